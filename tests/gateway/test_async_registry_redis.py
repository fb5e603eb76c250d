"""AsyncSessionRegistry through AsyncRedisStore: asyncio tasks, and two processes each running
an event loop, serving one session lose no hook and reach the verdicts one process reaches
applying the hooks in the order Redis committed them; one round trip per hook; the server
stopped mid-run (fail-open rides it out, fail-closed raises); TTL expiry; damaged state."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine, Dict, List, TypeVar

import pytest

from doomloop.gateway import AsyncRedisStore, AsyncSessionRegistry, RedisStore, SessionRegistry, StoreCorrupt, StoreUnavailable
from redis_helpers import RedisServer, calls, client, made_since
from registry_workers import (
    TASKS,
    TURNS,
    Committed,
    Seen,
    bare_blocks,
    check_commit_order,
    commit_index,
    drive_async,
    interleaved,
    repeat,
    run_drivers,
    serve_async,
)

T = TypeVar("T")


def run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(make())


def test_tasks_of_two_replicas_on_one_session_match_one_process_in_commit_order(redis_url: str, prefix: str) -> None:
    tasks, steps = 8, 60
    seen: List[Seen] = []

    async def scenario() -> None:
        async with (
            AsyncRedisStore(redis_url, prefix=prefix, on_error="closed") as one,
            AsyncRedisStore(redis_url, prefix=prefix, on_error="closed") as two,
        ):
            replicas = [AsyncSessionRegistry(store=Committed(one)), AsyncSessionRegistry(store=Committed(two))]
            await asyncio.gather(*(serve_async(replicas[task % 2], task, steps, seen) for task in range(tasks)))

    run(scenario)
    assert check_commit_order(seen, hooks=2 * tasks * steps) > TURNS


def test_tasks_on_distinct_sessions_keep_their_own_state(redis_url: str, prefix: str) -> None:
    # Fail-closed, with room for a slow connection on a loaded machine: a store that timed out
    # would otherwise serve its (empty) local state, and the check below would read nothing.
    options: Dict[str, Any] = {"prefix": prefix, "timeout": 5.0, "on_error": "closed"}

    async def scenario() -> List[List[bool]]:
        async with AsyncRedisStore(redis_url, **options) as store:
            registry = AsyncSessionRegistry(store=store)
            found = await asyncio.gather(*(repeat(registry, f"s{task}", 25) for task in range(8)))
            # What Redis holds is each session's own: a replica with no local state reads it.
            async with AsyncRedisStore(redis_url, **options) as other_store:
                other = AsyncSessionRegistry(store=other_store)
                for task in range(8):
                    assert (await other.get(f"s{task}")).tool_loop.get_stats()["calls"] == 25
            return found

    assert run(scenario) == [bare_blocks(25)] * 8


def test_two_processes_each_running_an_event_loop_match_one_process_in_commit_order(redis_url: str, prefix: str) -> None:
    steps = 300
    interleaved(
        lambda keys: run_drivers(drive_async, redis_url, keys, workers=2, steps=steps), prefix, hooks=2 * 2 * TASKS * steps
    )


def test_sync_and_asyncio_replicas_share_a_session(redis_url: str, prefix: str) -> None:
    sync = SessionRegistry(store=RedisStore(redis_url, prefix=prefix))
    for _ in range(10):
        sync.before_tool_call("k", "exec", {"command": "ls"})
        sync.after_tool_call("k", "exec", {"command": "ls"}, result="same")

    async def scenario() -> None:
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            registry = AsyncSessionRegistry(store=store)
            decision = await registry.before_tool_call("k", "exec", {"command": "ls"})
            assert decision.emit_warning and decision.verdict.count == 10
            await registry.discard("k")

    run(scenario)
    assert sync.get("k").tool_loop.history_len == 0


def test_a_hook_is_one_round_trip_in_the_common_path() -> None:
    server = RedisServer()
    server.start()
    try:
        connection = client(server.url)

        async def scenario() -> None:
            async with AsyncRedisStore(server.url) as store:
                registry = AsyncSessionRegistry(store=store)
                await registry.before_tool_call("s", "read", {"p": 0})
                before = calls(connection)
                for n in range(50):
                    await registry.before_tool_call("s", "read", {"p": n})
                    await registry.after_tool_call("s", "read", {"p": n}, result="ok")
                    await registry.record_action("s", "read", {"p": n}, "ok", True)
                assert made_since(before, connection) == {"evalsha": 150}

        run(scenario)
        connection.close()
    finally:
        server.kill()


def outage_records(caplog: pytest.LogCaptureFixture, level: int, text: str) -> List[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "doomloop" and r.levelno == level and text in r.getMessage()]


def test_fail_open_rides_out_a_stopped_server_and_the_state_resumes(
    private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    count = 0

    async def scenario() -> None:
        done = asyncio.Event()

        async def serve(registry: AsyncSessionRegistry) -> None:
            # A gateway task serving the session's tool calls while Redis stops and comes back:
            # any exception that reaches it fails the test.
            nonlocal count
            while not done.is_set():
                await registry.before_tool_call("s", "read", {"p": count})
                await registry.after_tool_call("s", "read", {"p": count}, result="ok")
                count += 1
                await asyncio.sleep(0.001)

        async def until(condition: Callable[[], bool]) -> None:
            for _ in range(2000):
                if condition():
                    return
                await asyncio.sleep(0.005)
            pytest.fail("timed out")

        async with AsyncRedisStore(private_redis.url, timeout=0.2) as store:
            registry = AsyncSessionRegistry(store=store)
            tasks = [asyncio.create_task(serve(registry)) for _ in range(2)]
            await until(lambda: count > 20)
            private_redis.kill()
            await until(lambda: bool(outage_records(caplog, logging.WARNING, "is unavailable")))
            stopped = count
            await until(lambda: count > stopped + 20)  # served from local state meanwhile
            private_redis.start()  # on the same port, with no data
            await until(lambda: bool(outage_records(caplog, logging.INFO, "is back")))
            back = count
            await until(lambda: count > back + 20)
            done.set()
            await asyncio.gather(*tasks)

    with caplog.at_level(logging.INFO, logger="doomloop"):
        run(scenario)
    assert len(outage_records(caplog, logging.WARNING, "is unavailable")) == 1
    assert len(outage_records(caplog, logging.INFO, "is back")) == 1
    # Redis came back empty; the hooks served meanwhile were written back, and every hook
    # since went to Redis: the session's blob holds all of them.
    connection = client(private_redis.url)
    assert commit_index(connection.hget("doomloop:s", "d")) == 2 * count
    connection.close()


def test_fail_closed_raises_during_an_outage_and_keeps_no_unstored_state(private_redis: RedisServer) -> None:
    async def scenario() -> None:
        async with AsyncRedisStore(private_redis.url, timeout=0.2, on_error="closed") as store:
            registry = AsyncSessionRegistry(store=store)
            await registry.before_tool_call("s", "read", {"p": 0})
            private_redis.kill()
            for hook in (
                registry.before_tool_call("s", "read", {"p": 1}),
                registry.after_tool_call("s", "read", {"p": 1}, result="ok"),
                registry.record_action("s", "read", {"p": 1}, "ok", True),
                registry.is_doom_loop("s"),
                registry.get("s"),
            ):
                with pytest.raises(StoreUnavailable):
                    await hook
            private_redis.start()
            for _ in range(500):  # the backoff is at most 2 s
                try:
                    await registry.before_tool_call("s", "read", {"p": 2})
                    break
                except StoreUnavailable:
                    await asyncio.sleep(0.01)
            else:
                pytest.fail("the store never came back")
            # Redis lost the session and nothing unstored was kept: it starts afresh.
            assert (await registry.get("s")).tool_loop.get_stats()["calls"] == 1

    run(scenario)


def test_a_session_expires_with_its_ttl(redis_url: str, prefix: str, raw: Any) -> None:
    async def scenario() -> None:
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            registry = AsyncSessionRegistry(store=store, ttl=0.3)
            await registry.before_tool_call("s", "read", {"p": 1})
            assert 0 < raw.pttl(f"{prefix}s") <= 300
            await asyncio.sleep(0.5)
            assert not raw.exists(f"{prefix}s") and "s" not in registry
            assert await registry.get("s") is None  # expired: gone here and in the store

    run(scenario)


def test_a_damaged_blob_is_a_logged_reset(redis_url: str, prefix: str, raw: Any, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            registry = AsyncSessionRegistry(store=store)
            await registry.before_tool_call("k", "exec", {"command": "ls"})
            raw.hset(f"{prefix}k", mapping={"d": b"\x00\x00\x00\x07garbage", "v": 999})
            with caplog.at_level(logging.WARNING, logger="doomloop"):
                await registry.before_tool_call("k", "exec", {"command": "ls"})
            assert (await registry.get("k")).tool_loop.history_len == 1

    run(scenario)
    (record,) = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert record.session_key == "k"  # type: ignore[attr-defined]


def test_a_corrupt_entry_is_overwritten_under_fail_open_and_raises_under_fail_closed(
    redis_url: str, prefix: str, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        raw.set(f"{prefix}k", b"junk")
        async with AsyncRedisStore(redis_url, prefix=prefix, on_error="closed") as closed:
            with pytest.raises(StoreCorrupt, match="holds a string"):
                await AsyncSessionRegistry(store=closed).before_tool_call("k", "read", {"p": 1})
        async with AsyncRedisStore(redis_url, prefix=prefix) as store:
            registry = AsyncSessionRegistry(store=store)
            with caplog.at_level(logging.WARNING, logger="doomloop"):
                await registry.before_tool_call("k", "read", {"p": 1})
            assert [r.session_key for r in caplog.records] == ["k"]  # type: ignore[attr-defined]
            assert (await registry.get("k")).tool_loop.get_stats()["calls"] == 1

    run(scenario)
