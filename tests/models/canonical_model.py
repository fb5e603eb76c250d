"""A small pure-Python model of doomloop's canonical fingerprint, built on python-xxhash.

It follows the encoding published in docs/fingerprint.md line by line and shares no code with the
Rust engine, so agreement between the two checks both the engine and the documentation.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import xxhash

SEED = 0x646F6F6D6C6F6F70  # "doomloop"
MASK = (1 << 64) - 1


def tagged(tag: str, payload: bytes) -> int:
    return xxhash.xxh3_64_intdigest(payload, seed=(SEED + ord(tag)) & MASK)


def digests(values: list[int]) -> bytes:
    return b"".join(struct.pack("<Q", v) for v in values)


def integer(value: int) -> int:
    magnitude = abs(value)
    body = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "little")
    return tagged("I", bytes([1 if value < 0 else 0]) + body)


MAX_DEPTH = 512
"""Containers this many levels down hash as the too-deep marker ``X``."""


def model(value: Any, path: tuple[int, ...] = ()) -> int:
    """The model covers the JSON-like kinds plus bytes, sets and tuples, with cycles and the
    depth cap (``path``: the ids of the containers open above ``value``)."""
    if value is None:
        return tagged("N", b"")
    if isinstance(value, bool):
        return tagged("B", bytes([value]))
    if isinstance(value, int):
        return integer(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return integer(int(value))
        bits = 0x7FF8000000000000 if math.isnan(value) else struct.unpack("<Q", struct.pack("<d", value))[0]
        return tagged("F", struct.pack("<Q", bits))
    if isinstance(value, str):
        return tagged("S", value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray)):
        return tagged("Y", bytes(value))
    if id(value) in path:
        distance = len(path) - 1 - path.index(id(value))
        return tagged("C", struct.pack("<Q", distance))
    if len(path) >= MAX_DEPTH:
        return tagged("X", b"")
    inner = path + (id(value),)
    if isinstance(value, (list, tuple)):
        return tagged("L", digests([model(v, inner) for v in value]))
    if isinstance(value, dict):
        pairs = sorted(tagged("P", digests([model(k, inner), model(v, inner)])) for k, v in value.items())
        return tagged("D", digests(pairs))
    if isinstance(value, (set, frozenset)):
        return tagged("T", digests(sorted(model(v, inner) for v in value)))
    raise TypeError(f"the model does not cover {type(value).__name__}")
