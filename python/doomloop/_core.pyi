"""Type stubs of the compiled ``doomloop._core`` extension module (the Rust engine)."""

from typing import Any, Callable, Optional, Tuple

from typing_extensions import Self, disjoint_base

__all__ = ["SessionEngine", "fingerprint", "MAX_DEPTH", "HASH_DETACH_THRESHOLD", "__version__"]
__version__: str
MAX_DEPTH: int
"""Containers nested deeper than this hash as a fixed "too deep" marker."""
HASH_DETACH_THRESHOLD: int
"""Strings and bytes at least this long are hashed with the interpreter lock released."""

def fingerprint(value: object, /) -> int:
    """The canonical 64-bit fingerprint of ``value`` (see the README). Never raises."""

@disjoint_base
class SessionEngine:
    """Rust state behind :class:`doomloop.DoomLoopDetector` (use that class)."""

    def __new__(cls, config: Any, *, clock: Optional[Callable[[], float]] = None) -> Self: ...
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
