"""Monitor: one agent session through the three detectors, each method's findings, turns,
streams, compactions, snapshots, and the same verdicts as the bare detectors."""

from __future__ import annotations

import copy
import pickle
from typing import Any, List, Tuple

import pytest
from hypothesis import given, settings, strategies as st

from doomloop import (
    ChantDetector,
    DoomLoopDetector,
    LoopEvent,
    Monitor,
    Profile,
    SnapshotError,
    ToolLoopDetector,
)
from doomloop.findings import CODES

QUICK = Profile.recommended().replace(warning_threshold=3, critical_threshold=5, global_circuit_breaker_threshold=8)


def repeat(monitor: Monitor, calls: int, tool: str = "exec", params: Any = None, result: Any = "same") -> List[Any]:
    """``calls`` identical calls; each step's (decision, after-findings)."""
    params = {"command": "make test"} if params is None else params
    steps = []
    for _ in range(calls):
        decision = monitor.before_tool_call(tool, params)
        after = monitor.after_tool_call(tool, params, result=decision.blocked_result if decision.blocked else result)
        steps.append((decision, after))
    return steps


def test_a_repeated_call_is_warned_then_blocked_with_one_finding_vocabulary() -> None:
    steps = repeat(Monitor(QUICK), 6)
    tool = [[(f.code, f.level, f.action) for f in decision.findings] for decision, _ in steps]
    assert tool == [
        [],
        [],
        [],
        [("tool_loop.generic_repeat", "warning", "retry_different")],
        [("tool_loop.generic_repeat", "warning", "retry_different")],
        [("tool_loop.generic_repeat", "critical", "block")],
    ]
    decision = steps[5][0]
    assert decision.blocked and decision.veto is not None and decision.veto.startswith("CRITICAL: Called exec")
    assert decision.blocked_result is not None and decision.veto in str(decision.blocked_result)
    finding = decision.findings[0]
    assert finding.tool == "exec" and finding.evidence == '{"command": "make test"}' and finding.count == 5
    assert (finding.first_step, finding.last_step) == (3, 5)  # the stretch began with the warning
    assert all(code in CODES for found in tool for code, _, _ in found)
    # The session detector saw the repeated action at the third call, as a warning.
    session = steps[2][1]
    assert [(f.code, f.level, f.detector, f.action) for f in session] == [
        ("session.repeated_action", "warning", "session", "retry_different")
    ]
    assert not steps[0][0].blocked and steps[0][0].veto is None and steps[0][0].findings == []


def test_a_new_user_turn_starts_a_new_run_for_the_tool_loop_detector() -> None:
    monitor = Monitor(QUICK)
    monitor.record_user_message("run the tests")
    assert [d.blocked for d, _ in repeat(monitor, 6)] == [False] * 5 + [True]
    assert monitor.turn == 1
    monitor.record_user_message("try again")  # the user's retry does not count against the agent
    decisions = [d for d, _ in repeat(monitor, 3)]
    assert [d.findings for d in decisions] == [[], [], []]
    assert monitor.turn == 2


def test_a_headless_agent_gets_the_bare_detectors_verdicts() -> None:
    monitor, bare = Monitor(QUICK), ToolLoopDetector(QUICK.tool_loop)
    for n in range(30):
        params = {"path": f"f{n % 3}.py"}
        mine = monitor.before_tool_call("read", params)
        theirs = bare.before_tool_call("read", params)
        assert mine.verdict.to_dict() == theirs.verdict.to_dict() and mine.blocked == theirs.blocked
        monitor.after_tool_call("read", params, result="text")
        bare.after_tool_call("read", params, result="text")


def test_an_answer_that_repeats_itself_is_one_critical_chant() -> None:
    monitor = Monitor()
    findings = monitor.record_response("Let me check. " + "I will read the file again. " * 20)
    assert [(f.code, f.level, f.detector, f.action) for f in findings] == [("chant", "critical", "chant", "stop_stream")]
    assert findings[0].tool is None and findings[0].evidence and findings[0].evidence in "I will read the file again. " * 3


