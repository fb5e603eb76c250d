"""Property test: the extension's chunk reader against its pure-Python model, on chunks built
as dicts, as pydantic models (fields declared, or kept as extras the way LiteLLM keeps them)
and as plain objects, with parts missing, None, empty or of the wrong type."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Dict

import pydantic
from hypothesis import given, strategies as st

import pieces_model
from doomloop import _core


class Declared(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    choices: Any = None
    delta: Any = None
    index: Any = None
    content: Any = None
    tool_calls: Any = None
    function: Any = None
    arguments: Any = None


class Extras(pydantic.BaseModel):
    """Every field an extra, as in LiteLLM's StreamingChoices and Delta."""

    model_config = pydantic.ConfigDict(extra="allow", arbitrary_types_allowed=True)
    provider_specific_fields: Any = None


def declared(fields: Dict[str, Any]) -> Any:
    return Declared(**fields)


def extras(fields: Dict[str, Any]) -> Any:
    return Extras(**fields)


def plain(fields: Dict[str, Any]) -> Any:
    return SimpleNamespace(**fields)


MAKERS: list[Callable[[Dict[str, Any]], Any]] = [dict, declared, extras, plain]
maker = st.sampled_from(MAKERS)
odd = st.sampled_from([None, "", 0, 1.5, True, [], {}, b"x"])
text = st.text(max_size=8) | odd
index = st.integers(-2, 5) | odd


def part(fields: st.SearchStrategy[Dict[str, Any]]) -> st.SearchStrategy[Any]:
    return st.tuples(maker, fields).map(lambda made: made[0](made[1]))


function = part(st.fixed_dictionaries({}, optional={"arguments": text})) | st.none()
call = part(st.fixed_dictionaries({}, optional={"index": index, "function": function}))
delta = part(st.fixed_dictionaries({}, optional={"content": text, "tool_calls": st.lists(call, max_size=3) | odd})) | st.none()
choice = part(st.fixed_dictionaries({}, optional={"index": index, "delta": delta}))
chunk = part(st.fixed_dictionaries({}, optional={"choices": st.lists(choice, max_size=3) | odd}))


@given(chunk)
def test_chat_pieces_match_the_model(value: Any) -> None:
    assert _core.chat_pieces(value) == pieces_model.chat_pieces(value)


NAMES = st.sampled_from(["content", "index", "absent"])


@given(part(st.fixed_dictionaries({}, optional={"content": text, "index": index})), NAMES)
def test_field_matches_the_model(value: Any, name: str) -> None:
    assert _core.field(value, name) == pieces_model.field(value, name)


def test_an_attribute_error_is_absence_and_other_errors_are_raised() -> None:
    class Raising:
        @property
        def content(self) -> str:
            raise RuntimeError("broken property")

    class Missing:
        @property
        def content(self) -> str:
            raise AttributeError("no content")

    try:
        _core.field(Raising(), "content")
    except RuntimeError as error:
        assert "broken property" in str(error)
    else:
        raise AssertionError("the property's error was swallowed")
    assert _core.field(Missing(), "content") is None
