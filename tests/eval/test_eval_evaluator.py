"""LoopEvaluator: the seed page's worked examples, the rules, edge cases and bad input."""

from __future__ import annotations

import asyncio
import json
import math
import pathlib
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, List, Optional

import pytest

from doomloop import ConfigError, DoomLoopEvent, DoomLoopType, RecoveryAction
from doomloop.eval import EvaluationLoopResult, IterationResult, LoopEvaluator, LoopHealthResult


def loop(
    scores: List[float], *, threshold: float = 8.0, mode: str = "optimize", success: Optional[bool] = None, duration: float = 0.0
) -> EvaluationLoopResult:
    return EvaluationLoopResult(
        iterations=[IterationResult(iteration=i, score=s, output=f"draft {i}") for i, s in enumerate(scores, start=1)],
        success=success,
        total_duration_seconds=duration,
        threshold=threshold,
        mode=mode,
    )


# --- the seed page's worked examples -------------------------------------------------------


def test_quick_start_converged_loop_is_healthy() -> None:
    health = LoopEvaluator().run(loop([6.0, 7.5, 8.5], duration=12.5, success=True))
    assert health.converged and health.passed and health.success
    assert health.iterations_to_success == 3
    assert health.wasted_iterations == 0
    assert not health.doom_loop_fired
    assert health.guard_interventions == 0
    assert health.total_duration_s == 12.5
    assert health.score_delta_per_iteration == [1.5, 1.0]
    assert health.threshold == 8.0
    assert health.reasoning == "Converged in 3 iteration(s)."
    assert health.metadata["num_iterations"] == 3


def test_wasted_iteration_fails_strict_gate_and_passes_with_allowance() -> None:
    result = loop([6.0, 8.5, 9.0])
    strict = LoopEvaluator(threshold=8.0).run(result)
    assert strict.converged and strict.iterations_to_success == 2 and strict.wasted_iterations == 1
    assert not strict.passed
    assert strict.reasoning == "Converged in 2 iteration(s). 1 wasted iteration(s) after threshold."

    tolerant = LoopEvaluator(threshold=8.0, max_wasted_iterations=1).run(result)
    assert tolerant.passed
    assert tolerant.wasted_iterations == 1


def test_two_wasted_iterations_exceed_an_allowance_of_one() -> None:
    health = LoopEvaluator(max_wasted_iterations=1).run(loop([8.0, 8.0, 9.0]))
    assert health.iterations_to_success == 1 and health.wasted_iterations == 2
    assert not health.passed


def test_structured_guard_events_as_dicts() -> None:
    guard_events = [{"type": "doom_loop", "reason": "repeated tool call"}]
    health = LoopEvaluator().run(loop([6.0, 8.5]), guard_events=guard_events)
    assert health.doom_loop_fired is True
    assert not health.passed
    assert health.converged
    assert health.reasoning == "Converged in 2 iteration(s). Doom-loop guard fired. 1 guard intervention(s)."


def test_structured_guard_events_as_objects() -> None:
    event = DoomLoopEvent(
        loop_type=DoomLoopType.REPEATED_ACTION,
        description="Same action repeated 3 times",
        action_history=["search"] * 3,
        recovery_action=RecoveryAction.RETRY_DIFFERENT,
    )
    health = LoopEvaluator().run(loop([6.0, 8.5]), guard_events=[event, {"is_loop": True}])
    assert health.doom_loop_fired is True
    assert health.guard_interventions == 2
    assert not health.passed


def test_review_mode_defers_to_loop_success() -> None:
    # An early high score followed by a low final score is a failed review run.
    failed = LoopEvaluator().run(loop([8.5, 6.0], mode="review", success=False))
    assert not failed.converged and not failed.passed
    assert failed.iterations_to_success == 2 and failed.wasted_iterations == 0
    assert failed.reasoning == "Did not converge after 2 iteration(s)."

    # The loop's own verdict wins over the final score.
    trusted = LoopEvaluator().run(loop([5.0, 6.0], mode="review", success=True))
    assert trusted.converged and trusted.passed


def test_review_mode_without_recorded_success_uses_final_score() -> None:
    assert not LoopEvaluator().run(loop([8.5, 6.0], mode="review")).converged
    passed = LoopEvaluator().run(loop([6.0, 8.5, 9.0, 9.5], mode="review"))
    assert passed.converged and passed.passed
    assert passed.iterations_to_success == 4
    assert passed.wasted_iterations == 0  # review runs every iteration by design


