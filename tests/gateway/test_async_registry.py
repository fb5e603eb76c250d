"""AsyncSessionRegistry without Redis: the hooks of SessionRegistry as coroutines, with no
store, a MemoryStore, or an AsyncStore whose tasks conflict (an in-memory one that yields to
the event loop inside every update); the store it takes; the plain methods."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Callable, Coroutine, List, Optional, TypeVar

import pytest

from doomloop import LoopDetectionConfig, LoopEvent, Profile
from doomloop.errors import ConfigError
from doomloop.gateway import HOOKS, AsyncRedisStore, AsyncSessionRegistry, Entry, MemoryStore, RedisStore, SessionKey, Update
from registry_workers import TURNS, Committed, Seen, bare_blocks, check_commit_order, repeat, serve_async
from support import FakeClock

T = TypeVar("T")


def run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(make())


class YieldingStore:
    """An AsyncStore in memory whose update yields to the event loop between running ``fn``
    and its compare-and-set, and after it, as a round trip would: tasks updating one key
    conflict, retry, and take turns."""

    def __init__(self) -> None:
        self.memory = MemoryStore()
        self.conflicts = 0

    async def load(self, key: SessionKey) -> Optional[Entry]:
        return self.memory.load(key)

    async def compare_and_set(
        self, key: SessionKey, expected_version: Optional[int], data: bytes, ttl_seconds: float
    ) -> Optional[int]:
        return self.memory.compare_and_set(key, expected_version, data, ttl_seconds)

    async def delete(self, key: SessionKey) -> None:
        self.memory.delete(key)

    async def update(self, key: SessionKey, fn: Update, ttl_seconds: float) -> bytes:
        while True:
            entry = self.memory.load(key)
            data = fn(None if entry is None else entry.data)
            await asyncio.sleep(0)
            if self.memory.compare_and_set(key, None if entry is None else entry.version, data, ttl_seconds) is not None:
                # The reply's way back: the losers retry meanwhile, so no task keeps the key.
                await asyncio.sleep(0)
                return data
            self.conflicts += 1


STORES: List[Callable[[], Any]] = [lambda: None, MemoryStore, YieldingStore]
STORE_IDS = ["no store", "MemoryStore", "AsyncStore"]


@pytest.mark.parametrize("make_store", STORES, ids=STORE_IDS)
def test_every_hook_gives_the_verdicts_of_a_bare_detector(make_store: Callable[[], Any]) -> None:
    async def scenario() -> None:
        registry = AsyncSessionRegistry(store=make_store())
        assert await repeat(registry, "a", 25) == bare_blocks(25)
        assert await repeat(registry, "b", 1) == [False]  # another session is untouched
        for _ in range(3):
            await registry.record_action("a", "read", {"p": 1}, "same", True)
        assert await registry.is_doom_loop("a") and not await registry.is_doom_loop("b")
        await registry.mark_progress("a", "new file")
        await registry.record_response("a", "Done.")
        assert await registry.arm_post_compaction("a") > 0
        session = await registry.get("a")
        assert session.doom_loop.get_stats()["total_actions"] == 3 and session.tool_loop.get_stats()["calls"] == 25
        assert len(registry) == 2 and "a" in registry and b"b" in registry and "c" not in registry
        await registry.discard("a")
        assert "a" not in registry
        assert await registry.get("a") is None  # the store forgot it too, and a getter creates nothing
        assert await registry.apply("a", lambda monitor: monitor.tool_loop.history_len) == 0
        assert registry.stats() == {"live": 2, "created": 3, "evicted": 0, "expired": 0}

    run(scenario)


def test_the_hooks_that_touch_the_store_are_coroutines_and_the_rest_are_not() -> None:
    for name in [*HOOKS, "get", "discard"]:
        assert inspect.iscoroutinefunction(getattr(AsyncSessionRegistry, name)), name
    for name in ["stream", "__len__", "__contains__", "stats"]:
        assert not inspect.iscoroutinefunction(getattr(AsyncSessionRegistry, name)), name
    registry = AsyncSessionRegistry(Profile.recommended().replace(chant={"max_repeated_chunks": 4}), store=YieldingStore())
    stream = registry.stream("s")
    assert stream.feed("Let me try again. " * 40) is not None
    assert "s" in registry


def test_tasks_on_one_session_lose_no_hook_and_match_one_process_in_commit_order() -> None:
    store = YieldingStore()
    tasks, steps = 6, 40
    seen: List[Seen] = []

    async def scenario() -> None:
        # Two registries on one store, as two replicas, each serving three tasks.
        replicas = [AsyncSessionRegistry(store=Committed(store)), AsyncSessionRegistry(store=Committed(store))]
        await asyncio.gather(*(serve_async(replicas[task % 2], task, steps, seen) for task in range(tasks)))

    run(scenario)
    assert store.conflicts > 0, "the tasks never conflicted: the test would prove nothing"
    assert check_commit_order(seen, hooks=2 * tasks * steps) > TURNS


@pytest.mark.parametrize("make_store", STORES, ids=STORE_IDS)
def test_tasks_on_distinct_sessions_keep_their_own_state(make_store: Callable[[], Any]) -> None:
    async def scenario() -> List[List[bool]]:
        registry = AsyncSessionRegistry(store=make_store())
        return await asyncio.gather(*(repeat(registry, f"s{task}", 25) for task in range(8)))

    assert run(scenario) == [bare_blocks(25)] * 8


def test_events_carry_the_session_key_through_an_async_store() -> None:
    events: List[LoopEvent] = []

    async def scenario() -> None:
        registry = AsyncSessionRegistry(store=YieldingStore(), on_event=events.append)
        await repeat(registry, "tenant/7", 12)

    run(scenario)
    assert events and {event.session_key for event in events} == {"tenant/7"}


def test_a_damaged_blob_is_a_logged_reset(caplog: pytest.LogCaptureFixture) -> None:
    store = YieldingStore()

    async def scenario() -> None:
        registry = AsyncSessionRegistry(store=store)
        await registry.before_tool_call("k", "exec", {"command": "ls"})
        store.memory.update("k", lambda data: b"\x00\x00\x00\x07garbage", 60)
        with caplog.at_level(logging.WARNING, logger="doomloop"):
            await registry.before_tool_call("k", "exec", {"command": "ls"})
        assert (await registry.get("k")).tool_loop.history_len == 1

    run(scenario)
    (record,) = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert record.session_key == "k"  # type: ignore[attr-defined]


def test_idle_sessions_expire_after_the_ttl() -> None:
    clock = FakeClock(0.0)

    async def scenario() -> None:
        registry = AsyncSessionRegistry(ttl=60.0, clock=clock, store=YieldingStore())
        await registry.before_tool_call("old", "read", {"p": 1})
        clock.now += 61.0
        assert "old" not in registry and len(registry) == 0
        assert registry.stats()["expired"] == 1

    run(scenario)


def test_the_store_must_not_block_the_event_loop() -> None:
    with pytest.raises(TypeError, match="got RedisStore: a sync store would block the event loop"):
        AsyncSessionRegistry(store=RedisStore("redis://127.0.0.1:1"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"store must be an AsyncStore .* or a MemoryStore, got object$"):
        AsyncSessionRegistry(store=object())  # type: ignore[arg-type]

    class HalfAsync(YieldingStore):
        def delete(self, key: SessionKey) -> None:  # type: ignore[override]
            self.memory.delete(key)

    with pytest.raises(TypeError, match="got HalfAsync"):
        AsyncSessionRegistry(store=HalfAsync())  # type: ignore[arg-type]
    store = AsyncRedisStore("redis://127.0.0.1:1")
    assert AsyncSessionRegistry(store=store).store is store


def test_the_other_arguments_are_checked_as_the_sync_registry_checks_them() -> None:
    with pytest.raises(TypeError, match="profile must be a Profile"):
        AsyncSessionRegistry(LoopDetectionConfig())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_sessions"):
        AsyncSessionRegistry(max_sessions=0)
    with pytest.raises(ConfigError, match="ttl"):
        AsyncSessionRegistry(ttl=-1)
    with pytest.raises(TypeError, match="on_event"):
        AsyncSessionRegistry(on_event=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown option"):
        AsyncSessionRegistry(tool_aliasez={})

    async def bad_key() -> None:
        await AsyncSessionRegistry(store=YieldingStore()).before_tool_call(1, "read", {})  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="must be str or bytes"):
        run(bad_key)


@pytest.mark.parametrize("make_store", [lambda: None, MemoryStore, YieldingStore], ids=["no store", "memory", "async"])
def test_an_empty_session_key_is_refused_with_any_store(make_store: Callable[[], Any]) -> None:
    registry = AsyncSessionRegistry(store=make_store())

    async def hooks() -> None:
        for key in ("", b""):
            with pytest.raises(ValueError, match="a session key must not be empty"):
                await registry.before_tool_call(key, "read", {})
            with pytest.raises(ValueError, match="a session key must not be empty"):
                await registry.record_action(key, "read", {}, "ok", True)
        await registry.before_tool_call("a", "read", {})

    run(hooks)
    assert len(registry) == 1
