"""doomloop's own tool-loop rules, on in a config built in Python and off in the OpenClaw
paths: cycles of 3 to 8 calls, argument churn, results that are not OpenClaw-shaped hashed by
value, and params that are any JSON-like value."""

from __future__ import annotations

import logging
from typing import Any, List, Tuple

import pytest

from doomloop import ConfigError, LoopDetectionConfig, ToolLoopDetector, tool_result_hash

Call = Tuple[str, Any]


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


FIVE: List[Call] = [
    ("read_file", {"path": "a.py"}),
    ("grep", {"pattern": "x"}),
    ("edit", {"path": "a.py", "old": "x", "new": "y"}),
    ("run_tests", {}),
    ("git_diff", {}),
]


def cycle_calls(cycle: List[Call], rounds: int, changing: bool = False) -> List[Tuple[str, Any, Any]]:
    return [
        (tool, params, f"{tool} result" + (f" {n}" if changing else ""))
        for n in range(rounds * len(cycle))
        for tool, params in [cycle[n % len(cycle)]]
    ]


# --- cycles -------------------------------------------------------------------------------


def test_a_cycle_of_five_calls_warns_at_ten_and_is_blocked_at_twenty() -> None:
    detector = ToolLoopDetector()
    found = flags(detector, cycle_calls(FIVE, 4)[:20])
    assert found[0] == (9, "warning", "cycle", 10)
    assert found[9] == (18, "warning", "cycle", 19)
    assert found[10] == (19, "critical", "cycle", 20)
    # The veto is not recorded: a retry is blocked again at the same count.
    retry = detector.before_tool_call(*FIVE[19 % 5])
    assert (retry.blocked, retry.verdict.detector, retry.verdict.count) == (True, "cycle", 20)
    # OpenClaw's rules never flag it (each call recurs only six times in thirty).
    assert flags(openclaw(), cycle_calls(FIVE, 6)) == []


def test_a_cycle_names_its_calls_and_keeps_one_warning_key() -> None:
    detector = ToolLoopDetector()
    verdicts = [run(detector, tool, params, result).verdict for tool, params, result in cycle_calls(FIVE, 3)]
    flagged = [v for v in verdicts if v.stuck]
    assert len(flagged) == 6
    # The 10th call (git_diff) is the first flagged; the calls are named from it, in order.
    assert flagged[0].message.startswith(
        "WARNING: You are repeating a cycle of 5 tool calls "
        "(git_diff -> read_file -> grep -> edit -> run_tests) (10 consecutive calls)."
    )
    assert "(read_file -> grep -> edit -> run_tests -> git_diff) (11 consecutive calls)" in flagged[1].message
    # One key for the whole cycle, whichever of its calls is made: it is emitted once.
    assert len({v.warning_key for v in flagged}) == 1
    assert flagged[0].warning_key.startswith("cycle:")
    assert flagged[0].warning_key.count(">") == 4
    assert flagged[0].paired_tool_name is None


def _texts(verdict: Any) -> Tuple[Any, ...]:
    return (verdict.message, verdict.warning_key, verdict.paired_tool_name, verdict.to_dict(), repr(verdict))


def test_a_verdict_reads_the_same_however_late_its_text_is_read() -> None:
    # A verdict's message and key are worded when first read, from what the call's decision
    # captured: later calls (new tools, a history that moved on) must not change them.
    one_tool = [("read", {"path": f"src/mod{n}.py"}) for n in range(7)]
    ping_pong = [("read_file", {"path": "a.py"}), ("list_dir", {"path": "."})]
    calls = cycle_calls(FIVE, 4) + cycle_calls(one_tool, 3) + cycle_calls(ping_pong, 8)
    eager, late = ToolLoopDetector(), ToolLoopDetector()
    read_at_once, decisions = [], []
    for tool, params, result in calls:
        read_at_once.append(_texts(run(eager, tool, params, result).verdict))
        decisions.append(run(late, tool, params, result))
    for n in range(12):  # an unknown tool's retries, its name read from the error
        for detector in (eager, late):
            decision = detector.before_tool_call("missing_tool", {"n": n})
            detector.after_tool_call("missing_tool", {"n": n}, error="Tool missing_tool not found")
            if detector is eager:
                read_at_once.append(_texts(decision.verdict))
            else:
                decisions.append(decision)
    for n in range(40):  # the history and the names move on before the late reads
        run(late, f"other_tool_{n}", {"n": n}, f"result {n}")
    assert [_texts(decision.verdict) for decision in decisions] == read_at_once
    flagged = [texts for texts in read_at_once if texts[0] is not None]
    assert any("(all read, with changing arguments)" in texts[0] for texts in flagged)
    assert any("git_diff -> read_file" in texts[0] for texts in flagged)
    assert any(texts[2] is not None for texts in flagged)  # a ping-pong names its other tool
    assert any(texts[1].startswith("unknown-tool:missing_tool:") for texts in flagged)


