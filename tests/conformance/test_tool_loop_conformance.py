"""Replays the recorded OpenClaw vectors (tool-loop scenarios and per-agent config overlays)
through doomloop's public API. Fails, never skips, when the vector files are missing."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

from doomloop import ToolLoopDetector, resolve_openclaw_block
from support import conformance_file


def _load(name: str) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(conformance_file(name).read_text(encoding="utf-8"))
    return data


SCENARIOS: List[Dict[str, Any]] = _load("openclaw_tool_loop.json")["scenarios"]
OVERLAYS: List[Dict[str, Any]] = _load("openclaw_config_overlay.json")["cases"]


def test_vectors_are_present() -> None:
    assert len(SCENARIOS) == 60
    assert len(OVERLAYS) == 7


def _warning_threshold(config: Any) -> int:
    # The effective threshold (a non-positive-integer falls back to the default, 10).
    value = (config or {}).get("warningThreshold", 10)
    return value if isinstance(value, int) and value >= 1 else 10


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_tool_loop_scenario(scenario: Dict[str, Any]) -> None:
    detector = ToolLoopDetector.from_openclaw(scenario["config"])
    compare_warnings = _warning_threshold(scenario["config"]) >= 10
    for index, entry in enumerate(scenario["trace"]):
        step, expect = entry["step"], entry["expect"]
        where = f"{scenario['name']} step {index}"
        if step.get("arm_guard"):
            # Arms for the window, or 0 when `enabled: false` turned the guard off.
            expected = 0 if (scenario["config"] or {}).get("enabled") is False else detector.config.post_compaction_window_size
            assert detector.arm_post_compaction() == expected, where
            continue
        tool, params, run_id = step["tool"], step["params"], step["run_id"]
        decision = detector.before_tool_call(tool, params, run_id=run_id)
        if decision.blocked:
            outcome = detector.after_tool_call(tool, params, result=decision.blocked_result, run_id=run_id)
        elif "error" in step:
            outcome = detector.after_tool_call(tool, params, error=RuntimeError(step["error"]), run_id=run_id)
        else:
            outcome = detector.after_tool_call(tool, params, result=step["result"], run_id=run_id)

        verdict, want = decision.verdict, expect["verdict"]
        assert verdict.stuck == want["stuck"], where
        if want["stuck"]:
            got = (verdict.level, verdict.detector, verdict.count, verdict.paired_tool_name)
            assert got == (want["level"], want["detector"], want["count"], want["pairedToolName"]), where
        assert decision.blocked == expect["blocked"], where
        if compare_warnings:
            assert decision.emit_warning == expect["warningEmitted"], where
        want_guard = expect["guard"]
        if want_guard is None:
            assert outcome.guard is None, where
        else:
            assert outcome.guard is not None, where
            assert outcome.guard.should_abort == want_guard["shouldAbort"], where
            if want_guard["shouldAbort"]:
                assert outcome.guard.detector == want_guard["detector"], where
                assert (outcome.guard.count, outcome.guard.tool_name) == (want_guard["count"], want_guard["toolName"]), where
        assert detector.history_len == expect["historyLen"], where


@pytest.mark.parametrize("case", OVERLAYS, ids=[f"overlay-{i}" for i in range(len(OVERLAYS))])
def test_config_overlay(case: Dict[str, Any]) -> None:
    assert resolve_openclaw_block(case["cfg"], case["agentId"]) == case["resolved"]
