"""LoopHealthResult (dict, JSON, summary) and the EvaluationLoopResult users build."""

from __future__ import annotations

import json
import math
import sys
from enum import Enum
from typing import Any, Dict

import pytest

from doomloop import DoomLoopType
from doomloop.eval import EvaluationLoopResult, IterationResult, LoopEvaluator, LoopHealthResult
from doomloop.eval._json import MAX_INDENT_DEPTH, dumps

KEY_ORDER = [
    "iterations_to_success",
    "wasted_iterations",
    "doom_loop_fired",
    "guard_interventions",
    "total_duration_s",
    "score_delta_per_iteration",
    "converged",
    "success",
    "passed",
    "threshold",
    "reasoning",
    "metadata",
]


def unhealthy() -> LoopHealthResult:
    return LoopHealthResult(
        iterations_to_success=2,
        wasted_iterations=1,
        doom_loop_fired=True,
        guard_interventions=3,
        total_duration_s=12.345,
        score_delta_per_iteration=[2.5, -0.25],
        converged=True,
        success=False,
        threshold=8.0,
        reasoning="r",
        metadata={"num_iterations": 3},
    )


def strict_loads(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"bare {constant} in JSON")

    return json.loads(text, parse_constant=refuse)


def test_to_dict_has_the_documented_keys_in_order() -> None:
    health = LoopEvaluator().run({"score_history": [6.0, 8.5]})
    assert list(health.to_dict()) == KEY_ORDER
    assert health.to_dict()["passed"] is health.passed is health.success is True


def test_passed_aliases_success() -> None:
    result = unhealthy()
    assert result.passed is False
    result.success = True
    assert result.passed is True and result.to_dict()["passed"] is True


def test_to_dict_returns_copies() -> None:
    result = unhealthy()
    result.to_dict()["metadata"]["extra"] = 1
    result.to_dict()["score_delta_per_iteration"].append(9.0)
    assert result.metadata == {"num_iterations": 3} and result.score_delta_per_iteration == [2.5, -0.25]


def test_to_json_round_trips() -> None:
    health = LoopEvaluator().run({"score_history": [6.0, 8.5, 9.0]}, guard_events=[{"type": "doom_loop"}])
    assert strict_loads(health.to_json()) == health.to_dict()
    assert health.to_json() == json.dumps(health.to_dict(), indent=2)


def test_to_json_writes_non_finite_numbers_as_null() -> None:
    result = unhealthy()
    result.total_duration_s = math.inf
    result.score_delta_per_iteration = [math.nan, 1.0, -math.inf]
    result.threshold = math.inf
    result.metadata = {"score_history": [math.nan, 7.0], "nested": {"x": [{"y": -math.inf}]}}
    decoded = strict_loads(result.to_json())
    assert decoded["total_duration_s"] is None and decoded["threshold"] is None
    assert decoded["score_delta_per_iteration"] == [None, 1.0, None]
    assert decoded["metadata"] == {"score_history": [None, 7.0], "nested": {"x": [{"y": None}]}}


def test_to_json_handles_values_json_has_no_type_for() -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    class Nested(Enum):
        PAIR = (1, 2)

    result = unhealthy()
    odd_keys: Dict[Any, Any] = {
        "type": DoomLoopType.NO_PROGRESS,
        "thing": Thing(),
        "tuple": (1, 2),
        "set": {3},
        "nested_enum": Nested.PAIR,
        7: "int key",
        None: "none key",
        (1, 2): "tuple key",
    }
    result.metadata = odd_keys
    assert strict_loads(result.to_json())["metadata"] == {
        "type": "no_progress",
        "thing": "a thing",
        "tuple": [1, 2],
        "set": [3],
        "nested_enum": "Nested.PAIR",
        "7": "int key",
        "null": "none key",
        "(1, 2)": "tuple key",
    }


def test_to_json_matches_json_dumps_on_plain_data() -> None:
    data: Dict[str, Any] = {"a": [1, 2.5, {"b": None, "c": [], "d": {}}], "é": 'x"y\n', "t": True, "f": False}
    assert dumps(data) == json.dumps(data, indent=2)
    assert dumps(data, indent=4) == json.dumps(data, indent=4)
    assert dumps([]) == "[]" and dumps(3) == "3" and dumps(math.nan) == "null"