def test_a_cycle_call_whose_outcome_never_came_is_no_evidence_of_no_progress() -> None:
    # One outcome missing, anywhere in the tail; or one call of the cycle that never has one
    # (its records then agree with each other, having no result at all).
    calls = cycle_calls(FIVE, 4)
    for missing in (set(), {3}, {12}, {18}, set(range(2, 19, 5))):
        detector = ToolLoopDetector()
        for index, (tool, params, result) in enumerate(calls[:19]):
            detector.before_tool_call(tool, params)
            if index not in missing:
                detector.after_tool_call(tool, params, result=result)
        verdict = detector.before_tool_call(*calls[19][:2]).verdict
        level = "warning" if missing else "critical"
        assert (verdict.level, verdict.detector, verdict.count) == (level, "cycle", 20), missing


def test_a_cycle_whose_results_change_is_progress_and_only_warned_about() -> None:
    found = flags(ToolLoopDetector(), cycle_calls(FIVE, 8, changing=True))
    assert found and all(level == "warning" for _, level, _, _ in found)


@pytest.mark.parametrize("period", [3, 4, 6, 8])
def test_every_period_from_three_to_eight(period: int) -> None:
    cycle = [(f"tool{i}", {"n": i}) for i in range(period)]
    found = flags(ToolLoopDetector(), cycle_calls(cycle, 8)[:20])
    # A cycle is one once it has been repeated: two full rounds, and the warning threshold.
    first_warning = max(10, 2 * period) - 1
    assert found[0] == (first_warning, "warning", "cycle", first_warning + 1)
    assert found[-1] == (19, "critical", "cycle", 20)


def test_the_cycle_switch() -> None:
    assert flags(ToolLoopDetector(cycle=False), cycle_calls(FIVE, 6)) == []


# --- argument churn -------------------------------------------------------------------------

# One tool, three argument sets in no fixed order, each with its own unchanging result.
CHURN_ORDER = [0, 1, 1, 2, 0, 2, 1, 0, 0, 2, 1, 2, 0, 1, 2, 2, 0, 1, 0, 2, 1, 1, 0]


def churn_calls(order: List[int]) -> List[Tuple[str, Any, Any]]:
    return [("search", {"query": f"q{i}"}, f"hits for q{i}") for i in order]


def test_argument_churn_warns_then_blocks() -> None:
    found = flags(ToolLoopDetector(), churn_calls(CHURN_ORDER))
    assert found[0] == (10, "warning", "argument_churn", 10)
    assert found[-1] == (22, "critical", "argument_churn", 20)
    assert flags(openclaw(), churn_calls(CHURN_ORDER)) == []
    assert flags(ToolLoopDetector(argument_churn=False), churn_calls(CHURN_ORDER)) == []


def test_argument_churn_names_the_tool_and_its_argument_sets() -> None:
    detector = ToolLoopDetector()
    for tool, params, result in churn_calls(CHURN_ORDER[:10]):
        run(detector, tool, params, result)
    verdict = detector.check("search", {"query": "q0"})
    assert verdict.detector == "argument_churn"
    assert verdict.message.startswith("WARNING: You have called search 10 times cycling through the same 3 argument sets")
    assert verdict.warning_key.startswith("churn:search:")


def test_changing_results_or_new_calls_are_no_churn() -> None:
    # A set whose result changed is progress: the churn starts over after it.
    calls = churn_calls(CHURN_ORDER)
    calls[8] = (calls[8][0], calls[8][1], "new hits")
    found = flags(ToolLoopDetector(), calls)
    assert found[0][0] == 19
    # Reading new things, each once, with one unchanging result: no churn.
    batch = [("read", {"path": f"f{i}.py"}, "ok") for i in range(30)]
    assert flags(ToolLoopDetector(), batch) == []


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


def test_the_openclaw_paths_turn_doomloops_rules_off() -> None:
    own = ("cycle", "argument_churn", "hash_plain_results")
    native = LoopDetectionConfig()
    assert all(getattr(native, name) is True for name in own)
    for config in (
        LoopDetectionConfig.from_openclaw(None),
        LoopDetectionConfig.from_openclaw({"enabled": True}),
        LoopDetectionConfig.from_openclaw({"tools": {"loopDetection": {"enabled": True}}}, strict=False),
        ToolLoopDetector.from_openclaw({"enabled": True}).config,
    ):
        assert all(getattr(config, name) is False for name in own)
    # An OpenClaw block has no keys for them: strict parsing rejects one as unknown.
    with pytest.raises(ConfigError) as caught:
        LoopDetectionConfig.from_openclaw({"detectors": {"cycle": True}})
    assert caught.value.path == "tools.loopDetection.detectors.cycle"
    for unknown in ({"argumentChurn": True}, {"hashPlainResults": True}):
        with pytest.raises(ConfigError):
            LoopDetectionConfig.from_openclaw(unknown)
    # They can still be switched on for an OpenClaw config, by keyword.
    assert ToolLoopDetector.from_openclaw({"enabled": True}, cycle=True).config.cycle is True


