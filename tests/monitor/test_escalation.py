"""Warn first, then stop: a warned loop that goes on (the same code, within the stretch gap)
for ``escalate_after`` steps, or whose recovery ladder is used up, becomes critical in the
Monitor; a session loop stopped after its call vetoes that action's next call; a loop that
stops after its warning, and a new user turn, start afresh; the parity profile keeps the
detectors' own levels."""

from __future__ import annotations

import pickle
from typing import Any, List, Optional, Tuple

import pytest

from doomloop import Monitor, Profile
from doomloop.findings import CRITICAL, WARNING, Finding
from doomloop.monitor import STRETCH_GAP
from doomloop.profile import ESCALATE_AFTER

MAKE = {"command": "make test"}


def call(monitor: Monitor, params: Any = MAKE, result: str = "1 failed", tool: str = "exec") -> Tuple[Any, List[Finding]]:
    """One call (the veto as its result when blocked): its decision and the findings of both
    hooks."""
    decision = monitor.before_tool_call(tool, params)
    after = monitor.after_tool_call(tool, params, result=decision.blocked_result if decision.blocked else result)
    return decision, [*decision.findings, *after]


def levels(findings: List[Finding]) -> List[Tuple[str, str, str]]:
    return [(f.code, f.level, f.action) for f in findings]


def first_warning_and_stop(monitor: Monitor, calls: int = 30) -> Tuple[Optional[int], Optional[int], List[Any]]:
    """The call index of the first finding and of the first critical one, and every decision."""
    warned = stopped = None
    decisions = []
    for n in range(calls):
        decision, found = call(monitor)
        decisions.append(decision)
        if found and warned is None:
            warned = n
        if stopped is None and any(f.level == CRITICAL for f in found):
            stopped = n
    return warned, stopped, decisions


def test_a_repeated_call_is_warned_then_stopped_after_the_documented_steps() -> None:
    monitor = Monitor(Profile.recommended())
    warned, stopped, decisions = first_warning_and_stop(monitor)
    assert warned == 2 and stopped == warned + ESCALATE_AFTER
    # The stop is the session finding of the call that went on, escalated: abort the run.
    monitor2 = Monitor(Profile.recommended())
    steps = [call(monitor2)[1] for _ in range(stopped + 1)]
    assert levels(steps[warned]) == [("session.repeated_action", WARNING, "retry_different")]
    assert levels(steps[stopped]) == [("session.repeated_action", CRITICAL, "abort")]
    stop = steps[stopped][0]
    assert stop.first_step == steps[warned][0].first_step and "stopped" in stop.message
    # The next call of the same action is vetoed, with the stop as the text the model sees.
    decision = decisions[stopped + 1]
    assert decision.blocked and not decision.decision.blocked
    assert decision.veto == decision.findings[-1].message and "stopped" in decision.veto
    assert decision.blocked_result["details"]["reason"] == decision.veto
    assert levels(decision.findings)[-1] == ("session.repeated_action", CRITICAL, "block")
    # ... and so is every one after it while the loop holds.
    assert all(d.blocked for d in decisions[stopped + 1 :])


def test_another_action_after_a_stop_is_not_vetoed_and_clears_the_stop() -> None:
    monitor = Monitor(Profile.recommended())
    for _ in range(2 + ESCALATE_AFTER + 1):
        call(monitor)
    assert monitor._stop is not None
    decision, _ = call(monitor, {"command": "git status"}, result="clean")
    assert not decision.blocked
    for n in range(3):
        call(monitor, {"path": f"src/f{n}.py"}, result=f"text {n}", tool="read")
    assert monitor._stop is None
    decision, _ = call(monitor)  # the stopped action again, after the loop ended
    assert not decision.blocked


def test_a_warned_tool_loop_that_goes_on_is_blocked_before_the_rule_would() -> None:
    # The session rules out of reach: the tool-loop detector's warning alone, escalated at the call.
    profile = Profile.recommended().replace(
        session={
            "max_identical_actions": 1000,
            "max_similar_actions": 1000,
            "max_consecutive_failures": 1000,
            "max_no_progress_steps": 1000,
        }
    )
    monitor = Monitor(profile)
    decisions = [call(monitor)[0] for _ in range(30)]
    warned = next(n for n, d in enumerate(decisions) if d.findings)
    blocked = next(n for n, d in enumerate(decisions) if d.blocked)
    assert levels(decisions[warned].findings) == [("tool_loop.generic_repeat", WARNING, "retry_different")]
    assert blocked == warned + ESCALATE_AFTER < profile.tool_loop.critical_threshold
    assert levels(decisions[blocked].findings) == [("tool_loop.generic_repeat", CRITICAL, "block")]
    assert not decisions[blocked].decision.blocked and decisions[blocked].veto == decisions[blocked].findings[0].message


