"""ToolLoopDetector beyond what OpenClaw's recorded vectors cover: params that are any JSON-like value."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

from doomloop import ToolLoopDetector


def run(detector: ToolLoopDetector, tool: str, params: Any, result: Any) -> Any:
    """One wired call; returns the decision."""
    decision = detector.before_tool_call(tool, params)
    outcome = decision.blocked_result if decision.blocked else result
    detector.after_tool_call(tool, params, result=outcome)
    return decision


def flags(detector: ToolLoopDetector, calls: List[Tuple[str, Any, Any]]) -> List[Tuple[int, str, str, int]]:
    """(call index, level, detector, count) of every call that was flagged."""
    found = []
    for index, (tool, params, result) in enumerate(calls):
        verdict = run(detector, tool, params, result).verdict
        if verdict.stuck:
            found.append((index, verdict.level, verdict.detector, verdict.count))
    return found


# --- params of any JSON-like value ---------------------------------------------------------


@pytest.mark.parametrize("params", ['{"command": "ls', ["ls", "-la"], ("ls", "-la"), 42, 2.5, True, "", []])
def test_params_may_be_any_json_like_value(params: Any) -> None:
    detector = ToolLoopDetector(warning_threshold=3, critical_threshold=5, global_circuit_breaker_threshold=8)
    found = flags(detector, [("bash", params, "same")] * 7)
    assert found[0] == (3, "warning", "generic_repeat", 3)
    assert found[-1][1:] == ("critical", "generic_repeat", 5)


def test_params_hash_by_canonical_value() -> None:
    def args_hash(params: Any) -> int:
        return ToolLoopDetector().after_tool_call("bash", params, result="r").args_hash

    assert args_hash(["ls", 1]) == args_hash(("ls", 1.0))
    distinct = [args_hash(p) for p in ("1", 1, True, [1], {"0": 1}, "ls", ["ls"], None)]
    assert len(set(distinct)) == len(distinct)
    # None is the empty mapping, as before.
    assert args_hash(None) == args_hash({})


def test_params_that_are_not_a_mapping_are_no_poll() -> None:
    # Only a mapping has an `action`: a str that spells one is just text.
    detector = ToolLoopDetector(warning_threshold=3, critical_threshold=5, global_circuit_breaker_threshold=8)
    found = flags(detector, [("process", "poll", "same")] * 6)
    assert {d for _, _, d, _ in found} == {"generic_repeat"}


@pytest.mark.parametrize("params", [{1, 2}, b"ls", object(), frozenset()])
def test_other_params_are_refused_naming_the_parameter(params: Any) -> None:
    with pytest.raises(TypeError, match="params must be a JSON-like value"):
        ToolLoopDetector().before_tool_call("bash", params)


def test_normalisers_get_the_params_as_given() -> None:
    seen: List[Any] = []

    def normaliser(result: Any, params: Any) -> Any:
        seen.append(params)
        return result

    detector = ToolLoopDetector(normalisers={"bash": normaliser})
    detector.after_tool_call("bash", ["ls"], result="x")
    assert seen == [["ls"]]
