"""DoomLoopDetector against praisonaiagents' DoomLoopDetector, in the same run.

Run: python -m pytest benches/bench_detector.py --benchmark-enable --benchmark-only
Compare the medians of the ``doomloop`` and ``praisonai`` rows of each group.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tracemalloc
from typing import Any, Callable

import pytest

import doomloop

praisonai = pytest.importorskip("praisonaiagents.escalation.doom_loop")

ARGS = {"path": "src/app.py", "offset": 40}
RESULT = "x" * 100
PAIR_ROUNDS = 2_000


def _no_loops() -> doomloop.DoomLoopConfig:
    # Loops would fire (and log) on the repeated benchmark call; keep the checks running
    # but never firing, so both implementations do their full work every time.
    return doomloop.DoomLoopConfig(max_identical_actions=10**9, max_similar_actions=10**9, max_no_progress_steps=10**9)


def _praisonai_no_loops() -> Any:
    return praisonai.DoomLoopConfig(max_identical_actions=10**9, max_similar_actions=10**9, max_no_progress_steps=10**9)


def _pairs(detector: Any) -> Callable[[], None]:
    record, check = detector.record_action, detector.is_doom_loop

    def run() -> None:
        for _ in range(PAIR_ROUNDS):
            record("read_file", ARGS, RESULT, True)
            check()

    return run


@pytest.mark.benchmark(group="record_action + is_doom_loop (x2000)")
def test_pair_doomloop(benchmark: Any) -> None:
    detector = doomloop.DoomLoopDetector(_no_loops())
    detector.start_session()
    benchmark(_pairs(detector))


@pytest.mark.benchmark(group="record_action + is_doom_loop (x2000)")
def test_pair_praisonai(benchmark: Any) -> None:
    detector = praisonai.DoomLoopDetector(_praisonai_no_loops())
    detector.start_session()
    # Upstream keeps every action and rescans: cap its history so the rounds stay comparable.
    benchmark.pedantic(_pairs(detector), setup=detector.start_session, rounds=20)


# The measure: a fresh arguments dict per call, with a new path and a new result each
# call (as an agent reading one file after another sends them), default configurations. Both
# detectors see the same calls; upstream's session starts afresh every round, as in the pair
# groups above.
FRESH_PATHS = [f"src/pkg/module_{i}.py" for i in range(PAIR_ROUNDS)]
FRESH_RESULTS = [f"read {i} lines" for i in range(PAIR_ROUNDS)]


def _fresh_pairs(detector: Any) -> Callable[[], None]:
    record, check = detector.record_action, detector.is_doom_loop

    def run() -> None:
        for path, result in zip(FRESH_PATHS, FRESH_RESULTS, strict=True):
            record("read_file", {"path": path, "offset": 40}, result, True)
            check()

    return run


def _fresh_arguments() -> None:
    # What the loops above spend building their arguments, to read the ratio net of it.
    for path, result in zip(FRESH_PATHS, FRESH_RESULTS, strict=True):
        _ = ("read_file", {"path": path, "offset": 40}, result, True)


@pytest.mark.benchmark(group="fresh arguments: record_action + is_doom_loop (x2000)")
def test_fresh_doomloop(benchmark: Any) -> None:
    detector = doomloop.DoomLoopDetector()
    detector.start_session()
    benchmark(_fresh_pairs(detector))


@pytest.mark.benchmark(group="fresh arguments: record_action + is_doom_loop (x2000)")
def test_fresh_praisonai(benchmark: Any) -> None:
    detector = praisonai.DoomLoopDetector()
    benchmark.pedantic(_fresh_pairs(detector), setup=detector.start_session, rounds=20)


@pytest.mark.benchmark(group="fresh arguments: record_action + is_doom_loop (x2000)")
def test_fresh_arguments_alone(benchmark: Any) -> None:
    benchmark(_fresh_arguments)


@pytest.mark.parametrize("history", [1_000, 1_000_000])
@pytest.mark.benchmark(group="per-call cost vs history length")
def test_flat_in_history(benchmark: Any, history: int) -> None:
    detector = doomloop.DoomLoopDetector(_no_loops())
    detector.start_session()
    record = detector.record_action
    for i in range(history):
        record("read_file", {"i": i % 100}, RESULT, True)
    benchmark(_pairs(detector))


def test_memory_after_a_million_actions() -> None:
    """Footprint of a detector after 1,000,000 actions (tracemalloc), printed for the report."""
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    detector = doomloop.DoomLoopDetector(_no_loops())
    detector.start_session()
    record = detector.record_action
    for i in range(1_000_000):
        record("read_file", {"i": i % 100}, RESULT, True)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    print(f"\ndoomloop detector after 1,000,000 actions: {grown} bytes traced (budget 65536)")
    assert detector.get_stats()["total_actions"] == 1_000_000


def _import_ms(module: str, runs: int = 15) -> float:
    """Median cumulative import time of ``module`` in fresh interpreters (``-X importtime``,
    which times the import itself rather than interpreter start-up, the noisy part)."""

    def once() -> float:
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
        )
        # The outermost line (no indentation) is the whole import's cumulative microseconds.
        line = [row for row in out.stderr.splitlines() if row.rstrip().endswith(f"| {module}")][-1]
        return int(line.split("|")[1]) / 1000

    return statistics.median(once() for _ in range(runs))


def test_import_time() -> None:
    """Median cumulative time of ``import doomloop`` vs upstream's escalation module."""
    ours = _import_ms("doomloop")
    theirs = _import_ms("praisonaiagents.escalation.doom_loop")
    print(f"\nimport doomloop: {ours:.1f} ms; import praisonaiagents.escalation.doom_loop: {theirs:.1f} ms")
