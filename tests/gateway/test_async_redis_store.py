"""AsyncRedisStore does what RedisStore does, on redis-py's asyncio client: the same
semantics, the same keys (the two kinds of store share sessions), no update lost between
concurrent tasks and stores, one round trip per update in the common path, corrupt entries
and outages under both policies."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, Coroutine, List, Optional, TypeVar

import pytest

from doomloop.gateway import AsyncRedisStore, AsyncStore, Entry, RedisStore, StoreCorrupt, StoreUnavailable
from redis_helpers import RECORD, RedisServer, calls, client, made_since, records

T = TypeVar("T")


def run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(make())


def append(record: bytes) -> Callable[[Optional[bytes]], bytes]:
    return lambda data: (data or b"") + record


def test_compare_and_set_load_delete_and_update(redis_url: str, prefix: str) -> None:
    async def scenario() -> None:
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            typed: AsyncStore = store
            assert await typed.load("s") is None
            first = await store.compare_and_set("s", None, b"a", 10)
            assert first is not None and await store.load("s") == Entry(first, b"a")
            assert await store.compare_and_set("s", None, b"b", 10) is None
            assert await store.compare_and_set("s", first, b"b", 10) == first + 1
            assert await store.update("s", append(b"c"), 10) == b"bc"
            await store.delete("s")
            assert await store.load("s") is None
            with pytest.raises(TypeError, match="must be bytes"):
                await store.update("s", lambda data: "text", 10)  # type: ignore[arg-type, return-value]

    run(scenario)


def test_sync_and_async_stores_share_sessions(redis_url: str, prefix: str) -> None:
    sync = RedisStore(redis_url, prefix=prefix)

    async def scenario() -> None:
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            sync.update("s", append(b"1"), 60)
            assert await store.update("s", append(b"2"), 60) == b"12"
            assert sync.update("s", append(b"3"), 60) == b"123"
            assert await store.update("s", append(b"4"), 60) == b"1234"

    run(scenario)
    sync.close()


def test_concurrent_tasks_and_stores_lose_no_update(redis_url: str, prefix: str) -> None:
    tasks, count = 8, 150

    async def scenario() -> bytes:
        async with AsyncRedisStore(redis_url, prefix=prefix) as one, AsyncRedisStore(redis_url, prefix=prefix) as two:

            async def work(task: int) -> None:
                store = one if task % 2 else two
                for n in range(count):
                    await store.update("hot", append(RECORD.pack(task, n)), 60)

            await asyncio.gather(*(work(task) for task in range(tasks)))
            entry = await one.load("hot")
            assert entry is not None
            return entry.data

    found = records(run(scenario))
    assert len(found) == tasks * count
    for task in range(tasks):
        assert [n for t, n in found if t == task] == list(range(count))


def test_an_update_is_one_round_trip_in_the_common_path() -> None:
    server = RedisServer()
    server.start()
    try:
        connection = client(server.url)

        async def scenario() -> None:
            async with AsyncRedisStore(server.url) as store:
                await store.update("s", append(b"x"), 60)
                before = calls(connection)
                for _ in range(100):
                    await store.update("s", append(b"x"), 60)
                assert made_since(before, connection) == {"evalsha": 100}

        run(scenario)
        connection.close()
    finally:
        server.kill()


def test_an_entry_expires_with_its_ttl(redis_url: str, prefix: str, raw: Any) -> None:
    async def scenario() -> None:
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            await store.update("s", append(b"a"), 0.3)
            assert 0 < raw.pttl(f"{prefix}s") <= 300
            await asyncio.sleep(0.5)
            assert not raw.exists(f"{prefix}s")
            assert await store.load("s") is None

    run(scenario)


def test_a_corrupt_entry_is_reset_under_fail_open_and_raises_under_fail_closed(
    redis_url: str, prefix: str, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        raw.set(f"{prefix}s", b"junk")
        async with AsyncRedisStore(redis_url, prefix=prefix, on_error="closed") as closed:
            with pytest.raises(StoreCorrupt, match="holds a string"):
                await closed.update("s", append(b"x"), 60)
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            with caplog.at_level(logging.WARNING, logger="doomloop"):
                assert await store.update("s", append(b"x"), 60) == b"x"
            assert [record.session_key for record in caplog.records] == ["s"]  # type: ignore[attr-defined]

    run(scenario)


def test_an_outage_under_both_policies(private_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        opened = AsyncRedisStore(private_redis.url, timeout=0.2)
        closed = AsyncRedisStore(private_redis.url, timeout=0.2, on_error="closed")
        await opened.update("s", append(b"1"), 60)
        private_redis.kill()
        assert await opened.update("s", append(b"2"), 60) == b"12"  # served locally
        assert await opened.update("s", append(b"3"), 60) == b"123"
        with pytest.raises(StoreUnavailable):
            await closed.update("t", append(b"x"), 60)
        private_redis.start()
        back: List[bytes] = []
        for _ in range(500):  # the backoff is at most 2 s
            back.append(await opened.update("s", append(b"4"), 60))
            if len(outage_info(caplog)) == 1:
                break
            await asyncio.sleep(0.01)
        # Written back to the restarted server, the updates made during the outage included.
        connection = client(private_redis.url)
        assert connection.hget("doomloop:s", "d") == back[-1] and back[-1].startswith(b"1234")
        connection.close()
        await opened.aclose()
        await closed.aclose()

    with caplog.at_level(logging.INFO, logger="doomloop"):
        run(scenario)
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 2  # one per store: each has its own outage


def outage_info(caplog: pytest.LogCaptureFixture) -> List[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno == logging.INFO and "is back" in record.getMessage()]


def test_a_store_made_outside_any_event_loop_serves_each_loop_that_uses_it(redis_url: str, prefix: str, raw: Any) -> None:
    # As a service made at import time meets its loops: a server's, then a test client's, ...
    # redis-py's asyncio connections belong to the loop that opened them; the store opens a
    # client per loop instead of handing a closed loop's connections to the next.
    store = AsyncRedisStore(redis_url, prefix=prefix, on_error="closed")
    for record in (b"1", b"2", b"3"):
        assert run(lambda record=record: store.update("s", append(record), 60)) == b"123"[: int(record)]
    assert raw.hget(f"{prefix}s", "d") == b"123"

    async def close_then_use() -> bytes:
        await store.aclose()  # this loop's connections; the next call opens new ones
        await store.aclose()  # closing twice is harmless
        return await store.update("s", append(b"4"), 60)

    assert run(close_then_use) == b"1234"


def test_threads_with_loops_of_their_own_share_one_store(redis_url: str, prefix: str, raw: Any) -> None:
    store = AsyncRedisStore(redis_url, prefix=prefix, on_error="closed")
    errors: List[BaseException] = []

    def worker(n: int) -> None:
        async def scenario() -> None:
            for _ in range(20):
                await store.update("shared", append(RECORD.pack(n, 0)), 60)
            await store.aclose()

        try:
            run(scenario)
        except BaseException as error:  # noqa: BLE001 -- reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors and not any(thread.is_alive() for thread in threads)
    assert len(raw.hget(f"{prefix}shared", "d")) == 3 * 20 * RECORD.size  # no update lost
