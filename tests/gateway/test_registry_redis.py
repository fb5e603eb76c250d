"""SessionRegistry through RedisStore: two gateway processes serving one session lose no update
and reach the verdicts one process reaches applying the same calls in the order Redis
committed them; replicas pick up each other's state; a damaged blob is a logged reset."""

from __future__ import annotations

import logging

import pytest

from doomloop.gateway import MemoryStore, RedisStore, SessionRegistry
from redis_helpers import client
from registry_workers import drive, interleaved, run_drivers

STEPS = 600


def test_two_processes_on_one_session_match_one_process_in_commit_order(redis_url: str, prefix: str) -> None:
    interleaved(lambda keys: run_drivers(drive, redis_url, keys, workers=2, steps=STEPS), prefix, hooks=4 * STEPS)


def test_a_replica_picks_up_the_state_another_wrote(redis_url: str, prefix: str) -> None:
    first = SessionRegistry(store=RedisStore(redis_url, prefix=prefix))
    second = SessionRegistry(store=RedisStore(redis_url, prefix=prefix))
    for _ in range(10):
        first.before_tool_call("k", "exec", {"command": "ls"})
        first.after_tool_call("k", "exec", {"command": "ls"}, result="same")
    decision = second.before_tool_call("k", "exec", {"command": "ls"})
    assert decision.emit_warning and decision.verdict.count == 10
    for _ in range(4):
        second.record_action("k", "read", {"p": 1}, "same", True)
    assert first.is_doom_loop("k") and first.get("k").doom_loop.get_stats()["total_actions"] == 4
    first.discard("k")
    assert second.get("k").tool_loop.history_len == 0


def test_a_damaged_blob_is_a_logged_reset(redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    registry = SessionRegistry(store=RedisStore(redis_url, prefix=prefix))
    registry.before_tool_call("k", "exec", {"command": "ls"})
    connection = client(redis_url)
    connection.hset(f"{prefix}k", mapping={"d": b"\x00\x00\x00\x07garbage", "v": 999})
    connection.close()
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        registry.before_tool_call("k", "exec", {"command": "ls"})
    assert any("cannot be read" in r.getMessage() and r.session_key == "k" for r in caplog.records)  # type: ignore[attr-defined]
    assert registry.get("k").tool_loop.history_len == 1


def test_a_memory_store_shares_sessions_between_registries() -> None:
    store = MemoryStore()
    first, second = SessionRegistry(store=store), SessionRegistry(store=store)
    for registry in (first, second, first):
        registry.before_tool_call("k", "read", {"p": 1})
    assert second.get("k").tool_loop.get_stats()["calls"] == 3
