"""The shared-state layer of the gateway runtime: stores that keep each session's detector
state as an opaque, versioned ``bytes`` blob. :class:`MemoryStore` is the embedded default;
:class:`RedisStore` and :class:`AsyncRedisStore` share sessions between gateway processes
(they import redis-py, the ``redis`` extra, only when made). :class:`SessionRegistry` and, for
asyncio gateways, :class:`AsyncSessionRegistry` map session keys to their :class:`~doomloop.Monitor` s over a
store. See docs/gateway.md and docs/gateway-stores.md."""

from ..errors import StoreCorrupt as StoreCorrupt, StoreUnavailable as StoreUnavailable
from .async_registry import AsyncSessionRegistry as AsyncSessionRegistry
from .redis_store import AsyncRedisStore as AsyncRedisStore, RedisStore as RedisStore
from .registry import HOOKS as HOOKS, SessionRegistry as SessionRegistry
from .store import (
    MAX_KEY_BYTES as MAX_KEY_BYTES,
    AsyncStore as AsyncStore,
    Entry as Entry,
    MemoryStore as MemoryStore,
    OnError as OnError,
    SessionKey as SessionKey,
    Store as Store,
    Update as Update,
    check_session_key as check_session_key,
)

__all__ = [
    "HOOKS",
    "MAX_KEY_BYTES",
    "AsyncRedisStore",
    "AsyncSessionRegistry",
    "AsyncStore",
    "Entry",
    "MemoryStore",
    "OnError",
    "RedisStore",
    "SessionRegistry",
    "SessionKey",
    "Store",
    "StoreCorrupt",
    "StoreUnavailable",
    "Update",
    "check_session_key",
]
