"""``DoomLoopConfig``: the session detector's thresholds, validated on construction."""

from __future__ import annotations

from ._settings import Settings, defaults

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Dict

_D = defaults("DoomLoopConfig")


# The profile tuned on real coding-agent runs (docs/quality.md has its measured numbers, and
# docs/session.md what each setting means); every other setting keeps its default.
_RECOMMENDED: Dict[str, Any] = {
    "similar_by_arguments": True,
    "failures_by_arguments": True,
    "no_progress_by_arguments": True,
    "max_consecutive_failures": 4,
    "max_repeated_responses": 3,
    "detailed_descriptions": True,
    "content_chunk_size": 32,
    "max_repeated_chunks": 6,
}


class DoomLoopConfig(Settings):
    """Thresholds of :class:`DoomLoopDetector`. ``DoomLoopConfig()`` has upstream's documented
    defaults and keeps PraisonAI's behaviour; :meth:`recommended` is the profile tuned on real
    agent runs.

    ``detect_cycles``, ``max_cycle_period`` and ``min_cycle_repeats`` are doomloop's
    CIRCULAR_PLAN settings; ``detect_cycles=False`` gives strict upstream parity.
    doomloop's own rules: ``similar_by_arguments``, ``failures_by_arguments`` and
    ``no_progress_by_arguments`` make those rules group only *alike* actions (same type,
    argument similarity at least ``similarity_threshold``) with the same result (off by
    default); ``max_repeated_responses`` alike responses in a row are REPEATED_OUTPUT (8 by
    default, where upstream's chunk counts flag identical responses);
    ``detailed_descriptions`` makes upstream's descriptions name what repeated.

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
    similar_by_arguments: bool
    failures_by_arguments: bool
    no_progress_by_arguments: bool
    max_repeated_responses: int
    detailed_descriptions: bool

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
        similar_by_arguments: bool = _D["similar_by_arguments"],
        failures_by_arguments: bool = _D["failures_by_arguments"],
        no_progress_by_arguments: bool = _D["no_progress_by_arguments"],
        max_repeated_responses: int = _D["max_repeated_responses"],
        detailed_descriptions: bool = _D["detailed_descriptions"],
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
            similar_by_arguments,
            failures_by_arguments,
            no_progress_by_arguments,
            max_repeated_responses,
            detailed_descriptions,
        )

    @classmethod
    def recommended(cls, **overrides: Any) -> DoomLoopConfig:
        """The profile tuned on real coding-agent runs, with ``overrides`` (any fields)
        applied: doomloop's rules on (actions grouped by their arguments and results, a retry
        storm at four alike failures, alike responses three times in a row, descriptions naming
        what repeated) and a chant window of 32 characters repeated 6 times. Its measured
        false positives and recall, beside ``DoomLoopConfig()``'s, are in docs/quality.md."""
        return cls(**_RECOMMENDED).replace(**overrides)
