"""Stream guards for the OpenAI SDK's streams: chat-completion chunks and Responses API events.

Each guard yields the stream's chunks (``openai`` objects, or the dicts of their JSON)
unchanged, with one :class:`~doomloop.ChantDetector` per stream of text: the content of each
choice, and the arguments of each tool call (accumulated by the choice's and the call's
``index``; a model that keeps writing the same arguments is chanting too). Chunks that carry
no text (role-only deltas, usage, finish reasons, other event types) pass through unchecked.
On a chant the source is closed and :class:`~doomloop.ChantingDetected` raised, or, with
``on_chant="stop"``, the iteration ends. See docs/chanting.md.
"""

from __future__ import annotations

from typing import Any, AsyncIterable, AsyncIterator, Callable, Hashable, Iterable, Iterator, List, Literal, Tuple, TypeVar

from .. import _core
from ._streams import DetectorSource, check_on_chant, detector_factory, field, guard, guard_async

__all__ = [
    "chat_pieces",
    "guard_chat_stream",
    "guard_chat_stream_async",
    "guard_responses_stream",
    "guard_responses_stream_async",
    "responses_pieces",
]

T = TypeVar("T")
OnChant = Literal["raise", "stop"]

_NONE: Tuple[Tuple[Hashable, str], ...] = ()


chat_pieces: Callable[[Any], List[Tuple[Hashable, str]]] = _core.chat_pieces
"""The text a chat-completion chunk carries, as ``((choice, part), text)`` pairs: ``part`` is
``"text"`` for ``delta.content`` and the tool call's ``index`` for its ``function.arguments``
(read in the extension, with :func:`~doomloop.integrations._streams.field`'s rule)."""


_RESPONSES_TEXT = frozenset({"response.output_text.delta", "response.function_call_arguments.delta"})


def responses_pieces(event: Any) -> Iterable[Tuple[Hashable, str]]:
    """The text a Responses API stream event carries: ``response.output_text.delta`` (keyed
    ``((item, content part), "text")``) and ``response.function_call_arguments.delta`` (keyed
    ``(item, "arguments")``), ``item`` the output index (or the item id)."""
    kind = field(event, "type")
    if kind not in _RESPONSES_TEXT:
        return _NONE
    delta = field(event, "delta")
    if type(delta) is not str or not delta:
        return _NONE
    item = field(event, "output_index")
    if item is None:
        item = field(event, "item_id")
    if kind == "response.output_text.delta":
        return ((((item, field(event, "content_index")), "text"), delta),)
    return (((item, "arguments"), delta),)


def guard_chat_stream(chunks: Iterable[T], detector: DetectorSource = None, *, on_chant: OnChant = "raise") -> Iterator[T]:
    """Yield chat-completion chunks unchanged, checking every choice's content and tool-call
    arguments. ``detector``: None (a new detector per stream of text), a ``ChantDetector``
    (it watches the first stream; the others get copies of it), or a callable making one per
    stream."""
    raise_ = check_on_chant(on_chant)
    return guard(chunks, chat_pieces, detector_factory(detector), raise_)


def guard_chat_stream_async(
    chunks: AsyncIterable[T], detector: DetectorSource = None, *, on_chant: OnChant = "raise"
) -> AsyncIterator[T]:
    """:func:`guard_chat_stream` for an async iterator of chat-completion chunks."""
    raise_ = check_on_chant(on_chant)
    return guard_async(chunks, chat_pieces, detector_factory(detector), raise_)


def guard_responses_stream(chunks: Iterable[T], detector: DetectorSource = None, *, on_chant: OnChant = "raise") -> Iterator[T]:
    """Yield Responses API stream events unchanged, checking output text and function-call
    argument deltas, per output item."""
    raise_ = check_on_chant(on_chant)
    return guard(chunks, responses_pieces, detector_factory(detector), raise_)


def guard_responses_stream_async(
    chunks: AsyncIterable[T], detector: DetectorSource = None, *, on_chant: OnChant = "raise"
) -> AsyncIterator[T]:
    """:func:`guard_responses_stream` for an async iterator of events."""
    raise_ = check_on_chant(on_chant)
    return guard_async(chunks, responses_pieces, detector_factory(detector), raise_)
