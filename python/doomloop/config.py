"""``DoomLoopConfig``: the session detector's thresholds, validated on construction."""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import boolean, number, positive_int

_OWNER = "DoomLoopConfig"


@dataclass(frozen=True)
class DoomLoopConfig:
    """Thresholds of :class:`DoomLoopDetector` (defaults are upstream's documented ones).

    Frozen: a detector reads its config once, so changing it afterwards could not take
    effect; build a new config (``dataclasses.replace``) and a new detector instead.
    Invalid values raise ``TypeError``/``ValueError`` naming the field.
    """

    max_identical_actions: int = 3
    max_similar_actions: int = 5
    max_consecutive_failures: int = 3
    max_no_progress_steps: int = 5
    similarity_threshold: float = 0.85
    """Kept for compatibility only; no check reads it."""
    max_time_per_action: float = 60.0
    max_total_time: float = 300.0
    enable_auto_recovery: bool = True
    max_recovery_attempts: int = 2
    escalate_on_loop: bool = True
    initial_backoff: float = 1.0
    backoff_multiplier: float = 2.0
    max_backoff: float = 30.0
    max_repeated_chunks: int = 8
    content_chunk_size: int = 50
    detect_cycles: bool = True
    """CIRCULAR_PLAN detection (doomloop's addition); False gives strict upstream parity."""
    max_cycle_period: int = 4
    min_cycle_repeats: int = 3

    def __post_init__(self) -> None:
        for name in (
            "max_identical_actions",
            "max_similar_actions",
            "max_consecutive_failures",
            "max_no_progress_steps",
            "max_repeated_chunks",
            "content_chunk_size",
        ):
            positive_int(_OWNER, name, getattr(self, name))
        positive_int(_OWNER, "max_recovery_attempts", self.max_recovery_attempts, minimum=0)
        positive_int(_OWNER, "max_cycle_period", self.max_cycle_period, minimum=2)
        positive_int(_OWNER, "min_cycle_repeats", self.min_cycle_repeats, minimum=2)
        similarity = number(_OWNER, "similarity_threshold", self.similarity_threshold)
        if similarity > 1.0:
            raise ValueError(f"{_OWNER}.similarity_threshold must be <= 1.0, got {similarity}")
        for name in ("max_time_per_action", "max_total_time"):
            object.__setattr__(self, name, number(_OWNER, name, getattr(self, name), strict=True))
        for name in ("initial_backoff", "max_backoff"):
            object.__setattr__(self, name, number(_OWNER, name, getattr(self, name)))
        multiplier = number(_OWNER, "backoff_multiplier", self.backoff_multiplier, minimum=1.0)
        object.__setattr__(self, "backoff_multiplier", multiplier)
        for name in ("enable_auto_recovery", "escalate_on_loop", "detect_cycles"):
            boolean(_OWNER, name, getattr(self, name))
