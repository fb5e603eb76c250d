"""Memory of the trace readers: reading a large event file holds what the open sessions hold,
not the file; an over-long line is dropped without being held."""

from __future__ import annotations

import io
import json
import tracemalloc
from typing import Any, Iterator

from doomloop.traces import read

SESSIONS = 20_000  # 10 calls and an end each: 220,000 lines, about 48 MB


def _lines() -> Iterator[bytes]:
    for n in range(SESSIONS):
        for call in range(10):
            event = {
                "v": 1,
                "session": f"s{n}",
                "type": "tool_call",
                "call_id": f"c{call}",
                "tool": "bash",
                "arguments": {"command": f"cat file{call}.py"},
                "result": "x" * 150,
            }
            yield json.dumps(event).encode() + b"\n"
        yield json.dumps({"v": 1, "session": f"s{n}", "type": "end", "status": "Submitted"}).encode() + b"\n"


class Generated(io.RawIOBase):
    """A file that is never in memory: its lines are made as they are read."""

    def __init__(self, lines: Iterator[bytes]) -> None:
        self._lines = lines
        self._pending = b""
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while len(self._pending) < len(buffer):
            line = next(self._lines, None)
            if line is None:
                break
            self._pending += line
        data, self._pending = self._pending[: len(buffer)], self._pending[len(buffer) :]
        buffer[: len(data)] = data
        self.size += len(data)
        return len(data)


def test_a_large_event_file_streams_in_flat_memory() -> None:
    source = Generated(_lines())
    tracemalloc.start()
    try:
        runs = 0
        for run in read(io.BufferedReader(source)):
            runs += 1
            assert len(run.steps) == 10
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert runs == SESSIONS and source.size > 40_000_000
    assert peak < 2_000_000, peak  # a few sessions' steps and the read buffers, not the 48 MB read


def test_a_150_mb_line_is_dropped_without_being_held() -> None:
    long_line = iter(
        [b'{"v": 1, "type": "user", "text": "' + b"z" * (1 << 20)] * 150
        + [b'"}\n', b'{"v": 1, "type": "user", "text": "after"}\n']
    )
    tracemalloc.start()
    try:
        skipped: list = []
        (run,) = read(io.BufferedReader(Generated(long_line)), on_skip=skipped.append, max_line_bytes=8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [step.text for step in run.steps] == ["after"] and skipped[0].line == 1
    assert peak < 30 << 20, peak  # the bound and a block, never the 150 MB line
