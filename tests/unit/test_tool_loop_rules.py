"""ToolLoopDetector beyond what OpenClaw's recorded vectors cover: results that are not
OpenClaw-shaped hashed by value (on in a config built in Python, off in the OpenClaw paths),
and params that are any JSON-like value."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

from doomloop import ConfigError, LoopDetectionConfig, ToolLoopDetector, tool_result_hash


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


def openclaw() -> ToolLoopDetector:
    return ToolLoopDetector.from_openclaw({"enabled": True})


# --- results that are not OpenClaw-shaped ----------------------------------------------------


def test_a_poll_whose_output_keeps_changing_is_progress() -> None:
    # `{"output": ...}` has neither content nor details: OpenClaw hashes every such result
    # alike, so its own rules block a poll that reports new output each time.
    polls = [("process", {"action": "poll", "id": 7}, {"output": f"line {n}"}) for n in range(30)]
    assert flags(ToolLoopDetector(), polls) == []
    parity = flags(openclaw(), polls)
    assert parity[0] == (10, "warning", "known_poll_no_progress", 10)
    assert parity[-1][1:] == ("critical", "known_poll_no_progress", 20)


def test_the_same_action_with_the_same_result_is_still_a_loop() -> None:
    same = [("status", {"id": 7}, {"output": "pending"}) for _ in range(25)]
    found = flags(ToolLoopDetector(), same)
    assert found[0] == (10, "warning", "generic_repeat", 10)
    assert found[-1][1:] == ("critical", "generic_repeat", 20)
    # A re-run after an edit (a new result) is progress.
    reruns = [("pytest", {}, {"output": f"{n} failed"}) for n in range(25, 0, -1)]
    assert all(level == "warning" for _, level, _, _ in flags(ToolLoopDetector(), reruns))


def test_plain_results_hash_by_value() -> None:
    a, b = {"output": "a", "code": 0}, {"output": "b", "code": 0}
    assert tool_result_hash("t", {}, result=a) != tool_result_hash("t", {}, result=b)
    assert tool_result_hash("t", {}, result=a) == tool_result_hash("t", {}, result={"code": 0, "output": "a"})
    assert tool_result_hash("t", {}, result=a, hash_plain_results=False) == tool_result_hash(
        "t", {}, result=b, hash_plain_results=False
    )
    # A send's volatile ids still do not count.
    send = {"action": "send"}
    assert tool_result_hash("message", send, result={"messageId": 1, "to": "u"}) == tool_result_hash(
        "message", send, result={"messageId": 2, "to": "u"}
    )
    # OpenClaw-shaped results keep OpenClaw's rules.
    shaped = {"content": [{"type": "text", "text": "x"}], "details": {}, "durationMs": 5}
    assert tool_result_hash("t", {}, result=shaped) == tool_result_hash("t", {}, result={**shaped, "durationMs": 6})
    with pytest.raises(TypeError, match="hash_plain_results"):
        tool_result_hash("t", {}, result=a, hash_plain_results=1)  # type: ignore[arg-type]


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


# --- configuration ------------------------------------------------------------------------


def test_the_openclaw_paths_hash_plain_results_as_openclaw_does() -> None:
    assert LoopDetectionConfig().hash_plain_results is True
    for config in (
        LoopDetectionConfig.from_openclaw(None),
        LoopDetectionConfig.from_openclaw({"enabled": True}),
        LoopDetectionConfig.from_openclaw({"tools": {"loopDetection": {"enabled": True}}}, strict=False),
        ToolLoopDetector.from_openclaw({"enabled": True}).config,
    ):
        assert config.hash_plain_results is False
    # An OpenClaw block has no key for it: strict parsing rejects one as unknown.
    with pytest.raises(ConfigError) as caught:
        LoopDetectionConfig.from_openclaw({"hashPlainResults": True})
    assert caught.value.path == "tools.loopDetection.hashPlainResults"
    # It can still be switched on for an OpenClaw config, by keyword.
    assert ToolLoopDetector.from_openclaw({"enabled": True}, hash_plain_results=True).config.hash_plain_results is True


def test_to_openclaw_leaves_doomloops_switches_out() -> None:
    config = LoopDetectionConfig(warning_threshold=4, critical_threshold=9)
    block = config.to_openclaw()
    assert "hash_plain_results" not in block and "hashPlainResults" not in block
    assert LoopDetectionConfig.from_openclaw(block) == config.replace(hash_plain_results=False)


def test_the_switch_is_checked() -> None:
    with pytest.raises(TypeError, match=r"LoopDetectionConfig\.hash_plain_results: must be a bool"):
        LoopDetectionConfig(hash_plain_results=1)


def test_positional_arguments_keep_their_meaning() -> None:
    # doomloop's switches come after OpenClaw's settings.
    config = LoopDetectionConfig(True, 30, 10, 20, 10, 30, True, True, True, 3, False)
    assert (config.post_compaction_window_size, config.hash_plain_results) == (3, False)
