"""SessionRegistry through RedisStore: two gateway processes serving one session lose no update
and reach the verdicts one process reaches applying the same calls in the order Redis
committed them; replicas pick up each other's state; a damaged blob is a logged reset."""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import queue
from typing import Any, Dict, List

import pytest

from doomloop import ToolLoopDetector
from doomloop.gateway import MemoryStore, RedisStore, SessionRegistry
from redis_helpers import client
from registry_workers import Seen, drive, params_of

STEPS = 600


def _run(url: str, prefix: str, workers: int) -> List[Seen]:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(workers + 1)
    results = context.Queue()
    processes = [context.Process(target=drive, args=(url, prefix, w, STEPS, start, results)) for w in range(workers)]
    for process in processes:
        process.start()
    start.wait(timeout=120)
    collected: Dict[int, List[Seen]] = {}
    while len(collected) < workers:
        try:
            worker, seen = results.get(timeout=1)
        except queue.Empty:
            failed = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            assert not failed, f"a worker failed (exit codes {failed})"
            continue
        collected[worker] = seen
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return [item for seen in collected.values() for item in seen]


def test_two_processes_on_one_session_match_one_process_in_commit_order(redis_url: str, prefix: str) -> None:
    seen = sorted(_run(redis_url, prefix, workers=2))
    # Every hook committed exactly once: the indexes are 1..4*STEPS with no gap or repeat.
    assert [index for index, *_ in seen] == list(range(1, 4 * STEPS + 1))
    # Both processes took turns, not one after the other.
    assert sum(1 for a, b in itertools.pairwise(seen) if a[2] != b[2]) > 10
    # One process applying the same hooks in that order sees what the callers saw.
    single = ToolLoopDetector()
    decisions: Dict[Any, Any] = {}
    for _, hook, worker, step, saw in seen:
        params = params_of(worker, step)
        if hook == "before":
            decision = single.before_tool_call("read", params)
            assert (decision.blocked, decision.verdict.to_dict()) == saw
            decisions[worker, step] = decision
        else:
            # The caller passed the veto when its own call was blocked, its result otherwise.
            own = decisions[worker, step]
            result = own.blocked_result if own.blocked else f"result {params['p']}"
            assert single.after_tool_call("read", params, result=result).result_hash == saw
    assert any(saw[0] for _, hook, _, _, saw in seen if hook == "before"), "no call was ever blocked"


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
    assert first.is_doom_loop("k") and first.get("k").session.get_stats()["total_actions"] == 4
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