def test_ci_gate_pattern(capsys: pytest.CaptureFixture[str]) -> None:
    def gate(loop_result: Any) -> None:
        health = LoopEvaluator(max_wasted_iterations=0).run(loop_result)
        if not health.passed:
            print(f"Loop unhealthy: {health.reasoning}")
            sys.exit(1)

    gate(loop([7.0, 8.0]))
    assert capsys.readouterr().out == ""
    with pytest.raises(SystemExit) as exit_info:
        gate(loop([8.0, 9.0]))
    assert exit_info.value.code == 1
    assert capsys.readouterr().out == "Loop unhealthy: Converged in 1 iteration(s). 1 wasted iteration(s) after threshold.\n"


def test_combine_quality_and_health() -> None:
    loop_result = loop([7.0, 8.2], success=True)
    assert loop_result.final_score == 8.2 and loop_result.success is True
    health = LoopEvaluator().run(loop_result)
    assert health.passed and health.wasted_iterations == 0


# --- rules -----------------------------------------------------------------------------


def test_did_not_converge() -> None:
    health = LoopEvaluator().run(loop([5.0, 6.0, 7.9]))
    assert not health.converged and not health.passed
    assert health.iterations_to_success == 3 and health.wasted_iterations == 0
    assert health.reasoning == "Did not converge after 3 iteration(s)."


def test_threshold_precedence() -> None:
    result = loop([6.0, 7.0], threshold=6.5)
    assert LoopEvaluator().run(result).iterations_to_success == 2
    assert LoopEvaluator().run(result).threshold == 6.5
    assert LoopEvaluator(threshold=5.0).run(result).iterations_to_success == 1
    assert LoopEvaluator(threshold=5.0).run(result).threshold == 5.0


@pytest.mark.parametrize(
    "loop_result",
    [
        {"score_history": [7.9, 8.0]},
        {"score_history": [7.9, 8.0], "threshold": None},
    ],
)
def test_threshold_none_everywhere_falls_back_to_8(loop_result: Any) -> None:
    health = LoopEvaluator(threshold=None).run(loop_result)
    assert health.threshold == 8.0
    assert health.iterations_to_success == 2 and health.converged


def test_threshold_is_inclusive_and_ints_work() -> None:
    health = LoopEvaluator(threshold=8).run({"score_history": [7, 8]})
    assert health.iterations_to_success == 2 and health.threshold == 8.0
    assert isinstance(health.threshold, float)


def test_score_deltas_are_rounded_to_4_decimals() -> None:
    health = LoopEvaluator().run({"score_history": [0.1, 0.3, 0.12344, 0.6]})
    assert health.score_delta_per_iteration == [0.2, -0.1766, 0.4766]


@pytest.mark.parametrize("mode", ["REVIEW", "Review", " review "])
def test_mode_is_case_insensitive(mode: str) -> None:
    health = LoopEvaluator().run({"score_history": [8.5, 9.0], "mode": mode})
    assert health.wasted_iterations == 0 and health.iterations_to_success == 2
    assert health.metadata["mode"] == "review"


@pytest.mark.parametrize(
    "loop_result",
    [{"score_history": [8.5, 9.0]}, {"score_history": [8.5, 9.0], "mode": None}, {"score_history": [8.5, 9.0], "mode": ""}],
)
def test_missing_mode_is_optimize(loop_result: Any) -> None:
    health = LoopEvaluator().run(loop_result)
    assert health.wasted_iterations == 1 and health.metadata["mode"] == "optimize"


def test_unknown_mode_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"loop_result\.mode must be 'optimize' or 'review'.*'explore'"):
        LoopEvaluator().run({"score_history": [9.0], "mode": "explore"})
    with pytest.raises(TypeError, match=r"loop_result\.mode must be a str"):
        LoopEvaluator().run({"score_history": [9.0], "mode": 1})


@pytest.mark.parametrize(
    ("flag", "converged"),
    [
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("", False),
        ("true", True),
        ("yes", True),
        (0, False),
        (1, True),
        (False, False),
        (True, True),
    ],
)
def test_review_success_flag_strings(flag: Any, converged: bool) -> None:
    # The final score says "converged" so any False here comes from the flag itself.
    health = LoopEvaluator().run({"score_history": [9.0], "mode": "review", "success": flag})
    assert health.converged is converged


