"""Type stubs of the compiled ``doomloop._core`` extension module (the Rust engine)."""

from typing import Any, Callable, Iterable, Optional, Tuple, final

from typing_extensions import disjoint_base

from .chant import ChantEvent

__version__: str
MAX_DEPTH: int
"""Containers nested deeper than this hash as a fixed "too deep" marker."""
HASH_DETACH_THRESHOLD: int
"""Strings and bytes at least this long are hashed with the interpreter lock released."""

def fingerprint(value: object, /) -> int:
    """The canonical 64-bit fingerprint of ``value`` (see the README). Never raises."""

class SessionEngine:
    """Rust state behind :class:`doomloop.DoomLoopDetector` (use that class)."""

    def __new__(cls, config: Any, *, clock: Optional[Callable[[], float]] = None) -> "SessionEngine": ...
    def start_session(self) -> None:
        """Start the clock and clear history, markers, plan states, attempts, events, backoff."""
    def record_action(
        self,
        action_type: str,
        args: Any,
        result: Any,
        success: bool,
        duration: float = 0.0,
        metadata: Optional[dict[str, Any]] = None,
    ) -> None:
        """Record one action and re-run the checks. ``metadata`` is accepted for upstream
        compatibility and not retained (memory stays bounded)."""
    def mark_progress(self, marker: str) -> None:
        """Record real progress; it gates NO_PROGRESS and CIRCULAR_PLAN."""
    def record_plan(self, state: object) -> None:
        """Record a plan state; returning to one already seen is CIRCULAR_PLAN."""
    def record_response(self, text: str) -> None:
        """Record one whole model response for REPEATED_OUTPUT (windows never span two
        responses); the verdict stands until the next response starts."""
    def record_output_chunk(self, chunk: str) -> None:
        """Record the next piece of a streamed response (windows span its pieces)."""
    def end_response(self) -> None:
        """The streamed response is complete: the next piece starts a new response."""
    def is_doom_loop(self) -> bool:
        """True exactly when ``get_loop_type()`` is not None."""
    def increment_recovery(self) -> bool:
        """Count one recovery attempt; True while more attempts are allowed."""
    def reset_backoff(self) -> None:
        """Reset the backoff delay to ``initial_backoff``."""
    def _evaluate(self) -> Tuple[Optional[int], int]: ...
    def _next_backoff(self) -> float: ...
    def _stats(self) -> Tuple[int, int, int, int, int, int, float, float]: ...
    def _recent_action_types(self) -> list[str]: ...
    @property
    def _history_capacity(self) -> int: ...

CHANT_DETACH_THRESHOLD: int
"""Text chunks of at least this many UTF-8 bytes, and token arrays of at least this many
tokens, are scanned with the interpreter lock released."""

@disjoint_base
class ChantEngine:
    """Rust state behind :class:`doomloop.ChantDetector` (use that class)."""

    def __new__(
        cls,
        content_chunk_size: int = 50,
        max_repeated_chunks: int = 8,
        *,
        ignore_whitespace: bool = True,
        max_period: int = 1000,
        _hash_key: Optional[Tuple[int, int]] = None,
    ) -> "ChantEngine": ...
    def feed(self, text: str, /) -> Optional[ChantEvent]:
        """Feed one chunk of text; returns a ``ChantEvent`` when chanting is found in it,
        else None. A non-str raises TypeError."""
    def feed_tokens(self, tokens: Any, /) -> Optional[ChantEvent]:
        """Feed a 1-D numpy array of token ids (int32, int64 or uint32), read without
        copying; returns a ``ChantEvent`` when chanting is found in it, else None."""
    def reset(self) -> None:
        """Forget the stream and any chant found."""
    @property
    def position(self) -> int:
        """Characters or tokens consumed since creation or ``reset()``."""
    @property
    def history_size(self) -> int:
        """Symbols of history kept (the memory bound)."""

@final
class TextGuard:
    """The iterator behind :func:`doomloop.guard_stream` (use that function)."""

    def __new__(cls, source: Iterable[str], detector: ChantEngine, exception: Optional[Callable[[Any], BaseException]] = None) -> "TextGuard": ...
    def __iter__(self) -> "TextGuard": ...
    def __next__(self) -> str: ...
