"""Benchmarks of the gateway runtime: a tool call through a SessionRegistry against the bare
detector call in the same run, and the memory of many live sessions.

Run: ``python -m pytest benches/bench_gateway.py --benchmark-enable --benchmark-only``. The
memory figures print with ``python benches/bench_gateway.py [sessions]`` (RSS, so run it alone
on the machine). Without ``--benchmark-enable`` each body runs once, as a plain test.
"""

from __future__ import annotations

import gc
import sys
from typing import Any, Dict

import pytest

from doomloop import ToolLoopDetector
from doomloop.gateway import SessionRegistry

PARAMS = {"command": "ls", "cwd": "/w", "timeout": 30}
RESULT = {"content": [{"type": "text", "text": "a.py b.py"}], "details": {"status": "completed", "exitCode": 0}}
# Calls per timed round, so the clock's own cost does not count; reported times are per call.
PER_CALL: Dict[str, int] = {"iterations": 1_000, "rounds": 30, "warmup_rounds": 1}
QUIET = {"warning_threshold": 10**6, "critical_threshold": 10**6 + 1, "global_circuit_breaker_threshold": 10**6 + 2}


@pytest.mark.benchmark(group="gateway: one tool call")
def test_bare_detector_call(benchmark: Any) -> None:
    detector = ToolLoopDetector(**QUIET)
    before, after = detector.before_tool_call, detector.after_tool_call

    def call() -> None:
        before("read", PARAMS)
        after("read", PARAMS, result=RESULT)

    benchmark.pedantic(call, **PER_CALL)


@pytest.mark.benchmark(group="gateway: one tool call")
def test_registry_call(benchmark: Any) -> None:
    from doomloop import Profile

    registry = SessionRegistry(Profile.recommended().replace(**QUIET))
    before, after = registry.before_tool_call, registry.after_tool_call

    def call() -> None:
        before("session-1", "read", PARAMS)
        after("session-1", "read", PARAMS, result=RESULT)

    benchmark.pedantic(call, **PER_CALL)


@pytest.mark.benchmark(group="gateway: one tool call")
def test_registry_call_on_a_memory_store(benchmark: Any) -> None:
    # The shared-store path without the network: each hook is one update of the session's
    # blob (restore when needed, decide, snapshot), with a fresh arguments dict each call.
    from doomloop import Profile
    from doomloop.gateway import MemoryStore

    registry = SessionRegistry(Profile.recommended().replace(**QUIET), store=MemoryStore())
    before, after = registry.before_tool_call, registry.after_tool_call
    count = iter(range(10**9))

    def call() -> None:
        params = {**PARAMS, "command": f"ls {next(count)}"}
        before("session-1", "read", params)
        after("session-1", "read", params, result=RESULT)

    benchmark.pedantic(call, **PER_CALL)


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def session_bytes(sessions: int) -> float:
    """RSS per live session with a full tool history (30 calls) and 10 actions each."""
    registry = SessionRegistry()
    params = [{"command": f"ls {i}"} for i in range(30)]
    gc.collect()
    before = _rss()
    for n in range(sessions):
        key = f"tenant-{n}"
        for p in params:
            registry.before_tool_call(key, "exec", p)
            registry.after_tool_call(key, "exec", p, result="ok")
        for p in params[:10]:
            registry.record_action(key, "exec", p, "ok", True)
    gc.collect()
    assert len(registry) == sessions
    return (_rss() - before) / sessions


def test_many_sessions_stay_bounded() -> None:
    # A smoke run of the measure (the figures come from running this file as a script).
    assert session_bytes(500) < 64 * 1024


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    per = session_bytes(count)
    print(f"{count:,} sessions: {per * count / 1e6:,.0f} MB RSS, {per:,.0f} bytes per session")
