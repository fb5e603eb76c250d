"""Benchmarks of the trace readers: tool-call events parsed per second.

Run: ``python -m pytest benches/bench_traces.py --benchmark-enable --benchmark-only`` (the
times are per file of ``CALLS`` tool calls), or ``python benches/bench_traces.py [CALLS]``,
which prints tool calls per second for each reader, decoded with orjson and with the standard
library's ``json``. Without ``--benchmark-enable`` each benchmark body runs once, as a plain
test.

The inputs are built in memory in the shape agents write: doomloop events with the result on
the call (one line a call) and with a separate ``tool_result`` line; OpenAI chat JSON Lines of
conversations of 20 calls each (an assistant message and a tool message per call).
"""

from __future__ import annotations

import io
import json
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator

import pytest

from doomloop.traces import decode, read, source

CALLS = 20_000
_COMMANDS = ["cat setup.py", "ls -la src", "pytest -q tests/test_api.py", "grep -rn handler src", "git diff"]
_OUTPUT = "<returncode>0</returncode>\n<output>\n" + "def handler(request):\n    return request.json()\n" * 3 + "</output>"


def events_inline(calls: int) -> bytes:
    """doomloop events, one tool_call line per call, its result on it; 4 sessions interleaved."""
    lines = []
    for n in range(calls):
        event = {
            "v": 1,
            "session": f"s{n % 4}",
            "type": "tool_call",
            "ts": 1764590400.0 + n,
            "call_id": f"call_{n}",
            "tool": "bash",
            "arguments": {"command": _COMMANDS[n % len(_COMMANDS)]},
            "result": _OUTPUT,
            "returncode": 0,
        }
        lines.append(json.dumps(event))
    return ("\n".join(lines) + "\n").encode()


def events_split(calls: int) -> bytes:
    """doomloop events, a tool_call line and a tool_result line per call."""
    lines = []
    for n in range(calls):
        call = {
            "v": 1,
            "session": "s1",
            "type": "tool_call",
            "ts": 1764590400.0 + n,
            "call_id": f"call_{n}",
            "tool": "bash",
            "arguments": {"command": _COMMANDS[n % len(_COMMANDS)]},
        }
        result = {
            "v": 1,
            "session": "s1",
            "type": "tool_result",
            "ts": 1764590400.5 + n,
            "call_id": f"call_{n}",
            "result": _OUTPUT,
            "returncode": 0,
        }
        lines += [json.dumps(call), json.dumps(result)]
    return ("\n".join(lines) + "\n").encode()


def openai_chat(calls: int, per_conversation: int = 20) -> bytes:
    """OpenAI chat JSON Lines: one conversation of ``per_conversation`` calls per line."""
    lines = []
    for start in range(0, calls, per_conversation):
        messages: list = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f"Fix issue {start}."},
        ]
        for n in range(start, min(calls, start + per_conversation)):
            arguments = json.dumps({"command": _COMMANDS[n % len(_COMMANDS)]})
            messages.append(
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [{"id": f"call_{n}", "type": "function", "function": {"name": "bash", "arguments": arguments}}],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": _OUTPUT})
        lines.append(json.dumps({"messages": messages}))
    return ("\n".join(lines) + "\n").encode()


INPUTS: Dict[str, Callable[[int], bytes]] = {
    "doomloop": events_inline,
    "doomloop-split": events_split,
    "openai-chat": openai_chat,
}


@contextmanager
def decoder(name: str) -> Iterator[None]:
    """Decode with ``"orjson"`` (the default when installed) or the stdlib's ``"json"``."""
    chosen = json.loads if name == "json" else decode.loads
    saved = decode.loads, source.loads
    decode.loads = source.loads = chosen
    try:
        yield
    finally:
        decode.loads, source.loads = saved


def tool_calls(data: bytes) -> int:
    """Read every run of ``data``; the number of tool steps read."""
    return sum(step.kind == "tool" for run in read(io.BytesIO(data)) for step in run.steps)


@pytest.mark.benchmark(group="trace-readers")
@pytest.mark.parametrize("json_library", ["orjson", "json"])
@pytest.mark.parametrize("shape", sorted(INPUTS))
def test_reader_throughput(benchmark: Any, shape: str, json_library: str) -> None:
    data = INPUTS[shape](CALLS)
    with decoder(json_library):
        read_calls = benchmark(tool_calls, data)
    assert read_calls == CALLS


def main(calls: int) -> None:
    for shape, build in INPUTS.items():
        data = build(calls)
        for json_library in ("orjson", "json"):
            with decoder(json_library):
                tool_calls(data)  # warm up
                best = min(_timed(data) for _ in range(5))
            print(f"{shape:16} {json_library:7} {calls / best:>12,.0f} tool calls/s  ({len(data) / best / 1e6:,.0f} MB/s)")


def _timed(data: bytes) -> float:
    start = time.perf_counter()
    tool_calls(data)
    return time.perf_counter() - start


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