def test_optimize_mode_ignores_loop_success() -> None:
    assert LoopEvaluator().run({"score_history": [9.0], "success": False}).converged


def test_guard_flags_as_strings_do_not_fire() -> None:
    events = [{"doom_loop": "false"}, {"doom_loop_fired": "0"}, {"doom_loop": "no"}, {"doom_loop": ""}]
    health = LoopEvaluator().run({"score_history": [9.0]}, guard_events=events)
    assert not health.doom_loop_fired and health.passed
    assert health.guard_interventions == 4
    assert health.reasoning == "Converged in 1 iteration(s). 4 guard intervention(s)."


def test_guard_events_accept_any_iterable() -> None:
    events = (event for event in [{"type": "doom_loop"}])
    assert LoopEvaluator().run({"score_history": [9.0]}, guard_events=events).doom_loop_fired
    assert LoopEvaluator().run({"score_history": [9.0]}, guard_events=()).guard_interventions == 0


@pytest.mark.parametrize("bad", [{"type": "doom_loop"}, "doom_loop", 3])
def test_a_lone_event_instead_of_a_list_is_rejected(bad: Any) -> None:
    with pytest.raises(TypeError, match="guard_events must be a list"):
        LoopEvaluator().run({"score_history": [9.0]}, guard_events=bad)


def test_none_inside_guard_events_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"guard_events\[1\] is None"):
        LoopEvaluator().run({"score_history": [9.0]}, guard_events=[{}, None])


# --- edge cases ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["optimize", "review"])
def test_empty_history(mode: str) -> None:
    health = LoopEvaluator().run(EvaluationLoopResult(mode=mode, success=True))
    assert not health.converged and not health.passed
    assert health.iterations_to_success == 0 and health.wasted_iterations == 0
    assert health.score_delta_per_iteration == []
    assert health.metadata["num_iterations"] == 0
    assert health.reasoning == "Did not converge after 0 iteration(s). The score history is empty."


def test_score_history_none_is_empty() -> None:
    health = LoopEvaluator().run({"score_history": None}, guard_events=[{"type": "doom_loop"}])
    assert health.metadata["num_iterations"] == 0
    assert health.reasoning == (
        "Did not converge after 0 iteration(s). The score history is empty. Doom-loop guard fired. 1 guard intervention(s)."
    )


@pytest.mark.parametrize(("score", "converged"), [(8.0, True), (7.99, False)])
def test_single_iteration(score: float, converged: bool) -> None:
    health = LoopEvaluator().run(loop([score]))
    assert health.converged is converged and health.passed is converged
    assert health.iterations_to_success == 1 and health.wasted_iterations == 0
    assert health.score_delta_per_iteration == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_scores_are_a_clear_error(bad: float) -> None:
    with pytest.raises(ValueError, match=r"loop_result\.score_history\[1\] must be a finite number"):
        LoopEvaluator().run({"score_history": [7.0, bad, 9.0]})


@pytest.mark.parametrize("bad", ["8", None, True, [8]])
def test_non_numeric_scores_are_rejected(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"loop_result\.score_history\[0\] must be a number"):
        LoopEvaluator().run({"score_history": [bad]})


def test_numpy_scores_work() -> None:
    numpy = pytest.importorskip("numpy")
    health = LoopEvaluator().run({"score_history": numpy.array([6.0, 8.5])})
    assert health.iterations_to_success == 2 and health.score_delta_per_iteration == [2.5]


@pytest.mark.parametrize("bad", [object(), [7.0, 8.0], {"scores": [8.0]}])
def test_loop_result_without_score_history_is_rejected(bad: Any) -> None:
    with pytest.raises(TypeError, match="loop_result must have a score_history"):
        LoopEvaluator().run(bad)


@pytest.mark.parametrize("bad", ["8.5", {"a": 1}, 8.5])
def test_score_history_must_be_a_sequence(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"loop_result\.score_history must be a sequence"):
        LoopEvaluator().run({"score_history": bad})


