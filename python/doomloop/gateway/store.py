"""The store interface of the gateway runtime, the embedded :class:`MemoryStore`, and the
pieces every store shares: the session-key check, argument checks, and the fail-open /
fail-closed outage policy of a store that can fail.

A store keeps one opaque ``bytes`` blob per session key, with a version that changes on every
write; it knows nothing about detectors. See docs/gateway-stores.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import OrderedDict
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Generic,
    Literal,
    NamedTuple,
    Optional,
    Protocol,
    Tuple,
    TypeVar,
    Union,
)

from .. import _log
from ..errors import ConfigError, StoreUnavailable

__all__ = ["MAX_KEY_BYTES", "AsyncStore", "Entry", "MemoryStore", "OnError", "SessionKey", "Store", "Update", "check_session_key"]

SessionKey = Union[str, bytes]
"""A session key: a ``str`` (stored as UTF-8) or ``bytes``; ``"a"`` and ``b"a"`` are one key."""

OnError = Literal["open", "closed"]
"""What a store that cannot reach its server does: ``"open"`` serves from local state and logs,
``"closed"`` raises :class:`~doomloop.errors.StoreUnavailable`."""

MAX_KEY_BYTES = 1024
"""The longest session key, in bytes (UTF-8 for a ``str``)."""

MAX_SECONDS = 1e9
"""The largest TTL or timeout a store takes (about 31 years): anything larger is a mistake, and
a millisecond count of it must still fit Redis's integers."""

Update = Callable[[Optional[bytes]], bytes]
"""An update: the session's current blob (``None`` when it has none) to its next blob."""


class Entry(NamedTuple):
    """A stored blob and the version it was written at. Versions are positive ints, never
    reused for a key: a deleted key that comes back starts above every version it had. (A Redis
    store's ``load`` during an outage returns its local copy, at version 0 if Redis never had it.)"""

    version: int
    data: bytes


class Store(Protocol):
    """What the session registry needs from a store: read, compare-and-set, delete, and a
    bounded-retry update built on compare-and-set.

    Every method checks its key with :func:`check_session_key` and its TTL with
    :func:`check_seconds` (``TypeError``/``ValueError`` naming the argument).
    """

    def load(self, key: SessionKey) -> Optional[Entry]:
        """The key's entry, or ``None`` when it has none (never written, deleted or expired)."""
        ...

    def compare_and_set(self, key: SessionKey, expected_version: Optional[int], data: bytes, ttl_seconds: float) -> Optional[int]:
        """Write ``data`` if the key is at ``expected_version`` (``None``: if it has no entry),
        and (re)start its TTL; the new version, or ``None`` on a conflict."""
        ...

    def delete(self, key: SessionKey) -> None:
        """Remove the key's entry (nothing happens when it has none)."""
        ...

    def update(self, key: SessionKey, fn: Update, ttl_seconds: float) -> bytes:
        """Apply ``fn`` to the key's blob and store the result, with no update lost to a
        concurrent writer: on a conflict ``fn`` runs again on the newer blob, so it may run more
        than once and must only compute. Returns the result of its last run, the blob stored."""
        ...


class AsyncStore(Protocol):
    """:class:`Store` for asyncio: the same methods and contract, as coroutines."""

    def load(self, key: SessionKey) -> Awaitable[Optional[Entry]]:
        """As :meth:`Store.load`."""
        ...

    def compare_and_set(
        self, key: SessionKey, expected_version: Optional[int], data: bytes, ttl_seconds: float
    ) -> Awaitable[Optional[int]]:
        """As :meth:`Store.compare_and_set`."""
        ...

    def delete(self, key: SessionKey) -> Awaitable[None]:
        """As :meth:`Store.delete`."""
        ...

    def update(self, key: SessionKey, fn: Update, ttl_seconds: float) -> Awaitable[bytes]:
        """As :meth:`Store.update` (``fn`` itself is a plain function)."""
        ...


