"""Shared test helpers: where the vendored data (conformance vectors, the corpus) and the documentation live, the code
blocks of a markdown file, a controllable clock, and snapshots taken apart and sealed again.

A plain module rather than conftest.py, so tests can import it by a name no other folder uses.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
import xxhash

# The data the tests read, vendored with its provenance (tests/data/README.md).
DATA = Path(__file__).resolve().parent / "data"
CONFORMANCE = DATA / "conformance"
CORPUS = DATA / "corpus" / "agent_runs_public.jsonl.gz"


def conformance_file(name: str) -> Path:
    """The path of a conformance file; fails (never skips) when it is missing."""
    path = CONFORMANCE / name
    if not path.is_file():
        pytest.fail(f"conformance file missing: {path}")
    return path


class FakeClock:
    """A clock the test sets by hand (seconds)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def code_blocks(path: Path, language: str) -> list[tuple[int, str]]:
    """The ```language blocks of a markdown file, each with the line its code starts on."""
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)
    ]


def sealed(header: bytes, body: bytes) -> bytes:
    """A snapshot with ``header`` (its first 16 bytes: magic to schema digest) and ``body``,
    its length and checksum made right, so only what is inside can be wrong."""
    data = header[:16] + struct.pack("<I", len(body)) + body
    return data + struct.pack("<Q", xxhash.xxh3_64_intdigest(data))


def snapshot_body(data: bytes) -> bytes:
    """A snapshot's body: what follows its 20-byte header, before its 8-byte checksum."""
    return data[20:-8]
