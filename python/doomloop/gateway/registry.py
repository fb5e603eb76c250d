"""``SessionRegistry``: many agent sessions in one gateway process, each a
:class:`~doomloop.Monitor` created on first use, evicted when idle or when there are too many,
and optionally kept in a shared store so several gateway replicas can serve one session. See
docs/gateway.md."""

from __future__ import annotations

import inspect
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, Optional, Tuple, TypeVar

from .. import _log
from .._core import RegistryEngine
from ..chant import ChantDetector
from ..errors import SnapshotError
from ..events import checked_callback, log_extra
from ..monitor import Monitor
from ..profile import Profile
from ..tool_loop import ToolCallDecision, ToolLoopDetector, ToolOutcome
from .store import MAX_KEY_BYTES, SessionKey, Store, check_seconds, check_session_key

if TYPE_CHECKING:
    from ..events import EventCallback

__all__ = ["DEFAULT_MAX_SESSIONS", "DEFAULT_TTL", "HOOKS", "SessionRegistry"]

DEFAULT_TTL = 30 * 60.0
"""Seconds a session may stay idle before it is evicted."""

DEFAULT_MAX_SESSIONS = 100_000
"""Sessions kept at most; past it the least recently used is evicted."""

# A str key this short is at most MAX_KEY_BYTES of UTF-8: no need to encode it to check.
_SHORT_KEY = MAX_KEY_BYTES // 4

_R = TypeVar("_R")

HOOKS = (
    "before_tool_call",
    "after_tool_call",
    "arm_post_compaction",
    "record_action",
    "mark_progress",
    "record_response",
    "is_doom_loop",
    "apply",
)
"""The hooks every registry offers, each taking the session key first: the sync registry's
methods, the asyncio registry's coroutines (tests/gateway checks both against this list, and
the Rust engine's tool-call hooks against its first two)."""


def _normalised(key: SessionKey) -> str:
    """The registry's own form of a session key: the str itself, or bytes decoded losslessly
    (so ``"a"`` and ``b"a"`` are one session, as in the stores). The stores' rule for a key
    (:func:`~doomloop.gateway.store.check_session_key`: not empty, at most
    :data:`MAX_KEY_BYTES`) holds with or without a store."""
    if type(key) is str and 0 < len(key) <= _SHORT_KEY:
        return key
    name = check_session_key(key)
    return name.decode("utf-8", "surrogateescape")


