"""``DoomLoopConfig``: the session detector's thresholds, validated on construction."""

from __future__ import annotations

from ._core import MAX_CYCLE_PERIOD, MAX_CYCLE_REPEATS, check_session_config
from ._validate import boolean, number, positive_int

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

_OWNER = "DoomLoopConfig"

MAX_BACKOFF = 1e9
"""Largest backoff delay accepted, in seconds (``time.sleep`` cannot sleep for much longer)."""

# (field, default) in declaration order: the constructor's positional order, repr and equality.
_FIELDS = (
    ("max_identical_actions", 3),
    ("max_similar_actions", 5),
    ("max_consecutive_failures", 3),
    ("max_no_progress_steps", 5),
    ("similarity_threshold", 0.85),
    ("max_time_per_action", 60.0),
    ("max_total_time", 300.0),
    ("enable_auto_recovery", True),
    ("max_recovery_attempts", 2),
    ("escalate_on_loop", True),
    ("initial_backoff", 1.0),
    ("backoff_multiplier", 2.0),
    ("max_backoff", 30.0),
    ("max_repeated_chunks", 8),
    ("content_chunk_size", 50),
    ("detect_cycles", True),
    ("max_cycle_period", 4),
    ("min_cycle_repeats", 3),
)


class DoomLoopConfig:
    """Thresholds of :class:`DoomLoopDetector` (defaults are upstream's documented ones).

    ``similarity_threshold`` is kept for compatibility only: no check reads it.
    ``detect_cycles``, ``max_cycle_period`` and ``min_cycle_repeats`` are doomloop's
    CIRCULAR_PLAN settings; ``detect_cycles=False`` gives strict upstream parity.

    Immutable: a detector reads its config once, so changing it afterwards could not take
    effect; use :meth:`replace` and build a new detector instead. Invalid values raise
    ``TypeError``/``ValueError`` naming the field. (A plain class rather than a dataclass
    keeps ``import doomloop`` fast.)
    """

    __slots__ = tuple(name for name, _ in _FIELDS)

    max_identical_actions: int
    max_similar_actions: int
    max_consecutive_failures: int
    max_no_progress_steps: int
    similarity_threshold: float
    max_time_per_action: float
    max_total_time: float
    enable_auto_recovery: bool
    max_recovery_attempts: int
    escalate_on_loop: bool
    initial_backoff: float
    backoff_multiplier: float
    max_backoff: float
    max_repeated_chunks: int
    content_chunk_size: int
    detect_cycles: bool
    max_cycle_period: int
    min_cycle_repeats: int

    def __init__(
        self,
        max_identical_actions: int = 3,
        max_similar_actions: int = 5,
        max_consecutive_failures: int = 3,
        max_no_progress_steps: int = 5,
        similarity_threshold: float = 0.85,
        max_time_per_action: float = 60.0,
        max_total_time: float = 300.0,
        enable_auto_recovery: bool = True,
        max_recovery_attempts: int = 2,
        escalate_on_loop: bool = True,
        initial_backoff: float = 1.0,
        backoff_multiplier: float = 2.0,
        max_backoff: float = 30.0,
        max_repeated_chunks: int = 8,
        content_chunk_size: int = 50,
        detect_cycles: bool = True,
        max_cycle_period: int = 4,
        min_cycle_repeats: int = 3,
    ) -> None:
        ints = {
            "max_identical_actions": (max_identical_actions, 1),
            "max_similar_actions": (max_similar_actions, 1),
            "max_consecutive_failures": (max_consecutive_failures, 1),
            "max_no_progress_steps": (max_no_progress_steps, 1),
            "max_recovery_attempts": (max_recovery_attempts, 0),
            "max_repeated_chunks": (max_repeated_chunks, 1),
            "content_chunk_size": (content_chunk_size, 1),
        }
        for name, (value, minimum) in ints.items():
            self._set(name, positive_int(_OWNER, name, value, minimum=minimum))
        self._set(
            "max_cycle_period", positive_int(_OWNER, "max_cycle_period", max_cycle_period, minimum=2, maximum=MAX_CYCLE_PERIOD)
        )
        self._set(
            "min_cycle_repeats",
            positive_int(_OWNER, "min_cycle_repeats", min_cycle_repeats, minimum=2, maximum=MAX_CYCLE_REPEATS),
        )
        similarity = number(_OWNER, "similarity_threshold", similarity_threshold)
        if similarity > 1.0:
            raise ValueError(f"{_OWNER}.similarity_threshold must be <= 1.0, got {similarity}")
        self._set("similarity_threshold", similarity)
        self._set("max_time_per_action", number(_OWNER, "max_time_per_action", max_time_per_action, strict=True))
        self._set("max_total_time", number(_OWNER, "max_total_time", max_total_time, strict=True))
        self._set("initial_backoff", number(_OWNER, "initial_backoff", initial_backoff, maximum=MAX_BACKOFF))
        self._set(
            "backoff_multiplier", number(_OWNER, "backoff_multiplier", backoff_multiplier, minimum=1.0, maximum=MAX_BACKOFF)
        )
        self._set("max_backoff", number(_OWNER, "max_backoff", max_backoff, maximum=MAX_BACKOFF))
        self._set("enable_auto_recovery", boolean(_OWNER, "enable_auto_recovery", enable_auto_recovery))
        self._set("escalate_on_loop", boolean(_OWNER, "escalate_on_loop", escalate_on_loop))
        self._set("detect_cycles", boolean(_OWNER, "detect_cycles", detect_cycles))
        # What the engine alone knows: the output settings' joint limits.
        check_session_config(self)

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{_OWNER} is immutable; use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{_OWNER} is immutable")

    def replace(self, **changes: Any) -> DoomLoopConfig:
        """A copy with ``changes`` applied (validated like the constructor)."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"{_OWNER} has no field {sorted(unknown)[0]!r}")
        return DoomLoopConfig(**{**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, in declaration order."""
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DoomLoopConfig):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().values()))

    def __repr__(self) -> str:
        changed = ", ".join(f"{name}={getattr(self, name)!r}" for name, default in _FIELDS if getattr(self, name) != default)
        return f"{_OWNER}({changed})"
