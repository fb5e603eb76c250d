"""Settings of tool-call loop detection: :class:`LoopDetectionConfig` (reading and writing
OpenClaw's ``tools.loopDetection`` block is :mod:`doomloop.integrations.openclaw`'s)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from . import _validate
from ._settings import Settings, defaults
from .integrations import openclaw

__all__ = ["LoopDetectionConfig"]

_D = defaults("LoopDetectionConfig")


class LoopDetectionConfig(Settings):
    """Settings of :class:`doomloop.ToolLoopDetector` (OpenClaw's ``tools.loopDetection``).

    ``enabled`` is tri-state, as in OpenClaw: ``True`` runs the detectors; ``None`` (no
    ``enabled`` key) records calls and outcomes and keeps the post-compaction guard on but
    never detects; ``False`` turns detection and the guard off (outcomes are still recorded).
    A Python-native config defaults to ``True``; :meth:`from_openclaw` keeps OpenClaw's
    default (unset).

    The thresholds must be ordered, ``warning_threshold < critical_threshold <
    global_circuit_breaker_threshold``: otherwise :class:`~doomloop.ConfigError` names the
    two fields and their values. OpenClaw's configuration (the three switches below all off,
    as :meth:`from_openclaw` reads it) keeps OpenClaw's rule instead: at run time
    ``critical`` is raised to ``warning + 1`` and ``global`` to ``critical + 1`` where
    needed, with a logged warning.

    The last three switches are doomloop's, not OpenClaw's: ``hash_plain_results`` (a result
    mapping with neither ``content`` nor ``details`` hashes by its value, not as OpenClaw's
    empty ``{details, text}``), ``cycle`` (a cycle of 3 to 8 calls repeated) and
    ``argument_churn`` (one tool cycling through a few argument sets whose outcomes never
    change). They default to on here; :meth:`from_openclaw` turns them off, so an
    OpenClaw config behaves exactly as OpenClaw does (docs/tool-loop.md describes each rule).

    Immutable, compared, hashed, pickled and copied by value. A value of the wrong type
    raises ``TypeError`` and one out of range :class:`~doomloop.ConfigError` (a
    ``ValueError``), naming the field and its range; the defaults and ranges are the
    engine's (listed in docs/tool-loop.md).
    """

    _OWNER = "LoopDetectionConfig"
    __slots__ = tuple(_D)

    enabled: Optional[bool]
    history_size: int
    warning_threshold: int
    critical_threshold: int
    unknown_tool_threshold: int
    global_circuit_breaker_threshold: int
    generic_repeat: bool
    known_poll_no_progress: bool
    ping_pong: bool
    post_compaction_window_size: int
    hash_plain_results: bool
    cycle: bool
    argument_churn: bool

    def __init__(
        self,
        enabled: Optional[bool] = _D["enabled"],
        history_size: int = _D["history_size"],
        warning_threshold: int = _D["warning_threshold"],
        critical_threshold: int = _D["critical_threshold"],
        unknown_tool_threshold: int = _D["unknown_tool_threshold"],
        global_circuit_breaker_threshold: int = _D["global_circuit_breaker_threshold"],
        generic_repeat: bool = _D["generic_repeat"],
        known_poll_no_progress: bool = _D["known_poll_no_progress"],
        ping_pong: bool = _D["ping_pong"],
        post_compaction_window_size: int = _D["post_compaction_window_size"],
        hash_plain_results: bool = _D["hash_plain_results"],
        cycle: bool = _D["cycle"],
        argument_churn: bool = _D["argument_churn"],
    ) -> None:
        self._set_all(
            enabled,
            history_size,
            warning_threshold,
            critical_threshold,
            unknown_tool_threshold,
            global_circuit_breaker_threshold,
            generic_repeat,
            known_poll_no_progress,
            ping_pong,
            post_compaction_window_size,
            hash_plain_results,
            cycle,
            argument_churn,
        )

    @classmethod
    def from_openclaw(
        cls, cfg: Optional[Mapping[str, Any]], agent_id: Optional[str] = None, strict: bool = True
    ) -> LoopDetectionConfig:
        """Build from a whole OpenClaw config or just its ``loopDetection`` block, merging the
        block of ``agent_id`` (ids normalised with :func:`~doomloop.normalize_agent_id`).

        ``strict=True`` raises :class:`~doomloop.ConfigError` naming the key path for unknown
        keys, numbers that are not positive integers or exceed a cap, non-boolean switches and
        unordered thresholds given in one block. ``strict=False`` applies OpenClaw's run-time
        rules: a bad value falls back to its default (logged), one above a cap is capped.
        ``cfg=None`` (no block at all) gives OpenClaw's defaults with ``enabled`` unset.
        With ``enabled`` unset nothing is detected (OpenClaw's default): a warning saying so
        is logged once, here.
        OpenClaw has no keys for doomloop's own switches (``cycle``, ``argument_churn``,
        ``hash_plain_results``): strict parsing rejects them as unknown keys, and every config
        read here has them off.
        """
        if cfg is None:
            _validate.boolean("LoopDetectionConfig.from_openclaw", "strict", strict)
            config = cls(**openclaw.block_values(None))
        else:
            config = cls(**openclaw.config_values(cfg, agent_id, strict))
        openclaw.warn_if_detection_off(config.enabled)
        return config

    def to_openclaw(self) -> Dict[str, Any]:
        """The equivalent OpenClaw ``loopDetection`` block (``enabled`` left out when unset).
        doomloop's own switches have no OpenClaw keys and are left out: the block read back
        has them off."""
        return openclaw.to_block(self.as_dict())