def check_session_key(key: object) -> bytes:
    """``key`` as the bytes a store keys on: a ``str`` is encoded as UTF-8. ``TypeError`` for
    any other type, ``ValueError`` for an empty key, a key longer than :data:`MAX_KEY_BYTES`,
    or a ``str`` that is not valid Unicode (a lone surrogate)."""
    if type(key) is bytes:
        name = key
    elif isinstance(key, str):
        try:
            name = str.encode(key, "utf-8")
        except UnicodeEncodeError:
            raise ValueError("a session key must be valid Unicode (it has a lone surrogate)") from None
    elif isinstance(key, bytes):
        name = bytes(key)
    else:
        raise TypeError(f"a session key must be str or bytes, got {type(key).__name__}")
    if not name:
        raise ValueError("a session key must not be empty")
    if len(name) > MAX_KEY_BYTES:
        raise ValueError(f"a session key is at most {MAX_KEY_BYTES} bytes (MAX_KEY_BYTES), got {len(name)}")
    return name


def check_seconds(name: str, value: object) -> float:
    """``value`` as a positive, finite number of seconds of at most :data:`MAX_SECONDS`:
    ``TypeError``, or :class:`~doomloop.errors.ConfigError` naming ``name``, otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    # The value itself, by float's and int's own methods: a subclass's could lie. An int too
    # large for a float is too large anyway.
    seconds = float.__float__(value) if isinstance(value, float) else float(min(int.__int__(value), 1 << 64))
    if not 0.0 < seconds <= MAX_SECONDS:  # also false for NaN
        raise ConfigError(name, f"must be a positive, finite number of seconds (at most {MAX_SECONDS:.0e}), got {value!r}")
    return seconds


def check_data(data: object, what: str) -> bytes:
    """``data`` itself when it is ``bytes``; ``TypeError`` naming ``what`` otherwise (a
    ``bytearray`` could change under the store after the check)."""
    if not isinstance(data, bytes):
        raise TypeError(f"{what} must be bytes, got {type(data).__name__}")
    return data


def check_version(version: object) -> Optional[int]:
    """An expected version: ``None`` or an int; ``TypeError`` otherwise."""
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"expected_version must be an int or None, got {type(version).__name__}")
    return int.__int__(version)


def check_on_error(owner: str, value: object) -> OnError:
    """``value`` when it is ``"open"`` or ``"closed"``; ``TypeError``/``ConfigError`` naming
    ``owner.on_error`` otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{owner}.on_error must be a str, got {type(value).__name__}")
    if value == "open":
        return "open"
    if value == "closed":
        return "closed"
    raise ConfigError(f"{owner}.on_error", f"must be 'open' or 'closed', got {value!r}")


def key_text(name: bytes) -> str:
    """A session key as log records and messages show it."""
    return name.decode("utf-8", "backslashreplace")


V = TypeVar("V")


