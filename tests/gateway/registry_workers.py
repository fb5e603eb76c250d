"""Worker processes of the registry-through-Redis tests (a module of its own, so spawned
processes can import it), the asyncio callers the async registry tests share, and the check of
what callers saw against one process applying the same hooks in commit order."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import queue
from typing import Any, Callable, Dict, List, Tuple

# (commit index, hook, worker, step, what the caller saw)
Seen = Tuple[int, str, int, int, Any]

# Tasks each process of drive_async runs on the shared session.
TASKS = 2


def commit_index(blob: bytes) -> int:
    """How many tool-loop hooks a session blob has seen: its calls plus its outcomes (each hook
    adds one, so this orders the hooks as the store committed them)."""
    from doomloop import Monitor

    stats = Monitor.from_bytes(blob).tool_loop.get_stats()
    return int(stats["calls"] + stats["outcomes"])


def params_of(worker: int, step: int) -> Any:
    # Mostly one call, now and then another: warnings, blocks and episodes that end happen.
    return {"p": 0} if step % 7 else {"p": worker + 1}


def saved_index(registry: Any, key: str) -> int:
    """The commit index of the blob a sync registry last stored for ``key``."""
    saved = registry._session(key)._saved
    assert saved is not None
    return commit_index(saved)


class Committed:
    """An AsyncStore around another that keeps, per asyncio task, the blob its last update
    stored: the commit index of a task's hook, whatever other tasks did since."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._blobs: Dict[Any, bytes] = {}

    async def load(self, key: Any) -> Any:
        return await self.store.load(key)

    async def compare_and_set(self, key: Any, expected_version: Any, data: bytes, ttl_seconds: float) -> Any:
        return await self.store.compare_and_set(key, expected_version, data, ttl_seconds)

    async def delete(self, key: Any) -> None:
        await self.store.delete(key)

    async def update(self, key: Any, fn: Any, ttl_seconds: float) -> bytes:
        blob: bytes = await self.store.update(key, fn, ttl_seconds)
        self._blobs[asyncio.current_task()] = blob
        return blob

    def index(self) -> int:
        """The commit index of the calling task's last update."""
        return commit_index(self._blobs[asyncio.current_task()])


def drive(url: str, prefix: str, worker: int, steps: int, start: Any, results: Any) -> None:
    """``steps`` tool calls (before + after) on one shared session, once every worker is at the
    ``start`` barrier; puts, per hook, its commit index and what the caller saw."""
    from doomloop.gateway import RedisStore, SessionRegistry

    store = RedisStore(url, prefix=prefix, on_error="closed")
    registry = SessionRegistry(store=store)
    seen: List[Seen] = []
    start.wait()
    for step in range(steps):
        params = params_of(worker, step)
        decision = registry.before_tool_call("shared", "read", params)
        seen.append((saved_index(registry, "shared"), "before", worker, step, (decision.blocked, decision.verdict.to_dict())))
        result = decision.blocked_result if decision.blocked else f"result {params['p']}"
        outcome = registry.after_tool_call("shared", "read", params, result=result)
        seen.append((saved_index(registry, "shared"), "after", worker, step, outcome.result_hash))
    store.close()
    results.put((worker, seen))


async def serve_async(registry: Any, worker: int, steps: int, seen: List[Seen]) -> None:
    """:func:`drive`'s tool calls as one asyncio task on an ``AsyncSessionRegistry`` whose
    store is a :class:`Committed`."""
    store = registry.store
    for step in range(steps):
        params = params_of(worker, step)
        decision = await registry.before_tool_call("shared", "read", params)
        seen.append((store.index(), "before", worker, step, (decision.blocked, decision.verdict.to_dict())))
        result = decision.blocked_result if decision.blocked else f"result {params['p']}"
        outcome = await registry.after_tool_call("shared", "read", params, result=result)
        seen.append((store.index(), "after", worker, step, outcome.result_hash))


async def repeat(registry: Any, key: str, calls: int) -> List[bool]:
    """``calls`` identical tool calls on an ``AsyncSessionRegistry``; which were blocked."""
    blocked = []
    for _ in range(calls):
        decision = await registry.before_tool_call(key, "exec", {"command": "ls"})
        blocked.append(decision.blocked)
        result = decision.blocked_result if decision.blocked else "same"
        await registry.after_tool_call(key, "exec", {"command": "ls"}, result=result)
    return blocked


def bare_blocks(calls: int) -> List[bool]:
    """Which of :func:`repeat`'s calls a bare detector blocks."""
    from doomloop import ToolLoopDetector

    bare = ToolLoopDetector()
    blocked = []
    for _ in range(calls):
        decision = bare.before_tool_call("exec", {"command": "ls"})
        blocked.append(decision.blocked)
        bare.after_tool_call("exec", {"command": "ls"}, result=decision.blocked_result if decision.blocked else "same")
    return blocked


def drive_async(url: str, prefix: str, worker: int, steps: int, start: Any, results: Any) -> None:
    """:func:`drive` as an asyncio gateway: one event loop whose :data:`TASKS` tasks (workers
    ``TASKS * worker + n``) each make ``steps`` tool calls on the shared session."""
    from doomloop.gateway import AsyncRedisStore, AsyncSessionRegistry

    seen: List[Seen] = []

    async def main() -> None:
        async with AsyncRedisStore(url, prefix=prefix, on_error="closed") as store:
            registry = AsyncSessionRegistry(store=Committed(store))
            start.wait()
            await asyncio.gather(*(serve_async(registry, TASKS * worker + n, steps, seen) for n in range(TASKS)))

    asyncio.run(main())
    results.put((worker, seen))


def run_drivers(target: Callable[..., None], url: str, prefix: str, workers: int, steps: int) -> List[Seen]:
    """Run ``target`` (:func:`drive` or :func:`drive_async`) in ``workers`` spawned processes
    started together; what they all saw."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(workers + 1)
    results = context.Queue()
    processes = [context.Process(target=target, args=(url, prefix, w, steps, start, results)) for w in range(workers)]
    for process in processes:
        process.start()
    try:
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
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()
    return [item for seen in collected.values() for item in seen]


TURNS = 10
"""More handovers between callers than this show that they took turns, not one after the other."""


def interleaved(run: Callable[[str], List[Seen]], prefix: str, hooks: int, attempts: int = 3) -> None:
    """:func:`check_commit_order` on what ``run(key_prefix)`` saw, run again (up to ``attempts``
    times, each on keys of its own under ``prefix``) while the callers did not take turns: on a
    loaded machine the OS may run one process's calls back to back, which proves nothing about
    contention (every run's order is still checked)."""
    for attempt in range(attempts):
        if check_commit_order(run(f"{prefix}{attempt}:"), hooks) > TURNS:
            return
    raise AssertionError(f"the callers never took turns in {attempts} runs")


def check_commit_order(seen: List[Seen], hooks: int) -> int:
    """The ``hooks`` hooks callers saw each committed exactly once, and one process applying the
    same hooks in commit order sees what the callers saw; returns how often the commits passed
    from one caller to another."""
    from doomloop import ToolLoopDetector

    seen = sorted(seen)
    # Every hook committed exactly once: the indexes are 1..hooks with no gap or repeat.
    assert [index for index, *_ in seen] == list(range(1, hooks + 1))
    turns = sum(1 for a, b in itertools.pairwise(seen) if a[2] != b[2])
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
    return turns
