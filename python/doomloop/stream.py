"""Stream guards: pass a model's streamed chunks through a :class:`ChantDetector`.

Each guard yields the chunks of the wrapped iterator unchanged and, the moment the
detector finds chanting, either raises :class:`ChantingDetected` (``on_chant="raise"``,
the default) or simply ends the iteration (``on_chant="stop"``; the event is then on
``detector.event``). The chunk that completed the chant is not passed on, and the wrapped
iterator is closed (``close()`` / ``aclose()`` when it has one) so an HTTP stream stops
generating. Guards for chat-completion streams read ``choices[0].delta.content`` from
OpenAI-style chunks (objects or dicts); chunks without text content pass through unchecked.
"""

from __future__ import annotations

from typing import Any, AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Literal, Optional, TypeVar

from ._core import TextGuard
from .chant import ChantDetector, ChantingDetected

__all__ = ["guard_chat_stream", "guard_chat_stream_async", "guard_stream", "guard_stream_async"]

OnChant = Literal["raise", "stop"]
T = TypeVar("T")


def _checked(detector: Optional[ChantDetector], on_chant: str) -> ChantDetector:
    if on_chant not in ("raise", "stop"):
        raise ValueError(f"on_chant must be 'raise' or 'stop', got {on_chant!r}")
    if detector is None:
        return ChantDetector()
    if not isinstance(detector, ChantDetector):
        raise TypeError(f"detector must be a ChantDetector or None, got {type(detector).__name__}")
    return detector


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def chat_content(chunk: Any) -> Optional[str]:
    """The text of an OpenAI-style chat-completion chunk (``choices[0].delta.content``), or
    None when it carries none (role-only deltas, tool calls, usage chunks)."""
    choices = _field(chunk, "choices")
    if not choices:
        return None
    delta = _field(choices[0], "delta")
    content = None if delta is None else _field(delta, "content")
    return content if isinstance(content, str) else None


def _guard_chat(chunks: Iterable[T], detector: ChantDetector, raise_: bool) -> Iterator[T]:
    feed = detector.feed
    iterator = iter(chunks)
    for chunk in iterator:
        piece = chat_content(chunk)
        if piece is not None and feed(piece) is not None:
            _stop(iterator, detector, raise_)
            return
        yield chunk


def _stop(iterator: Iterator[Any], detector: ChantDetector, raise_: bool) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()
    if raise_ and detector.event is not None:
        raise ChantingDetected(detector.event)


async def _guard_async(
    chunks: AsyncIterable[T], text: Callable[[T], Optional[str]], detector: ChantDetector, raise_: bool
) -> AsyncIterator[T]:
    feed = detector.feed
    iterator = chunks.__aiter__()
    async for chunk in iterator:
        piece = text(chunk)
        if piece is not None and feed(piece) is not None:
            # Stop the producer (an HTTP stream stops generating) before reporting.
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()
            if raise_ and detector.event is not None:
                raise ChantingDetected(detector.event)
            return
        yield chunk


def _text(chunk: Any) -> Any:
    # Async text streams pass every chunk to `feed`, which rejects non-str with TypeError.
    return chunk


def guard_stream(
    chunks: Iterable[str], detector: Optional[ChantDetector] = None, *, on_chant: OnChant = "raise"
) -> Iterator[str]:
    """Yield text chunks unchanged until ``detector`` (default: a new
    :class:`ChantDetector`) finds chanting; then raise or stop as ``on_chant`` says.
    A chunk that is not a str raises TypeError."""
    checked = _checked(detector, on_chant)
    # The hot path is a Rust iterator: no Python frame per chunk.
    return TextGuard(chunks, checked, ChantingDetected if on_chant == "raise" else None)


def guard_stream_async(
    chunks: AsyncIterable[str], detector: Optional[ChantDetector] = None, *, on_chant: OnChant = "raise"
) -> AsyncIterator[str]:
    """:func:`guard_stream` for an async iterator of text chunks."""
    checked = _checked(detector, on_chant)
    return _guard_async(chunks, _text, checked, on_chant == "raise")


def guard_chat_stream(
    chunks: Iterable[T], detector: Optional[ChantDetector] = None, *, on_chant: OnChant = "raise"
) -> Iterator[T]:
    """Yield chat-completion chunks unchanged, checking their ``choices[0].delta.content``."""
    checked = _checked(detector, on_chant)
    return _guard_chat(chunks, checked, on_chant == "raise")


def guard_chat_stream_async(
    chunks: AsyncIterable[T], detector: Optional[ChantDetector] = None, *, on_chant: OnChant = "raise"
) -> AsyncIterator[T]:
    """:func:`guard_chat_stream` for an async iterator of chat-completion chunks."""
    checked = _checked(detector, on_chant)
    return _guard_async(chunks, chat_content, checked, on_chant == "raise")
