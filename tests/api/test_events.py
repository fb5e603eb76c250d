"""What operators see: on_event callbacks, log records with structured fields, one log line per
loop episode, and get_stats() of the tool-loop detector."""

from __future__ import annotations

import logging
from typing import List

import numpy as np
import pytest

import doomloop
from doomloop import ChantDetector, DoomLoopDetector, LoopEvent, ToolLoopDetector
from support import FakeClock


def _blocked_loop(detector: ToolLoopDetector, calls: int, run_id: str = "run-1") -> None:
    params = {"command": "ls"}
    for _ in range(calls):
        decision = detector.before_tool_call("exec", params, run_id=run_id)
        result = decision.blocked_result if decision.blocked else "same"
        detector.after_tool_call("exec", params, result=result, run_id=run_id)


def test_a_loop_blocked_again_and_again_logs_once_and_reports_every_block(caplog: pytest.LogCaptureFixture) -> None:
    events: List[LoopEvent] = []
    detector = ToolLoopDetector(on_event=events.append, session_key="sess-7")
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        _blocked_loop(detector, 40)
    blocked_logs = [r for r in caplog.records if r.getMessage().startswith("tool call blocked")]
    assert len(blocked_logs) == 1
    assert (blocked_logs[0].session_key, blocked_logs[0].run_id) == ("sess-7", None)  # type: ignore[attr-defined]
    warning_logs = [r for r in caplog.records if r.getMessage().startswith("tool loop warning")]
    assert len(warning_logs) >= 1
    blocks = [e for e in events if e.blocked]
    # Calls 21..40 reach the critical threshold of 20 identical calls.
    assert len(blocks) == 20
    assert {(e.source, e.detector, e.level, e.session_key, e.run_id) for e in blocks} == {
        ("tool_loop", "generic_repeat", "critical", "sess-7", "run-1")
    }
    # A blocked call does not run, so it is not recorded: the count stays at the threshold.
    assert [e.count for e in blocks] == [20] * 20
    stats = detector.get_stats()
    assert stats["calls"] == 40 and stats["blocks"] == 20 and stats["blocked_episodes"] == 1
    assert stats["warnings"] == len([e for e in events if not e.blocked])


def test_a_new_episode_after_an_allowed_call_is_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    detector = ToolLoopDetector()
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        _blocked_loop(detector, 22)
        detector.before_tool_call("read", {"path": "a.py"})  # allowed: the episode ends
        _blocked_loop(detector, 1)
    assert len([r for r in caplog.records if r.getMessage().startswith("tool call blocked")]) == 2
    assert detector.get_stats()["blocked_episodes"] == 2


def test_session_episodes_are_events_with_the_session_key(caplog: pytest.LogCaptureFixture) -> None:
    events: List[LoopEvent] = []
    detector = DoomLoopDetector(clock=FakeClock(0.0), on_event=events.append, session_key="s1")
    detector.start_session()
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        for _ in range(6):
            detector.record_action("read", {"path": "a"}, "same", True)
            detector.is_doom_loop()
    assert [(e.source, e.detector, e.level, e.session_key) for e in events] == [("session", "repeated_action", "critical", "s1")]
    assert events[0].count == 3 and "repeated" in events[0].message.lower()
    assert [r.session_key for r in caplog.records] == ["s1"]  # type: ignore[attr-defined]


def test_guard_aborts_are_events() -> None:
    events: List[LoopEvent] = []
    detector = ToolLoopDetector(on_event=events.append, session_key="k")
    detector.arm_post_compaction()
    for _ in range(3):
        detector.before_tool_call("read", {"p": 1})
        detector.after_tool_call("read", {"p": 1}, result="same", run_id=None)
    aborts = [e for e in events if e.detector == "compaction_loop_persisted"]
    assert len(aborts) == 1 and aborts[0].blocked and aborts[0].count == 3
    assert detector.get_stats()["guard_aborts"] == 1


def test_an_exception_in_on_event_reaches_the_caller_and_the_call_is_still_recorded() -> None:
    def boom(event: LoopEvent) -> None:
        raise RuntimeError("metrics backend down")

    detector = ToolLoopDetector(on_event=boom)
    _blocked_loop(detector, 10)
    with pytest.raises(RuntimeError, match="metrics backend down"):
        detector.before_tool_call("exec", {"command": "ls"}, run_id="run-1")  # the 11th: a warning
    assert detector.get_stats()["calls"] == 11 and detector.history_len == 11


CHANT = "I will call the tool again. " * 40  # period 28


def test_a_chant_is_one_event_with_the_session_key(caplog: pytest.LogCaptureFixture) -> None:
    events: List[LoopEvent] = []
    detector = ChantDetector(on_event=events.append, session_key="s2")
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        found = [detector.feed(CHANT[at : at + 17]) for at in range(0, len(CHANT), 17)]
        detector.feed(CHANT)  # latched: no second event
        assert detector.event is not None
    (chant,) = [e for e in found if e is not None]
    assert [(e.source, e.detector, e.level, e.count, e.blocked, e.session_key, e.run_id) for e in events] == [
        ("chant", "chant", "critical", chant.count, False, "s2", None)
    ]
    assert events[0].message == f"model output is a chant: period 28, 8 repeats from offset {chant.start}"
    assert [(r.getMessage(), r.session_key) for r in caplog.records] == [(events[0].message, "s2")]  # type: ignore[attr-defined]
    detector.reset()
    assert detector.feed(CHANT) is not None and len(events) == 2  # a new stream, a new chant


def test_a_chant_found_by_a_stream_guard_or_with_tokens_is_an_event() -> None:
    events: List[LoopEvent] = []
    chunks = [CHANT[at : at + 100] for at in range(0, len(CHANT), 100)]
    guarded = list(doomloop.guard_stream(chunks, ChantDetector(on_event=events.append), on_chant="stop"))
    assert guarded == chunks[: len(guarded)] and len(guarded) < len(chunks)
    assert [e.detector for e in events] == ["chant"]
    tokens = ChantDetector(4, 3, on_event=events.append)
    assert tokens.feed_tokens(np.array([1, 2, 3, 4, 5] * 10, dtype=np.int32)) is not None
    assert len(events) == 2 and events[1].count == 3 and events[1].session_key is None


def test_an_exception_in_a_chants_on_event_reaches_the_feed_and_the_chant_stays_found() -> None:
    def boom(event: LoopEvent) -> None:
        raise RuntimeError("metrics backend down")

    detector = ChantDetector(on_event=boom)
    with pytest.raises(RuntimeError, match="metrics backend down"):
        detector.feed(CHANT)
    assert detector.event is not None and detector.feed(CHANT) is None


def test_bad_options_are_refused() -> None:
    with pytest.raises(TypeError, match="on_event"):
        ToolLoopDetector(on_event=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_key"):
        DoomLoopDetector(session_key=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_event"):
        DoomLoopDetector(on_event="log")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_event"):
        ChantDetector(on_event=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_key"):
        ChantDetector(session_key=b"k")  # type: ignore[arg-type]
