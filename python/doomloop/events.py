"""``LoopEvent``: what a detector reports to an ``on_event`` callback (the hook for metrics and
alerting), one per emitted warning, blocked call, guard abort, loop episode or chant."""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Optional

    EventCallback = Callable[["LoopEvent"], object]

__all__ = ["LoopEvent"]


class LoopEvent:
    """One loop event.

    Attributes:
        source: the detector that raised it: ``"tool_loop"``, ``"session"`` or ``"chant"``.
        detector: the rule: a tool-loop detector name (``"generic_repeat"``, ...,
            ``"compaction_loop_persisted"``), a session loop type (``"repeated_action"``, ...),
            or ``"chant"``.
        level: ``"warning"`` or ``"critical"``.
        count: the rule's count (repeats seen; for a session episode, the actions recorded).
        message: the human-readable description.
        blocked: the call was blocked (tool loop) or the run should stop (guard abort).
        session_key: the gateway session's key (None for a detector used on its own).
        run_id: the call's run id, if it had one.
    """

    __slots__ = ("source", "detector", "level", "count", "message", "blocked", "session_key", "run_id")

    def __init__(
        self,
        source: str,
        detector: str,
        level: str,
        count: int,
        message: str,
        *,
        blocked: bool = False,
        session_key: Optional[str] = None,
        run_id: Optional[str] = None,
    ) -> None:
        self.source = source
        self.detector = detector
        self.level = level
        self.count = count
        self.message = message
        self.blocked = blocked
        self.session_key = session_key
        self.run_id = run_id

    def to_dict(self) -> Dict[str, Any]:
        """Every attribute by name (JSON-ready)."""
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LoopEvent):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        where = f", session_key={self.session_key!r}" if self.session_key is not None else ""
        return f"LoopEvent({self.source}/{self.detector}, {self.level}, count={self.count}{where})"


def checked_callback(on_event: object) -> Optional[EventCallback]:
    """``on_event`` when it is None or callable; TypeError otherwise."""
    if on_event is not None and not callable(on_event):
        raise TypeError(f"on_event must be callable or None, got {type(on_event).__name__}")
    return on_event


def log_extra(session_key: Optional[str], run_id: Optional[str] = None) -> Dict[str, Any]:
    """The structured ``extra`` fields of a log record about a loop."""
    return {"session_key": session_key, "run_id": run_id}
