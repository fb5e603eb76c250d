"""Per-tool policies (``Profile.tool_policies``): room for a polling tool, none for a tool that
must never repeat, exempt tools neither detector sees, in both detectors, through snapshots and
profile files, and the errors for bad policies."""

from __future__ import annotations

import fnmatch
import pickle
from pathlib import Path
from typing import Any, List, Optional

import pytest
from hypothesis import given, settings, strategies as st

from doomloop import ConfigError, Monitor, Profile, ToolPolicy
from doomloop._core import ToolPolicies

ROOM = {
    "max_identical_actions": 12,
    "max_similar_actions": 12,
    "max_no_progress_steps": 12,
    "warning_threshold": 18,
    "critical_threshold": 26,
    "global_circuit_breaker_threshold": 40,
}
PROFILE = Profile.recommended().replace(
    tool_policies={
        "wait_for_deploy": {"warning_threshold": 1, "critical_threshold": 1},
        "wait_*": ROOM,
        "notify_*": "exempt",
    }
)


def calls(monitor: Monitor, tool: str, count: int, result: str = "still running") -> List[Optional[str]]:
    """``count`` identical calls of ``tool``: at each, the first finding's code and level (None:
    none), ending at a blocked call."""
    found: List[Optional[str]] = []
    for _ in range(count):
        decision = monitor.before_tool_call(tool, {"job": 7})
        after = [] if decision.blocked else monitor.after_tool_call(tool, {"job": 7}, result=result)
        first = [*decision.findings, *after]
        found.append(f"{first[0].code} {first[0].level}" if first else None)
        if decision.blocked:
            break
    return found


def test_a_polling_tool_gets_room_in_both_detectors() -> None:
    # Without a policy the session detector warns at the third identical poll.
    assert calls(Monitor(), "wait_for_job", 3)[-1] == "session.repeated_action warning"
    found = calls(Monitor(PROFILE), "wait_for_job", 60)
    assert found[:11] == [None] * 11
    assert found[11] == "session.repeated_action warning"
    # The monitor stops it 5 steps on (escalation is the profile's); the tool-loop detector
    # alone, with the policy's thresholds, blocks it at 26 repeats (a default one at 20).
    assert "session.repeated_action critical" in found
    alone = Monitor(PROFILE.replace(escalate_after=0, max_identical_actions=1000, max_similar_actions=1000))
    blocked = calls(alone, "wait_for_job", 60)
    assert len(blocked) == 27 and blocked[-1] == "tool_loop.generic_repeat critical"


def test_a_tool_that_must_never_repeat_is_blocked_at_its_first_repeat() -> None:
    assert calls(Monitor(PROFILE), "wait_for_deploy", 5) == [None, "tool_loop.generic_repeat critical"]
    # The first matching pattern is the policy: wait_for_deploy is not given wait_*'s room.
    assert ToolPolicies([("a*", None), ("ab", ((2, 2, 2, 2), (1, 1, 2)))]).policy_of("ab") == "exempt"


def test_an_exempt_tool_is_seen_by_neither_detector() -> None:
    monitor = Monitor(PROFILE)
    assert calls(monitor, "notify_user", 50, result="sent") == [None] * 50
    assert monitor.tool_loop.history_len == 0 and monitor.doom_loop.get_stats()["total_actions"] == 0
    # Between two identical calls of another tool, exempt calls do not hide the repeat.
    monitor = Monitor(PROFILE)
    for _ in range(3):
        monitor.before_tool_call("bash", {"command": "make"})
        found = monitor.after_tool_call("bash", {"command": "make"}, result="1 failed")
        calls(monitor, "notify_user", 2)
    assert [finding.code for finding in found] == ["session.repeated_action"]


def test_tools_no_pattern_matches_keep_the_profiles_thresholds() -> None:
    assert calls(Monitor(PROFILE), "bash", 3) == calls(Monitor(), "bash", 3)
    assert ToolPolicies([]).policy_of("bash") is None


