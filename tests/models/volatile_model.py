"""A pure-Python model of the engine's volatile-token masks (rust/engine/src/volatile.rs): the
same rules, written with regular expressions anchored at one position and no backtracking
across rules, so the property tests can compare the two on any text."""

from __future__ import annotations

import re
from typing import Optional

MASK = b"\xff"

_WORD = re.compile(rb"[A-Za-z0-9_]")
_FRACTION = rb"(?:\.[0-9]+)?"
_CLOCK = rb"[0-9]{1,2}(?![0-9]):[0-9]{2}(?::[0-9]{2}" + _FRACTION + rb")?"
_ZONE = rb"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
# The rules in order; each is matched at one position, possessively (what it reads, it keeps).
_RULES = [
    re.compile(rb"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"),
    re.compile(rb"0[xX][0-9A-Fa-f]{4,}+"),
    # (ASCII whitespace as Rust reads it: no vertical tab.)
    re.compile(rb"(?:/tmp/|/var/tmp/|/var/folders/|/private/tmp/|/private/var/)[^ \t\n\x0c\r'\"`<>()\[\]{},;]*+"),
    re.compile(rb"tmp(?=[A-Za-z0-9_]*[0-9])[A-Za-z0-9_]{6,}+"),
    re.compile(rb"[Pp][Ii][Dd][ :=#]{0,3}+[0-9]++"),
    re.compile(rb"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ]" + _CLOCK + rb")?+" + _ZONE),
    re.compile(_CLOCK + rb"Z?"),
    re.compile(rb"1(?:[0-9]{12}|[0-9]{9})(?![0-9])" + _FRACTION),
    re.compile(rb"[0-9]++" + _FRACTION + rb" ?(?i:ns|us|ms|s|sec|secs|second|seconds|min|mins|minute|minutes)(?![A-Za-z])"),
    # A JSON entry whose key names a volatile quantity (the key checked by _names_quantity).
    re.compile(rb'"([^"\\\n]{1,64})"[ \t]*+:[ \t]*+(?:"[^"\\\n]*+"|-?[0-9]++' + _FRACTION + rb")"),
]


def token_end(text: bytes, at: int) -> Optional[int]:
    """The end of the volatile token starting at ``at``: the first rule whose token ends at a
    word boundary."""
    for rule in _RULES:
        found = rule.match(text, at)
        if found is None or (found.re.groups and not _names_quantity(found.group(1))):
            continue
        end = found.end()
        if end == len(text) or not _WORD.match(text, end):
            return end
    return None


MASK_LIMIT = 4096
"""Texts longer than this are left as they are."""


def mask(text: bytes) -> Optional[bytes]:
    """``text`` with every volatile token replaced by ``MASK``, or None when it has none (or is
    longer than ``MASK_LIMIT``)."""
    if len(text) > MASK_LIMIT:
        return None
    out = bytearray()
    copied = at = 0
    found = False
    while at < len(text):
        if at > 0 and _WORD.match(text, at - 1):
            at += 1
            continue
        end = token_end(text, at)
        if end is None:
            at += 1
            continue
        out += text[copied:at] + MASK
        copied = at = end
        found = True
    return bytes(out + text[copied:]) if found else None


# Key words that name a volatile quantity, and last words that name a time or a unit of time.
_QUANTITY_WORDS = {"pid", "ppid", "elapsed", "duration", "uptime", "latency", "took", "timestamp", "ts"}
_TIME_SUFFIXES = {"at", "time", "ms", "ns", "us", "sec", "secs", "seconds"}


def is_volatile_quantity(key: str) -> bool:
    """Whether a mapping key names a volatile quantity: read as words (split at ``_ - .`` and
    spaces and where a lower-case letter or digit is followed by an upper-case one), one word
    is a quantity word or the last is a time suffix. Keys over 64 bytes never are."""
    return _names_quantity(key.encode("utf-8", "surrogatepass"))


def _names_quantity(raw: bytes) -> bool:
    if len(raw) > 64:
        return False
    spaced = re.sub(rb"(?<=[a-z0-9])(?=[A-Z])", b" ", raw)
    words = [w.lower().decode("latin-1") for w in re.split(rb"[_\-. ]", spaced) if w]
    return any(w in _QUANTITY_WORDS for w in words) or bool(words and words[-1] in _TIME_SUFFIXES)


def masked_value(value: object) -> object:
    """A comparable model of a plain value as the keyword configuration compares it: texts
    masked, a number or text under a volatile-quantity key masked whole, mappings as
    multisets of entries, numbers by value, lists and tuples alike."""
    if isinstance(value, bool):
        return ("bool", value)
    if value is None:
        return ("none",)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        masked = mask(raw)
        return ("text", raw if masked is None else masked)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(masked_value(item) for item in value))
    if isinstance(value, dict):
        entries = []
        for key, item in value.items():
            whole = isinstance(item, (int, float, str)) and not isinstance(item, bool)
            masked_item = ("text", MASK) if whole and is_volatile_quantity(key) else masked_value(item)
            entries.append((masked_value(key), masked_item))
        return ("map", tuple(sorted(entries, key=repr)))
    raise TypeError(f"not a plain value: {value!r}")
