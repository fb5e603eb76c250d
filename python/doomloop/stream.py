"""Stream guards: pass a model's streamed chunks through a :class:`ChantDetector`.

Each guard yields the chunks of the wrapped iterator unchanged and, the moment the
detector finds chanting, either raises :class:`ChantingDetected` (``on_chant="raise"``,
the default) or simply ends the iteration (``on_chant="stop"``; the event is then on
``detector.event``). The chunk that completed the chant is not passed on, and the wrapped
iterator is closed (``close()`` / ``aclose()`` when it has one) so an HTTP stream stops
generating.

:func:`guard_stream` and :func:`guard_stream_async` take text chunks. The guards for SDK
chunk shapes live with their SDK's integration: :mod:`doomloop.integrations.openai`
(chat-completion chunks, re-exported here as :func:`guard_chat_stream` and
:func:`guard_chat_stream_async`, and Responses API events) and
:mod:`doomloop.integrations.anthropic` (Messages stream events).
"""

from __future__ import annotations

from typing import AsyncIterable, AsyncIterator, Hashable, Iterable, Iterator, Literal, Optional, Tuple

from ._core import TextGuard
from .chant import ChantDetector, ChantingDetected
from .integrations._streams import check_on_chant, guard_async
from .integrations.openai import guard_chat_stream as guard_chat_stream, guard_chat_stream_async as guard_chat_stream_async

__all__ = ["guard_chat_stream", "guard_chat_stream_async", "guard_stream", "guard_stream_async"]

OnChant = Literal["raise", "stop"]


def _checked(detector: Optional[ChantDetector]) -> ChantDetector:
    if detector is None:
        return ChantDetector()
    if not isinstance(detector, ChantDetector):
        raise TypeError(f"detector must be a ChantDetector or None, got {type(detector).__name__}")
    return detector


def _text(chunk: str) -> Tuple[Tuple[Hashable, str], ...]:
    # One stream; `feed` rejects a chunk that is not a str with TypeError.
    return ((None, chunk),)


def guard_stream(
    chunks: Iterable[str], detector: Optional[ChantDetector] = None, *, on_chant: OnChant = "raise"
) -> Iterator[str]:
    """Yield text chunks unchanged until ``detector`` (default: a new
    :class:`ChantDetector`) finds chanting; then raise or stop as ``on_chant`` says.
    A chunk that is not a str raises TypeError."""
    raise_ = check_on_chant(on_chant)
    checked = _checked(detector)
    # The hot path is a Rust iterator: no Python frame per chunk.
    return TextGuard(chunks, checked, ChantingDetected if raise_ else None)


def guard_stream_async(
    chunks: AsyncIterable[str], detector: Optional[ChantDetector] = None, *, on_chant: OnChant = "raise"
) -> AsyncIterator[str]:
    """:func:`guard_stream` for an async iterator of text chunks."""
    raise_ = check_on_chant(on_chant)
    checked = _checked(detector)
    return guard_async(chunks, _text, lambda: checked, raise_)
