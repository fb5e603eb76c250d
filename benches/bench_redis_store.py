"""Benchmarks of the gateway's Redis store: round trips per update, latency per update on
loopback (p50 and p99 too), the throughput of 4 processes on one key and on distinct keys, and
the latency of a tool call (before and after, two updates) through the session registries,
sync (SessionRegistry on RedisStore) and asyncio (AsyncSessionRegistry on AsyncRedisStore).

The reference, timed in the same run, is the textbook redis-py optimistic update: WATCH the
key, read it (HGETALL), then MULTI / HSET / PEXPIRE / EXEC (three round trips, the last
pipelined).

Run: ``python -m pytest benches/bench_redis_store.py --benchmark-enable -s`` against
``DOOMLOOP_REDIS_URL``, or a private ``redis-server`` the run starts (see
tests/gateway/redis_helpers.py). Without ``--benchmark-enable`` each body runs a few updates,
as a plain test, and checks its result.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any, Awaitable, Callable, Dict, Iterator, List

import pytest

from doomloop.gateway import AsyncRedisStore, AsyncSessionRegistry, MemoryStore, RedisStore, SessionRegistry
from redis_helpers import bump, calls, client, count_worker, counted, made_since, run_workers, server_url, tool_call_worker

TTL = 600
SIZES = [256, 4096, 65536]


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with server_url() as url:
        yield url


@pytest.fixture
def prefix() -> str:
    return f"doomloop-bench:{uuid.uuid4().hex}:"


def counter(blob: bytes) -> int:
    return int.from_bytes(blob[:8], "big")


def watch_update(connection: Any, key: str, fn: Callable[[bytes], bytes]) -> bytes:
    """The reference: an optimistic update with WATCH / MULTI / EXEC."""
    import redis

    with connection.pipeline() as pipe:
        while True:
            try:
                pipe.watch(key)
                data = fn(pipe.hgetall(key).get(b"d"))
                pipe.multi()
                pipe.hset(key, "d", data)
                pipe.pexpire(key, TTL * 1000)
                pipe.execute()
                return data
            except redis.WatchError:
                continue


def percentiles(update: Callable[[], object], count: int) -> List[float]:
    """p50 and p99 of ``count`` timed calls, in microseconds."""
    times = []
    for _ in range(count):
        began = time.perf_counter_ns()
        update()
        times.append((time.perf_counter_ns() - began) / 1000)
    return p50_p99(times)


async def async_percentiles(update: Callable[[], Awaitable[object]], count: int) -> List[float]:
    """:func:`percentiles` of a coroutine function, timed inside the event loop."""
    times = []
    for _ in range(count):
        began = time.perf_counter_ns()
        await update()
        times.append((time.perf_counter_ns() - began) / 1000)
    return p50_p99(times)


def p50_p99(times: List[float]) -> List[float]:
    return [statistics.median(times), statistics.quantiles(times, n=100)[98]]


def test_round_trips_per_update(redis_url: str, prefix: str, benchmark: Any) -> None:
    """Round trips of updates in the common path (the store wrote the key last), counted by the
    server (INFO commandstats); the benchmark times the whole batch once."""
    connection = client(redis_url)
    count = 20 if benchmark.disabled else 2000
    store = RedisStore(redis_url, prefix=prefix)
    store.update("s", bump, TTL)

    def batch() -> Dict[str, int]:
        before = calls(connection)
        for _ in range(count):
            store.update("s", bump, TTL)
        return made_since(before, connection)

    ours = benchmark.pedantic(batch, rounds=1, iterations=1)
    store.close()
    before = calls(connection)
    for _ in range(count):
        watch_update(connection, f"{prefix}w", bump)
    theirs = made_since(before, connection)
    connection.close()
    assert ours == {"evalsha": count}
    # WATCH/MULTI: WATCH, HGETALL, then MULTI, HSET, PEXPIRE and EXEC in one pipelined trip
    # (commandstats does not count the HSET and PEXPIRE apart from the scripts' own).
    print(f"\ncommands for {count} updates: RedisStore {ours}; WATCH/MULTI {theirs}")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.benchmark(group="update")
def test_redis_store_update(redis_url: str, prefix: str, size: int, benchmark: Any) -> None:
    with RedisStore(redis_url, prefix=prefix) as store:
        store.update("s", lambda data: counted(size), TTL)
        benchmark(store.update, "s", bump, TTL)
        p50, p99 = percentiles(lambda: store.update("s", bump, TTL), 10 if benchmark.disabled else 5000)
        benchmark.extra_info.update(p50_us=p50, p99_us=p99)
        entry = store.load("s")
        assert entry is not None and len(entry.data) == size and counter(entry.data) > 0
    if not benchmark.disabled:
        print(f"\nRedisStore.update, {size} B: p50 {p50:.0f} us, p99 {p99:.0f} us")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.benchmark(group="update")
def test_watch_multi_update(redis_url: str, prefix: str, size: int, benchmark: Any) -> None:
    connection = client(redis_url)
    key = f"{prefix}w"
    connection.hset(key, "d", counted(size))
    benchmark(watch_update, connection, key, bump)
    p50, p99 = percentiles(lambda: watch_update(connection, key, bump), 10 if benchmark.disabled else 5000)
    benchmark.extra_info.update(p50_us=p50, p99_us=p99)
    assert counter(connection.hget(key, "d")) > 0
    connection.close()
    if not benchmark.disabled:
        print(f"\nWATCH/MULTI update, {size} B: p50 {p50:.0f} us, p99 {p99:.0f} us")


@pytest.mark.benchmark(group="update")
def test_memory_store_update(benchmark: Any) -> None:
    store = MemoryStore()
    store.update("s", lambda data: counted(4096), TTL)
    benchmark(store.update, "s", bump, TTL)
    entry = store.load("s")
    assert entry is not None and counter(entry.data) > 0


def _four_processes(benchmark: Any, url: str, names: List[str], count: int, job: Any, prefix: str) -> Any:
    # `job` in 4 processes on `names` (fail-closed), timed once by the benchmark.
    kwargs = {"job": job, "prefix": prefix, "on_error": "closed"}
    return benchmark.pedantic(run_workers, args=(url, names, 4, count), kwargs=kwargs, rounds=1, iterations=1)


@pytest.mark.parametrize("keys", [1, 4], ids=["one key", "distinct keys"])
def test_throughput_of_four_processes(redis_url: str, prefix: str, keys: int, benchmark: Any) -> None:
    """Four processes updating one shared key, or one key each, at the default settings; the
    benchmark times the run once (process start-up included), the printed rate counts from the
    workers' start, with each update's p50, p99 and maximum latency."""
    # Fail-closed: an update that did not commit (all its attempts lost, or its wait for a turn
    # ran out) fails its worker, so the final counters prove none was lost and none failed.
    count = 50 if benchmark.disabled else 2000
    names = [f"k{n}" for n in range(keys)]
    connection = client(redis_url)
    before = calls(connection)
    taken, seconds = _four_processes(benchmark, redis_url, names, count, count_worker, prefix)
    made = made_since(before, connection)
    total = sum(counter(connection.hget(f"{prefix}{name}", "d")) for name in names)
    assert all(connection.hget(f"{prefix}{name}", "q") is None for name in names)  # no writer left queued
    connection.close()
    assert total == 4 * count
    rate, round_trips = 4 * count / seconds, made.get("evalsha", 0) / (4 * count)
    times = sorted(one for worker in taken.values() for one in worker)
    p50, p99 = (times[min(len(times) - 1, int(len(times) * q))] * 1e6 for q in (0.5, 0.99))
    print(
        f"\n4 processes, {keys} key(s): {rate:,.0f} updates/s, {round_trips:.2f} round trips per update, "
        f"p50 {p50:,.0f} µs, p99 {p99:,.0f} µs, max {times[-1] * 1e6:,.0f} µs"
    )


# A tool call the registries time: distinct arguments and results each time, so no rule fires
# (a warned or blocked call costs more, and logs).
WARM_UP = 50


def test_session_registry_tool_call(redis_url: str, prefix: str, benchmark: Any) -> None:
    """before_tool_call + after_tool_call of one session through SessionRegistry on RedisStore."""
    calls = iter(range(10**9))

    def tool_call() -> None:
        n = next(calls)
        registry.before_tool_call("s", "read", {"p": n})
        registry.after_tool_call("s", "read", {"p": n}, result=f"r{n}")

    with RedisStore(redis_url, prefix=prefix) as store:
        registry = SessionRegistry(store=store)
        for _ in range(WARM_UP):
            tool_call()
        benchmark(tool_call)
        p50, p99 = percentiles(tool_call, 10 if benchmark.disabled else 5000)
        benchmark.extra_info.update(p50_us=p50, p99_us=p99)
        assert registry.get("s").tool_loop.get_stats()["blocks"] == 0
    if not benchmark.disabled:
        print(f"\nSessionRegistry tool call (RedisStore): p50 {p50:.0f} us, p99 {p99:.0f} us")


def test_async_session_registry_tool_call(redis_url: str, prefix: str, benchmark: Any) -> None:
    """The same tool call through AsyncSessionRegistry on AsyncRedisStore; pytest-benchmark's
    figure includes entering the event loop once per call, the percentiles are timed inside it."""
    calls = iter(range(10**9))
    loop = asyncio.new_event_loop()
    store = AsyncRedisStore(redis_url, prefix=prefix)
    registry = AsyncSessionRegistry(store=store)

    async def tool_call() -> None:
        n = next(calls)
        await registry.before_tool_call("s", "read", {"p": n})
        await registry.after_tool_call("s", "read", {"p": n}, result=f"r{n}")

    for _ in range(WARM_UP):
        loop.run_until_complete(tool_call())
    benchmark(lambda: loop.run_until_complete(tool_call()))
    p50, p99 = loop.run_until_complete(async_percentiles(tool_call, 10 if benchmark.disabled else 5000))
    benchmark.extra_info.update(p50_us=p50, p99_us=p99)
    session = loop.run_until_complete(registry.get("s"))
    assert session.tool_loop.get_stats()["blocks"] == 0
    loop.run_until_complete(store.aclose())
    loop.close()
    if not benchmark.disabled:
        print(f"\nAsyncSessionRegistry tool call (AsyncRedisStore): p50 {p50:.0f} us, p99 {p99:.0f} us")


def _beside_raw(tool_calls: List[float], round_trips: List[float]) -> Dict[str, float]:
    # p50 and p99 of the tool calls and of the raw round trips (µs), and each tool call
    # percentile as a multiple of two raw round trips' (a tool call is two hooks).
    call, raw = p50_p99([t * 1e6 for t in tool_calls]), p50_p99([t * 1e6 for t in round_trips])
    return {
        "call_p50_us": call[0],
        "call_p99_us": call[1],
        "raw_p50_us": raw[0],
        "raw_p99_us": raw[1],
        "p50_ratio": call[0] / (2 * raw[0]),
        "p99_ratio": call[1] / (2 * raw[1]),
    }


def _report(label: str, found: Dict[str, float]) -> None:
    print(
        f"\n{label}: tool call p50 {found['call_p50_us']:.0f} µs, p99 {found['call_p99_us']:.0f} µs; "
        f"raw EVALSHA p50 {found['raw_p50_us']:.0f} µs, p99 {found['raw_p99_us']:.0f} µs; "
        f"x{found['p50_ratio']:.2f} / x{found['p99_ratio']:.2f} two raw round trips"
    )


@pytest.mark.parametrize("sessions", [1, 200, 10_000])
def test_tool_call_beside_raw_round_trips(redis_url: str, prefix: str, sessions: int, benchmark: Any) -> None:
    """A tool call through SessionRegistry on RedisStore, round robin over ``sessions``
    sessions of one process, each call timed beside a raw EVALSHA round trip (a script that
    only returns, sent one session's blob) of the same run; the benchmark times the run once."""
    count = 20 if benchmark.disabled else 5000
    keys = [f"s{n}" for n in range(sessions if not benchmark.disabled else min(sessions, 50))]
    with RedisStore(redis_url, prefix=prefix) as store:
        tool_calls, round_trips = benchmark.pedantic(tool_call_worker, args=(store, keys, -1, count), rounds=1, iterations=1)
    found = _beside_raw(tool_calls, round_trips)
    benchmark.extra_info.update(found)
    assert len(tool_calls) == len(round_trips) == count
    if not benchmark.disabled:
        _report(f"{sessions} session(s), one process", found)


@pytest.mark.parametrize("keys", [1, 4], ids=["one session", "distinct sessions"])
def test_tool_calls_of_four_processes_beside_raw_round_trips(redis_url: str, prefix: str, keys: int, benchmark: Any) -> None:
    """The same tool call in 4 processes at once, on one shared session or one session each,
    each call beside a raw round trip of its own process; percentiles over all 4."""
    count = 20 if benchmark.disabled else 2000
    names = ["shared"] if keys == 1 else [f"w{n}" for n in range(keys)]
    results, _ = _four_processes(benchmark, redis_url, names, count, tool_call_worker, prefix)
    tool_calls = [one for calls, _ in results.values() for one in calls]
    round_trips = [one for _, raws in results.values() for one in raws]
    found = _beside_raw(tool_calls, round_trips)
    benchmark.extra_info.update(found)
    assert len(tool_calls) == 4 * count
    if not benchmark.disabled:
        _report(f"4 processes, {'one session' if keys == 1 else 'distinct sessions'}", found)