def test_a_restored_monitor_keeps_judging_by_the_policy() -> None:
    monitor = Monitor(PROFILE)
    assert calls(monitor, "wait_for_job", 8) == [None] * 8
    restored = Monitor.from_bytes(monitor.to_bytes())
    assert restored.profile == PROFILE
    assert (
        calls(restored, "wait_for_job", 4)
        == calls(monitor, "wait_for_job", 4)
        == [None] * 3 + ["session.repeated_action warning"]
    )
    # The session detector's snapshot carries the newest action's thresholds itself.
    again = type(monitor.doom_loop).from_bytes(monitor.doom_loop.to_bytes())
    assert again.get_loop_event() is not None and "12 times" in again.get_loop_event().description


GLOB_ALPHABET = st.sampled_from(list("ab*?[]!-z"))


@settings(max_examples=400, deadline=None)
@given(st.text(GLOB_ALPHABET, max_size=8), st.text(st.sampled_from(list("ab[]!-zé")), max_size=8))
def test_patterns_match_as_fnmatchcase(pattern: str, name: str) -> None:
    table = ToolPolicies([(pattern, None)])
    assert (table.policy_of(name) == "exempt") == fnmatch.fnmatchcase(name, pattern), (pattern, name)


def test_a_profile_with_policies_is_a_value_and_round_trips_through_files(tmp_path: Path) -> None:
    assert PROFILE == pickle.loads(pickle.dumps(PROFILE)) and hash(PROFILE) == hash(pickle.loads(pickle.dumps(PROFILE)))
    assert [pattern for pattern, _ in PROFILE.tool_policies] == ["wait_for_deploy", "wait_*", "notify_*"]
    assert dict(PROFILE.tool_policies)["notify_*"] == ToolPolicy(exempt=True) == ToolPolicy.of("exempt")
    assert PROFILE.to_dict()["tool_policies"]["wait_*"] == ROOM
    for suffix in (".toml", ".json"):
        path = tmp_path / f"gateway{suffix}"
        PROFILE.replace(name="gateway").dump(path)
        assert Profile.load(path) == PROFILE.replace(name="gateway")
    path = tmp_path / "gateway.toml"
    assert '"notify_*" = "exempt"' in path.read_text() and "[tool_policies]" in path.read_text()
    assert PROFILE.replace(tool_policies={}).tool_policies == () == Profile.recommended().tool_policies


@pytest.mark.parametrize(
    ("policies", "error", "message"),
    [
        ({"x": {"bogus": 1}}, TypeError, r"tool_policies\['x'\]: ToolPolicy has no setting 'bogus'"),
        ({"x": {"warning_threshold": "3"}}, TypeError, "warning_threshold must be an int"),
        ({"x": {"warning_threshold": True}}, TypeError, "warning_threshold must be an int"),
        ({"x": {"max_identical_actions": 0}}, ValueError, r"max_identical_actions must be in 1\.\."),
        ({"x": {"critical_threshold": 5}}, ValueError, r"ordered .* got 10, 5, 30"),
        ({"x": {"warning_threshold": 40}}, ValueError, r"got 40, 20, 30 \(the profile's where the policy sets none\)"),
        (
            {"x": {"critical_threshold": 31, "global_circuit_breaker_threshold": 40}},
            ValueError,
            r"at most the profile's history_size \(30\)",
        ),
        ({"x": "exempted"}, TypeError, r'"exempt" or a table of thresholds'),
        ({"": "exempt"}, TypeError, "non-empty str"),
        ({1: "exempt"}, TypeError, "non-empty str"),
        ("wait_*", TypeError, "must map tool names or globs"),
        ([("x",)], TypeError, "must map tool names or globs"),
    ],
)
def test_a_bad_policy_is_refused_naming_what_is_wrong(policies: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        Profile.recommended().replace(tool_policies=policies)


def test_an_exempt_policy_sets_no_thresholds_and_a_file_names_a_bad_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="an exempt ToolPolicy sets no thresholds"):
        ToolPolicy(exempt=True, warning_threshold=3)
    path = tmp_path / "bad.toml"
    path.write_text('[tool_policies]\n"wait_*" = { critical_threshold = 3 }\n')
    with pytest.raises(ConfigError, match=r"bad\.toml.*wait_\*.*ordered"):
        Profile.load(path)
