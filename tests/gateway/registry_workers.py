"""Worker processes of the registry-through-Redis tests (a module of its own, so spawned
processes can import it)."""

from __future__ import annotations

from typing import Any, List, Tuple

# (commit index, hook, worker, step, what the caller saw)
Seen = Tuple[int, str, int, int, Any]


def commit_index(blob: bytes) -> int:
    """How many tool-loop hooks a session blob has seen: its calls plus its outcomes (each hook
    adds one, so this orders the hooks as the store committed them)."""
    from doomloop import ToolLoopDetector
    from doomloop.gateway.registry import _unpack

    stats = ToolLoopDetector.from_bytes(_unpack(blob)[0]).get_stats()
    return int(stats["calls"] + stats["outcomes"])


def params_of(worker: int, step: int) -> Any:
    # Mostly one call, now and then another: warnings, blocks and episodes that end happen.
    return {"p": 0} if step % 7 else {"p": worker + 1}


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
        saved = registry._session("shared")._saved
        assert saved is not None
        seen.append((commit_index(saved), "before", worker, step, (decision.blocked, decision.verdict.to_dict())))
        result = decision.blocked_result if decision.blocked else f"result {params['p']}"
        outcome = registry.after_tool_call("shared", "read", params, result=result)
        saved = registry._session("shared")._saved
        assert saved is not None
        seen.append((commit_index(saved), "after", worker, step, outcome.result_hash))
    store.close()
    results.put((worker, seen))
