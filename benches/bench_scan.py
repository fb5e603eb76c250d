"""End-to-end throughput of ``doomloop.traces.scan``: reading a trace file, replaying every
session through a fresh Monitor and building the reports, in tool-call events per second on
one process, for doomloop's JSONL event format and OpenAI chat JSONL; and the peak memory of
scans of growing files (flat: sessions are scanned one at a time).

Run: ``python benches/bench_scan.py [calls]`` prints events per second and peak RSS per size
(run it alone on the machine); ``python -m pytest benches/bench_scan.py --benchmark-enable``
times the same scans under pytest-benchmark. Without ``--benchmark-enable`` each body runs
once on a small file, as a plain test.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

from doomloop.traces import scan

SESSION_CALLS = 200  # tool calls per session
TOOLS = ("read_file", "grep", "bash", "edit_file", "list_dir")


def _call(n: int) -> Dict[str, Any]:
    # A realistic mix: a few tools, arguments that vary, results of a few hundred bytes, and
    # now and then the same call again (so the detectors have work to do).
    tool = TOOLS[n % len(TOOLS)]
    target = n // 3 if n % 7 else n // 7
    return {"tool": tool, "arguments": {"path": f"src/pkg/module_{target}.py", "pattern": f"def f{target % 97}"}}


def _result(n: int) -> str:
    return f"module_{n // 3}.py:{n % 400}: def f{n % 97}(x):\n" + "    return x + 1  # unchanged\n" * 6


def write_events(path: Path, calls: int) -> Path:
    """``calls`` tool calls in doomloop's event format: sessions of SESSION_CALLS calls, each
    call one ``tool_call`` line with its result."""
    with path.open("w", encoding="utf-8") as out:
        for n in range(calls):
            session = f"s{n // SESSION_CALLS}"
            if n % SESSION_CALLS == 0:
                out.write(json.dumps({"v": 1, "type": "user", "session": session, "text": "fix the failing test"}) + "\n")
            event = {"v": 1, "type": "tool_call", "session": session, "call_id": f"c{n}", **_call(n), "result": _result(n)}
            event["usage"] = {"input_tokens": 1200 + n % 500, "output_tokens": 40}
            out.write(json.dumps(event) + "\n")
            if n % SESSION_CALLS == SESSION_CALLS - 1:
                out.write(json.dumps({"v": 1, "type": "end", "session": session, "status": "completed"}) + "\n")
    return path


def _messages(first: int, count: int) -> Iterator[Dict[str, Any]]:
    yield {"role": "user", "content": "fix the failing test"}
    for n in range(first, first + count):
        call = _call(n)
        call_id = f"call_{n}"
        function = {"name": call["tool"], "arguments": json.dumps(call["arguments"])}
        yield {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            "usage": {"prompt_tokens": 1200 + n % 500, "completion_tokens": 40},
        }
        yield {"role": "tool", "tool_call_id": call_id, "content": _result(n)}


def write_openai_chat(path: Path, calls: int) -> Path:
    """``calls`` tool calls as OpenAI chat JSONL: one conversation of SESSION_CALLS calls a
    line."""
    with path.open("w", encoding="utf-8") as out:
        for first in range(0, calls, SESSION_CALLS):
            count = min(SESSION_CALLS, calls - first)
            out.write(json.dumps({"session_id": f"s{first}", "messages": list(_messages(first, count))}) + "\n")
    return path


WRITERS: Dict[str, Callable[[Path, int], Path]] = {"doomloop": write_events, "openai-chat": write_openai_chat}


def scanned_calls(path: Path) -> int:
    """Scan ``path`` to the end; the tool calls the scan replayed."""
    running = scan(path)
    calls = 0
    for report in running:
        calls += report.steps - 1  # every session's one user turn
    return calls


@pytest.mark.parametrize("name", sorted(WRITERS))
@pytest.mark.benchmark(group="scan: end to end, 20,000 tool calls")
def test_scan_throughput(benchmark: Any, tmp_path: Path, name: str) -> None:
    path = WRITERS[name](tmp_path / f"trace.{name}.jsonl", 20_000)
    calls = benchmark.pedantic(scanned_calls, args=(path,), rounds=3, iterations=1)
    assert calls == 20_000


def _measure(name: str, calls: int) -> Dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        path = WRITERS[name](Path(folder) / "trace.jsonl", calls)
        started = time.perf_counter()
        assert scanned_calls(path) == calls
        seconds = time.perf_counter() - started
    return {"events_per_second": calls / seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv: List[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(_measure(argv[1], int(argv[2]))))
        return
    calls = int(argv[0]) if argv else 200_000
    print(f"{'format':<12} {'tool calls':>10} {'events/s':>10} {'peak RSS':>9}")
    for name in sorted(WRITERS):
        for size in (calls // 4, calls):
            # A fresh process per measure, so each peak RSS is that scan's alone.
            line = subprocess.run(
                [sys.executable, __file__, "--one", name, str(size)], capture_output=True, text=True, check=True
            )
            figures = json.loads(line.stdout)
            print(f"{name:<12} {size:>10,} {figures['events_per_second']:>10,.0f} {figures['peak_rss_mb']:>7.1f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
