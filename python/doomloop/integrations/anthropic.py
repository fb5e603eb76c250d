"""Stream guards for the Anthropic SDK's Messages streams.

Each guard yields the stream's events (``anthropic`` objects, or the dicts of their JSON)
unchanged, with one :class:`~doomloop.ChantDetector` per content block: ``content_block_delta``
events with a ``text_delta`` (text) or an ``input_json_delta`` (a tool call's input, as it is
written). Other events pass through unchecked. On a chant the source is closed and
:class:`~doomloop.ChantingDetected` raised, or, with ``on_chant="stop"``, the iteration ends.
See docs/chanting.md.
"""

from __future__ import annotations

from typing import Any, AsyncIterable, AsyncIterator, Hashable, Iterable, Iterator, Literal, Tuple, TypeVar

from ._streams import DetectorSource, check_on_chant, detector_factory, field, guard, guard_async

__all__ = ["guard_message_stream", "guard_message_stream_async", "message_pieces"]

T = TypeVar("T")
OnChant = Literal["raise", "stop"]

_NONE: Tuple[Tuple[Hashable, str], ...] = ()
# The field of each delta type that carries its text, and the part of the block it writes.
_DELTA_TEXT = {"text_delta": ("text", "text"), "input_json_delta": ("partial_json", "input")}


def message_pieces(event: Any) -> Iterable[Tuple[Hashable, str]]:
    """The text a Messages stream event carries, keyed ``(block index, "text")`` for text and
    ``(block index, "input")`` for a tool call's input."""
    if field(event, "type") != "content_block_delta":
        return _NONE
    delta = field(event, "delta")
    known = None if delta is None else _DELTA_TEXT.get(field(delta, "type"))
    if known is None:
        return _NONE
    text = field(delta, known[0])
    if type(text) is not str or not text:
        return _NONE
    return (((field(event, "index"), known[1]), text),)


def guard_message_stream(chunks: Iterable[T], detector: DetectorSource = None, *, on_chant: OnChant = "raise") -> Iterator[T]:
    """Yield Messages stream events unchanged, checking each content block's text and tool
    input. ``detector``: None (a new detector per block), a ``ChantDetector`` (it watches the
    first block; the others get copies of it), or a callable making one per block."""
    raise_ = check_on_chant(on_chant)
    return guard(chunks, message_pieces, detector_factory(detector), raise_)


def guard_message_stream_async(
    chunks: AsyncIterable[T], detector: DetectorSource = None, *, on_chant: OnChant = "raise"
) -> AsyncIterator[T]:
    """:func:`guard_message_stream` for an async iterator of events."""
    raise_ = check_on_chant(on_chant)
    return guard_async(chunks, message_pieces, detector_factory(detector), raise_)