def test_to_openclaw_leaves_doomloops_switches_out() -> None:
    config = LoopDetectionConfig(warning_threshold=4, critical_threshold=9)
    block = config.to_openclaw()
    assert not {"cycle", "argument_churn", "hash_plain_results", "argumentChurn"} & (set(block) | set(block["detectors"]))
    back = LoopDetectionConfig.from_openclaw(block)
    assert back == config.replace(cycle=False, argument_churn=False, hash_plain_results=False)


@pytest.mark.parametrize("name", ["cycle", "argument_churn", "hash_plain_results"])
def test_switches_are_checked(name: str) -> None:
    with pytest.raises(TypeError, match=rf"LoopDetectionConfig\.{name}: must be a bool"):
        LoopDetectionConfig(**{name: 1})


def test_positional_arguments_keep_their_meaning() -> None:
    # doomloop's switches come after OpenClaw's settings.
    config = LoopDetectionConfig(True, 30, 10, 20, 10, 30, True, True, True, 3, True, False)
    assert (config.post_compaction_window_size, config.hash_plain_results, config.cycle, config.argument_churn) == (
        3,
        True,
        False,
        True,
    )


def test_findings_are_logged_naming_the_rule(caplog: pytest.LogCaptureFixture) -> None:
    detector = ToolLoopDetector()
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        for tool, params, result in cycle_calls(FIVE, 2):
            run(detector, tool, params, result)
    assert [r.getMessage()[:44] for r in caplog.records] == ["tool loop warning (cycle, count 10): WARNING"]


def _status(n: int) -> str:
    return f"[2026-12-02T05:{n % 60:02d}:{(7 * n) % 60:02d}Z] job 42: running (pid {811 + n}), {1.5 + 7 * n:.1f}s elapsed"


def test_a_poll_whose_output_changes_only_in_volatile_tokens_makes_no_progress() -> None:
    # The keyword configuration masks the timestamp, pid and elapsed time: the same result,
    # so the repeat reaches its critical level; OpenClaw's rules see 25 different results.
    keyword, openclaw = ToolLoopDetector(), ToolLoopDetector.from_openclaw({"enabled": True})
    for name, detector in (("keyword", keyword), ("openclaw", openclaw)):
        blocked = None
        for n in range(25):
            decision = detector.before_tool_call("bash", {"command": "./status.sh 42"})
            if decision.blocked:
                blocked = n
                break
            detector.after_tool_call("bash", {"command": "./status.sh 42"}, result=_status(n))
        assert (blocked is not None) == (name == "keyword"), name
    assert keyword.get_stats()["calls"] <= keyword.config.critical_threshold + 1


def _job(n: int, done: int = 0) -> dict[str, object]:
    return {
        "job": "42",
        "state": "running",
        "pid": 811 + n,
        "elapsed_ms": 1500 + 7000 * n,
        "checkedAt": f"2026-12-02T05:{n % 60:02d}:{(7 * n) % 60:02d}Z",
        "log": [f"05:{n % 60:02d}:00 still waiting on /tmp/build-{n}/out"],
        "steps_done": done,
    }


def test_a_poll_whose_mapping_changes_only_in_volatile_parts_makes_no_progress() -> None:
    # A plain mapping (no OpenClaw content or details): its texts are masked at every depth,
    # and the pid, the elapsed time and the check time are masked whole by their keys.
    keyword = ToolLoopDetector()
    blocked = None
    for n in range(25):
        if keyword.before_tool_call("job_status", {"id": 42}).blocked:
            blocked = n
            break
        keyword.after_tool_call("job_status", {"id": 42}, result=_job(n))
    assert blocked is not None
    assert keyword.get_stats()["calls"] <= keyword.config.critical_threshold + 1
    # Progress in a field that names no volatile quantity is progress.
    detector = ToolLoopDetector()
    for n in range(25):
        assert detector.before_tool_call("job_status", {"id": 42}).verdict.level != "critical"
        detector.after_tool_call("job_status", {"id": 42}, result=_job(n, done=n))


def test_progress_in_a_poll_is_not_masked() -> None:
    detector = ToolLoopDetector()
    for n in range(25):
        decision = detector.before_tool_call("bash", {"command": "./status.sh 42"})
        assert decision.verdict.level != "critical"
        detector.after_tool_call("bash", {"command": "./status.sh 42"}, result=f"step {n}/25 at {_status(n)}")
