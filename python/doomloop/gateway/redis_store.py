"""Stores in Redis, shared by every gateway process that serves a session: :class:`RedisStore`
(redis-py's client) and :class:`AsyncRedisStore` (its asyncio client). redis-py is imported
when a store is made, never by importing this module.

Each session is one Redis hash ``{v: version, d: data}`` under ``prefix + key``, with the TTL
restarted on every write. Writes are a compare-and-set in one Lua script (EVALSHA; redis-py
loads it on ``NOSCRIPT``) which, on a conflict, replies with the entry that won, so a retry
needs no read, and keeps a queue of the writers that keep losing, so that under sustained
contention each gets its turn. Each store keeps a local copy of the last entry it wrote per
key: when the same replica serves a session's next call, as it usually does, an update is one
round trip.

Both stores run the same logic: :class:`_Core`'s methods are generators that yield the Redis
calls to make and receive their replies, and each store only makes the calls, with or
without ``await``. See docs/gateway-stores.md.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Generator, NamedTuple, Optional, Tuple, TypeVar, Union, cast
from urllib.parse import urlsplit

from .._extras import install_hint
from ..errors import ConfigError, StoreCorrupt, StoreUnavailable
from .store import (
    AsyncKeyTurns,
    Entry,
    Expiring,
    KeyTurns,
    OnError,
    Outage,
    SessionKey,
    Update,
    apply,
    check_data,
    check_on_error,
    check_seconds,
    check_session_key,
    check_version,
    key_text,
)

if TYPE_CHECKING:
    import redis
    import redis.asyncio
    from redis.commands.core import AsyncScript, Script

__all__ = ["AsyncRedisStore", "RedisStore"]

# The version of the entry at KEYS[1]; nil when the key does not exist; false and what is wrong
# when it holds something else. Versions stay below 2^53, where Lua's numbers are exact. The
# optional field q is the queue of writers waiting for their turn (see the CAS script); c was
# an earlier release's contention mark, accepted and dropped on the next write (the fourth
# value says whether it is there). The data is not read here: a write that succeeds never
# needs it, and it may be large. The common case costs three calls: HMGET, HEXISTS and HLEN
# (the key's type is asked only when HMGET fails, and whether it exists only when it has no v).
_READ = """
local function read()
  local fields = redis.pcall('HMGET', KEYS[1], 'v', 'c', 'q')
  if fields['err'] then
    return false, 'the key holds a ' .. redis.call('TYPE', KEYS[1])['ok'] .. ', not a hash'
  end
  local version = fields[1]
  if not version and redis.call('EXISTS', KEYS[1]) == 0 then return nil end
  if not version or redis.call('HEXISTS', KEYS[1], 'd') == 0
      or redis.call('HLEN', KEYS[1]) ~= 2 + (fields[2] and 1 or 0) + (fields[3] and 1 or 0) then
    return false, 'the hash does not have exactly the fields v and d (and q)'
  end
  if not string.match(version, '^[1-9]%d*$') or tonumber(version) >= 9007199254740992 then
    return false, 'the version is not a positive integer below 2^53'
  end
  return version, nil, fields[3], fields[2] ~= false
end
"""

# ARGV: the expected version ('' when the key must have no entry), the data, the TTL in ms, '1'
# to overwrite a corrupt entry, the writer's token ('' for none), '1' when the writer queues
# for a turn should it lose, and the lease in ms. Replies {1, new version} when written; on a
# conflict {0} (no entry) or {0, version, data}; {2, place} while other writers queue before it
# (nothing written); {-1, what is wrong} for a corrupt entry.
#
# The queue makes contention fair: a writer that loses joins it (when it will try again), and
# while it is not empty only its head may write, so every loser gets its turn in order instead
# of racing writers whose round trips happen to be shorter. Each writer in it is stamped with
# the server's clock each time it calls; one not heard from for a lease (it gave up, or its
# process died) is dropped.
#
# The common write (the expected version, no queue, no contention mark) makes five calls:
# the three of read(), then HSET and PEXPIRE; the server's clock is read only for a queue or a
# new entry.
_CAS = (
    _READ
    + """
