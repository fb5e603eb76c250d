"""A JSON writer that always emits valid JSON, for results whose metadata is user data.

Unlike ``json.dumps`` it never writes bare ``NaN`` / ``Infinity`` (non-finite floats become
``null``), never fails on a value JSON has no type for (enums become their value, other
objects their ``str()``), and walks nesting with an explicit stack, so metadata nested
100,000 deep is written instead of raising ``RecursionError``. The layout matches
``json.dumps(value, indent=indent)`` except that indentation stops growing after
:data:`MAX_INDENT_DEPTH` levels, so the text stays linear in the input's size.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterator, List, Set

__all__ = ["MAX_INDENT_DEPTH", "dumps"]

_CONTAINERS = (Mapping, list, tuple, set, frozenset)
_END = object()

MAX_INDENT_DEPTH = 32
"""Nesting levels that get their own indentation; deeper items share the last level's."""


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Enum) and not isinstance(value.value, (*_CONTAINERS, Enum)):
        return _scalar(value.value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return repr(number) if math.isfinite(number) else "null"
    return json.dumps(str(value))


def _key(key: object) -> str:
    # JSON object keys are strings: str keys as they are, None and bools as JSON spells them.
    if isinstance(key, str):
        text = key
    elif key is None or isinstance(key, (bool, numbers.Integral)):
        text = _scalar(key)
    elif isinstance(key, numbers.Real):
        text = repr(float(key))
    else:
        text = str(key)
    return json.dumps(text)


def _pad(indent: int, depth: int) -> str:
    return " " * (indent * min(depth, MAX_INDENT_DEPTH))


@dataclass
class _Frame:
    """One open container: its items, whether it is a mapping, its depth and its id."""

    items: Iterator[Any]
    is_mapping: bool
    depth: int
    ident: int
    empty: bool = True


def dumps(value: object, *, indent: int = 2) -> str:
    """``value`` as JSON text (see the module doc for how odd values are written).

    Raises:
        ValueError: a container contains itself.
    """
    out: List[str] = []
    stack: List[_Frame] = []
    open_ids: Set[int] = set()

    def write(item: object, depth: int) -> None:
        if not isinstance(item, _CONTAINERS):
            out.append(_scalar(item))
            return
        if id(item) in open_ids:
            raise ValueError("circular reference: a container contains itself")
        is_mapping = isinstance(item, Mapping)
        items: Iterator[Any] = iter(item.items()) if isinstance(item, Mapping) else iter(item)
        out.append("{" if is_mapping else "[")
        open_ids.add(id(item))
        stack.append(_Frame(items, is_mapping, depth, id(item)))

    write(value, 1)
    while stack:
        frame = stack[-1]
        item: Any = next(frame.items, _END)
        if item is _END:
            stack.pop()
            open_ids.discard(frame.ident)
            if not frame.empty:
                out.append("\n" + _pad(indent, frame.depth - 1))
            out.append("}" if frame.is_mapping else "]")
            continue
        out.append(("\n" if frame.empty else ",\n") + _pad(indent, frame.depth))
        frame.empty = False
        if frame.is_mapping:
            key, item = item
            out.append(_key(key) + ": ")
        write(item, frame.depth + 1)
    return "".join(out)
