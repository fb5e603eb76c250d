"""Benchmarks of tool-call loop detection (one tool call = before_tool_call + after_tool_call).

Run: ``python -m pytest benches/bench_tool_loop.py --benchmark-enable --benchmark-only``
(with a release build: ``maturin develop --release``). The reference is praisonaiagents'
per-agent loop detection (record + detect + record outcome) in the same run. Without
``--benchmark-enable`` each benchmark body runs once, as a plain test.
"""

from __future__ import annotations

import sys
import tracemalloc
from typing import Any, Callable, Dict, List

import pytest

from doomloop import ToolLoopDetector

PARAMS = {"path": "/w/src/app.py", "offset": 0, "limit": 200}
RESULT = {
    "content": [{"type": "text", "text": "def main():\n    return 0\n"}],
    "details": {"status": "ok", "lines": 2},
}
EXEC_RESULT = {
    "content": [{"type": "text", "text": "a\nb"}],
    "details": {"status": "completed", "exitCode": 0, "durationMs": 12, "pid": 4001, "cwd": "/w", "aggregated": "a\nb"},
}


# Calls per timed round: the clock is read once per 1,000 calls, so its own cost (and its
# resolution) does not count as detector time. Reported times are per call.
PER_CALL: Dict[str, int] = {"iterations": 1_000, "rounds": 30, "warmup_rounds": 1}


def _detector() -> ToolLoopDetector:
    # High thresholds so the benchmark measures the common, not-stuck path.
    return ToolLoopDetector(warning_threshold=10**6, critical_threshold=10**6 + 1, global_circuit_breaker_threshold=10**6 + 2)


def _one_call(detector: ToolLoopDetector, tool: str = "read", params: Dict[str, Any] = PARAMS, result: Any = RESULT) -> None:
    detector.before_tool_call(tool, params, run_id="run-1")
    detector.after_tool_call(tool, params, result=result, run_id="run-1")


def _call(
    detector: ToolLoopDetector, tool: str = "read", params: Dict[str, Any] = PARAMS, result: Any = RESULT
) -> Callable[[], None]:
    """One tool call as a gateway makes it: the two hooks, already bound, and nothing else
    (so the harness's own attribute lookups and argument defaults are not timed)."""
    before, after = detector.before_tool_call, detector.after_tool_call

    def call() -> None:
        before(tool, params, run_id="run-1")
        after(tool, params, result=result, run_id="run-1")

    return call


@pytest.mark.benchmark(group="tool-call")
def test_doomloop_tool_call(benchmark: Any) -> None:
    detector = _detector()
    for _ in range(1_000):
        _one_call(detector)
    benchmark.pedantic(_call(detector), **PER_CALL)
    assert detector.history_len == 30


@pytest.mark.benchmark(group="tool-call")
def test_doomloop_tool_call_new_params(benchmark: Any) -> None:
    # As an agent calls it: a new params dict for each call (built inside the timed call),
    # handed to both hooks, so only after_tool_call can reuse the params digest.
    detector = _detector()
    before, after = detector.before_tool_call, detector.after_tool_call

    def one_call() -> None:
        params = {"path": "/w/src/app.py", "offset": 0, "limit": 200}
        before("read", params, run_id="run-1")
        after("read", params, result=RESULT, run_id="run-1")

    for _ in range(1_000):
        one_call()
    benchmark.pedantic(one_call, **PER_CALL)
    assert detector.history_len == 30


@pytest.mark.benchmark(group="tool-call")
def test_doomloop_exec_call(benchmark: Any) -> None:
    detector = _detector()
    params = {"command": "ls -la"}
    for _ in range(1_000):
        _one_call(detector, "exec", params, EXEC_RESULT)
    benchmark.pedantic(_call(detector, "exec", params, EXEC_RESULT), **PER_CALL)


@pytest.mark.benchmark(group="tool-call")
def test_doomloop_tool_call_after_1m(benchmark: Any) -> None:
    # Flat in the number of calls: the same call after a million earlier ones.
    detector = _detector()
    # A million calls when benchmarking; fewer when the file runs as a plain test.
    for _ in range(1_000_000 if not benchmark.disabled else 10_000):
        _one_call(detector)
    benchmark.pedantic(_call(detector), **PER_CALL)
    assert detector.history_len == 30


@pytest.mark.benchmark(group="tool-call")
def test_praisonai_tool_call(benchmark: Any) -> None:
    from praisonaiagents.agent import loop_detection as ld

    config = ld.LoopDetectionConfig(enabled=True, warn_threshold=10**6, critical_threshold=10**6 + 1)
    history: List[Any] = []

    def one_call() -> None:
        ld.record_tool_call(history, "read", PARAMS, config)
        ld.detect_tool_loop(history, "read", PARAMS, config)
        ld.record_tool_outcome(history, "read", PARAMS, RESULT, config)

    for _ in range(1_000):
        one_call()
    benchmark.pedantic(one_call, iterations=50, rounds=20, warmup_rounds=1)


def test_memory_per_detector() -> None:
    """Python-side bytes (tracemalloc) plus Rust-side bytes (``_state_size``) per detector
    at the default config, after 100 calls each; printed, and bounded at 4 KiB."""
    count = 2_000
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    detectors = [ToolLoopDetector() for _ in range(count)]
    for detector in detectors:
        for i in range(100):
            _one_call(detector, params={"path": "/w/src/app.py", "offset": i})
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    python_bytes = sum(stat.size_diff for stat in after.compare_to(before, "filename")) / count
    rust_bytes = detectors[0]._state_size()
    total = python_bytes + rust_bytes
    print(
        f"\nmemory per detector: python {python_bytes:.0f} B + rust {rust_bytes} B = {total:.0f} B; "
        f"sys.getsizeof {sys.getsizeof(detectors[0])} B"
    )
    assert total <= 4096


def _rotation(paths: int) -> Callable[[], None]:
    # A warned cycle (7 paths read in turn, the same result each time: `paths=7`) against a
    # normal call of the same shape (1,000 paths: nothing recurs), as instruction_counts.py's
    # `cycle_warned` and `cycle_normal` measure them. Never critical: the warning holds.
    detector = ToolLoopDetector(critical_threshold=10**6, global_circuit_breaker_threshold=10**6 + 1)
    before, after = detector.before_tool_call, detector.after_tool_call
    calls = [{"path": f"src/mod{n}.py"} for n in range(paths)]
    state = {"i": 0}
    for i in range(30):  # past the first loop episode
        before("read", calls[i % paths])
        after("read", calls[i % paths], result="same")

    def call() -> None:
        i = state["i"] = state["i"] + 1
        params = calls[i % paths]
        before("read", params)
        after("read", params, result="same")

    return call


@pytest.mark.benchmark(group="a warned cycle's call against a normal call of its shape")
def test_cycle_warned_call(benchmark: Any) -> None:
    benchmark.pedantic(_rotation(7), **PER_CALL)


@pytest.mark.benchmark(group="a warned cycle's call against a normal call of its shape")
def test_cycle_normal_call(benchmark: Any) -> None:
    benchmark.pedantic(_rotation(1000), **PER_CALL)