def test_the_same_answer_across_turns_is_a_session_warning() -> None:
    monitor = Monitor()
    answer = "Let me look at the implementation of the parser to find where the header is split."
    found = [monitor.record_response(answer) for _ in range(3)]
    assert found[:2] == [[], []]
    assert [(f.code, f.level) for f in found[2]] == [("session.repeated_output", "warning")]


def test_a_streamed_answer_is_cut_at_the_chunk_that_makes_it_a_chant() -> None:
    monitor = Monitor()
    chunks = ["Sure. "] + ["and again "] * 100
    cut = None
    for index, chunk in enumerate(chunks):
        found = monitor.record_output_chunk(chunk)
        if found:
            cut = index
            break
    assert cut is not None and cut < 60 and [f.code for f in found] == ["chant"]
    assert monitor.step == 1  # the answer is one step, whatever its chunks
    with pytest.raises(SnapshotError, match="being streamed"):
        monitor.to_bytes()
    assert monitor.end_response() == []  # the chant is reported once, at its chunk
    assert monitor.step == 1
    monitor.to_bytes()


def test_streamed_answers_are_compared_across_turns() -> None:
    monitor = Monitor()
    found: List[Any] = []
    for _ in range(3):
        for word in "The build is green now and the tests pass.".split(" "):
            assert monitor.record_output_chunk(word + " ") == []
        found = monitor.end_response()
    assert [f.code for f in found] == ["session.repeated_output"]


def test_after_a_compaction_the_guard_stops_a_repeated_call() -> None:
    monitor = Monitor()
    params = {"command": "cat big.log"}
    for _ in range(2):
        monitor.before_tool_call("exec", params)
        monitor.after_tool_call("exec", params, result="the same huge output")
    assert monitor.record_compaction() == []
    found: List[Any] = []
    for _ in range(3):
        monitor.before_tool_call("exec", params)
        found += monitor.after_tool_call("exec", params, result="the same huge output")
    guard = [f for f in found if f.detector == "guard"]
    assert [(f.code, f.level, f.action, f.tool) for f in guard] == [("guard.compaction_loop", "critical", "abort", "exec")]


def test_failures_are_failed_actions() -> None:
    monitor = Monitor()
    found: List[Any] = []
    for n in range(4):
        params = {"command": f"python run.py --case {n}"}
        monitor.before_tool_call("exec", params)
        found = monitor.after_tool_call("exec", params, result="Traceback: ImportError", success=False)
    assert [f.code for f in found] == ["session.repeated_failure"]
    errors = Monitor()
    for n in range(4):
        errors.before_tool_call("exec", {"n": n})
        found = errors.after_tool_call("exec", {"n": n}, error="timeout")
    assert [f.code for f in found] == ["session.repeated_failure"]


def test_a_loop_that_stops_for_longer_than_the_gap_starts_a_new_stretch() -> None:
    monitor = Monitor(QUICK)
    first = repeat(monitor, 4)[-1][0].findings[0]
    for n in range(10):
        monitor.before_tool_call("read", {"path": f"{n}.py"})
        monitor.after_tool_call("read", {"path": f"{n}.py"}, result=f"text {n}")
    again = [d.findings for d, _ in repeat(monitor, 6)]
    later = [f for found in again for f in found if f.code == "tool_loop.generic_repeat"]
    assert later and later[0].first_step > first.last_step + 8 and later[-1].first_step == later[0].first_step


def test_events_reach_on_event_with_the_session_key() -> None:
    events: List[LoopEvent] = []
    monitor = Monitor(QUICK, session_key="tenant/1", on_event=events.append)
    repeat(monitor, 5)
    monitor.record_response("again and again " * 40)
    assert {e.session_key for e in events} == {"tenant/1"}
    assert {e.source for e in events} == {"tool_loop", "session", "chant"}


