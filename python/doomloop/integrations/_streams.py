"""The machinery every SDK's stream guard shares: one :class:`~doomloop.ChantDetector` per
stream of text within a response (each choice's content, each tool call's arguments, each
content block), fed the pieces an SDK-specific reader takes out of each chunk.

A guard yields the chunks unchanged; the moment one stream chants it closes the source
(``close()`` / ``aclose()``, so an HTTP stream stops generating) and raises
:class:`~doomloop.ChantingDetected` or, with ``on_chant="stop"``, ends.
"""

from __future__ import annotations

import copy
import inspect
from typing import (
    Any,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Dict,
    Hashable,
    Iterable,
    Iterator,
    Optional,
    Tuple,
    TypeVar,
    Union,
)

from .. import _core
from ..chant import ChantDetector, ChantEvent, ChantingDetected

__all__ = ["DetectorSource", "Pieces", "Streams", "field", "guard", "guard_async"]

T = TypeVar("T")

Pieces = Callable[[Any], Iterable[Tuple[Hashable, str]]]
"""Reads one chunk: the ``(stream, text)`` pairs it carries, ``stream`` naming the stream of
text within the response as ``(position, part)``: the position of the choice, output item or
content block, and ``part`` ``"text"`` for answer text (anything else is a tool call's
input)."""

DetectorSource = Union[ChantDetector, Callable[[], ChantDetector], None]
"""What a guard takes as ``detector``: None (a new ``ChantDetector()`` per stream), a
``ChantDetector`` (it watches the first stream of text; every further stream gets a copy of
it as it was when the guard started), or a zero-argument callable returning a fresh detector
for each stream."""


def check_on_chant(on_chant: str) -> bool:
    """Whether a guard raises (``"raise"``) or stops (``"stop"``); anything else is a ValueError."""
    if on_chant not in ("raise", "stop"):
        raise ValueError(f"on_chant must be 'raise' or 'stop', got {on_chant!r}")
    return on_chant == "raise"


def detector_factory(detector: DetectorSource) -> Callable[[], ChantDetector]:
    """The per-stream detector factory a guard's ``detector`` argument stands for."""
    if detector is None:
        return ChantDetector
    if isinstance(detector, ChantDetector):
        template = copy.copy(detector)
        first = [detector]

        def new() -> ChantDetector:
            return first.pop() if first else copy.copy(template)

        return new
    if callable(detector):
        return _checked_factory(detector)
    raise TypeError(f"detector must be a ChantDetector, a callable returning one, or None, got {type(detector).__name__}")


def _checked_factory(factory: Callable[[], Any]) -> Callable[[], ChantDetector]:
    def new() -> ChantDetector:
        made = factory()
        if not isinstance(made, ChantDetector):
            raise TypeError(f"the detector factory must return a ChantDetector, got {type(made).__name__}")
        return made

    return new


class Streams:
    """The detectors of one response's streams of text, made on each stream's first piece."""

    __slots__ = ("_new", "_detectors", "event")

    def __init__(self, new: Callable[[], ChantDetector]) -> None:
        self._new = new
        self._detectors: Dict[Hashable, ChantDetector] = {}
        self.event: Optional[ChantEvent] = None
        """The first chant found, in any stream."""

    def feed(self, stream: Hashable, text: str) -> Optional[ChantEvent]:
        """Feed ``text`` to ``stream``'s detector; the chant it completes, if any."""
        return self.found(self.detector(stream).feed(text))

    def detector(self, stream: Hashable) -> ChantDetector:
        """``stream``'s detector, made on its first use."""
        detectors = self._detectors
        detector = detectors.get(stream)
        if detector is None:
            detector = detectors[stream] = self._new()
        return detector

    def found(self, event: Optional[ChantEvent]) -> Optional[ChantEvent]:
        """Note what a detector's feed returned (the first chant is :attr:`event`); returns it."""
        if event is not None and self.event is None:
            self.event = event
        return event


def guard(chunks: Iterable[T], pieces: Pieces, new: Callable[[], ChantDetector], raise_: bool) -> Iterator[T]:
    """Yield ``chunks`` unchanged until one of their streams chants (see the module)."""
    streams = Streams(new)
    iterator = iter(chunks)
    for chunk in iterator:
        for stream, text in pieces(chunk):
            if streams.feed(stream, text) is not None:
                _close(iterator, chunks)
                if raise_:
                    raise ChantingDetected(streams.event)  # type: ignore[arg-type]
                return
        yield chunk


async def guard_async(
    chunks: AsyncIterable[T], pieces: Pieces, new: Callable[[], ChantDetector], raise_: bool
) -> AsyncIterator[T]:
    """:func:`guard` for an async iterator."""
    streams = Streams(new)
    iterator = chunks.__aiter__()
    async for chunk in iterator:
        for stream, text in pieces(chunk):
            if streams.feed(stream, text) is not None:
                # Stop the producer (an HTTP stream stops generating) before reporting.
                await _aclose(iterator, chunks)
                if raise_:
                    raise ChantingDetected(streams.event)  # type: ignore[arg-type]
                return
        yield chunk


def _close(iterator: Iterator[Any], source: Iterable[Any]) -> None:
    # An SDK stream's iterator is a generator over its response: closing the generator does
    # not close the HTTP response, closing the stream object does.
    for owner in (iterator, source) if source is not iterator else (iterator,):
        close = getattr(owner, "close", None)
        if callable(close):
            close()


async def _aclose(iterator: AsyncIterator[Any], source: AsyncIterable[Any]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if callable(aclose):
        await aclose()
    if source is not iterator:
        # openai's and anthropic's AsyncStream close their response with an async close().
        close = getattr(source, "close", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result


# The parts of SDK objects are read in the extension: in Python, these lookups cost about a
# microsecond a chunk, and a stream hook reads every chunk of every response.
field: Callable[[Any, str], Any] = _core.field
"""``value[name]`` of a dict, else the field (None when absent): SDK objects and the dicts of
their JSON alike. A pydantic model's data is read where pydantic keeps it (its ``__dict__``,
then its extra fields: LiteLLM's stream chunks keep their fields there)."""