def test_to_json_survives_deep_nesting() -> None:
    depth = 100_000
    deep: Dict[str, Any] = {}
    cursor = deep
    for _ in range(depth):
        cursor["k"] = {}
        cursor = cursor["k"]
    result = unhealthy()
    result.metadata = {"deep": deep}
    text = result.to_json()
    assert text.count('"k"') == depth
    # Indentation stops growing (two lines per level), so the text stays linear in the depth.
    assert len(text) < depth * 2 * (2 * MAX_INDENT_DEPTH + 10)
    compact = "".join(text.split())
    assert compact.startswith('{"iterations_to_success":2,') and compact.endswith("}" * (depth + 3))


def test_to_json_refuses_circular_metadata() -> None:
    result = unhealthy()
    loop_back: Dict[str, Any] = {}
    loop_back["self"] = loop_back
    result.metadata = loop_back
    with pytest.raises(ValueError, match="circular reference"):
        result.to_json()


def test_shared_but_not_circular_values_are_fine() -> None:
    shared = [1, 2]
    result = unhealthy()
    result.metadata = {"a": shared, "b": shared}
    assert strict_loads(result.to_json())["metadata"] == {"a": [1, 2], "b": [1, 2]}


RICH_ROWS = [
    ("Status", "❌ UNHEALTHY"),
    ("Converged", "✅"),
    ("Iterations to Success", "2"),
    ("Wasted Iterations", "1"),
    ("Doom-Loop Fired", "⚠️ YES"),
    ("Guard Interventions", "3"),
    ("Duration", "12.35s"),
    ("Score Deltas", "+2.5 → -0.2"),
]


def test_print_summary_with_rich(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("rich")
    unhealthy().print_summary()
    out = capsys.readouterr().out
    assert "Loop Health Summary" in out
    for metric, value in RICH_ROWS:
        line = next(line for line in out.splitlines() if metric in line)
        assert value in line, (metric, line)


def test_print_summary_plain_fallback(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.setitem(sys.modules, "rich.console", None)
    monkeypatch.setitem(sys.modules, "rich.table", None)
    unhealthy().print_summary()
    assert capsys.readouterr().out == (
        "Loop Health Summary\n"
        "  Status: ❌ UNHEALTHY\n"
        "  Converged: ✅\n"
        "  Iterations to Success: 2\n"
        "  Wasted Iterations: 1\n"
        "  Doom-Loop Fired: ⚠️ YES\n"
        "  Guard Interventions: 3\n"
        "  Duration: 12.35s\n"
        "  Score Deltas: +2.5 → -0.2\n"
    )


def test_plain_fallback_healthy_without_deltas(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.setitem(sys.modules, "rich.console", None)
    LoopEvaluator().run({"score_history": [9.0]}).print_summary()
    out = capsys.readouterr().out
    assert "  Status: ✅ HEALTHY\n" in out and "  Doom-Loop Fired: no\n" in out and "Score Deltas" not in out


def test_evaluation_loop_result_properties() -> None:
    result = EvaluationLoopResult(
        iterations=[IterationResult(1, 6.0, "a"), IterationResult(2, 8.5, "b")],
        success=True,
        total_duration_seconds=3.0,
        mode="review",
    )
    assert result.score_history == [6.0, 8.5]
    assert result.num_iterations == 2 and result.final_score == 8.5
    assert EvaluationLoopResult().final_score is None and EvaluationLoopResult().score_history == []
    assert EvaluationLoopResult().threshold == 8.0 and EvaluationLoopResult().mode == "optimize"


def test_evaluation_loop_result_dict_is_evaluator_input() -> None:
    result = EvaluationLoopResult(
        iterations=[IterationResult(1, 6.0), IterationResult(2, 8.5)],
        success=False,
        total_duration_seconds=3.0,
        threshold=8.0,
        mode="review",
    )
    as_dict = strict_loads(json.dumps(result.to_dict()))
    assert as_dict["iterations"][1]["score"] == 8.5
    from_object = LoopEvaluator().run(result).to_dict()
    from_dict = LoopEvaluator().run(as_dict).to_dict()
    for health in (from_object, from_dict):
        health["metadata"].pop("name")
        health["metadata"].pop("eval_id")
    assert from_object == from_dict
    assert from_dict["converged"] is False  # review mode defers to success=False
