"""Reading duck-typed inputs: a field of a dict or an object, and flags given as words."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Optional

MISSING: object = object()
"""Returned by :func:`read_field` when the field is absent (distinct from a present ``None``)."""

# Upstream treats the string "false" as true; these words are false here.
_FALSE_WORDS = frozenset({"false", "0", "no", ""})


def read_field(source: object, name: str) -> object:
    """``source[name]`` for a mapping, ``source.name`` otherwise; :data:`MISSING` when absent."""
    if isinstance(source, Mapping):
        return source.get(name, MISSING)
    return getattr(source, name, MISSING)


def is_set(value: object) -> bool:
    """Whether a field read by :func:`read_field` carries a value (present and not ``None``)."""
    return value is not MISSING and value is not None


def flag(value: object) -> bool:
    """Truthiness, except that strings are read as words: "false", "0", "no" and "" (any case,
    surrounding blanks ignored) are false, every other string is true."""
    if isinstance(value, str):
        return value.strip().lower() not in _FALSE_WORDS
    return bool(value)


def word(value: object) -> Optional[str]:
    """A string or an enum's string value, stripped and lower-cased; ``None`` for anything else."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, str):
        return value.strip().lower()
    return None
