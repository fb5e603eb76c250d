"""The pure-Python model of the extension's chunk reader (``doomloop._core.field`` and
``chat_pieces``): the rule as the stream guards define it, written plainly. Choices and tool
calls are read from a list or a tuple; anything else holds none."""

from __future__ import annotations

from typing import Any, Hashable, List, Tuple

_MISSING: Any = object()


def field(value: Any, name: str) -> Any:
    if type(value) is dict:
        return value.get(name)
    found = getattr(value, "__dict__", None)
    if isinstance(found, dict) and name in found:
        return found[name]
    extra = getattr(value, "__pydantic_extra__", _MISSING)
    if extra is not _MISSING:
        return extra.get(name) if isinstance(extra, dict) else None
    return getattr(value, name, None)


def chat_pieces(chunk: Any) -> List[Tuple[Hashable, str]]:
    found: List[Tuple[Hashable, str]] = []
    choices = field(chunk, "choices")
    if not isinstance(choices, (list, tuple)):
        return found
    for position, choice in enumerate(choices):
        delta = field(choice, "delta")
        if delta is None:
            continue
        index = field(choice, "index")
        if not isinstance(index, int):
            index = position
        content = field(delta, "content")
        if type(content) is str and content:
            found.append(((index, "text"), content))
        calls = field(delta, "tool_calls")
        for order, call in enumerate(calls if isinstance(calls, (list, tuple)) else ()):
            function = field(call, "function")
            arguments = None if function is None else field(function, "arguments")
            if type(arguments) is str and arguments:
                call_index = field(call, "index")
                found.append(((index, call_index if isinstance(call_index, int) else order), arguments))
    return found