class SessionRegistry(RegistryEngine):
    """Maps session keys to their :class:`~doomloop.Monitor` s, for a gateway serving many
    agent sessions.

    Args:
        profile: the :class:`~doomloop.Profile` of every session (default
            :meth:`Profile.recommended`, the profile measured on real runs).
        ttl: seconds a session may stay idle before it is evicted (default 30 minutes).
        max_sessions: sessions kept at most; past it the least recently used is evicted.
        store: a shared :class:`~doomloop.gateway.Store` (``RedisStore``) so that replicas
            serving one session share its state; ``None`` keeps every session in this
            process only. With a store, each hook is one update of the session's blob (its
            monitor's snapshot). An asyncio store (``AsyncRedisStore``) is a ``TypeError``: it
            belongs to :class:`~doomloop.gateway.AsyncSessionRegistry`.
        on_event: ``callable(LoopEvent)`` for every event of every session's detectors,
            each carrying its session key (the hook for metrics and alerting).
        clock: seconds for the idle TTL (default ``time.monotonic``).
        monitor_class: what each session is: :class:`~doomloop.Monitor` or a subclass that
            keeps state of its own (an integration's; its snapshot carries it, see
            ``Monitor._extra_state``).
        **tool_options: extension points of every :class:`~doomloop.ToolLoopDetector`.

    The hooks (:data:`HOOKS`) take the session key first. ``before_tool_call`` /
    ``after_tool_call`` and the others reach one detector of the session's monitor;
    :meth:`apply` runs any of the monitor's own methods (``record_user_message``,
    ``record_compaction``, its findings-returning tool hooks, ...) as one hook.

    Thread-safe, and safe to use from asyncio tasks (no hook blocks unless the store does).

    The session table (``_session``, ``ttl``, ``max_sessions``, the counters, ``len``, ``in``,
    :meth:`stats`) and, without a store, ``before_tool_call`` / ``after_tool_call`` are the
    Rust :class:`~doomloop._core.RegistryEngine`'s: a tool call through the registry is one
    call into the engine.
    """

    profile: Profile
    monitor_class: type[Monitor]
    store: Optional[Store]
    on_event: Optional[EventCallback]
    _tool_options: Dict[str, Any]

    def __new__(
        cls,
        profile: Optional[Profile] = None,
        *,
        ttl: float = DEFAULT_TTL,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        store: Optional[Store] = None,
        on_event: Optional[EventCallback] = None,
        clock: Optional[Callable[[], float]] = None,
        monitor_class: type[Monitor] = Monitor,
        **tool_options: Any,
    ) -> SessionRegistry:
        # Everything is checked before the engine is built, and the engine is built whole.
        if profile is None:
            profile = Profile.recommended()
        elif not isinstance(profile, Profile):
            raise TypeError(f"profile must be a Profile, got {type(profile).__name__}")
        ttl = check_seconds("ttl", ttl)
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError(f"max_sessions must be a positive int, got {max_sessions!r}")
        if store is not None and not callable(getattr(store, "update", None)):
            raise TypeError(f"store must be a Store (with update()), got {type(store).__name__}")
        if inspect.iscoroutinefunction(getattr(store, "update", None)):
            # Its update() would return a coroutine no hook awaits: refused now, not at the first hook.
            problem = f"store must be a sync Store, got {type(store).__name__}: an asyncio store needs AsyncSessionRegistry"
            raise TypeError(problem)
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a zero-argument callable returning seconds, got {type(clock).__name__}")
        on_event = checked_callback(on_event)
        if not (isinstance(monitor_class, type) and issubclass(monitor_class, Monitor)):
            raise TypeError(f"monitor_class must be Monitor or a subclass of it, got {monitor_class!r}")
        # Checked once: a bad extension point fails here, not in the first session.
        ToolLoopDetector(profile.tool_loop, **tool_options)
        # The engine calls back into the class's own methods (a subclass's, if it has them).
        shared = None if store is None else (cls._shared_before_tool_call, cls._shared_after_tool_call)
        self = super().__new__(
            cls,
            ttl=ttl,
            max_sessions=max_sessions,
            clock=clock,
            new_session=cls._new_session,
            normalise_key=_normalised,
            shared=shared,
        )
        self.profile = profile
        self.monitor_class = monitor_class
        self.store = store
        self.on_event = on_event
        self._tool_options = tool_options
        return self

    # --- the session map -------------------------------------------------------------------
    # The engine's `_session(key)` returns the key's `Monitor`: it normalises the key, reads
    # the clock, finds the session (touching it) or builds one with the `new_session` it was
    # built with, `_new_session(name)` (lock released), sweeps idle sessions and evicts past
    # `max_sessions`.

    if TYPE_CHECKING:

        def _session(self, key: SessionKey) -> Monitor: ...

    def _new_session(self, key: str) -> Monitor:
        return self.monitor_class(self.profile, session_key=key, on_event=self.on_event, tool_options=self._tool_options)

    def get(self, key: SessionKey) -> Optional[Monitor]:
        """The session's monitor, or None when the session has none here (nor in the store):
        a getter never creates a session. With a store, the monitor is brought up to the
        state the store holds."""
        if key not in self and (self.store is None or self.store.load(_store_name(key)) is None):
            return None
        entry = self._session(key)
        if self.store is not None:
            self._shared(entry, lambda: None)
        return entry

    def discard(self, key: SessionKey) -> None:
        """Forget the session here (and in the store): its next hook starts it afresh."""
        name = _normalised(key)
        self._forget(name)
        if self.store is not None:
            self.store.delete(name.encode("utf-8", "surrogateescape"))

    # --- shared state ----------------------------------------------------------------------

    def _shared(self, entry: Monitor, hook: Callable[[], _R], detectors_only: bool = False) -> _R:
        """Run ``hook`` on the session's monitor as one update of its blob in the store (see
        :class:`SharedUpdate`); ``detectors_only``: the hook changes detectors' state only
        (a detector's own hook), none of the monitor's own."""
        store = self.store
        if store is None:
            return hook()
        update = SharedUpdate(self, entry, hook, detectors_only)
        store.update(update.name, update, self.ttl)
        return update.result

    def _load(self, entry: Monitor, data: Optional[bytes]) -> None:
        # The monitor's state as a blob of the store gives it (None: afresh).
        if data is None:
            entry._reset()
        else:
            entry._restore(data)

    # --- the hooks ---------------------------------------------------------------------------
    # `before_tool_call` and `after_tool_call` are the engine's: without a store they call the
    # session's tool-loop detector directly; with one, they hand the session to these two.

    def _shared_before_tool_call(
        self, entry: Monitor, tool: str, params: Any, run_id: Optional[str], tool_call_id: Optional[str]
    ) -> ToolCallDecision:
        decision: ToolCallDecision = self._detector_hook(entry, "before_tool_call", (tool, params, run_id, tool_call_id))
        return decision

    def _shared_after_tool_call(
        self,
        entry: Monitor,
        tool: str,
        params: Any,
        result: Any,
        error: Any,
        run_id: Optional[str],
        tool_call_id: Optional[str],
    ) -> ToolOutcome:
        call = (tool, params, result, error, run_id, tool_call_id)
        outcome: ToolOutcome = self._detector_hook(entry, "after_tool_call", call)
        return outcome

    def _detector_hook(self, entry: Monitor, hook: str, args: Tuple[Any, ...]) -> Any:
        # A detector's own hook (see DetectorUpdate): with a store, one update of the
        # session's blob. The engine hands the tool hooks here only when there is a store.
        store = self.store
        if store is None:
            return _run_detector_hook(entry, hook, args)
        update = DetectorUpdate(self, entry, hook, args)
        store.update(update.name, update, self.ttl)
        return update.result

    def apply(self, key: SessionKey, fn: Callable[[Monitor], _R]) -> _R:
        """Run ``fn(monitor)`` on the session's monitor as one hook (with a store, one update
        of its blob, which may run ``fn`` again on a conflict) and return what it returns,
        e.g. ``registry.apply(key, lambda m: m.record_user_message(text))``."""
        entry = self._session(key)
        return self._shared(entry, lambda: fn(entry))

    def arm_post_compaction(self, key: SessionKey) -> int:
        """:meth:`ToolLoopDetector.arm_post_compaction` of the session's detector."""
        entry = self._session(key)
        return self._shared(entry, lambda: entry.tool_loop.arm_post_compaction(), detectors_only=True)

    def record_action(
        self,
        key: SessionKey,
        action_type: str,
        args: Any,
        result: Any,
        success: bool,
        duration: Optional[float] = None,
        metadata: Optional[Dict[str, Any]] = None,
    ) -> None:
        """:meth:`DoomLoopDetector.record_action` of the session's detector."""
        entry = self._session(key)
        self._detector_hook(entry, "record_action", (action_type, args, result, success, duration, metadata))

    def mark_progress(self, key: SessionKey, marker: str) -> None:
        """:meth:`DoomLoopDetector.mark_progress` of the session's detector."""
        self._detector_hook(self._session(key), "mark_progress", (marker,))

    def record_response(self, key: SessionKey, text: str) -> None:
        """:meth:`DoomLoopDetector.record_response` of the session's detector."""
        self._detector_hook(self._session(key), "record_response", (text,))

    def is_doom_loop(self, key: SessionKey) -> bool:
        """:meth:`DoomLoopDetector.is_doom_loop` of the session's detector."""
        found: bool = self._detector_hook(self._session(key), "is_doom_loop", ())
        return found

    def stream(self, key: SessionKey) -> ChantDetector:
        """A fresh :class:`~doomloop.ChantDetector` with the registry profile's ``chant``
        settings for the response about to be streamed in this session (also
        ``get(key).chant`` until the next one), reporting its chant to the registry's
        ``on_event`` with the session key. Streams stay in the process that serves them; they
        are not shared through the store."""
        entry = self._session(key)
        return entry._fresh_chant()