def _script(monitor: Monitor, steps: List[Tuple[str, int]]) -> List[List[Tuple[str, str, int, int]]]:
    out = []
    for kind, n in steps:
        if kind == "call":
            decision = monitor.before_tool_call("read", {"p": n})
            found = decision.findings + monitor.after_tool_call("read", {"p": n}, result=f"r{n % 2}")
        elif kind == "user":
            found = monitor.record_user_message(f"message {n}")
        elif kind == "answer":
            found = monitor.record_response("same words " * n)
        elif kind == "progress":
            found = monitor.mark_progress(f"m{n}")
        else:
            found = monitor.record_compaction()
        out.append([(f.code, f.level, f.first_step, f.last_step) for f in found])
    return out


_STEPS = st.lists(
    st.tuples(st.sampled_from(["call", "call", "call", "user", "answer", "progress", "compaction"]), st.integers(0, 3))
)


@settings(max_examples=60, deadline=None)
@given(before=_STEPS, after=_STEPS)
def test_a_snapshot_answers_every_continuation_as_the_original(
    before: List[Tuple[str, int]], after: List[Tuple[str, int]]
) -> None:
    original = Monitor(QUICK)
    _script(original, before)
    for restored in (Monitor.from_bytes(original.to_bytes()), pickle.loads(pickle.dumps(original)), copy.deepcopy(original)):
        assert restored.profile == original.profile and (restored.step, restored.turn) == (original.step, original.turn)
    restored = Monitor.from_bytes(original.to_bytes())
    assert _script(restored, after) == _script(original, after)


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=40))
def test_tool_calls_reach_the_bare_detectors_as_they_would_alone(steps: List[Tuple[int, bool]]) -> None:
    # The monitor's findings are the bare detectors' verdicts and loop events, renamed (with
    # warn-then-stop off, which is the monitor's own escalation of them).
    monitor = Monitor(QUICK.replace(escalate_after=0))
    tool, session = ToolLoopDetector(QUICK.tool_loop), DoomLoopDetector(QUICK.session)
    session.start_session()
    for n, ok in steps:
        params, result = {"p": n}, f"r{n}"
        decision = monitor.before_tool_call("read", params)
        bare = tool.before_tool_call("read", params)
        expected = [] if bare.verdict.level is None else [(f"tool_loop.{bare.verdict.detector}", bare.verdict.level)]
        assert [(f.code, f.level) for f in decision.findings] == expected
        found = monitor.after_tool_call("read", params, result=result, success=ok)
        tool.after_tool_call("read", params, result=result)
        session.record_action("read", params, result, ok)
        event = session.get_loop_event()
        expected = [] if event is None else [(f"session.{event.loop_type.value}", event.description)]
        assert [(f.code, f.message) for f in found] == expected


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="profile must be a Profile"):
        Monitor(ChantDetector())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_key"):
        Monitor(session_key=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_event"):
        Monitor(on_event=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be a str"):
        Monitor().record_user_message(None)  # type: ignore[arg-type]
    data = Monitor().to_bytes()
    for bad, problem in [
        (b"nope", "not a Monitor snapshot"),
        (data[:8], "truncated"),
        (data[:60], "runs past its end"),
        (data + b"x", "trailing bytes"),
        (data[:10] + b"X" + data[11:], "bad header"),
    ]:
        with pytest.raises(SnapshotError, match=problem):
            Monitor.from_bytes(bad)
    with pytest.raises(TypeError, match="bytes"):
        Monitor.from_bytes("text")  # type: ignore[arg-type]


def test_the_tool_hooks_refuse_bad_input_and_hand_out_fresh_lists() -> None:
    monitor = Monitor()
    with pytest.raises(TypeError):
        monitor.before_tool_call(3, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        monitor.after_tool_call("read", {}, result="x", success="yes")  # type: ignore[arg-type]
    decision = monitor.before_tool_call("read", {"p": 1})
    decision.findings.append("not mine")  # a caller's list: never another call's
    assert decision.findings == [] and monitor.before_tool_call("read", {"p": 2}).findings == []
    found = monitor.after_tool_call("read", {"p": 2}, result="x")
    found.append("mine")
    assert monitor.after_tool_call("read", {"p": 3}, result="y") == []
    assert "ToolDecision(blocked=False, findings=[])" == repr(decision)
