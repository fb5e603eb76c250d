"""The loop-health README section's examples run, and one evaluator serves many threads."""

from __future__ import annotations

import threading
from typing import List

import pytest

from doomloop.eval import LoopEvaluator
from support import python_blocks, readme_section

BLOCKS = python_blocks(readme_section("Loop-health evaluation"))


def test_section_has_examples() -> None:
    assert len(BLOCKS) == 2


def test_quick_start_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(BLOCKS[0], "readme-eval.md example 1", "exec"), {"__name__": "__readme__"})
    assert "Loop Health Summary" in capsys.readouterr().out


def test_ci_gate_passes_a_healthy_loop() -> None:
    exec(compile(BLOCKS[1], "readme-eval.md example 2", "exec"), {"__name__": "__readme__"})


def test_ci_gate_fails_an_unhealthy_loop(capsys: pytest.CaptureFixture[str]) -> None:
    unhealthy = BLOCKS[1].replace("[7.0, 8.2]", "[8.2, 9.0]")
    assert unhealthy != BLOCKS[1]
    with pytest.raises(SystemExit) as exit_info:
        exec(compile(unhealthy, "readme-eval.md example 2", "exec"), {"__name__": "__readme__"})
    assert exit_info.value.code == 1
    assert capsys.readouterr().out.startswith("Loop unhealthy: Converged in 1 iteration(s).")


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