class SharedUpdate(Generic[_R]):
    """The store update that runs one hook on a session's detectors, for the sync and the
    asyncio registries alike: on the state the store holds (restored first when another
    replica changed it), so replicas reach the verdicts one process would, in the order the
    store commits. It may run more than once (on a conflict); ``result`` is the hook's return
    of the last run, the one stored. ``detectors_only``: the hook changes detectors' state
    only (a detector's own hook): on the state this process stored last, the snapshot's
    header is not encoded again. The detectors' own hooks' updates are :class:`DetectorUpdate`."""

    __slots__ = ("_registry", "_entry", "_hook", "_detectors_only", "name", "result")

    result: _R

    def __init__(self, registry: SessionRegistry, entry: Monitor, hook: Callable[[], _R], detectors_only: bool = False) -> None:
        self._registry = registry
        self._entry = entry
        self._hook = hook
        self._detectors_only = detectors_only
        # The session's key in the store.
        self.name = (entry.session_key or "").encode("utf-8", "surrogateescape")

    def __call__(self, data: Optional[bytes]) -> bytes:
        entry = self._entry
        detectors_only = self._detectors_only
        if data != entry._saved:
            detectors_only = False  # restored: nothing of the last snapshot is reused
            try:
                self._registry._load(entry, data)
            except SnapshotError as error:
                # Another version's or a damaged blob: start the session afresh, once.
                _log.warning(
                    "session %r: its stored state cannot be read (%s); starting it afresh",
                    entry.session_key,
                    error,
                    extra=log_extra(entry.session_key),
                )
                self._registry._load(entry, None)
        self.result = self._hook()
        saved = entry._saved = entry._snapshot_after(detectors_only)
        return saved