local version, problem, q, marked = read()
if version == false then
  if ARGV[4] ~= '1' then return {-1, problem} end
  redis.call('DEL', KEYS[1])
  version, q, marked = nil, nil, false
end
local token, lease = ARGV[5], tonumber(ARGV[7])
local clock, now = nil, nil
local function tick()
  if not clock then
    clock = redis.call('TIME')
    now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  end
  return now
end
local queue, place = {}, nil
if q then
  tick()
  for writer, heard in string.gmatch(q, '(%w+):(%d+)') do
    if writer == token then
      queue[#queue + 1] = {writer, now}
      place = #queue
    elseif now - tonumber(heard) < lease then
      queue[#queue + 1] = {writer, tonumber(heard)}
    end
  end
end
local function join()
  if token ~= '' and ARGV[6] == '1' and not place then
    queue[#queue + 1] = {token, tick()}
    place = #queue
  end
end
local function save()
  if #queue == 0 then
    if q then redis.call('HDEL', KEYS[1], 'q') end
    return
  end
  local parts = {}
  for i, entry in ipairs(queue) do parts[i] = entry[1] .. ':' .. string.format('%d', entry[2]) end
  redis.call('HSET', KEYS[1], 'q', table.concat(parts, ' '))
end
if #queue > 0 and place ~= 1 then
  join()
  save()
  return {2, place or #queue + 1}
end
local new
if version == nil then
  if ARGV[1] ~= '' then return {0} end
  -- A new entry starts at the server's clock in microseconds: above every version an earlier
  -- entry of the key reached, so a writer that still holds one of those conflicts.
  tick()
  new = clock[1] .. string.format('%06d', tonumber(clock[2]))
elseif version ~= ARGV[1] then
  join()
  save()
  return {0, version, redis.call('HGET', KEYS[1], 'd')}
else
  new = string.format('%.0f', tonumber(version) + 1)
end
if place == 1 then table.remove(queue, 1) end
redis.call('HSET', KEYS[1], 'v', new, 'd', ARGV[2])
if marked then redis.call('HDEL', KEYS[1], 'c') end
save()
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, new}
"""
)

# Replies as the CAS script's conflicts do: {0} or {0, version, data}; {-1, what is wrong}.
_LOAD = (
    _READ
    + """
local version, problem = read()
if version == nil then return {0} end
if version == false then return {-1, problem} end
return {0, version, redis.call('HGET', KEYS[1], 'd')}
"""
)


class _Call(NamedTuple):
    """A Redis call for a store to make: ``op`` is ``"cas"``, ``"load"`` or ``"delete"``."""

    op: str
    key: bytes
    args: Tuple[Union[bytes, int], ...] = ()


class _Sleep(NamedTuple):
    """A pause for a store to make before its next call."""

    seconds: float


class _Committed(NamedTuple):
    version: int


class _Wait(NamedTuple):
    """Other writers queue for the key before this one: nothing was written."""

    place: int


class _Corrupt(NamedTuple):
    problem: str


class _Failure(NamedTuple):
    """A call that raised: the server is unreachable, too slow, or refused it."""

    error: BaseException


# What a call's reply parses to; a delete's is None.
_Reply = Union[_Committed, _Wait, _Corrupt, Entry, None]
T = TypeVar("T")
_Steps = Generator[Union[_Call, _Sleep], Union[_Reply, _Failure], T]


def _parse(reply: Any) -> _Reply:
    status = reply[0]
    if status == 1:
        return _Committed(int(reply[1]))
    if status == 2:
        return _Wait(int(reply[1]))
    if status == -1:
        return _Corrupt(bytes(reply[1]).decode("utf-8", "replace"))
    if len(reply) == 1:
        return None
    return Entry(int(reply[1]), bytes(reply[2]))


class _Local(NamedTuple):
    """A store's local copy of a key."""

    # The version in Redis the copy starts from (None: the key had no entry).
    version: Optional[int]
    data: bytes
    # Whether the copy holds updates Redis lacks (made while it was unreachable).
    pending: bool


_SCHEMES = ("redis", "rediss", "unix")

# A writer that lost this many attempts in a row joins the key's queue when it loses again:
# two writers that meet now and then take turns by racing (the first retry is immediate), and
# only a writer that keeps losing waits for a turn.
_QUEUE_AFTER = 2
# The bounds of the pause (seconds) before a writer waiting in a key's queue asks again.
_POLL = (0.0001, 0.02)
# The longest a writer waits in a key's queue before its update fails (seconds).
_MAX_WAIT = 10.0


class _Core:
    """A Redis store's options, local copies and outage policy, and the logic of each method
    as a generator of Redis calls (see the module docstring)."""

    __slots__ = ("url", "server", "timeout", "retries", "cluster", "outage", "_prefix", "_lock", "_copies", "_token", "_lease")

    def __init__(
        self, owner: str, url: object, prefix: object, timeout: object, on_error: object, retries: object, cluster: object
    ) -> None:
        self.url, self.server = _check_url(owner, url)
        if not isinstance(cluster, bool):
            raise TypeError(f"{owner}.cluster must be a bool, got {type(cluster).__name__}")
        if cluster:
            _check_cluster_url(owner, url)
        self.cluster = cluster
        if not isinstance(prefix, str):
            raise TypeError(f"{owner}.prefix must be a str, got {type(prefix).__name__}")
        self._prefix = prefix.encode("utf-8", "surrogateescape")
        self.timeout = check_seconds(f"{owner}.timeout", timeout)
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise TypeError(f"{owner}.retries must be an int, got {type(retries).__name__}")
        if not 0 <= retries <= 100:
            raise ConfigError(f"{owner}.retries", f"must be in 0..100, got {retries!r}")
        self.retries = int.__int__(retries)
        self.outage = Outage(check_on_error(owner, on_error), self.server)
        self._lock = threading.Lock()
        self._copies: Expiring[_Local] = Expiring()
        # This store's name in a key's queue of writers: one per store, since its updates of a
        # key take turns (a later update finds its place kept). Random, so stores never share one.
        self._token = b"%016x" % random.SystemRandom().getrandbits(64)
        # A writer in a queue not heard from for this long is dropped (ms): two timeouts, so
        # one slow reply does not cost a turn, and a dead process holds none for longer.
        self._lease = max(1, math.ceil(self.timeout * 2000))

    def load(self, key: SessionKey) -> _Steps[Optional[Entry]]:
        """See :meth:`RedisStore.load`."""
        name = check_session_key(key)
        if not self.outage.may_call():
            return self._local_entry(name)
        reply = yield _Call("load", self._prefix + name)
        if isinstance(reply, _Failure):
            self.outage.failed(name, reply.error)
            return self._local_entry(name)
        self.outage.succeeded(name)
        if isinstance(reply, _Corrupt):
            self._corrupt(name, reply.problem, "it reads as no entry, and the next update overwrites it")
        return reply if isinstance(reply, Entry) else None

    def compare_and_set(
        self, key: SessionKey, expected_version: Optional[int], data: bytes, ttl_seconds: float
    ) -> _Steps[Optional[int]]:
        """See :meth:`RedisStore.compare_and_set`."""
        name = check_session_key(key)
        expected = check_version(expected_version)
        data = check_data(data, "data")
        ttl = check_seconds("ttl_seconds", ttl_seconds)
        self.outage.may_call(always_raise=True)
        reply = yield self._cas(name, expected, data, ttl, reset=False)
        if isinstance(reply, _Failure):
            raise self.outage.unavailable(name, reply.error) from reply.error
        self.outage.succeeded(name)
        if isinstance(reply, _Corrupt):
            raise StoreCorrupt(self._corrupt_message(name, reply.problem))
        if isinstance(reply, _Committed):
            self._keep(name, _Local(reply.version, data, pending=False), ttl)
            return reply.version
        return None  # a conflict, or other writers queue for the key before this call

    def delete(self, key: SessionKey) -> _Steps[None]:
        """See :meth:`RedisStore.delete`."""
        name = check_session_key(key)
        with self._lock:
            self._copies.pop(name)
        if not self.outage.may_call():
            return
        reply = yield _Call("delete", self._prefix + name)
        if isinstance(reply, _Failure):
            self.outage.failed(name, reply.error)
            return
        self.outage.succeeded(name)

    def update(self, key: SessionKey, fn: Update, ttl_seconds: float) -> _Steps[bytes]:
        """See :meth:`RedisStore.update`."""
        name = check_session_key(key)
        ttl = check_seconds("ttl_seconds", ttl_seconds)
        local = self._local(name)
        # What the next attempt builds on: the last entry seen, or the local copy.
        expected = None if local is None else local.version
        base = None if local is None else local.data
        pending = local is not None and local.pending
        reset = False
        lost = 0
        waiting_since: Optional[float] = None
        data = apply(fn, base)
        while lost <= self.retries:
            if not self.outage.may_call():
                return self._keep_pending(name, expected, data, ttl)
            sent = time.monotonic()
            # Queue for a turn on losing only when there is another attempt to take it.
            reply = yield self._cas(name, expected, data, ttl, reset=reset, queue=_QUEUE_AFTER <= lost < self.retries)
            if isinstance(reply, _Failure):
                self.outage.failed(name, reply.error)
                return self._keep_pending(name, expected, data, ttl)
            self.outage.succeeded(name)
            if isinstance(reply, _Committed):
                self._keep(name, _Local(reply.version, data, pending=False), ttl)
                return data
            if isinstance(reply, _Wait):
                # Writers before this one in the key's queue: not a lost attempt. The same write
                # is sent again after a fraction of a round trip (random, so waiters do not call
                # in step): a turn takes one or two round trips, and a longer pause leaves the
                # key idle once the writer before is done.
                now = time.monotonic()
                waiting_since = sent if waiting_since is None else waiting_since
                if now - waiting_since >= _MAX_WAIT:
                    break
                yield _Sleep(min(max((now - sent) * random.uniform(0.25, 0.75), _POLL[0]), _POLL[1]))
                continue
            if isinstance(reply, _Corrupt):
                self._corrupt(name, reply.problem, "it is overwritten")
                # Built on the local copy, if there is one: the last good state this replica knows.
                # Not a lost attempt: the next one overwrites the entry if it is still corrupt.
                expected, reset = None, True
                continue
            lost += 1
            if isinstance(reply, Entry):
                expected, base, pending = reply.version, reply.data, False
                # Kept even if every attempt loses: the next call then starts from it.
                self._keep(name, _Local(expected, base, pending=False), ttl)
            elif pending:
                # Redis lost the key (a restart without persistence) while this replica made
                # updates it lacks: they are the freshest state there is, so they are written back.
                expected, pending = None, False
            else:
                expected, base = None, None
            data = apply(fn, base)
        starved = lost <= self.retries  # the wait for a turn ran out, not the attempts
        if self.outage.on_error == "closed":
            why = f"waited over {_MAX_WAIT:g} s for its turn behind" if starved else f"{lost} attempts all lost to"
            raise StoreUnavailable(f"session {key_text(name)!r}: {why} other writers")
        self.outage.warn(
            name,
            "doomloop: session %r %s other writers of the store at %s; its update is kept locally",
            key_text(name),
            f"waited over {_MAX_WAIT:g} s for its turn behind" if starved else f"lost {lost} attempts in a row to",
            self.server,
        )
        return self._keep_pending(name, expected, data, ttl)

    def _cas(self, name: bytes, expected: Optional[int], data: bytes, ttl: float, *, reset: bool, queue: bool = False) -> _Call:
        version = b"" if expected is None else b"%d" % expected
        # Milliseconds, rounded up: a TTL never ends early, and is never 0 (which Redis rejects).
        ttl_ms = max(1, math.ceil(ttl * 1000))
        flags = (b"1" if reset else b"0", self._token, b"1" if queue else b"0", self._lease)
        return _Call("cas", self._prefix + name, (version, data, ttl_ms, *flags))

    def _local(self, name: bytes) -> Optional[_Local]:
        now = time.monotonic()
        with self._lock:
            return self._copies.get(name, now)

    def _local_entry(self, name: bytes) -> Optional[Entry]:
        local = self._local(name)
        return None if local is None else Entry(local.version or 0, local.data)

    def _keep(self, name: bytes, local: _Local, ttl: float) -> None:
        now = time.monotonic()
        with self._lock:
            self._copies.put(name, local, now + ttl, now)

    def _keep_pending(self, name: bytes, expected: Optional[int], data: bytes, ttl: float) -> bytes:
        self._keep(name, _Local(expected, data, pending=True), ttl)
        return data

    def _corrupt(self, name: bytes, problem: str, remedy: str) -> None:
        if self.outage.on_error == "closed":
            raise StoreCorrupt(self._corrupt_message(name, problem))
        self.outage.warn(name, "doomloop: %s; %s", self._corrupt_message(name, problem), remedy)

    def _corrupt_message(self, name: bytes, problem: str) -> str:
        return f"the entry of session {key_text(name)!r} in the store at {self.server} is corrupt: {problem}"


def _check_url(owner: str, url: object) -> Tuple[str, str]:
    """``url`` and the server it names as logs show it (no credentials); TypeError/ConfigError
    naming ``owner.url`` otherwise. The URL itself never goes into a message: it may hold a password."""
    if not isinstance(url, str):
        raise TypeError(f"{owner}.url must be a str, got {type(url).__name__}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{owner}.url", "is not a valid URL") from None
    if parts.scheme not in _SCHEMES:
        raise ConfigError(f"{owner}.url", f"must start with redis://, rediss:// or unix://, got scheme {parts.scheme!r}")
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigError(f"{owner}.url", "names no socket path")
        return url, f"unix://{parts.path}"
    return url, f"{parts.scheme}://{parts.hostname or 'localhost'}:{port or 6379}"


def _check_cluster_url(owner: str, url: object) -> None:
    # A cluster has one database, 0, and no unix sockets: a URL naming either is a mistake.
    parts = urlsplit(str(url))
    if parts.scheme == "unix":
        raise ConfigError(f"{owner}.url", "a Redis Cluster is reached by redis:// or rediss://, not a unix socket")
    if parts.path.strip("/") not in ("", "0"):
        raise ConfigError(f"{owner}.url", f"a Redis Cluster has only database 0, the URL names {parts.path.strip('/')!r}")


def _redis_missing(error: ImportError) -> ImportError:
    missing = ImportError(f"a Redis store needs redis-py: {install_hint('redis')}")
    missing.__cause__ = error
    return missing


class RedisStore:
    """A :class:`~doomloop.gateway.Store` in Redis, for gateway processes that share sessions
    (redis-py's client; thread-safe). No connection is made until the first call.

    Args:
        url: ``redis://``, ``rediss://`` (TLS) or ``unix://`` URL, as redis-py reads it.
        prefix: prepended to every session key to make its Redis key.
        timeout: seconds to wait for a connection or a reply before the call counts as failed.
        on_error: ``"open"`` (the default): when Redis is unreachable or slow, serve from this
            process's local copies, log one warning per outage and one info record when Redis is
            back, and raise nothing; ``"closed"``: raise :class:`~doomloop.errors.StoreUnavailable`
            (and :class:`~doomloop.errors.StoreCorrupt` for a corrupt entry).
        retries: how many times :meth:`update` tries again after losing to another writer (a
            writer that keeps losing queues for a turn, so the default is never used up by
            contention alone; see docs/gateway-stores.md).
        cluster: ``url`` names a node of a Redis Cluster (redis-py's ``RedisCluster`` client,
            which finds the others): every call touches one key, so it runs on that key's node.
    """

    __slots__ = ("_core", "_connect", "_client", "_connecting", "_failures", "_turns")

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "doomloop:",
        timeout: float = 0.5,
        on_error: OnError = "open",
        retries: int = 64,
        cluster: bool = False,
    ) -> None:
        self._core = _Core("RedisStore", url, prefix, timeout, on_error, retries, cluster)
        try:
            import redis
            import redis.cluster
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as error:
            raise _redis_missing(error) from error
        core = self._core
        kind: Any = redis.cluster.RedisCluster if cluster else redis.Redis

        def connect() -> Tuple[Any, Script, Script]:
            # No retries inside redis-py: a resent script after a lost reply could apply an
            # update twice, and the outage backoff already decides when to try again.
            client = kind.from_url(
                core.url, socket_timeout=core.timeout, socket_connect_timeout=core.timeout, retry=Retry(NoBackoff(), 0)
            )
            return client, client.register_script(_CAS), client.register_script(_LOAD)

        # Made on the first call: a cluster client reaches the cluster as it is made, and no
        # store connects before its first call (an unreachable one counts as an outage then).
        self._connect = connect
        self._client: Optional[Tuple[Any, Script, Script]] = None
        self._connecting = threading.Lock()
        self._failures = (redis.RedisError, redis.exceptions.RedisClusterException, OSError)
        self._turns = KeyTurns()

    def load(self, key: SessionKey) -> Optional[Entry]:
        """The key's entry, or ``None``. Under fail-open, when Redis cannot be reached: this
        process's local copy of the key (version 0 if Redis never had it), or ``None``; a
        corrupt entry is logged and reads as ``None``."""
        return self._run(self._core.load(key))

    def compare_and_set(self, key: SessionKey, expected_version: Optional[int], data: bytes, ttl_seconds: float) -> Optional[int]:
        """See :meth:`~doomloop.gateway.Store.compare_and_set`. The primitive under
        :meth:`update`, so it has no local answer to give: it raises ``StoreUnavailable`` or
        ``StoreCorrupt`` under either policy."""
        return self._run(self._core.compare_and_set(key, expected_version, data, ttl_seconds))

    def delete(self, key: SessionKey) -> None:
        """Remove the key's entry and the local copy. Under fail-open, when Redis cannot be
        reached, the entry stays until its TTL ends."""
        self._run(self._core.delete(key))

    def update(self, key: SessionKey, fn: Update, ttl_seconds: float) -> bytes:
        """See :meth:`~doomloop.gateway.Store.update`: one round trip when this process wrote
        the key last, one more per conflict with another process, up to ``retries`` more. The
        updates of one key from this store's threads take turns, so they never conflict with
        each other (``fn`` must not call the store). Under fail-open, when Redis cannot be
        reached (or the key stays contended), ``fn`` is applied to the local copy, which is
        written back when Redis is reachable again unless another process wrote the key
        meanwhile; a corrupt entry is logged and overwritten."""
        name = check_session_key(key)
        turns = self._turns
        turn = turns.take(name)
        try:
            return self._run(self._core.update(name, fn, ttl_seconds))
        finally:
            turns.give_back(name, turn)

    def close(self) -> None:
        """Close the connections (a later call opens new ones)."""
        with self._connecting:
            made, self._client = self._client, None
        if made is not None:
            made[0].close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, steps: _Steps[T]) -> T:
        reply: Union[_Reply, _Failure] = None
        while True:
            try:
                call = steps.send(reply)
            except StopIteration as stop:
                return cast(T, stop.value)
            if isinstance(call, _Sleep):
                time.sleep(call.seconds)
                reply = None
                continue
            try:
                client, cas, load = self._connection()
                if call.op == "delete":
                    client.delete(call.key)
                    reply = None
                else:
                    reply = _parse((cas if call.op == "cas" else load)(keys=[call.key], args=call.args))
            except self._failures as error:
                reply = _Failure(error)

    def _connection(self) -> Tuple[Any, Script, Script]:
        made = self._client
        if made is None:
            with self._connecting:
                made = self._client
                if made is None:
                    made = self._client = self._connect()
        return made


class _LoopClient(NamedTuple):
    """An :class:`AsyncRedisStore`'s client for one event loop: redis-py's asyncio connections
    (and the locks its tasks take turns on) belong to the loop they were made on."""

    client: redis.asyncio.Redis
    cas: AsyncScript
    load: AsyncScript
    turns: AsyncKeyTurns


class AsyncRedisStore:
    """:class:`RedisStore` on redis-py's asyncio client: the same arguments, and the same
    methods as coroutines (an :class:`~doomloop.gateway.AsyncStore`). Its tasks take turns on a
    key as RedisStore's threads do; ``fn`` passed to :meth:`update` stays a plain function.

    The store may be made anywhere, at import time too, before any event loop runs: its
    client is made on the first call from each event loop, for that loop (redis-py's asyncio
    connections belong to the loop that opened them). So a service that runs ``asyncio.run``
    twice, or a test framework that starts a loop per test, can keep one store; connections a
    loop that has since closed left open are dropped with it. :meth:`aclose` closes the
    running loop's connections: call it before that loop ends (an ASGI ``lifespan``'s
    shutdown), as docs/gateway.md shows.
    """

    __slots__ = ("_core", "_connect", "_clients", "_lock", "_failures")

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "doomloop:",
        timeout: float = 0.5,
        on_error: OnError = "open",
        retries: int = 64,
        cluster: bool = False,
    ) -> None:
        self._core = _Core("AsyncRedisStore", url, prefix, timeout, on_error, retries, cluster)
        try:
            import redis
            import redis.asyncio
            import redis.asyncio.cluster
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError as error:
            raise _redis_missing(error) from error
        core = self._core
        kind: Any = redis.asyncio.cluster.RedisCluster if cluster else redis.asyncio.Redis

        def connect() -> _LoopClient:
            # No retries inside redis-py: see RedisStore.
            client = kind.from_url(
                core.url, socket_timeout=core.timeout, socket_connect_timeout=core.timeout, retry=Retry(NoBackoff(), 0)
            )
            return _LoopClient(client, client.register_script(_CAS), client.register_script(_LOAD), AsyncKeyTurns())

        self._connect = connect
        # Weak: a loop that is gone takes its client with it.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._failures = (redis.RedisError, redis.exceptions.RedisClusterException, OSError)

    def _client(self) -> _LoopClient:
        """The running loop's client, made on its first call (a RuntimeError outside a loop)."""
        loop = asyncio.get_running_loop()
        bound = self._clients.get(loop)
        if bound is None:
            with self._lock:
                bound = self._clients.get(loop)
                if bound is None:
                    bound = self._clients[loop] = self._connect()
        return bound

    async def load(self, key: SessionKey) -> Optional[Entry]:
        """See :meth:`RedisStore.load`."""
        return await self._run(self._core.load(key))

    async def compare_and_set(
        self, key: SessionKey, expected_version: Optional[int], data: bytes, ttl_seconds: float
    ) -> Optional[int]:
        """See :meth:`RedisStore.compare_and_set`."""
        return await self._run(self._core.compare_and_set(key, expected_version, data, ttl_seconds))

    async def delete(self, key: SessionKey) -> None:
        """See :meth:`RedisStore.delete`."""
        await self._run(self._core.delete(key))

    async def update(self, key: SessionKey, fn: Update, ttl_seconds: float) -> bytes:
        """See :meth:`RedisStore.update`."""
        name = check_session_key(key)
        async with self._client().turns.turn(name):
            return await self._run(self._core.update(name, fn, ttl_seconds))

    async def aclose(self) -> None:
        """Close the running loop's connections (a later call opens new ones)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            bound = self._clients.pop(loop, None)
        if bound is not None:
            await bound.client.aclose()

    async def __aenter__(self) -> AsyncRedisStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _run(self, steps: _Steps[T]) -> T:
        bound = self._client()
        reply: Union[_Reply, _Failure] = None
        while True:
            try:
                call = steps.send(reply)
            except StopIteration as stop:
                return cast(T, stop.value)
            if isinstance(call, _Sleep):
                await asyncio.sleep(call.seconds)
                reply = None
                continue
            try:
                if call.op == "delete":
                    await bound.client.delete(call.key)
                    reply = None
                else:
                    reply = _parse(await (bound.cas if call.op == "cas" else bound.load)(keys=[call.key], args=call.args))
            except self._failures as error:
                reply = _Failure(error)
