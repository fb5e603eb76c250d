"""Tool-call loop detection (OpenClaw's ``tools.loopDetection``) with the post-compaction guard.

:class:`ToolLoopDetector` is one agent session. Its history ring, detectors, warning buckets,
guard and result normalisation live in the Rust engine (:class:`doomloop._core.ToolLoopEngine`,
which it extends), so ``before_tool_call`` / ``after_tool_call`` run no Python code unless a
call is blocked, a warning is emitted, the guard aborts or a user extension is configured.
The verdict types (:class:`LoopVerdict`, :class:`ToolCallDecision`, :class:`ToolOutcome`,
:class:`GuardVerdict`) are immutable Rust objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from . import _log
from ._core import (
    COMPACTION_DETECTOR,
    GuardEngine,
    GuardVerdict,
    LoopVerdict,
    ToolCallDecision,
    ToolLoopEngine,
    ToolOutcome,
    tool_result_hash,
)
from ._snapshots import Snapshots
from .events import LoopEvent, checked_callback, log_extra
from .tool_loop_config import LoopDetectionConfig

if TYPE_CHECKING:
    from .events import EventCallback

__all__ = [
    "CompactionLoopPersisted",
    "GuardVerdict",
    "LoopVerdict",
    "PostCompactionGuard",
    "ToolCallDecision",
    "ToolLoopDetector",
    "ToolOutcome",
    "tool_result_hash",
]

_CONFIG_FIELDS = frozenset(LoopDetectionConfig.__slots__)
_EXTENSIONS = frozenset({"tool_aliases", "known_poll_tools", "volatile_keys", "normalisers", "send_like"})
# Configs are immutable: every default detector shares one.
_DEFAULT_CONFIG = LoopDetectionConfig()


class CompactionLoopPersisted(RuntimeError):
    """The post-compaction guard saw the same (tool, args, result) fill its window: the
    compaction did not break the loop and the run should stop."""

    detector = COMPACTION_DETECTOR

    def __init__(self, tool: str, count: int, message: Optional[str] = None) -> None:
        super().__init__(message or f"{COMPACTION_DETECTOR}: {tool} repeated {count} times after compaction")
        self.tool = tool
        self.count = count

    @classmethod
    def from_verdict(cls, verdict: GuardVerdict) -> CompactionLoopPersisted:
        """The exception for an aborting guard verdict."""
        if not verdict.should_abort or verdict.tool_name is None:
            raise ValueError("the guard verdict does not say abort")
        return cls(verdict.tool_name, verdict.count, verdict.message)

    @classmethod
    def raise_for(cls, outcome: ToolOutcome) -> None:
        """Raise if ``outcome``'s guard verdict says abort; do nothing otherwise."""
        if outcome.guard is not None and outcome.guard.should_abort:
            raise cls.from_verdict(outcome.guard)


def _log_decision(detector: ToolLoopDetector, decision: ToolCallDecision) -> None:
    # Called by the engine, lock released, for each warning emitted and each blocked episode.
    verdict = decision.verdict
    what = "tool call blocked" if decision.blocked else "tool loop warning"
    extra = log_extra(detector.session_key)
    _log.warning("%s (%s, count %d): %s", what, verdict.detector, verdict.count, verdict.message, extra=extra)


def _tool_event(detector: ToolLoopDetector, decision: ToolCallDecision, run_id: Optional[str]) -> None:
    # Called by the engine, lock released, for every warning emitted and every blocked call
    # (only for a detector with `on_event`).
    if detector.on_event is None:
        return
    v = decision.verdict
    event = LoopEvent(
        "tool_loop",
        v.detector or "",
        v.level or "warning",
        v.count,
        v.message or "",
        blocked=decision.blocked,
        session_key=detector.session_key,
        run_id=run_id,
    )
    detector.on_event(event)