class Expiring(Generic[V]):
    """A map whose items expire at a time given with each write; not thread-safe (its owner
    holds a lock). O(1) per operation, amortised: items are kept in the order of their last
    write, and each write drops the expired items at the old end. An item that outlives the
    TTL behind a longer-lived one stays until that one goes, but is never returned."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: OrderedDict[bytes, Tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: bytes, now: float) -> Optional[V]:
        """The item, or ``None`` when there is none or it has expired (it is then dropped)."""
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] <= now:
            del self._items[key]
            return None
        return item[1]

    def put(self, key: bytes, value: V, expires_at: float, now: float) -> None:
        """Store ``value`` until ``expires_at``, and drop the oldest items that have expired."""
        self._items[key] = (expires_at, value)
        self._items.move_to_end(key)
        while self._items:
            oldest_key, (oldest_expiry, _) = next(iter(self._items.items()))
            if oldest_expiry > now:
                return
            del self._items[oldest_key]

    def pop(self, key: bytes) -> None:
        """Drop the item, if there is one."""
        self._items.pop(key, None)


# Optimistic attempts of MemoryStore.update before it runs `fn` under the store's lock.
_OPTIMISTIC_ATTEMPTS = 4


class MemoryStore:
    """The embedded store: entries in this process's memory, for a gateway that runs as one
    process. Thread-safe; every operation is O(1) (amortised); an entry expires ``ttl_seconds``
    after its last write, so the store holds at most the sessions written within one TTL.

    Args:
        clock: zero-argument callable returning seconds (default: a monotonic clock); the TTLs
            count on it.
    """

    __slots__ = ("_clock", "_lock", "_entries", "_versions")

    def __init__(self, *, clock: Optional[Callable[[], float]] = None) -> None:
        self._clock = time.monotonic if clock is None else clock
        # Reentrant: an update's `fn` that runs under the lock may still read the store.
        self._lock = threading.RLock()
        self._entries: Expiring[Entry] = Expiring()
        # One counter for every key, so a version is never reused, even by a deleted key's
        # successor: a writer holding an old version cannot mistake a new entry for its own.
        self._versions = itertools.count(1)

    def __len__(self) -> int:
        """The number of entries held, counting expired ones not yet dropped."""
        with self._lock:
            return len(self._entries)

    def load(self, key: SessionKey) -> Optional[Entry]:
        """See :meth:`Store.load`."""
        name = check_session_key(key)
        now = self._clock()
        with self._lock:
            return self._entries.get(name, now)

    def compare_and_set(self, key: SessionKey, expected_version: Optional[int], data: bytes, ttl_seconds: float) -> Optional[int]:
        """See :meth:`Store.compare_and_set`."""
        name = check_session_key(key)
        expected = check_version(expected_version)
        data = check_data(data, "data")
        ttl = check_seconds("ttl_seconds", ttl_seconds)
        now = self._clock()
        with self._lock:
            current = self._entries.get(name, now)
            if (None if current is None else current.version) != expected:
                return None
            return self._write(name, data, ttl, now)

    def delete(self, key: SessionKey) -> None:
        """See :meth:`Store.delete`."""
        name = check_session_key(key)
        with self._lock:
            self._entries.pop(name)

    def update(self, key: SessionKey, fn: Update, ttl_seconds: float) -> bytes:
        """See :meth:`Store.update`. ``fn`` runs outside the store's lock; only when other
        threads win the key a few times in a row does it run under the lock, where it cannot
        lose, so an update always completes (``fn`` may read the store, never write it)."""
        name = check_session_key(key)
        ttl = check_seconds("ttl_seconds", ttl_seconds)
        with self._lock:
            seen = self._entries.get(name, self._clock())
        for _ in range(_OPTIMISTIC_ATTEMPTS):
            data = apply(fn, None if seen is None else seen.data)
            now = self._clock()
            with self._lock:
                current = self._entries.get(name, now)
                # Entries are immutable and each write makes a new one: identity is "unchanged".
                if current is seen:
                    self._write(name, data, ttl, now)
                    return data
            seen = current
        with self._lock:
            now = self._clock()
            current = self._entries.get(name, now)
            data = apply(fn, None if current is None else current.data)
            self._write(name, data, ttl, now)
            return data

    def _write(self, name: bytes, data: bytes, ttl: float, now: float) -> int:
        version = next(self._versions)
        self._entries.put(name, Entry(version, data), now + ttl, now)
        return version


def apply(fn: Update, data: Optional[bytes]) -> bytes:
    """``fn(data)``; ``TypeError`` unless it returns bytes."""
    return check_data(fn(data), "the result of update's fn")


class _Turn:
    __slots__ = ("lock", "waiting")

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.waiting = 0


class KeyTurns:
    """One update at a time per key among a store's threads: the rest wait their turn, so they
    never race each other to Redis and each starts from the copy the previous one left.
    Holds a lock only for the keys being updated."""

    __slots__ = ("_lock", "_turns")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: Dict[bytes, _Turn] = {}

    def take(self, name: bytes) -> _Turn:
        """Wait for ``name``'s turn and take it; hand it back with :meth:`give_back` (a
        ``try``/``finally`` pair: cheaper than a context manager on every update)."""
        with self._lock:
            turn = self._turns.get(name) or self._turns.setdefault(name, _Turn(threading.Lock()))
            turn.waiting += 1
        turn.lock.acquire()
        return turn

    def give_back(self, name: bytes, turn: _Turn) -> None:
        """End the turn :meth:`take` gave."""
        turn.lock.release()
        with self._lock:
            turn.waiting -= 1
            if not turn.waiting:
                del self._turns[name]


class AsyncKeyTurns:
    """:class:`KeyTurns` for the tasks of one event loop."""

    __slots__ = ("_turns",)

    def __init__(self) -> None:
        self._turns: Dict[bytes, _Turn] = {}

    @contextlib.asynccontextmanager
    async def turn(self, name: bytes) -> AsyncIterator[None]:
        """Wait for ``name``'s turn and hold it for the ``async with`` block."""
        turn = self._turns.get(name) or self._turns.setdefault(name, _Turn(asyncio.Lock()))
        turn.waiting += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.waiting -= 1
            if not turn.waiting:
                del self._turns[name]


# The retry backoff during an outage: after a failure, calls are served without the server for
# this long, then one call tries it again; each failed try doubles the wait, up to the maximum.
# Short, so the shared state is back within seconds of the server; a try costs at most the
# store's timeout, and only the one caller that makes it pays that.
OUTAGE_BACKOFF_FIRST = 0.1
OUTAGE_BACKOFF_MAX = 2.0


