"""Settings of tool-call loop detection: :class:`LoopDetectionConfig` (reading and writing
OpenClaw's ``tools.loopDetection`` block is :mod:`doomloop.openclaw`'s)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from . import _log, _validate, openclaw
from ._core import MAX_GUARD_WINDOW

__all__ = ["LoopDetectionConfig"]

_OWNER = "LoopDetectionConfig"


@dataclass(frozen=True)
class LoopDetectionConfig:
    """Settings of :class:`doomloop.ToolLoopDetector` (OpenClaw's ``tools.loopDetection``).

    ``enabled`` is tri-state, as in OpenClaw: ``True`` runs the detectors; ``None`` (no
    ``enabled`` key) records calls and outcomes and keeps the post-compaction guard on but
    never detects; ``False`` turns detection and the guard off (outcomes are still recorded).
    A Python-native config defaults to ``True``; :meth:`from_openclaw` keeps OpenClaw's
    default (unset). Thresholds need not be ordered here: at run time ``critical`` is raised
    to ``warning + 1`` and ``global`` to ``critical + 1`` where needed, with a logged warning.
    """

    enabled: Optional[bool] = True
    history_size: int = 30
    warning_threshold: int = 10
    critical_threshold: int = 20
    unknown_tool_threshold: int = 10
    global_circuit_breaker_threshold: int = 30
    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    post_compaction_window_size: int = 3

    def __post_init__(self) -> None:
        if self.enabled is not None:
            _validate.boolean(_OWNER, "enabled", self.enabled)
        for name, cap in openclaw.FIELD_CAPS.items():
            _validate.positive_int(_OWNER, name, getattr(self, name), maximum=cap)
        _validate.positive_int(_OWNER, "post_compaction_window_size", self.post_compaction_window_size, maximum=MAX_GUARD_WINDOW)
        for name in ("generic_repeat", "known_poll_no_progress", "ping_pong"):
            _validate.boolean(_OWNER, name, getattr(self, name))

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
        """
        if cfg is None:
            _validate.boolean("LoopDetectionConfig.from_openclaw", "strict", strict)
            return cls(enabled=None)
        return cls(**openclaw.config_values(cfg, agent_id, strict))

    def to_openclaw(self) -> Dict[str, Any]:
        """The equivalent OpenClaw ``loopDetection`` block (``enabled`` left out when unset)."""
        return openclaw.to_block(dataclasses.asdict(self))

    def replace(self, **changes: Any) -> LoopDetectionConfig:
        """A copy with ``changes`` applied (validated)."""
        return dataclasses.replace(self, **changes)

    def engine_settings(self) -> Dict[str, Any]:
        """The resolved run-time settings: thresholds ordered as OpenClaw's run time orders
        them (``critical > warning``, ``global > critical``; each fix is logged)."""
        warning = self.warning_threshold
        critical = self.critical_threshold
        breaker = self.global_circuit_breaker_threshold
        if critical <= warning:
            _log.warning(
                "loop detection: critical_threshold %d <= warning_threshold %d; using %d", critical, warning, warning + 1
            )
            critical = warning + 1
        if breaker <= critical:
            _log.warning(
                "loop detection: global_circuit_breaker_threshold %d <= critical_threshold %d; using %d",
                breaker,
                critical,
                critical + 1,
            )
            breaker = critical + 1
        return {
            "history_size": self.history_size,
            "warning_threshold": warning,
            "critical_threshold": critical,
            "unknown_tool_threshold": self.unknown_tool_threshold,
            "global_circuit_breaker_threshold": breaker,
            "generic_repeat": self.generic_repeat,
            "known_poll_no_progress": self.known_poll_no_progress,
            "ping_pong": self.ping_pong,
            "detect": self.enabled is True,
            "record_calls": self.enabled is not False,
            "guard_enabled": self.enabled is not False,
            "guard_window_size": self.post_compaction_window_size,
        }