def _compaction_loop(detector: ToolLoopDetector, outcome: ToolOutcome, run_id: Optional[str]) -> None:
    # Called by the engine, lock released, when the guard says abort (the outcome is recorded):
    # log it, report it, and with `raise_on_compaction_loop=True` raise.
    guard = outcome.guard
    if guard is None:
        return
    _log.error("%s", guard.message, extra=log_extra(detector.session_key, run_id))
    if detector.on_event is not None:
        detector.on_event(
            LoopEvent(
                "tool_loop",
                COMPACTION_DETECTOR,
                "critical",
                guard.count,
                guard.message or "",
                blocked=True,
                session_key=detector.session_key,
                run_id=run_id,
            )
        )
    if detector.raise_on_compaction_loop:
        CompactionLoopPersisted.raise_for(outcome)


class ToolLoopDetector(Snapshots, ToolLoopEngine):
    """Loop detection for one agent session's tool calls, plus the post-compaction guard.

    Wire it around every tool call::

        decision = detector.before_tool_call(tool, params, run_id=run_id)
        result = decision.blocked_result if decision.blocked else run_tool(tool, params)
        outcome = detector.after_tool_call(tool, params, result=result, run_id=run_id)

    Args:
        config: a :class:`LoopDetectionConfig`; ``None`` uses the defaults with detection
            enabled (a detector built here is meant to detect; :meth:`from_openclaw` keeps
            OpenClaw's disabled-by-default).
        **options: any :class:`LoopDetectionConfig` field (overrides ``config``), and the
            extension points:

            - ``tool_aliases``: ``{name: canonical name}`` applied to every tool name first
              (e.g. ``{"bash": "exec"}``); off by default, as in OpenClaw's recorded behaviour.
            - ``known_poll_tools``: extra tool names treated as known polls.
            - ``volatile_keys``: extra keys stripped (at every depth) from send-like results.
            - ``normalisers``: ``{tool: callable(result, params) -> value}``; the value's
              canonical fingerprint becomes the result hash (a loop veto is still unhashed).
            - ``send_like``: ``callable(tool, params) -> bool`` marking more send-like calls.
            - ``raise_on_compaction_loop``: make :meth:`after_tool_call` raise
              :class:`CompactionLoopPersisted` (after recording) instead of only returning
              the aborting guard verdict in the outcome. Default False.
            - ``on_event``: ``callable(LoopEvent)`` called for every warning emitted, every
              blocked call and every guard abort (with the lock released; what it raises
              propagates to the caller).
            - ``session_key``: the gateway session this detector serves, carried by its
              events and, as the structured ``extra`` field ``session_key``, by its log
              records (with ``run_id``).

    Logging: a warning is logged when it is emitted (OpenClaw's buckets); a call blocked
    again and again for the same loop is logged once, when the blocking starts.

    Thread-safe: one detector shared by many threads loses no update (each call's detect,
    decide and record happen under one lock). Memory is fixed by ``history_size``.

    :meth:`to_bytes` saves the state and config (not the extension points, which may be
    callables) and :meth:`from_bytes` restores it; ``copy``, ``deepcopy`` and ``pickle`` go
    through them and carry the extension points along (pickling needs them picklable).
    The ``options`` of :meth:`from_bytes` are the constructor's keyword options other than
    config fields (the extension points, ``on_event``, ``session_key``,
    ``raise_on_compaction_loop``).
    """

    _SNAPSHOT_CONFIG = LoopDetectionConfig
    _SNAPSHOT_OPTIONS = _EXTENSIONS | frozenset({"raise_on_compaction_loop", "on_event", "session_key"})

    __slots__ = ("_extensions", "config", "on_event", "raise_on_compaction_loop", "session_key")

    config: LoopDetectionConfig
    raise_on_compaction_loop: bool
    on_event: Optional[EventCallback]
    session_key: Optional[str]
    _extensions: Dict[str, Any]

    def __new__(
        cls,
        config: Optional[LoopDetectionConfig] = None,
        *,
        raise_on_compaction_loop: bool = False,
        on_event: Optional[EventCallback] = None,
        session_key: Optional[str] = None,
        **options: Any,
    ) -> ToolLoopDetector:
        if config is None:
            config = _DEFAULT_CONFIG
        elif not isinstance(config, LoopDetectionConfig):
            raise TypeError(f"config must be a LoopDetectionConfig or None, got {type(config).__name__}")
        extensions: Dict[str, Any] = {}
        if options:
            unknown = set(options) - _CONFIG_FIELDS - _EXTENSIONS
            if unknown:
                raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
            fields = {k: v for k, v in options.items() if k in _CONFIG_FIELDS}
            if fields:
                config = config.replace(**fields)
            extensions = {k: v for k, v in options.items() if k in _EXTENSIONS}
        if not isinstance(raise_on_compaction_loop, bool):
            raise TypeError("raise_on_compaction_loop must be a bool")
        on_event = checked_callback(on_event)
        if session_key is not None and not isinstance(session_key, str):
            raise TypeError(f"session_key must be a str or None, got {type(session_key).__name__}")
        self = super().__new__(
            cls,
            config._values,
            **extensions,
            _on_loop=_log_decision,
            _on_event=None if on_event is None else _tool_event,
            _on_compaction_loop=_compaction_loop,
        )
        if config is not _DEFAULT_CONFIG:
            for fix in self._setting_fixes:
                _log.warning("loop detection: %s", fix)
        self.config = config
        self.raise_on_compaction_loop = raise_on_compaction_loop
        self.on_event = on_event
        self.session_key = session_key
        self._extensions = extensions
        return self

    def _options(self) -> Dict[str, Any]:
        return {
            **self._extensions,
            "raise_on_compaction_loop": self.raise_on_compaction_loop,
            "on_event": self.on_event,
            "session_key": self.session_key,
        }

    @classmethod
    def from_openclaw(cls, cfg: Optional[Mapping[str, Any]], agent_id: Optional[str] = None, **options: Any) -> ToolLoopDetector:
        """A detector configured as OpenClaw would be: ``cfg`` is a whole OpenClaw config or
        just its ``loopDetection`` block, read leniently (bad values fall back to defaults,
        logged); detection stays off unless ``enabled: true`` (a warning saying so is logged
        once, here). ``None`` means no block at
        all: calls and outcomes are recorded and the guard can be armed, but nothing is
        detected. ``options`` are the extension points of the constructor."""
        config = LoopDetectionConfig.from_openclaw(cfg, agent_id, strict=False)
        return cls(config, **options)

    def arm_post_compaction(self) -> int:
        """Arm the post-compaction guard after a compaction retry: it watches the next
        ``post_compaction_window_size`` outcomes. Returns that number (0 when the guard is
        off because ``enabled`` is explicitly false) and logs
        ``post-compaction guard armed for N attempts``."""
        attempts = self._arm()
        if attempts:
            _log.info("post-compaction guard armed for %d attempts", attempts)
        return attempts

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + self._state_size()


class PostCompactionGuard(GuardEngine):
    """The post-compaction guard on its own.

    After :meth:`arm` it watches the next ``window_size`` outcomes (an int in
    ``1..=MAX_GUARD_WINDOW``); when one (tool, args hash, result hash) triple fills the
    window, :meth:`observe` returns a verdict with ``should_abort=True``,
    ``detector="compaction_loop_persisted"``, the tool name and the count. Outside an armed
    window it never aborts. Thread-safe.
    """

    __slots__ = ()

    def __new__(cls, window_size: Optional[int] = None) -> PostCompactionGuard:
        return super().__new__(cls, window_size)

    def arm(self) -> int:
        """Start watching; logs ``post-compaction guard armed for N attempts``; returns N."""
        attempts = self._arm()
        _log.info("post-compaction guard armed for %d attempts", attempts)
        return attempts
