"""Where the guardrail keeps its conversations: in this process (the default: live objects,
least recently used evicted past ``max_sessions``, idle ones after ``ttl``), or in a shared
:class:`~doomloop.gateway.AsyncRedisStore` so that proxy replicas serve one conversation
together (each request is one compare-and-set update of the conversation's blob, and a Redis
outage follows the store's ``on_error`` policy: ``"open"`` serves sessions from this process's
copies, ``"closed"`` raises :class:`~doomloop.StoreUnavailable`)."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ... import _log
from ...errors import SnapshotError
from ...events import log_extra
from ...profile import Profile
from .conversation import Conversation

__all__ = ["LocalSessions", "SharedSessions"]

R = TypeVar("R")


class LocalSessions:
    """Conversations held in this process."""

    def __init__(self, profile: Profile, *, max_sessions: int, ttl: float, monitor_options: Dict[str, Any]) -> None:
        self.profile = profile
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._options = monitor_options
        self._table: OrderedDict[str, Tuple[Conversation, float]] = OrderedDict()
        self.created = self.evicted = self.expired = 0

    async def run(self, key: str, hook: Callable[[Conversation], R]) -> R:
        """``hook(conversation)`` on the key's conversation (made on first use). The hook runs
        without awaiting, so requests of one session never interleave inside it."""
        return hook(self._get(key))

    def _get(self, key: str) -> Conversation:
        table = self._table
        now = time.monotonic()
        entry = table.get(key)
        if entry is not None and now - entry[1] <= self.ttl:
            table.move_to_end(key)
            table[key] = (entry[0], now)
            return entry[0]
        if entry is not None:
            del table[key]
            self.expired += 1
        conversation = Conversation.new(self.profile, session_key=key, **self._options)
        table[key] = (conversation, now)
        self.created += 1
        while len(table) > self.max_sessions:
            table.popitem(last=False)
            self.evicted += 1
        return conversation

    def stats(self) -> Dict[str, int]:
        """What :meth:`doomloop.integrations.prometheus.PrometheusExporter.watch` reads."""
        return {"live": len(self._table), "created": self.created, "evicted": self.evicted, "expired": self.expired}


class SharedSessions:
    """Conversations in a shared async store (``AsyncRedisStore``)."""

    def __init__(self, profile: Profile, store: Any, *, ttl: float, monitor_options: Dict[str, Any]) -> None:
        self.profile = profile
        self.store = store
        self.ttl = ttl
        self._options = monitor_options

    async def run(self, key: str, hook: Callable[[Conversation], R]) -> R:
        """``hook(conversation)`` as one update of the key's blob: on the state the store holds,
        so replicas reach the verdicts one process would. The hook may run more than once (on
        a conflict); the result of the run that was stored is returned."""
        result: List[R] = []

        def update(data: Optional[bytes]) -> bytes:
            conversation = self._load(key, data)
            result[:] = [hook(conversation)]
            return conversation.to_bytes()

        await self.store.update(key.encode("utf-8", "surrogateescape"), update, self.ttl)
        return result[0]

    def _load(self, key: str, data: Optional[bytes]) -> Conversation:
        if data is not None:
            try:
                return Conversation.from_bytes(data, session_key=key, **self._options)
            except (SnapshotError, ValueError, KeyError, TypeError) as error:
                _log.warning(
                    "session %r: its stored state cannot be read (%s); starting it afresh", key, error, extra=log_extra(key)
                )
        return Conversation.new(self.profile, session_key=key, **self._options)
