"""Shared test helpers: where the vendored data (conformance vectors, the corpus) and the documentation live, the code
blocks of a markdown file, a controllable clock, snapshots taken apart and sealed again, and argument dicts that share
objects with the ones before them.

A plain module rather than conftest.py, so tests can import it by a name no other folder uses.
"""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

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


_KEYS = ["path", "line", "cmd", "cwd", "timeout", "pattern"]
_VALUES: list[Any] = ["a.py", "src/b.py", 3, 1000, 2.5, True, None, "x" * 300, -7, "é/ü.txt"]


def _fresh(value: Any) -> Any:
    """An equal object that is not ``value`` (where the type makes new objects: strs of two
    or more characters, ints outside CPython's small-int cache, floats)."""
    if isinstance(value, str):
        return (value + ".")[:-1]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(str(value))
    if isinstance(value, float):
        return float(repr(value))
    raise TypeError(value)


class Unremembered(dict):  # type: ignore[type-arg]
    """A dict subclass: detectors remember only exact dicts, so one of these is hashed anew,
    whole, on every call."""


def shared_argument_dicts(seed: int, steps: int) -> Iterator[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """Pairs of equal argument dicts: the first built as agents build them, a fresh dict per call
    from the same key objects and mostly the same value objects (now and then the very dict
    of the call before, or that dict mutated), the second an :class:`Unremembered` dict of
    fresh objects. A detector handed the first of each pair must end in the state of one
    handed the second."""
    rng = random.Random(seed)
    last: Dict[str, Any] = {}
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.15 and last:
            shared = last  # the same dict again
        elif roll < 0.25 and last:
            shared = last
            shared[rng.choice(list(shared))] = rng.choice(_VALUES)  # the same dict, mutated
        elif roll < 0.6 and last:
            shared = dict(last)  # a fresh dict of the same objects, one value changed
            shared[rng.choice(list(shared))] = rng.choice(_VALUES)
        else:
            keys = rng.sample(_KEYS, rng.randint(1, 4))
            shared = {key: rng.choice(_VALUES) for key in keys}
        last = shared
        yield shared, Unremembered({_fresh(key): _fresh(value) for key, value in shared.items()})
