"""Replays PraisonAI 1.7.17's recorded DoomLoopDetector answers through doomloop's API."""

from __future__ import annotations

import json
from typing import Any

import pytest

from doomloop import DoomLoopConfig, DoomLoopDetector
from support import FakeClock, conformance_file

SIMILAR_CASE_WORDING = "Same action type repeated"


def _scenarios() -> list[dict[str, Any]]:
    data = json.loads(conformance_file("praisonai_doom_loop.json").read_text())
    scenarios: list[dict[str, Any]] = data["scenarios"]
    assert scenarios, "no scenarios in praisonai_doom_loop.json"
    return scenarios


def _ids() -> list[str]:
    try:
        return [s["name"] for s in _scenarios()]
    except BaseException:  # noqa: BLE001 - reported by the test body instead, as a failure
        return ["missing-conformance-file"]


@pytest.mark.parametrize("name", _ids())
def test_replay_matches_upstream(name: str) -> None:
    scenario = next(s for s in _scenarios() if s["name"] == name)
    clock = FakeClock(scenario["start_t"])
    config = DoomLoopConfig(**scenario["config"], detect_cycles=False)
    detector = DoomLoopDetector(config, clock=clock)
    detector.start_session()
    for index, entry in enumerate(scenario["trace"]):
        step, expect = entry["step"], entry["expect"]
        where = f"{name} step {index} ({step['op']})"
        clock.now = step["t"]
        op = step["op"]
        if op == "action":
            detector.record_action(step["type"], step["args"], step["result"], step["success"])
        elif op == "progress":
            detector.mark_progress(step["marker"])
        elif op == "recover":
            assert detector.increment_recovery() == expect["increment_result"], where
        else:
            assert op == "advance", where
        loop_type = detector.get_loop_type()
        assert (loop_type.value if loop_type else None) == expect["loop_type"], where
        assert detector.is_doom_loop() == (expect["loop_type"] is not None), where
        assert detector.get_recovery_action().value == expect["recovery"], where
        event = detector.get_loop_event()
        assert (event is None) == (expect["description"] is None), where
        if event is not None and not event.description.startswith(SIMILAR_CASE_WORDING):
            assert event.description == expect["description"], where
        stats = detector.get_stats()
        for key, value in expect["stats"].items():
            assert stats[key] == value, f"{where}: stats[{key!r}]"