@pytest.mark.parametrize(
    ("field_name", "value", "error"),
    [
        ("threshold", math.nan, ValueError),
        ("threshold", "8", TypeError),
        ("total_duration_seconds", -1.0, ValueError),
        ("total_duration_seconds", math.nan, ValueError),
        ("total_duration_seconds", "3s", TypeError),
    ],
)
def test_bad_loop_fields_name_the_field(field_name: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=rf"loop_result\.{field_name}"):
        LoopEvaluator().run({"score_history": [9.0], field_name: value})


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("threshhold", r"loop_result\['threshhold'\]: unknown key \(did you mean 'threshold'\?\)"),
        ("Mode", r"loop_result\['Mode'\]: unknown key \(did you mean 'mode'\?\)"),
        ("total_duration", r"loop_result\['total_duration'\]: unknown key \(did you mean 'total_duration_seconds'\?\)"),
        ("colour", r"loop_result\['colour'\]: unknown key; a loop result's keys are score_history, threshold"),
        (7, r"loop_result\[7\]: unknown key; "),
    ],
)
def test_an_unknown_key_of_a_dict_loop_result_is_an_error(key: Any, message: str) -> None:
    # Ignoring it would score {"threshhold": 0.5} against the default 8.0 without a word.
    with pytest.raises(ConfigError, match=message) as caught:
        LoopEvaluator().run({"score_history": [1.0], key: 0.5})
    assert isinstance(caught.value, ValueError)


def test_a_loop_results_own_dict_is_a_valid_loop_result() -> None:
    result = loop([7.0, 8.5], threshold=8.5, mode="optimize", success=True, duration=2.0)
    result.metadata["run"] = "nightly"
    evaluator = LoopEvaluator()
    assert evaluator.run(result.to_dict()).to_dict() == evaluator.run(result).to_dict()


def test_missing_duration_is_zero() -> None:
    assert LoopEvaluator().run({"score_history": [9.0]}).total_duration_s == 0.0


def test_plain_objects_work_as_loop_results() -> None:
    @dataclass
    class Foreign:
        score_history: List[float] = field(default_factory=lambda: [7.0, 9.0])
        threshold: float = 9.0
        total_duration_seconds: float = 4.0
        mode: str = "optimize"
        success: bool = True

    health = LoopEvaluator().run(Foreign())
    assert health.iterations_to_success == 2 and health.threshold == 9.0 and health.total_duration_s == 4.0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"threshold": math.nan}, ValueError, "LoopEvaluator.threshold must not be NaN"),
        ({"threshold": "8"}, TypeError, "LoopEvaluator.threshold must be a number"),
        ({"threshold": math.inf}, ValueError, "LoopEvaluator.threshold must be <= "),
        ({"threshold": -1.0}, ValueError, "LoopEvaluator.threshold must be >= 0"),
        ({"max_wasted_iterations": -1}, ValueError, "LoopEvaluator.max_wasted_iterations must be >= 0"),
        ({"max_wasted_iterations": 1.5}, TypeError, "LoopEvaluator.max_wasted_iterations must be an int"),
        ({"name": 3}, TypeError, "LoopEvaluator.name must be a str"),
        ({"verbose": "yes"}, TypeError, "LoopEvaluator.verbose must be a bool"),
        ({"save_results_path": 3}, TypeError, "LoopEvaluator.save_results_path must be a str"),
        ({"save_results_path": "out/{run}.json"}, ValueError, "placeholders"),
        ({"save_results_path": "out/{0}.json"}, ValueError, "placeholders"),
        ({"save_results_path": "out/{name.json"}, ValueError, "placeholders"),
    ],
)
def test_constructor_validation(kwargs: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message.replace(".", r"\.")):
        LoopEvaluator(**kwargs)


def test_default_name_uses_the_eval_id() -> None:
    evaluator = LoopEvaluator()
    assert len(evaluator.eval_id) == 8 and int(evaluator.eval_id, 16) >= 0
    assert evaluator.name == f"eval_{evaluator.eval_id}"
    assert LoopEvaluator(name="nightly").name == "nightly"
    assert LoopEvaluator().eval_id != evaluator.eval_id


# --- side effects: files, printing, async ----------------------------------------------


