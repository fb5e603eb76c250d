"""Argument checks shared by the config classes: one clear error naming the field."""

from __future__ import annotations

import math


def positive_int(owner: str, name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``; TypeError/ValueError naming ``owner.name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{owner}.{name} must be >= {minimum}, got {value}")
    return value


def number(owner: str, name: str, value: object, *, minimum: float = 0.0, strict: bool = False) -> float:
    """``value`` as a float that is not NaN and is >= ``minimum`` (> when ``strict``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}.{name} must be a number, got {type(value).__name__}")
    result = float(value)
    if math.isnan(result):
        raise ValueError(f"{owner}.{name} must not be NaN")
    if result < minimum or (strict and result == minimum):
        bound = ">" if strict else ">="
        raise ValueError(f"{owner}.{name} must be {bound} {minimum}, got {value}")
    return result


def boolean(owner: str, name: str, value: object) -> bool:
    """``value`` itself when it is a bool; TypeError naming ``owner.name`` otherwise."""
    if not isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be a bool, got {type(value).__name__}")
    return value
