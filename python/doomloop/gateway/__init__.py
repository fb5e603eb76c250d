"""The shared-state layer of the gateway runtime: stores that keep each session's detector
state as an opaque, versioned ``bytes`` blob. :class:`MemoryStore` is the embedded default."""

from ..errors import StoreCorrupt as StoreCorrupt, StoreUnavailable as StoreUnavailable
from .store import (
    MAX_KEY_BYTES as MAX_KEY_BYTES,
    AsyncStore as AsyncStore,
    Entry as Entry,
    MemoryStore as MemoryStore,
    OnError as OnError,
    SessionKey as SessionKey,
    Store as Store,
    check_session_key as check_session_key,
)

__all__ = [
    "MAX_KEY_BYTES",
    "AsyncStore",
    "Entry",
    "MemoryStore",
    "OnError",
    "SessionKey",
    "Store",
    "StoreCorrupt",
    "StoreUnavailable",
    "check_session_key",
]
