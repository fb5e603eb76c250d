"""Guard-event recognition: every documented shape, as a dict and as an object."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, Optional

import pytest

from doomloop import DoomLoopDetector, DoomLoopEvent, DoomLoopType, RecoveryAction
from doomloop.eval import DOOM_LOOP_MARKERS, LoopEvaluator, is_doom_loop_event


# Stand-ins with exactly the attribute contracts of the event types built on other branches.
@dataclass
class LoopVerdict:
    stuck: bool
    level: Optional[str]
    detector: Optional[str]
    count: int = 0
    message: str = ""
    warning_key: Optional[str] = None
    paired_tool_name: Optional[str] = None


@dataclass
class ToolCallDecision:
    verdict: LoopVerdict
    blocked: bool
    emit_warning: bool = False


@dataclass
class CompactionGuardVerdict:
    should_abort: bool
    detector: Optional[str]
    count: int
    tool_name: Optional[str]


class CompactionLoopPersisted(Exception):
    def __init__(self, count: int, tool: str) -> None:
        super().__init__(f"{tool} repeated {count} times after compaction")
        self.detector = "compaction_loop_persisted"
        self.count = count
        self.tool = tool


@dataclass
class ChantEvent:
    loop_type: Any
    text: str = "all work and no play "
    count: int = 5


class Bag:
    """An object whose attributes are the given keywords (the object twin of a dict)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


CRITICAL = LoopVerdict(stuck=True, level="critical", detector="ping_pong", count=20, message="stuck")
WARNING = LoopVerdict(stuck=True, level="warning", detector="generic_repeat", count=10, message="careful")
CLEAR = LoopVerdict(stuck=False, level=None, detector=None)


def doom_loop_event(loop_type: DoomLoopType = DoomLoopType.NO_PROGRESS) -> DoomLoopEvent:
    return DoomLoopEvent(loop_type=loop_type, description="d", action_history=[], recovery_action=RecoveryAction.ABORT)


# (fields, fires): each shape is checked as a dict and as an object with the same fields.
SHAPES = [
    ({"type": "doom_loop", "reason": "repeated tool call"}, True),
    ({"event": "loop_detected"}, True),
    ({"type": "  Doom-Loop "}, True),
    ({"type": "DOOMLOOP"}, True),
    ({"type": DoomLoopType.REPEATED_OUTPUT}, True),
    ({"type": "tool_call"}, False),
    ({"type": "tool_call", "event": "repetition"}, True),
    ({"type": 3}, False),
    ({"is_loop": True}, True),
    ({"is_loop": False, "type": "doom_loop"}, True),
    ({"is_loop": False}, False),
    ({"is_loop": "false"}, False),
    ({"loop_type": DoomLoopType.CIRCULAR_PLAN}, True),
    ({"loop_type": "repeated_output"}, True),
    ({"loop_type": None}, False),
    ({"loop_type": "  "}, False),
    ({"loop_type": False}, False),
    ({"doom_loop": True}, True),
    ({"doom_loop_fired": 1}, True),
    ({"doom_loop": "yes"}, True),
    ({"doom_loop": "false"}, False),
    ({"doom_loop": "FALSE "}, False),
    ({"doom_loop": "0"}, False),
    ({"doom_loop": "no"}, False),
    ({"doom_loop": ""}, False),
    ({"doom_loop_fired": "No"}, False),
    ({"doom_loop": None, "type": "repetition"}, True),
    ({"doom_loop": "false", "type": "repetition"}, True),
    ({"level": "critical", "detector": "ping_pong"}, True),
    ({"level": "CRITICAL"}, True),
    ({"level": "warning", "detector": "ping_pong"}, False),
    ({"level": "error", "type": "doom_loop"}, True),
    ({"should_abort": True}, True),
    ({"should_abort": False, "detector": "compaction_loop_persisted"}, False),
    ({"should_abort": "0"}, False),
    ({"detector": "compaction_loop_persisted"}, True),
    ({"detector": "compaction_loop_persisted", "should_abort": None}, True),
    ({"detector": " Compaction_Loop_Persisted"}, True),
    ({"detector": "ping_pong"}, False),
    ({"blocked": True}, True),
    ({"blocked": "false"}, False),
    ({"blocked": False, "verdict": {"level": "critical"}}, True),
    ({"blocked": False, "verdict": {"level": "warning"}}, False),
    ({"blocked": True, "verdict": {"level": "warning"}}, True),
    ({"blocked": False, "verdict": {"blocked": False, "verdict": {"is_loop": True}}}, True),
    ({"verdict": {"level": "warning"}, "type": "doom_loop"}, True),
    ({"verdict": "ok", "type": "doom_loop"}, True),
    ({"reason": "nothing here"}, False),
    ({}, False),
]


