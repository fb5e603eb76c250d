"""Content chanting: catch model output that repeats itself while it is still streaming.

:class:`ChantDetector` watches a stream of text chunks (or of token ids) for a window of
``content_chunk_size`` characters that recurs ``max_repeated_chunks`` times with the *same
text between occurrences* each time -- the signature of a model stuck chanting, which shared
boilerplate in code or docs does not have. The sliding window, rolling hash and bounded
history live in the Rust engine (:class:`doomloop._core.ChantEngine`, which this class
extends), so ``feed`` runs no Python code unless it finds a chant.

The rule, exactly (positions count characters, i.e. code points, or tokens):

* each position ends a window, ranked by the top 30 bits of a polynomial hash with a
  per-detector key (secret and random unless ``seed`` fixes it); windows of whitespace only
  have no rank when ``ignore_whitespace`` is set;
* a window is an *anchor* when its rank is no greater than the ranks of the previous 32
  windows (or the largest power of two <= ``content_chunk_size + max_repeated_chunks``
  when that is smaller): about one window in 33 of ordinary text, while in periodic text
  the period's smallest-rank window is an anchor at every occurrence;
* an anchor is *counted* when it ends at least ``content_chunk_size`` after the same
  window's previous counted occurrence (so one long divider line is not a chant);
* a counted occurrence extends its window's chain when it is one chain gap after the last
  (a gap of at most ``max_period + content_chunk_size - 1``) and the text between is the
  same as the gap before;
* any other counted occurrence restarts the chain from the text: at the gap at which the
  window occurs most often before it with identical text between each two occurrences
  (the smallest such gap on a tie), counting those occurrences (so a window that occurs
  several times within a chant's period chains at the period);
* a chain of ``max_repeated_chunks`` occurrences is chanting. The text between occurrences
  is compared character by character, and the chain again before it is reported, so a hash
  collision cannot raise an alarm.

A chant of period ``p <= max_period`` (that is not only whitespace) is reported within
``content_chunk_size + max_repeated_chunks * (p + content_chunk_size)`` characters of its
start, whatever the detector's key, however the text is split into chunks
(docs/chanting.md gives the argument).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Union, cast

from . import _log
from ._core import CHANT_DETACH_THRESHOLD, ChantEngine
from ._settings import defaults
from ._snapshots import Snapshots
from .enums import DoomLoopType
from .events import LoopEvent, checked_callback, log_extra

if TYPE_CHECKING:
    from .chant_config import ChantConfig
    from .events import EventCallback

__all__ = ["CHANT_DETACH_THRESHOLD", "ChantDetector", "ChantEvent", "ChantingDetected"]

# The engine's settings table: defaults and ranges are not restated here.
_D = defaults("ChantDetector")


@dataclass(frozen=True)
class ChantEvent:
    """A chant found in a stream."""

    window: Union[str, Tuple[int, ...]]
    """The repeated window: text, or token ids (truncated to 120 items for display)."""
    count: int
    """Chained occurrences of the window (``max_repeated_chunks``)."""
    period: Optional[int]
    """The smallest period of the repeated text (dividing the distance between chained
    occurrences); None when ``max_repeated_chunks`` is 1."""
    start: int
    """Offset (characters or tokens since the stream started) where the repetition starts:
    the first chained occurrence, extended back while the text keeps the period."""
    end: int
    """Characters or tokens consumed when the chant was confirmed."""

    @property
    def message(self) -> str:
        """The chant described in one line (what it logs, reports and raises)."""
        return _message(self)

    @property
    def loop_type(self) -> DoomLoopType:
        """Always :attr:`DoomLoopType.REPEATED_OUTPUT`."""
        return DoomLoopType.REPEATED_OUTPUT

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict (token windows as lists)."""
        return {
            "loop_type": self.loop_type.value,
            "window": self.window if isinstance(self.window, str) else list(self.window),
            "count": self.count,
            "period": self.period,
            "start": self.start,
            "end": self.end,
        }


class ChantingDetected(Exception):
    """Raised by the stream guards when chanting is found; ``.event`` says what and where."""

    def __init__(self, event: ChantEvent) -> None:
        super().__init__(_message(event))
        self.event = event


def _message(event: ChantEvent) -> str:
    return f"model output is a chant: period {event.period}, {event.count} repeats from offset {event.start}"


def _chanted(detector: ChantDetector, event: ChantEvent) -> None:
    # Called by the engine once per chant found, when its event is handed out, with the lock
    # released: log it and report it.
    message = _message(event)
    _log.warning("%s", message, extra=log_extra(detector.session_key))
    if detector.on_event is not None:
        detector.on_event(LoopEvent("chant", "chant", "critical", event.count, message, session_key=detector.session_key))