class Outage:
    """The outage bookkeeping and policy of a store that can fail, shared by its threads.

    A store asks :meth:`may_call` before each call to its server and reports the result with
    :meth:`failed` or :meth:`succeeded`. The first failure starts an outage and logs one warning;
    while the outage lasts, calls within the backoff are refused without touching the network,
    and the first call after it is let through as a probe. The first success ends the outage
    and logs one info record. Under ``on_error="closed"`` refusals and failures raise
    :class:`~doomloop.errors.StoreUnavailable`; under ``"open"`` the store serves locally.
    """

    __slots__ = ("on_error", "_server", "_lock", "_since", "_backoff", "_next_try", "_probing", "_missed")

    def __init__(self, on_error: OnError, server: str) -> None:
        self.on_error = on_error
        self._server = server
        self._lock = threading.Lock()
        self._since: Optional[float] = None
        self._backoff = OUTAGE_BACKOFF_FIRST
        self._next_try = 0.0
        # Whether a call let through as a probe has not reported yet: only its failure lengthens
        # the backoff, not those of calls that were already under way when the outage began.
        self._probing = False
        # Calls of the current outage that did not reach the server (served locally or refused).
        self._missed = 0

    def may_call(self, *, always_raise: bool = False) -> bool:
        """Whether to call the server now. ``False`` within an outage's backoff under
        fail-open; raises ``StoreUnavailable`` there under fail-closed (or ``always_raise``)."""
        if self._since is None:
            return True
        with self._lock:
            now = time.monotonic()
            if self._since is None:
                return True
            if now >= self._next_try:
                # This caller is the probe; the others keep to local state until it reports.
                self._next_try = now + self._backoff
                self._probing = True
                return True
            self._missed += 1
            if self.on_error == "closed" or always_raise:
                wait = self._next_try - now
                raise StoreUnavailable(f"the store at {self._server} is unavailable; next attempt in {wait:.2f} s")
            return False

    def failed(self, name: bytes, error: BaseException) -> None:
        """Record a failed call (see :meth:`unavailable`); raises the ``StoreUnavailable``
        under fail-closed."""
        unavailable = self.unavailable(name, error)
        if self.on_error == "closed":
            raise unavailable from error

    def unavailable(self, name: bytes, error: BaseException) -> StoreUnavailable:
        """Record a failed call: it starts an outage (one warning) or lengthens the backoff.
        Returns the ``StoreUnavailable`` to raise for it."""
        with self._lock:
            now = time.monotonic()
            starts = self._since is None
            if starts:
                self._since = now
                self._backoff = OUTAGE_BACKOFF_FIRST
                self._missed = 0
            elif self._probing:
                self._backoff = min(self._backoff * 2, OUTAGE_BACKOFF_MAX)
            self._probing = False
            self._next_try = now + self._backoff
            self._missed += 1
        # Logged outside the lock: handlers are the application's code.
        if starts:
            _log.warning(
                "doomloop: the store at %s is unavailable (%s); %s until it is back",
                self._server,
                _describe(error),
                "calls fail" if self.on_error == "closed" else "sessions are served from local state",
                extra=_extra(name, server=self._server, error=_describe(error)),
            )
        return StoreUnavailable(f"the store at {self._server} is unavailable: {_describe(error)}")

    def succeeded(self, name: bytes) -> None:
        """Record a successful call: ends the outage, if there was one (one info record)."""
        if self._since is None:
            return
        with self._lock:
            if self._since is None:
                return
            lasted, missed = time.monotonic() - self._since, self._missed
            self._since = None
            self._probing = False
            self._backoff = OUTAGE_BACKOFF_FIRST
        _log.info(
            "doomloop: the store at %s is back after %.1f s; %d calls did not reach it meanwhile",
            self._server,
            lasted,
            missed,
            extra=_extra(name, server=self._server, outage_seconds=lasted, missed_calls=missed),
        )

    def warn(self, name: bytes, message: str, *args: object) -> None:
        """Log a warning about one key (a corrupt entry, a contended key), with its fields."""
        _log.warning(message, *args, extra=_extra(name, server=self._server))


def _extra(name: bytes, **fields: object) -> Dict[str, object]:
    return {"session_key": key_text(name), **fields}


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