@pytest.mark.parametrize(("fields", "fires"), SHAPES)
def test_dict_shapes(fields: Dict[str, Any], fires: bool) -> None:
    assert is_doom_loop_event(fields) is fires


@pytest.mark.parametrize(("fields", "fires"), SHAPES)
def test_object_shapes(fields: Dict[str, Any], fires: bool) -> None:
    as_object = {key: Bag(**value) if isinstance(value, dict) else value for key, value in fields.items()}
    assert is_doom_loop_event(Bag(**as_object)) is fires


def test_every_marker_fires_in_type_and_event() -> None:
    assert len(DOOM_LOOP_MARKERS) == 11
    for marker in DOOM_LOOP_MARKERS:
        assert is_doom_loop_event({"type": marker.upper()})
        assert is_doom_loop_event(Bag(event=f" {marker} "))


def test_every_doom_loop_type_is_a_marker() -> None:
    assert {member.value for member in DoomLoopType} <= DOOM_LOOP_MARKERS


def test_bare_strings_and_enums_are_markers() -> None:
    assert is_doom_loop_event("doom_loop")
    assert is_doom_loop_event(DoomLoopType.RESOURCE_EXHAUSTION)
    assert not is_doom_loop_event("hello")

    class Other(Enum):
        X = "x"

    assert not is_doom_loop_event(Other.X)


def test_doom_loop_event_fires() -> None:
    for loop_type in DoomLoopType:
        assert is_doom_loop_event(doom_loop_event(loop_type))


def test_event_from_a_real_detector_fires() -> None:
    detector = DoomLoopDetector()
    detector.start_session()
    for _ in range(3):
        detector.record_action("search", {"q": "same"}, "same result", True)
    event = detector.get_loop_event()
    assert event is not None
    health = LoopEvaluator().run({"score_history": [9.0]}, guard_events=[event])
    assert health.doom_loop_fired and not health.passed


def test_loop_verdicts() -> None:
    assert is_doom_loop_event(CRITICAL)
    assert not is_doom_loop_event(WARNING)
    assert not is_doom_loop_event(CLEAR)


def test_tool_call_decisions() -> None:
    assert is_doom_loop_event(ToolCallDecision(verdict=WARNING, blocked=True))
    assert is_doom_loop_event(ToolCallDecision(verdict=CRITICAL, blocked=False))
    assert not is_doom_loop_event(ToolCallDecision(verdict=WARNING, blocked=False, emit_warning=True))
    assert not is_doom_loop_event(ToolCallDecision(verdict=CLEAR, blocked=False))


def test_compaction_guard_verdict_and_exception() -> None:
    assert is_doom_loop_event(CompactionGuardVerdict(True, "compaction_loop_persisted", 3, "read_file"))
    assert not is_doom_loop_event(CompactionGuardVerdict(False, None, 1, "read_file"))
    assert not is_doom_loop_event(CompactionGuardVerdict(False, "compaction_loop_persisted", 2, "read_file"))
    assert is_doom_loop_event(CompactionLoopPersisted(3, "read_file"))


def test_chant_events() -> None:
    assert is_doom_loop_event(ChantEvent(loop_type=DoomLoopType.REPEATED_OUTPUT))
    assert is_doom_loop_event(ChantEvent(loop_type="repeated_output"))


def test_warnings_count_as_interventions_only() -> None:
    health = LoopEvaluator().run({"score_history": [8.5]}, guard_events=[WARNING, ToolCallDecision(WARNING, False)])
    assert health.guard_interventions == 2
    assert not health.doom_loop_fired
    assert health.passed


def test_each_own_event_type_fails_the_loop() -> None:
    for event in (
        CRITICAL,
        ToolCallDecision(verdict=WARNING, blocked=True),
        CompactionGuardVerdict(True, "compaction_loop_persisted", 3, "read_file"),
        CompactionLoopPersisted(3, "read_file"),
        ChantEvent(loop_type=DoomLoopType.REPEATED_OUTPUT),
        doom_loop_event(),
    ):
        health = LoopEvaluator().run({"score_history": [8.5]}, guard_events=[WARNING, event])
        assert health.doom_loop_fired, event
        assert health.guard_interventions == 2
        assert not health.passed


def test_self_referencing_verdict_terminates() -> None:
    looping = Bag(blocked=False)
    looping.verdict = looping
    assert not is_doom_loop_event(looping)