def test_save_results_path_templating(tmp_path: pathlib.Path) -> None:
    evaluator = LoopEvaluator(name="nightly", save_results_path=str(tmp_path / "runs" / "{name}" / "{eval_id}.json"))
    health = evaluator.run(loop([6.0, 8.5]))
    written = tmp_path / "runs" / "nightly" / f"{evaluator.eval_id}.json"
    assert evaluator.results_path == written
    assert json.loads(written.read_text(encoding="utf-8")) == health.to_dict()
    assert list(json.loads(written.read_text(encoding="utf-8"))) == list(health.to_dict())


def test_save_results_path_accepts_paths_and_literal_braces(tmp_path: pathlib.Path) -> None:
    evaluator = LoopEvaluator(save_results_path=tmp_path / "{{literal}}.json")
    evaluator.run(loop([9.0]))
    assert json.loads((tmp_path / "{literal}.json").read_text(encoding="utf-8"))["passed"] is True


def test_save_errors_propagate(tmp_path: pathlib.Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError):
        LoopEvaluator(save_results_path=str(blocker / "result.json")).run(loop([9.0]))


def test_no_file_without_a_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    LoopEvaluator().run(loop([9.0]))
    assert list(tmp_path.iterdir()) == []


def test_verbose_prints_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    LoopEvaluator(verbose=True).run(loop([6.0, 8.5]))
    out = capsys.readouterr().out
    assert "Loop Health Summary" in out and "HEALTHY" in out and "+2.5" in out
    LoopEvaluator().run(loop([6.0, 8.5]))
    assert capsys.readouterr().out == ""


def test_run_async_matches_run(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    evaluator = LoopEvaluator(save_results_path=str(tmp_path / "{name}.json"), name="async", verbose=True)
    events = [{"type": "doom_loop", "iteration": 2}]
    health = asyncio.run(evaluator.run_async(loop([6.0, 8.5]), guard_events=events))
    assert isinstance(health, LoopHealthResult)
    assert health.to_dict() == evaluator.run(loop([6.0, 8.5]), guard_events=events).to_dict()
    assert json.loads((tmp_path / "async.json").read_text(encoding="utf-8")) == health.to_dict()
    assert capsys.readouterr().out.count("Loop Health Summary") == 2


def test_metadata_carries_the_picture_inputs() -> None:
    events = [{"type": "doom_loop", "iteration": 2}, {"level": "warning"}, {"doom_loop": True, "iteration": True}]
    health = LoopEvaluator(name="n").run(loop([6.0, 8.5, 9.0]), guard_events=events)
    assert health.metadata["score_history"] == [6.0, 8.5, 9.0]
    assert health.metadata["converged_at"] == 2
    assert health.metadata["guard_events"] == [
        {"iteration": 2, "fired": True},
        {"iteration": None, "fired": False},
        {"iteration": None, "fired": True},
    ]
    assert health.metadata["name"] == "n"
    review = LoopEvaluator().run(loop([9.0, 8.5], mode="review"))
    assert review.metadata["converged_at"] == 2
    assert LoopEvaluator().run(loop([1.0])).metadata["converged_at"] is None


@pytest.mark.parametrize(("value", "error"), [(1.5, TypeError), ("2", TypeError), (True, TypeError), (0, ValueError)])
def test_iteration_numbers_are_positive_ints(value: Any, error: type) -> None:
    with pytest.raises(error, match=r"IterationResult\.iteration"):
        IterationResult(iteration=value, score=5.0)


@pytest.mark.parametrize("threshold", [math.inf, -math.inf, -2.0])
def test_loop_result_thresholds_must_be_finite_and_not_negative(threshold: float) -> None:
    with pytest.raises(ValueError, match=r"loop_result\.threshold"):
        LoopEvaluator().run({"score_history": [9.0], "threshold": threshold})


# --- threads -------------------------------------------------------------------------------


def test_one_evaluator_shared_by_threads() -> None:
    evaluator = LoopEvaluator(max_wasted_iterations=1)
    failures: List[str] = []

    def work(offset: int) -> None:
        for step in range(200):
            wasted = (offset + step) % 3
            history = [5.0, 9.0] + [9.5] * wasted
            health = evaluator.run({"score_history": history}, guard_events=[{"level": "warning"}] * wasted)
            if (health.wasted_iterations, health.guard_interventions, health.passed) != (wasted, wasted, wasted <= 1):
                failures.append(f"{offset}/{step}: {health.to_dict()}")

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
