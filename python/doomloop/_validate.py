"""Argument checks shared by the config classes: one clear error naming the field."""

from __future__ import annotations

import math

U64_MAX = (1 << 64) - 1
"""The largest count the engine's counters hold."""


def shown(value: object) -> str:
    """``repr(value)`` for an error message; an int too long to print (Python refuses ints
    of more than 4,300 digits) is described by its size instead."""
    if isinstance(value, int) and not isinstance(value, bool):
        # `int`'s own methods: a subclass's could lie about the size, or raise.
        bits = int.bit_length(value)
        if bits > 256:
            return f"{'-' if int.__lt__(value, 0) else ''}an int of {bits} bits"
        return int.__repr__(value)
    return repr(value)


def positive_int(owner: str, name: str, value: object, *, minimum: int = 1, maximum: int = U64_MAX) -> int:
    """``value`` as an int in ``minimum..=maximum``; TypeError/ValueError naming ``owner.name``
    and the bound it breaks otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be an int, got {type(value).__name__}")
    # The value itself, by int's own method: a subclass's comparisons or __int__ could lie.
    number = int.__int__(value)
    if number < minimum:
        raise ValueError(f"{owner}.{name} must be >= {minimum}, got {shown(value)}")
    if number > maximum:
        raise ValueError(f"{owner}.{name} must be <= {maximum}, got {shown(value)}")
    return number


def number(
    owner: str, name: str, value: object, *, minimum: float = 0.0, strict: bool = False, maximum: float = math.inf
) -> float:
    """``value`` as a float that is not NaN, is >= ``minimum`` (> when ``strict``) and is
    <= ``maximum``; TypeError/ValueError naming ``owner.name`` and the bound otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}.{name} must be a number, got {type(value).__name__}")
    try:
        # The value itself, by float's and int's own methods: a subclass's could lie.
        result = float.__float__(value) if isinstance(value, float) else float(int.__int__(value))
    except OverflowError:
        raise ValueError(f"{owner}.{name} must be <= {maximum}, got an int too large for a float") from None
    if math.isnan(result):
        raise ValueError(f"{owner}.{name} must not be NaN")
    if result < minimum or (strict and result == minimum):
        bound = ">" if strict else ">="
        raise ValueError(f"{owner}.{name} must be {bound} {minimum}, got {shown(value)}")
    if result > maximum:
        raise ValueError(f"{owner}.{name} must be <= {maximum}, got {shown(value)}")
    return result


def boolean(owner: str, name: str, value: object) -> bool:
    """``value`` itself when it is a bool; TypeError naming ``owner.name`` otherwise."""
    if not isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be a bool, got {type(value).__name__}")
    return value