class DetectorUpdate(SharedUpdate[Any]):
    """The :class:`SharedUpdate` of one of a detector's own hooks: ``hook``, the name of the
    tool-loop detector's ``before_tool_call`` (``args``: tool, params, run_id, tool_call_id)
    or ``after_tool_call`` (tool, params, result, error, run_id, tool_call_id), or of the
    session detector's ``record_action``, ``mark_progress``, ``record_response`` or
    ``is_doom_loop`` (their positional arguments). One extension call restores the stored
    state when another replica changed only the detectors' (its header and chant parts are
    this monitor's own), runs the hook and snapshots; the base class's Python path runs the
    rest (the session's first update, a blob of another state, none, or one that cannot be
    read)."""

    __slots__ = ("_hook_name", "_args")

    def __init__(self, registry: SessionRegistry, entry: Monitor, hook: str, args: Tuple[Any, ...]) -> None:
        super().__init__(registry, entry, partial(_run_detector_hook, entry, hook, args), detectors_only=True)
        self._hook_name = hook
        self._args = args

    def __call__(self, data: Optional[bytes]) -> bytes:
        entry = self._entry
        header = entry._saved_header
        # A store of its own may hand over any bytes-like blob: the Python path reads those.
        if type(data) is bytes and header is not None and entry._answer_step is None:
            done = entry._hook_update(data, entry._saved, header, entry.chant, self._hook_name, self._args)
            if done is not None:
                self.result, saved = done
                entry._saved = saved
                return saved
        return super().__call__(data)


def _run_detector_hook(entry: Monitor, hook: str, args: Tuple[Any, ...]) -> Any:
    # A detector's own hook on the Python path (a DetectorUpdate's, or without a store).
    if hook == "before_tool_call":
        tool, params, run_id, tool_call_id = args
        return entry.tool_loop.before_tool_call(tool, params, run_id=run_id, tool_call_id=tool_call_id)
    if hook == "after_tool_call":
        tool, params, result, error, run_id, tool_call_id = args
        return entry.tool_loop.after_tool_call(tool, params, result=result, error=error, run_id=run_id, tool_call_id=tool_call_id)
    return getattr(entry.doom_loop, hook)(*args)


def _store_name(key: SessionKey) -> bytes:
    return _normalised(key).encode("utf-8", "surrogateescape")
