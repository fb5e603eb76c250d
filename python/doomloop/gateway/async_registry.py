"""``AsyncSessionRegistry``: the session registry of an asyncio gateway, whose hooks await an
:class:`~doomloop.gateway.AsyncStore` (``AsyncRedisStore``) instead of blocking the event
loop. The session map, its eviction and the update a hook makes of a session's blob are
:class:`~doomloop.gateway.SessionRegistry`'s own. See docs/gateway.md."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, TypeVar, Union, cast

from ..chant import ChantDetector
from ..monitor import Monitor
from ..profile import Profile
from ..tool_loop import ToolCallDecision, ToolOutcome
from .registry import DEFAULT_MAX_SESSIONS, DEFAULT_TTL, DetectorUpdate, SessionRegistry, SharedUpdate, _normalised, _store_name
from .store import AsyncStore, MemoryStore, SessionKey

if TYPE_CHECKING:
    from ..events import EventCallback

__all__ = ["AsyncSessionRegistry"]

_R = TypeVar("_R")


def _check_store(store: object) -> Optional[AsyncStore]:
    """``store`` when it is an :class:`AsyncStore` (its ``update`` and ``delete`` coroutine
    functions); ``None`` for no store or a ``MemoryStore``, which the sync registry drives
    (it never blocks); ``TypeError`` otherwise."""
    if store is None or isinstance(store, MemoryStore):
        return None
    if all(inspect.iscoroutinefunction(getattr(store, method, None)) for method in ("update", "delete")):
        return cast(AsyncStore, store)
    problem = "store must be an AsyncStore (update() and delete() coroutines, as AsyncRedisStore's) or a MemoryStore"
    problem += f", got {type(store).__name__}"
    if callable(getattr(store, "update", None)):
        problem += ": a sync store would block the event loop (use it with SessionRegistry)"
    raise TypeError(problem)


class AsyncSessionRegistry:
    """:class:`~doomloop.gateway.SessionRegistry` for asyncio gateways: the same arguments and
    the same hooks, those that touch the store as coroutines.

    Args:
        store: an :class:`~doomloop.gateway.AsyncStore` (``AsyncRedisStore``) so that
            replicas serving one session share its state, each hook awaiting one update of the
            session's blob (one round trip in the common path); a ``MemoryStore``, which never
            blocks; or ``None`` (the default) to keep every session in this process only. A sync
            store such as ``RedisStore`` is a ``TypeError``: it would block the event loop.
        profile, ttl, max_sessions, on_event, clock, monitor_class, **tool_options: as
            :class:`~doomloop.gateway.SessionRegistry`'s.

    With an ``AsyncStore``, tasks may serve one session concurrently (the store's update
    loses none of their hooks); ``AsyncRedisStore`` opens a client per event loop, so a
    registry made at import time serves every loop a service runs.
    Without one, it is as safe to share between threads as ``SessionRegistry``. ``stream``,
    ``len``, ``in`` and :meth:`stats` never touch the store and are plain methods.
    """

    def __init__(
        self,
        profile: Optional[Profile] = None,
        *,
        ttl: float = DEFAULT_TTL,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        store: Union[AsyncStore, MemoryStore, None] = None,
        on_event: Optional[EventCallback] = None,
        clock: Optional[Callable[[], float]] = None,
        monitor_class: type[Monitor] = Monitor,
        **tool_options: Any,
    ) -> None:
        shared = _check_store(store)
        # The session map and the checks of every other argument are the sync registry's; it
        # drives a MemoryStore itself.
        self._registry = SessionRegistry(
            profile,
            ttl=ttl,
            max_sessions=max_sessions,
            store=store if isinstance(store, MemoryStore) else None,
            on_event=on_event,
            clock=clock,
            monitor_class=monitor_class,
            **tool_options,
        )
        self.store = store
        self._store = shared

    async def _shared(
        self, store: AsyncStore, key: SessionKey, hook: Callable[[Monitor], _R], detectors_only: bool = False
    ) -> _R:
        # The sync registry's update of the session's blob, awaited.
        registry = self._registry
        entry = registry._session(key)
        update = SharedUpdate(registry, entry, lambda: hook(entry), detectors_only)
        await store.update(update.name, update, registry.ttl)
        return update.result

    async def _detector_hook(self, store: AsyncStore, key: SessionKey, hook: str, args: Tuple[Any, ...]) -> Any:
        # A detector's own hook's update (see DetectorUpdate), awaited.
        registry = self._registry
        update = DetectorUpdate(registry, registry._session(key), hook, args)
        await store.update(update.name, update, registry.ttl)
        return update.result

    # --- the hooks ---------------------------------------------------------------------------

    async def before_tool_call(
        self, key: SessionKey, tool: str, params: Any, *, run_id: Optional[str] = None, tool_call_id: Optional[str] = None
    ) -> ToolCallDecision:
        """:meth:`ToolLoopDetector.before_tool_call` of the session's detector."""
        store = self._store
        if store is None:
            return self._registry.before_tool_call(key, tool, params, run_id=run_id, tool_call_id=tool_call_id)
        decision: ToolCallDecision = await self._detector_hook(
            store, key, "before_tool_call", (tool, params, run_id, tool_call_id)
        )
        return decision

    async def after_tool_call(
        self,
        key: SessionKey,
        tool: str,
        params: Any,
        *,
        result: Any = None,
        error: Any = None,
        run_id: Optional[str] = None,
        tool_call_id: Optional[str] = None,
    ) -> ToolOutcome:
        """:meth:`ToolLoopDetector.after_tool_call` of the session's detector."""
        store = self._store
        if store is None:
            return self._registry.after_tool_call(
                key, tool, params, result=result, error=error, run_id=run_id, tool_call_id=tool_call_id
            )
        call = (tool, params, result, error, run_id, tool_call_id)
        outcome: ToolOutcome = await self._detector_hook(store, key, "after_tool_call", call)
        return outcome

    async def arm_post_compaction(self, key: SessionKey) -> int:
        """:meth:`ToolLoopDetector.arm_post_compaction` of the session's detector."""
        store = self._store
        if store is None:
            return self._registry.arm_post_compaction(key)
        return await self._shared(store, key, lambda entry: entry.tool_loop.arm_post_compaction(), detectors_only=True)

    async def record_action(
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
        store = self._store
        if store is None:
            self._registry.record_action(key, action_type, args, result, success, duration, metadata)
        else:
            await self._detector_hook(store, key, "record_action", (action_type, args, result, success, duration, metadata))

    async def mark_progress(self, key: SessionKey, marker: str) -> None:
        """:meth:`DoomLoopDetector.mark_progress` of the session's detector."""
        store = self._store
        if store is None:
            self._registry.mark_progress(key, marker)
        else:
            await self._detector_hook(store, key, "mark_progress", (marker,))

    async def record_response(self, key: SessionKey, text: str) -> None:
        """:meth:`DoomLoopDetector.record_response` of the session's detector."""
        store = self._store
        if store is None:
            self._registry.record_response(key, text)
        else:
            await self._detector_hook(store, key, "record_response", (text,))

    async def is_doom_loop(self, key: SessionKey) -> bool:
        """:meth:`DoomLoopDetector.is_doom_loop` of the session's detector."""
        store = self._store
        if store is None:
            return self._registry.is_doom_loop(key)
        found: bool = await self._detector_hook(store, key, "is_doom_loop", ())
        return found

    async def apply(self, key: SessionKey, fn: Callable[[Monitor], _R]) -> _R:
        """:meth:`SessionRegistry.apply`: ``fn(monitor)`` on the session's monitor as one
        hook (with an ``AsyncStore``, one awaited update of its blob)."""
        store = self._store
        if store is None:
            return self._registry.apply(key, fn)
        return await self._shared(store, key, fn)

    async def get(self, key: SessionKey) -> Optional[Monitor]:
        """The session's monitor on the state the store holds, or None when the session has
        none here nor in the store (a getter never creates a session)."""
        store = self._store
        if store is None:
            return self._registry.get(key)
        if key not in self._registry and await store.load(_store_name(key)) is None:
            return None
        return await self._shared(store, key, lambda entry: entry)

    async def discard(self, key: SessionKey) -> None:
        """Forget the session here (and in the store): its next hook starts it afresh."""
        self._registry.discard(key)
        if self._store is not None:
            await self._store.delete(_normalised(key).encode("utf-8", "surrogateescape"))

    # --- what never touches the store --------------------------------------------------------

    def stream(self, key: SessionKey) -> ChantDetector:
        """:meth:`SessionRegistry.stream`: a fresh :class:`~doomloop.ChantDetector` for the
        response about to be streamed in this session (streams are not shared through the
        store, so this is no coroutine)."""
        return self._registry.stream(key)

    def __len__(self) -> int:
        """Live sessions in this process (idle ones past the TTL are dropped first)."""
        return len(self._registry)

    def __contains__(self, key: object) -> bool:
        return key in self._registry

    def stats(self) -> Dict[str, int]:
        """:meth:`SessionRegistry.stats`: ``live``, ``created``, ``evicted`` and ``expired``."""
        return self._registry.stats()
