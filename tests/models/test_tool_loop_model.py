"""Property test: the Rust detector against a small pure-Python model of the spec's rules
(history, run scoping, the five detectors, veto stickiness, warning buckets, the guard) and
doomloop's own (cycles of 3 to 8 calls, argument churn, plain results hashed by value, each
switched on or off) on random call sequences."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import given, settings, strategies as st

from doomloop import ConfigError, ToolLoopDetector

Verdict = Optional[Tuple[str, str, int, Optional[str]]]  # level, detector, count, paired tool


def _primitive(pattern: List[Any]) -> bool:
    """No shorter pattern repeated makes it up."""
    p = len(pattern)
    return not any(all(pattern[i] == pattern[i % d] for i in range(p)) for d in range(1, p) if p % d == 0)


def cycle(h: List[Dict[str, Any]], ident: Any) -> Optional[Tuple[int, bool, Any]]:
    """The longest cycle of 3 to 8 calls the call continues, over two full rounds at least:
    (count, no-progress evidence, the cycle up to rotation), ties to the shorter period."""
    newest = list(reversed(h))
    ids = [r["id"] for r in newest]
    best: Optional[Tuple[int, bool, Any]] = None
    for p in range(3, 9):
        pattern = ids[:p]
        if len(pattern) < p or pattern[p - 1] != ident or not _primitive(pattern):
            continue
        tail = 0
        while tail < len(ids) and ids[tail] == pattern[tail % p]:
            tail += 1
        results: Dict[Any, Any] = {}
        evidence = all(r["result"] is not None and results.setdefault(r["id"], r["result"]) == r["result"] for r in newest[:tail])
        calls = [repr(x) for x in reversed(pattern)]
        key = min(tuple(calls[i:] + calls[:i]) for i in range(p))
        if tail + 1 >= 2 * p and (best is None or tail + 1 > best[0]):
            best = (tail + 1, evidence, key)
    return best


def churn(h: List[Dict[str, Any]], tool: str, ident: Any) -> Optional[Tuple[int, Any]]:
    """One tool cycling through a few argument sets with unchanged outcomes: (count, the
    repeated sets), or None."""
    sets: Dict[Any, List[Any]] = {}
    count = 0
    for r in reversed(h):
        if r["tool"] != tool or r["result"] is None:
            break
        if r["id"] in sets:
            if sets[r["id"]][0] != r["result"]:
                break
            sets[r["id"]][1] += 1
        elif len(sets) == 8:
            break
        else:
            sets[r["id"]] = [r["result"], 1]
        count += 1
    repeated = frozenset(k for k, (_, calls) in sets.items() if calls >= 3)
    probes = count - sum(sets[k][1] for k in repeated)
    if len(repeated) >= 2 and probes <= max(1, count // 5) and ident in repeated:
        return count, repeated
    return None


class Model:
    """The rules of the tool-loop spec, written out plainly (records are dicts)."""

    def __init__(self, cfg: Dict[str, int]) -> None:
        self.cfg = dict(cfg)
        if self.cfg["critical"] <= self.cfg["warning"]:
            self.cfg["critical"] = self.cfg["warning"] + 1
        if self.cfg["global"] <= self.cfg["critical"]:
            self.cfg["global"] = self.cfg["critical"] + 1
        self.history: List[Dict[str, Any]] = []
        self.buckets: Dict[Any, int] = {}
        self.remaining = 0
        self.window: List[Any] = []

    def detect(self, tool: str, args: Any, run: Optional[str], poll: bool) -> Tuple[Verdict, Any]:
        c = self.cfg
        h = [r for r in self.history if r["run"] == run]
        ident = (tool, args)
        # 1. unknown tool
        n, name = 0, None
        for r in reversed(h):
            if r["tool"] != tool or r["unknown"] is None or (name is not None and r["unknown"] != name):
                break
            name = r["unknown"]
            n += 1
        if n >= c["unknown"]:
            return ("critical", "unknown_tool_repeat", n, None), ("u", tool, name)
        # streak and recent
        streak, latest = 0, None
        for r in reversed(h):
            if r["id"] != ident or r["result"] is None:
                continue
            if latest is None:
                latest, streak = r["result"], 1
            elif r["result"] == latest:
                streak += 1
            else:
                break
        recent = sum(1 for r in h if r["id"] == ident)
        if streak >= c["global"]:
            return ("critical", "global_circuit_breaker", streak, None), None
        if poll:
            if streak >= c["critical"]:
                return ("critical", "known_poll_no_progress", streak, None), None
            if streak >= c["warning"]:
                return ("warning", "known_poll_no_progress", streak, None), ("p", ident, latest)
        # ping-pong
        if h:
            last = h[-1]
            other = next((r["id"] for r in reversed(h[:-1]) if r["id"] != last["id"]), None)
            tail = 0
            for r in reversed(h):
                if r["id"] != (last["id"] if tail % 2 == 0 else other):
                    break
                tail += 1
            if other is not None and tail >= 2 and ident == other:
                sides: Dict[Any, Any] = {}
                evidence = True
                for r in h[len(h) - tail :]:
                    if r["result"] is None or sides.setdefault(r["id"], r["result"]) != r["result"]:
                        evidence = False
                evidence = evidence and len(sides) == 2
                count = tail + 1
                key = ("q", tuple(sorted([repr(ident), repr(last["id"])])))
                if count >= c["critical"] and evidence:
                    return ("critical", "ping_pong", count, last["tool"]), key
                if count >= c["warning"]:
                    return ("warning", "ping_pong", count, last["tool"]), key
        found = cycle(h, ident) if c["cycle"] else None
        if found is not None:
            count, evidence, key = found
            if count >= c["critical"] and evidence:
                return ("critical", "cycle", count, None), None
            if count >= c["warning"]:
                return ("warning", "cycle", count, None), ("c", key)
        if not poll and streak >= c["critical"]:
            return ("critical", "generic_repeat", streak, None), None
        churning = churn(h, tool, ident) if c["churn"] else None
        if churning is not None:
            count, sets = churning
            if count >= c["critical"]:
                return ("critical", "argument_churn", count, None), None
            if count >= c["warning"]:
                return ("warning", "argument_churn", count, None), ("a", tool, sets)
        if not poll and recent >= c["warning"]:
            return ("warning", "generic_repeat", recent, None), ("g", ident)
        return None, None

    def trim(self) -> None:
        del self.history[: max(0, len(self.history) - self.cfg["history"])]

    def call(
        self, tool: str, args: Any, run: Optional[str], poll: bool, result: Any, unknown: Optional[str]
    ) -> Tuple[Verdict, bool, bool, Optional[bool]]:
        verdict, key = self.detect(tool, args, run, poll)
        if verdict is not None and verdict[0] == "critical":
            return verdict, True, False, None
        emitted = False
        if verdict is not None:
            bucket_key = (run, key)
            bucket = verdict[2] // 10
            if bucket_key not in self.buckets:
                emitted = True
                self.buckets[bucket_key] = bucket
                if len(self.buckets) > 256:
                    del self.buckets[next(iter(self.buckets))]
            elif bucket > self.buckets[bucket_key]:
                emitted = True
                self.buckets[bucket_key] = bucket
        ident = (tool, args)
        self.history.append({"tool": tool, "id": ident, "run": run, "result": None, "unknown": None})
        self.trim()
        if result is None:
            return verdict, False, emitted, None
        for r in reversed(self.history):
            if r["result"] is None and r["run"] == run and r["id"] == ident:
                r["result"], r["unknown"] = result, unknown
                break
        else:
            self.history.append({"tool": tool, "id": ident, "run": run, "result": result, "unknown": unknown})
            self.trim()
        abort = False
        if self.remaining > 0:
            self.remaining -= 1
            self.window.append((ident, result))
            abort = self.window.count((ident, result)) >= self.cfg["window"]
        return verdict, False, emitted, abort

    def arm(self) -> None:
        self.remaining = self.cfg["window"]
        self.window = []


TOOLS = ["read", "list", "process", "deploy"]

call_step = st.tuples(
    st.sampled_from(TOOLS),
    st.integers(0, 2),  # params variant
    st.sampled_from([None, "r1", "r2"]),
    st.one_of(
        st.tuples(st.just("result"), st.integers(0, 2)),
        st.tuples(st.just("plain"), st.integers(0, 2)),
        st.tuples(st.just("error"), st.sampled_from(["Unknown tool: deploy", "Unknown tool: other", "boom"])),
        st.just(("none", 0)),
    ),
)
step = st.one_of(call_step, st.just("arm"))


@settings(max_examples=300, deadline=None)
@given(
    cfg=st.fixed_dictionaries(
        {
            "history": st.integers(1, 12),
            "warning": st.integers(1, 6),
            "critical": st.integers(1, 8),
            "global": st.integers(1, 10),
            "unknown": st.integers(1, 4),
            "window": st.integers(1, 3),
            "cycle": st.booleans(),
            "churn": st.booleans(),
            "plain": st.booleans(),
        }
    ),
    steps=st.lists(step, max_size=60),
)
def test_engine_matches_the_model(cfg: Dict[str, int], steps: List[Any]) -> None:
    model = Model(cfg)
    thresholds = {
        "warning_threshold": cfg["warning"],
        "critical_threshold": cfg["critical"],
        "global_circuit_breaker_threshold": cfg["global"],
    }
    if (cfg["cycle"] or cfg["churn"] or cfg["plain"]) and not cfg["warning"] < cfg["critical"] < cfg["global"]:
        # Only OpenClaw's configuration (doomloop's switches off) keeps unordered thresholds,
        # raised at run time; doomloop's refuses them, and runs with them as the model raises them.
        with pytest.raises(ConfigError, match="must be greater than"):
            ToolLoopDetector(**thresholds, cycle=cfg["cycle"], argument_churn=cfg["churn"], hash_plain_results=cfg["plain"])
        thresholds = {
            "warning_threshold": model.cfg["warning"],
            "critical_threshold": model.cfg["critical"],
            "global_circuit_breaker_threshold": model.cfg["global"],
        }
    detector = ToolLoopDetector(
        history_size=cfg["history"],
        **thresholds,
        unknown_tool_threshold=cfg["unknown"],
        post_compaction_window_size=cfg["window"],
        cycle=cfg["cycle"],
        argument_churn=cfg["churn"],
        hash_plain_results=cfg["plain"],
    )
    for index, item in enumerate(steps):
        if item == "arm":
            model.arm()
            detector.arm_post_compaction()
            continue
        tool, variant, run_id, (kind, value) = item
        params = {"action": ["poll", "log", "kill"][variant]} if tool == "process" else {"v": variant}
        poll = tool == "process" and variant < 2
        # Results: plain ints hash by value; errors hash apart from results; a mapping with
        # neither content nor details by value too, or (OpenClaw) all alike.
        model_result = None if kind == "none" else (kind, value if kind != "plain" or cfg["plain"] else None)
        unknown = None
        if kind == "error":
            unknown = value.split(": ")[1] if value.startswith("Unknown tool") else None
        expected = model.call(tool, (tool, variant), run_id, poll, model_result, unknown)

        decision = detector.before_tool_call(tool, params, run_id=run_id)
        if decision.blocked:
            outcome = detector.after_tool_call(tool, params, result=decision.blocked_result, run_id=run_id)
        elif kind == "error":
            outcome = detector.after_tool_call(tool, params, error=value, run_id=run_id)
        elif kind == "plain":
            outcome = detector.after_tool_call(tool, params, result={"output": value}, run_id=run_id)
        else:
            outcome = detector.after_tool_call(tool, params, result=None if kind == "none" else value, run_id=run_id)
        v = decision.verdict
        got_verdict = (v.level, v.detector, v.count, v.paired_tool_name) if v.stuck else None
        guard = None if outcome.guard is None else outcome.guard.should_abort
        got = (got_verdict, decision.blocked, decision.emit_warning, guard)
        assert got == expected, f"step {index}: {item}"
        assert detector.history_len == len(model.history), f"step {index}"