class ChantDetector(Snapshots, ChantEngine):
    """Streaming detector of repeated output (REPEATED_OUTPUT), for text or token ids.

    Args:
        content_chunk_size: window length in characters (or tokens).
        max_repeated_chunks: chained occurrences that make a chant (>= 1).
        ignore_whitespace: skip windows made only of whitespace (Unicode White_Space), so
            indentation, blank lines and padding never fire. False counts them too.
        max_period: the longest chant period caught (the proximity bound): occurrences
            further apart than ``max_period + content_chunk_size - 1`` do not chain.
        seed: an int in ``0..2**64`` that fixes the detector's hash key, so a verdict can be
            reproduced: detectors with the same seed and options report the same events at
            the same positions. Default: a secret random key per detector.
        on_event: ``callable(LoopEvent)`` called once per chant found (source ``"chant"``,
            detector ``"chant"``, level ``"critical"``, count the repeats), with the lock
            released; what it raises propagates to the caller of the feed that found it (the
            chant stays found).
        session_key: the gateway session this detector serves, carried by its events and,
            as the structured ``extra`` field ``session_key``, by its log records.

    Each chant found is logged once (a warning under the ``doomloop`` logger).

    The defaults and ranges are the engine's (docs/chanting.md lists them): a value of the
    wrong type raises ``TypeError`` and one out of range :class:`~doomloop.ConfigError` (a
    ``ValueError``), naming the option and the range it accepts.

    Each detector hashes windows with its own key (kept across :meth:`reset`), so which
    window of a chant is tracked, and hence the exact offset at which it is reported (always
    within the bound above, whatever the key), can differ between detectors; one detector
    reports the same event for the same text however it is split.

    Memory is fixed by the arguments (about ``(max_repeated_chunks + 1) * (max_period +
    content_chunk_size)`` symbols of history, see :attr:`history_size`), never by the
    stream's length. Once a chant is found the detector latches: :attr:`event` keeps it and
    later input is ignored until :meth:`reset`. Thread-safe: threads may share a detector
    (chunks are applied one at a time); chunks of at least ``CHANT_DETACH_THRESHOLD`` bytes
    (code points, for long non-ASCII text) or tokens are scanned with the interpreter lock
    released.

    :meth:`to_bytes` saves the options and the whole state (the stream, its hash key and any
    chant found) and :meth:`from_bytes` restores it, so the restored detector reports what
    the original would for any continuation; ``copy``, ``deepcopy`` and ``pickle`` go
    through them and carry ``on_event`` and ``session_key`` along.
    """

    on_event: Optional[EventCallback]
    session_key: Optional[str]
    _settings: Tuple[Any, ...]

    def __new__(
        cls,
        content_chunk_size: int = _D["content_chunk_size"],
        max_repeated_chunks: int = _D["max_repeated_chunks"],
        *,
        ignore_whitespace: bool = _D["ignore_whitespace"],
        max_period: int = _D["max_period"],
        seed: Optional[int] = _D["seed"],
        on_event: Optional[EventCallback] = None,
        session_key: Optional[str] = None,
        _hash_key: Optional[Tuple[int, int]] = None,
    ) -> ChantDetector:
        on_event = checked_callback(on_event)
        if session_key is not None and not isinstance(session_key, str):
            raise TypeError(f"session_key must be a str or None, got {type(session_key).__name__}")
        # One engine call checks them all: TypeError or ConfigError naming the option.
        settings = (content_chunk_size, max_repeated_chunks, ignore_whitespace, max_period, seed)
        self = cast(
            "ChantDetector", super().__new__(cls, settings, _hash_key=_hash_key, _event_type=ChantEvent, _on_chant=_chanted)
        )
        self.on_event = on_event
        self.session_key = session_key
        self._settings = settings
        return self

    @property
    def config(self) -> ChantConfig:
        """The detector's options as a :class:`~doomloop.ChantConfig`."""
        from .chant_config import ChantConfig

        return ChantConfig(*self._settings)

    # Snapshots: its settings are its keyword arguments, in the engine table's order.
    _SNAPSHOT_OPTIONS = frozenset({"on_event", "session_key"})

    @classmethod
    def _snapshot_kind(cls) -> str:
        return "ChantDetector"

    @classmethod
    def _from_settings(cls, settings: Tuple[Any, ...], options: Dict[str, Any]) -> ChantDetector:
        return cls(**dict(zip(_D, settings, strict=True)), **options)

    def _options(self) -> Dict[str, Any]:
        return {"on_event": self.on_event, "session_key": self.session_key}

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + self._state_size()
