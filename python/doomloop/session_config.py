"""``DoomLoopConfig``: the session detector's thresholds, validated on construction."""

from __future__ import annotations

from ._settings import Settings, defaults

_D = defaults("DoomLoopConfig")


class DoomLoopConfig(Settings):
    """Thresholds of :class:`DoomLoopDetector` (defaults are upstream's documented ones).

    ``similarity_threshold`` is kept for compatibility only: no check reads it.
    ``detect_cycles``, ``max_cycle_period`` and ``min_cycle_repeats`` are doomloop's
    CIRCULAR_PLAN settings; ``detect_cycles=False`` gives strict upstream parity.

    Immutable: a detector reads its config once, so changing it afterwards could not take
    effect; use :meth:`replace` and build a new detector instead. A value of the wrong type
    raises ``TypeError`` and one out of range :class:`~doomloop.ConfigError` (a
    ``ValueError``), naming the field and the range it accepts. Configs compare, hash,
    pickle and copy by value. The defaults and ranges are the engine's (listed in
    docs/session.md).
    """

    _OWNER = "DoomLoopConfig"
    __slots__ = tuple(_D)

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
        max_identical_actions: int = _D["max_identical_actions"],
        max_similar_actions: int = _D["max_similar_actions"],
        max_consecutive_failures: int = _D["max_consecutive_failures"],
        max_no_progress_steps: int = _D["max_no_progress_steps"],
        similarity_threshold: float = _D["similarity_threshold"],
        max_time_per_action: float = _D["max_time_per_action"],
        max_total_time: float = _D["max_total_time"],
        enable_auto_recovery: bool = _D["enable_auto_recovery"],
        max_recovery_attempts: int = _D["max_recovery_attempts"],
        escalate_on_loop: bool = _D["escalate_on_loop"],
        initial_backoff: float = _D["initial_backoff"],
        backoff_multiplier: float = _D["backoff_multiplier"],
        max_backoff: float = _D["max_backoff"],
        max_repeated_chunks: int = _D["max_repeated_chunks"],
        content_chunk_size: int = _D["content_chunk_size"],
        detect_cycles: bool = _D["detect_cycles"],
        max_cycle_period: int = _D["max_cycle_period"],
        min_cycle_repeats: int = _D["min_cycle_repeats"],
    ) -> None:
        self._set_all(
            max_identical_actions,
            max_similar_actions,
            max_consecutive_failures,
            max_no_progress_steps,
            similarity_threshold,
            max_time_per_action,
            max_total_time,
            enable_auto_recovery,
            max_recovery_attempts,
            escalate_on_loop,
            initial_backoff,
            backoff_multiplier,
            max_backoff,
            max_repeated_chunks,
            content_chunk_size,
            detect_cycles,
            max_cycle_period,
            min_cycle_repeats,
        )