def test_a_loop_that_stops_after_its_warning_starts_afresh() -> None:
    monitor = Monitor(Profile.recommended())
    for _ in range(3):
        call(monitor)
    for n in range(STRETCH_GAP + 1):
        call(monitor, {"path": f"src/f{n}.py"}, result=f"text {n}", tool="read")
    found = [f for _ in range(ESCALATE_AFTER) for f in call(monitor)[1]]
    assert found and all(f.level == WARNING for f in found)


def test_the_recovery_ladders_last_rung_is_critical_at_once() -> None:
    monitor = Monitor(Profile.recommended())
    for _ in range(monitor.profile.session.max_recovery_attempts):
        monitor.doom_loop.increment_recovery()
    found = [f for _ in range(3) for f in call(monitor)[1]]
    assert levels(found) == [("session.repeated_action", CRITICAL, "abort")]
    assert found[0].message.endswith("(the recovery ladder is used up: stopped)")


def test_a_new_user_turn_lifts_the_stop_and_restarts_the_escalation() -> None:
    monitor = Monitor(Profile.recommended())
    for _ in range(2 + ESCALATE_AFTER + 1):
        call(monitor)
    assert monitor._stop is not None
    monitor.record_user_message("try again")
    decision, found = call(monitor)
    assert not decision.blocked and all(f.level == WARNING for f in found)


def test_parity_keeps_the_detectors_own_levels() -> None:
    monitor = Monitor(Profile.parity())
    found = [f for _ in range(15) for f in call(monitor)[1]]
    assert {f.code for f in found if f.level == CRITICAL} <= {"tool_loop.generic_repeat"}
    assert all(f.level == WARNING for f in found if f.detector == "session")


def test_the_stop_rides_in_snapshots_and_pickles() -> None:
    monitor = Monitor(Profile.recommended())
    for _ in range(2 + ESCALATE_AFTER + 1):
        call(monitor)
    for restored in (Monitor.from_bytes(monitor.to_bytes()), pickle.loads(pickle.dumps(monitor))):
        assert restored._stop == monitor._stop
        assert restored.before_tool_call("exec", MAKE).blocked


def test_escalate_after_is_a_profile_setting_read_from_files(tmp_path: Any) -> None:
    assert Profile.recommended().escalate_after == ESCALATE_AFTER and Profile.parity().escalate_after == 0
    custom = Profile.recommended().replace(escalate_after=12)
    for name in ("p.toml", "p.json"):
        custom.dump(tmp_path / name)
        assert Profile.load(tmp_path / name) == custom
    (tmp_path / "off.toml").write_text("escalate_after = 0\n")
    assert Profile.load(tmp_path / "off.toml").escalate_after == 0
    with pytest.raises(TypeError, match="escalate_after must be an int"):
        Profile.recommended().replace(escalate_after=True)
    with pytest.raises(ValueError, match="escalate_after must be in"):
        Profile.recommended().replace(escalate_after=-1)


def test_noise_in_the_arguments_is_left_out_of_a_calls_identity() -> None:
    from doomloop.profile import IGNORE_ARGUMENT_KEYS

    assert {"request_id", "timestamp", "task_progress", "trace_id"} <= set(IGNORE_ARGUMENT_KEYS)

    def noisy(n: int) -> Any:
        return {"command": "make test", "request_id": f"req-{n}", "timestamp": 1764590400 + n, "task_progress": f"{n}/9"}

    for profile, caught in ((Profile.recommended(), True), (Profile.parity(), False)):
        monitor = Monitor(profile)
        found = [f for n in range(12) for f in call(monitor, noisy(n))[1]]
        assert any(f.detector == "tool_loop" for f in found) == caught, profile.name
        assert any(f.code == "session.repeated_action" for f in found) == caught or profile.name == "parity"
    # Only the named keys: another argument still makes another call.
    monitor = Monitor(Profile.recommended())
    found = [f for n in range(12) for f in call(monitor, {**noisy(n), "target": f"t{n}"}, result=f"r{n}")[1]]
    assert not any(f.detector == "tool_loop" for f in found)


def test_ignore_argument_keys_is_a_profile_setting() -> None:
    custom = Profile.parity().replace(ignore_argument_keys=["request_id", "request_id", "ts"])
    assert custom.ignore_argument_keys == ("request_id", "ts")
    assert Profile.from_dict(custom.to_dict()) == custom
    with pytest.raises(TypeError, match="list of str"):
        Profile.recommended().replace(ignore_argument_keys="request_id")
    with pytest.raises(TypeError, match="non-empty strs"):
        Profile.recommended().replace(ignore_argument_keys=[""])
