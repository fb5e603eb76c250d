"""``DoomLoopDetector``: session-level doom-loop detection with a recovery ladder.

The checks, the history ring buffer and all counters live in the Rust engine
(:class:`doomloop._core.SessionEngine`, which this class extends), so ``record_action`` and
``is_doom_loop`` never run Python code of their own. This module adds the enums, events,
descriptions, backoff sleeping and logging on top.
"""

from __future__ import annotations

import time

from . import _log
from ._core import SessionEngine
from ._snapshots import Snapshots
from .events import LoopEvent, checked_callback, log_extra
from .session_config import DoomLoopConfig

# Configs are immutable: every default detector shares one.
_DEFAULT_CONFIG = DoomLoopConfig()

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional

    from .enums import DoomLoopType, RecoveryAction
    from .events import EventCallback


# The engine names loop types and rungs by their enum values. The enums load with the first
# one asked for: importing `enum` costs twice the rest of `import doomloop`, and a gateway
# that only asks `is_doom_loop()` never needs them.
def _loop_type(value: str) -> DoomLoopType:
    from .enums import DoomLoopType

    return DoomLoopType(value)


def _recovery(value: str) -> RecoveryAction:
    from .enums import RecoveryAction

    return RecoveryAction(value)


class DoomLoopEvent:
    """One detected loop: what it is, why, and what to do about it.

    ``action_history`` holds the last ten action types, oldest first.
    """

    __slots__ = ("loop_type", "description", "action_history", "recovery_action", "timestamp", "metadata")

    def __init__(
        self,
        loop_type: DoomLoopType,
        description: str,
        action_history: List[str],
        recovery_action: RecoveryAction,
        timestamp: Optional[float] = None,
        metadata: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.loop_type = loop_type
        self.description = description
        self.action_history = action_history
        self.recovery_action = recovery_action
        self.timestamp = time.time() if timestamp is None else timestamp
        self.metadata = {} if metadata is None else metadata

    def __repr__(self) -> str:
        return f"DoomLoopEvent({self.loop_type}, {self.description!r}, recovery_action={self.recovery_action})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DoomLoopEvent):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the upstream dataclass

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict (enums as their string values)."""
        return {
            "loop_type": self.loop_type.value,
            "description": self.description,
            "action_history": list(self.action_history),
            "recovery_action": self.recovery_action.value,
            "timestamp": self.timestamp,
            "metadata": dict(self.metadata),
        }


def _episode(detector: DoomLoopDetector, loop_type: str, description: str, actions: int) -> None:
    # Called by the engine once per loop episode, with its lock released: log it and report it.
    _log.warning("doom loop detected: %s", description, extra=log_extra(detector.session_key))
    if detector.on_event is not None:
        detector.on_event(LoopEvent("session", loop_type, "critical", actions, description, session_key=detector.session_key))


class DoomLoopDetector(Snapshots, SessionEngine):
    """Watches a session's actions and progress markers for doom loops.

    Thread-safe: one detector may be shared by many threads; every update happens under
    one lock in the engine and none is lost. Memory is bounded by the thresholds, not by
    the number of actions.

    Args:
        config: thresholds; ``None`` uses the documented defaults.
        clock: zero-argument callable returning seconds (default: a monotonic clock);
            elapsed time for RESOURCE_EXHAUSTION and stats is read from it.
        on_event: ``callable(LoopEvent)`` called once per loop episode (a new loop type
            found), with the lock released; what it raises propagates to the caller.
        session_key: the gateway session this detector serves, carried by its events and,
            as the structured ``extra`` field ``session_key``, by its log records.

    Each loop episode is logged once (a warning under the ``doomloop`` logger).

    :meth:`to_bytes` saves the state and config (the session clock as the time elapsed) and
    :meth:`from_bytes` restores it, its session clock continuing from the elapsed time saved;
    its ``options`` are ``clock``, ``on_event`` and ``session_key`` (a snapshot does not carry
    them). ``copy``, ``deepcopy`` and ``pickle`` go through them and carry the options along.
    """

    _SNAPSHOT_CONFIG = DoomLoopConfig
    _SNAPSHOT_OPTIONS = frozenset({"clock", "on_event", "session_key"})

    config: DoomLoopConfig
    on_event: Optional[EventCallback]
    session_key: Optional[str]
    _clock: Optional[Callable[[], float]]

    def __new__(
        cls,
        config: Optional[DoomLoopConfig] = None,
        *,
        clock: Optional[Callable[[], float]] = None,
        on_event: Optional[EventCallback] = None,
        session_key: Optional[str] = None,
    ) -> DoomLoopDetector:
        if config is None:
            config = _DEFAULT_CONFIG
        elif not isinstance(config, DoomLoopConfig):
            raise TypeError(f"config must be a DoomLoopConfig or None, got {type(config).__name__}")
        on_event = checked_callback(on_event)
        if session_key is not None and not isinstance(session_key, str):
            raise TypeError(f"session_key must be a str or None, got {type(session_key).__name__}")
        self = super().__new__(cls, config._values, clock=clock, _on_episode=_episode)
        self.config = config
        self.on_event = on_event
        self.session_key = session_key
        self._clock = clock
        return self

    def _options(self) -> Dict[str, Any]:
        return {"clock": self._clock, "on_event": self.on_event, "session_key": self.session_key}

    def get_loop_type(self) -> Optional[DoomLoopType]:
        """The loop found now (checks in the documented precedence), or None."""
        name, _ = self._evaluate()
        return None if name is None else _loop_type(name)

    def get_recovery_action(self) -> RecoveryAction:
        """The recovery ladder's recommendation for the current state."""
        _, rung = self._evaluate()
        return _recovery(rung)

    def get_loop_event(self) -> Optional[DoomLoopEvent]:
        """A fresh event describing the current loop, or None when there is none. Its
        ``metadata["rule"]`` names the rule that fired (docs/session.md lists them)."""
        found = self._loop_event()
        if found is None:
            return None
        name, description, rung, actions, attempts, rule = found
        return DoomLoopEvent(
            loop_type=_loop_type(name),
            description=description,
            action_history=[str(t) for t in self._recent_action_types()],
            recovery_action=_recovery(rung),
            metadata={"action_count": actions, "recovery_attempts": attempts, "rule": rule},
        )

    def apply_backoff(self) -> float:
        """Sleep for the current backoff delay and return it; the next delay grows by
        ``backoff_multiplier`` up to ``max_backoff``. Blocks the calling thread."""
        delay = self._next_backoff()
        time.sleep(delay)
        return delay

    async def apply_backoff_async(self) -> float:
        """Like :meth:`apply_backoff`, but awaits ``asyncio.sleep`` (never blocks the loop)."""
        import asyncio  # imported here: asyncio is heavy and only async callers need it

        delay = self._next_backoff()
        await asyncio.sleep(delay)
        return delay
