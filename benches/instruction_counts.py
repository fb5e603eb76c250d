"""Instruction counts of the hot paths under ``valgrind --tool=callgrind``: stable where wall
time drifts (the same binary, input and environment give the same count on a busy machine).

Each measure runs a scenario twice in a fresh interpreter, with N operations and with none,
and reports (total(N) - total(0)) / N: the cost of one operation, the caller's loop included.
Both runs first do a few operations (so one-time costs, such as importing ``logging`` for the
first loop episode's warning, fall on both), and ``PYTHONHASHSEED=0`` keeps dict layouts, and
so lookup costs, the same from run to run.

    python benches/instruction_counts.py            # every measure but the LiteLLM pair
    python benches/instruction_counts.py tool chant # some of them
    python benches/instruction_counts.py litellm_stream litellm_passthrough  # minutes each

Per-call measures also print their count above the caller's loop (the ``loop`` measure, an
iteration with an empty body, subtracted).

Needs valgrind and an installed doomloop (the release build: ``maturin develop --release`` or
the wheel).

The regression guard (CI runs it against the wheel it built)::

    python benches/instruction_counts.py --check    # fail if a path grew over 5% of the baseline
    python benches/instruction_counts.py --update   # measure the baseline anew

``--check`` measures every path in ``benches/instruction_baseline.json`` and exits 1 when one
costs more than ``TOLERANCE`` over its baseline. The baseline is measured on the wheel CI builds
(``maturin build --release --zig --compatibility manylinux2014``, CPython 3.11): a local
``maturin develop`` build is compiled differently and counts a few percent apart. Updating it
is a deliberate commit that says why the counts moved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_LITELLM_SETUP = (
    "import asyncio, os\n"
    "os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] = 'True'\n"
    "from litellm.proxy._types import UserAPIKeyAuth\n"
    "from litellm.types.utils import ModelResponseStream\n"
    "from doomloop.integrations.litellm import DoomLoopGuardrail\n"
    "g = DoomLoopGuardrail(guardrail_name='d', event_hook=['pre_call', 'post_call'], default_on=True, metrics=False)\n"
    "key = UserAPIKeyAuth(api_key='hashed-bench-key', team_id='bench')\n"
    "data = {'model': 'm', 'messages': [{'role': 'user', 'content': 'write'}], 'user': 'agent-1'}\n"
    "items = [ModelResponseStream(id='c', model='m', choices=[{'index': 0, 'delta': {'content': f'token{n} '}}])\n"
    "         for n in range(2000)]\n"
    "async def source():\n"
    "    for item in items:\n"
    "        yield item\n"
    "async def drain(stream):\n"
    "    async for _ in stream:\n"
    "        pass\n"
    "loop = asyncio.new_event_loop()"
)

# 1,000 distinct actions, each with a 2 KB traceback whose last line differs (so no loop).
_FAILED_SETUP = (
    "d = doomloop.DoomLoopDetector(doomloop.DoomLoopConfig.recommended()); d.start_session()\n"
    "rec, chk = d.record_action, d.is_doom_loop\n"
    "name = lambda i: ''.join(chr(97 + i // 26**k % 26) for k in range(3))  # another error each time: no loop\n"
    "frames = '  File \"/testbed/src/package/core.py\", line 120, in parse_header\\n    return int(v)\\n' * 28\n"
    "pool = [({'command': f'python run.py --case {i}'}, f'Traceback:\\n{frames}ValueError: {name(i)}') for i in range(1000)]"
)

_SESSION_FRESH = "paths = [f'src/pkg/m{i}.py' for i in range(1000)]; outs = [f'read {i} lines' for i in range(1000)]\n"
_SESSION_FRESH_CALL = "rec('read', {'path': paths[i % 1000], 'line': 3}, outs[i % 1000], True); chk()"
_TOOL_FRESH = (
    "cmds = [f'ls {i}' for i in range(1000)]\n"
    "results = [{'content': [{'type': 'text', 'text': f'a{i}.py'}], 'details': {'status': 'completed', 'exitCode': 0}}\n"
    "           for i in range(1000)]\n"
)
_TOOL_FRESH_CALL = (
    "params = {'command': cmds[i % 1000], 'cwd': '/w', 'timeout': 30}; before('read', params);"
    " after('read', params, result=results[i % 1000])"
)

# name: (what one operation is, operations per N, N, setup, loop body run N times)
SCENARIOS = {
    "session": (
        "record_action + is_doom_loop",
        1,
        20_000,
        "d = doomloop.DoomLoopDetector(); d.start_session(); rec, chk = d.record_action, d.is_doom_loop\n"
        "args = {'path': 'a.py', 'line': 3}",
        "rec('read', args, 'ok', True); chk()",
    ),
    "session_recommended": (
        "record_action + is_doom_loop under DoomLoopConfig.recommended()",
        1,
        20_000,
        "d = doomloop.DoomLoopDetector(doomloop.DoomLoopConfig.recommended()); d.start_session()\n"
        "rec, chk = d.record_action, d.is_doom_loop\n"
        "args = {'path': 'a.py', 'line': 3}",
        "rec('read', args, 'ok', True); chk()",
    ),
    "session_failed": (
        "record_action + is_doom_loop under DoomLoopConfig.recommended(), a failed action with a 2 KB traceback"
        " (1,000 distinct, no loop), digested for retry_storm",
        1,
        20_000,
        _FAILED_SETUP,
        "a, r = pool[i % 1000]; rec('bash', a, r, False); chk()",
    ),
    "session_failed_ok": (
        "the same actions as 'session_failed', succeeding: the cost of the digest is the difference",
        1,
        20_000,
        _FAILED_SETUP,
        "a, r = pool[i % 1000]; rec('bash', a, r, True); chk()",
    ),
    "tool": (
        "before_tool_call + after_tool_call (1,000 distinct params, no loop)",
        1,
        20_000,
        "d = doomloop.ToolLoopDetector(); before, after = d.before_tool_call, d.after_tool_call\n"
        "pool = [{'command': f'ls {i}', 'cwd': '/w', 'timeout': 30} for i in range(1000)]\n"
        "result = {'content': [{'type': 'text', 'text': 'a.py b.py'}], 'details': {'status': 'completed', 'exitCode': 0}}",
        "params = pool[i % 1000]; before('read', params); after('read', params, result=result)",
    ),
    "monitor": (
        "Monitor.before_tool_call + after_tool_call (1,000 distinct params and results, no loop), recording"
        " the action in its session detector too",
        1,
        20_000,
        "m = doomloop.Monitor(); before, after = m.before_tool_call, m.after_tool_call\n"
        "pool = [{'command': f'ls {i}', 'cwd': '/w', 'timeout': 30} for i in range(1000)]\n"
        "results = [{'content': [{'type': 'text', 'text': f'a{i}.py'}], 'details': {'status': 'completed', 'exitCode': 0}}\n"
        "           for i in range(1000)]",
        "params = pool[i % 1000]; before('read', params); after('read', params, result=results[i % 1000])",
    ),
    "monitor_before": (
        "Monitor.before_tool_call (1,000 distinct params, no loop)",
        1,
        20_000,
        "m = doomloop.Monitor(); before = m.before_tool_call\n"
        "pool = [{'command': f'ls {i}', 'cwd': '/w', 'timeout': 30} for i in range(1000)]",
        "before('read', pool[i % 1000])",
    ),
    "tool_before": (
        "ToolLoopDetector.before_tool_call (1,000 distinct params, no loop)",
        1,
        20_000,
        "t = doomloop.ToolLoopDetector(); before = t.before_tool_call\n"
        "pool = [{'command': f'ls {i}', 'cwd': '/w', 'timeout': 30} for i in range(1000)]",
        "before('read', pool[i % 1000])",
    ),
    "tool_session": (
        "the bare calls the 'monitor' measure makes: before_tool_call + after_tool_call, record_action +"
        " is_doom_loop under recommended()",
        1,
        20_000,
        "t = doomloop.ToolLoopDetector(); before, after = t.before_tool_call, t.after_tool_call\n"
        "d = doomloop.DoomLoopDetector(doomloop.DoomLoopConfig.recommended()); d.start_session()\n"
        "rec, chk = d.record_action, d.is_doom_loop\n"
        "pool = [{'command': f'ls {i}', 'cwd': '/w', 'timeout': 30} for i in range(1000)]\n"
        "results = [{'content': [{'type': 'text', 'text': f'a{i}.py'}], 'details': {'status': 'completed', 'exitCode': 0}}\n"
        "           for i in range(1000)]",
        "params = pool[i % 1000]; r = results[i % 1000]; before('read', params); after('read', params, result=r)\n"
        "    rec('read', params, r, True); chk()",
    ),
    # The issue's own measures: a fresh arguments dict per call, as agents build them, with a new
    # path (or command) and a new result each call; counted net of a loop that builds the same
    # arguments ("_args", see NET_OF). Warmed up past the first loop episode in the setup, so
    # its one-time costs (the log record, the event) fall on both runs. Under DoomLoopConfig()
    # the same tool every call is a loop PraisonAI's rules report, so that measure is of a
    # session in a loop; under recommended() it is healthy.
    "session_fresh": (
        "record_action + is_doom_loop, a fresh arguments dict and a new path and result each call, DoomLoopConfig()",
        1,
        20_000,
        "d = doomloop.DoomLoopDetector(); d.start_session(); rec, chk = d.record_action, d.is_doom_loop\n"
        + _SESSION_FRESH
        + f"for i in range(50): {_SESSION_FRESH_CALL}",
        _SESSION_FRESH_CALL,
    ),
    "session_fresh_recommended": (
        "the same under DoomLoopConfig.recommended()",
        1,
        20_000,
        "d = doomloop.DoomLoopDetector(doomloop.DoomLoopConfig.recommended()); d.start_session()\n"
        "rec, chk = d.record_action, d.is_doom_loop\n" + _SESSION_FRESH + f"for i in range(50): {_SESSION_FRESH_CALL}",
        _SESSION_FRESH_CALL,
    ),
    "session_fresh_args": (
        "building the arguments the 'session_fresh' measures pass",
        1,
        20_000,
        _SESSION_FRESH,
        "('read', {'path': paths[i % 1000], 'line': 3}, outs[i % 1000], True)",
    ),
    "tool_fresh": (
        "before_tool_call + after_tool_call, a fresh params dict and a new command and OpenClaw-shaped result each"
        " call, healthy session",
        1,
        20_000,
        "d = doomloop.ToolLoopDetector(); before, after = d.before_tool_call, d.after_tool_call\n"
        + _TOOL_FRESH
        + f"for i in range(50): {_TOOL_FRESH_CALL}",
        _TOOL_FRESH_CALL,
    ),
    "tool_nested": (
        "before_tool_call + after_tool_call, a fresh params dict holding a list (never snapshotted) each call",
        1,
        20_000,
        "d = doomloop.ToolLoopDetector(); before, after = d.before_tool_call, d.after_tool_call\n"
        "cmds = [f'ls {i}' for i in range(1000)]",
        "params = {'command': cmds[i % 1000], 'env': ['A', 'B']}; before('bash', params); after('bash', params, result='ok')",
    ),
    "tool_fresh_args": (
        "building the arguments the 'tool_fresh' measure passes",
        1,
        20_000,
        _TOOL_FRESH,
        "params = {'command': cmds[i % 1000], 'cwd': '/w', 'timeout': 30}; results[i % 1000]",
    ),
    "chant": (
        "feed, per character of a 1.9 MB chunk",
        1_930_000,
        2,
        "import random\n"
        "rng = random.Random(1)\n"
        "words = ['the', 'model', 'agent', 'tool', 'call', 'file', 'read', 'write', 'loop', 'test']\n"
        "text = ' '.join(f'{rng.choice(words)}{rng.randrange(10**6)}' for _ in range(200_000))\n"
        "d = doomloop.ChantDetector()",
        "d.reset(); d.feed(text)",
    ),
    "chant_source": (
        "feed, per character of Python source in 64 KiB chunks (2 MiB of the standard library)",
        2 << 20,
        2,
        "import os, sysconfig\n"
        "root = sysconfig.get_paths()['stdlib']\n"
        "paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(root) for f in fs if f.endswith('.py'))\n"
        "parts, size = [], 0\n"
        "for path in paths:\n"
        "    if size >= 2 << 20: break\n"
        "    with open(path, encoding='utf-8', errors='replace') as f: parts.append(f.read())\n"
        "    size += len(parts[-1])\n"
        "text = ''.join(parts)[: 2 << 20]\n"
        "chunks = [text[k : k + (64 << 10)] for k in range(0, len(text), 64 << 10)]\n"
        # A fixed hash key: which windows are anchors, and so how often source code's recurring
        # windows restart a chain, depends on it (33.2 and 34.2 in two runs with random keys).
        "d = doomloop.ChantDetector(seed=1)",
        "d.reset(); [d.feed(c) for c in chunks]",
    ),
    "token": (
        "feed of one token-sized chunk",
        1000,
        5,
        "d = doomloop.ChantDetector(); feed = d.feed; pieces = [f'tok{i} ' for i in range(1000)]",
        "[feed(p) for p in pieces]; d.reset()",
    ),
    "registry": (
        "SessionRegistry get-or-create + before_tool_call + after_tool_call (the 'tool' measure through a registry)",
        1,
        20_000,
        "from doomloop.gateway import SessionRegistry\n"
        "d = SessionRegistry(); before, after = d.before_tool_call, d.after_tool_call\n"
        "pool = [{'command': f'ls {i}', 'cwd': '/w', 'timeout': 30} for i in range(1000)]\n"
        "result = {'content': [{'type': 'text', 'text': 'a.py b.py'}], 'details': {'status': 'completed', 'exitCode': 0}}",
        "params = pool[i % 1000]; before('s', 'read', params); after('s', 'read', params, result=result)",
    ),
    "registry_store": (
        "before_tool_call + after_tool_call through a SessionRegistry on a MemoryStore (the 'registry' measure"
        " with each hook one update of the session's blob: the shared-store path without the network)",
        1,
        20_000,
        "from doomloop.gateway import MemoryStore, SessionRegistry\n"
        "d = SessionRegistry(store=MemoryStore()); before, after = d.before_tool_call, d.after_tool_call\n"
        "pool = [{'command': f'ls {i}', 'cwd': '/w', 'timeout': 30} for i in range(1000)]\n"
        "result = {'content': [{'type': 'text', 'text': 'a.py b.py'}], 'details': {'status': 'completed', 'exitCode': 0}}",
        "params = pool[i % 1000]; before('s', 'read', params); after('s', 'read', params, result=result)",
    ),
    "registry_store_session": (
        "record_action + is_doom_loop through a SessionRegistry on a MemoryStore (each hook one update"
        " of the session's blob), a fresh arguments dict each call",
        1,
        20_000,
        "from doomloop.gateway import MemoryStore, SessionRegistry\n"
        "d = SessionRegistry(store=MemoryStore()); record, is_loop = d.record_action, d.is_doom_loop\n"
        "paths = [f'/w/src/module_{i}.py' for i in range(1000)]; results = [f'{i} lines' for i in range(1000)]",
        "record('s', 'read', {'path': paths[i % 1000]}, results[i % 1000], True); is_loop('s')",
    ),
    "blocked": (
        "before_tool_call + after_tool_call of a call blocked as a loop (the same call again)",
        1,
        20_000,
        "d = doomloop.ToolLoopDetector(); before, after = d.before_tool_call, d.after_tool_call\n"
        "params = {'command': 'ls', 'cwd': '/w'}\n"
        "for _ in range(30): before('read', params); after('read', params, result='same')",
        "x = before('read', params); after('read', params, result=x.blocked_result)",
    ),
    "warned": (
        "before_tool_call + after_tool_call of a call in a warned ping-pong",
        1,
        20_000,
        "d = doomloop.ToolLoopDetector(critical_threshold=10**6, global_circuit_breaker_threshold=10**6 + 1)\n"
        "before, after = d.before_tool_call, d.after_tool_call\n"
        "calls = [('read', {'p': 1}), ('list', {'p': 2})]\n"
        "for i in range(12): t, p = calls[i % 2]; before(t, p); after(t, p, result=t)",
        "t, p = calls[i % 2]; before(t, p); after(t, p, result=t)",
    ),
    "cycle_warned": (
        "before_tool_call + after_tool_call of a call in a warned cycle (7 paths read in turn, same results)",
        1,
        20_000,
        "d = doomloop.ToolLoopDetector(critical_threshold=10**6, global_circuit_breaker_threshold=10**6 + 1)\n"
        "before, after = d.before_tool_call, d.after_tool_call\n"
        "calls = [{'path': f'src/mod{n}.py'} for n in range(7)]\n"
        "for i in range(30): p = calls[i % 7]; before('read', p); after('read', p, result='same')",
        "p = calls[i % 7]; before('read', p); after('read', p, result='same')",
    ),
    "cycle_normal": (
        "before_tool_call + after_tool_call of a normal call shaped as 'cycle_warned' (1,000 paths read in turn,"
        " same results): what a warned cycle's call is compared with",
        1,
        20_000,
        "d = doomloop.ToolLoopDetector(critical_threshold=10**6, global_circuit_breaker_threshold=10**6 + 1)\n"
        "before, after = d.before_tool_call, d.after_tool_call\n"
        "calls = [{'path': f'src/mod{n}.py'} for n in range(1000)]\n"
        "for i in range(30): p = calls[i % 1000]; before('read', p); after('read', p, result='same')",
        "p = calls[i % 1000]; before('read', p); after('read', p, result='same')",
    ),
    # The LiteLLM guardrail's stream hook, per chunk of LiteLLM's own ModelResponseStream
    # objects, and the pass-through hook it is compared with (bench_litellm.py's pair). Each
    # run imports litellm (about 14 G instructions under valgrind, minutes): named only, never
    # in the default set.
    "litellm_stream": (
        "chunk through DoomLoopGuardrail's stream hook (2,000 chunks a response)",
        2000,
        3,
        _LITELLM_SETUP,
        "loop.run_until_complete(drain(g.async_post_call_streaming_iterator_hook(key, source(), data)))",
    ),
    "litellm_passthrough": (
        "chunk through a pass-through async generator (2,000 chunks a response)",
        2000,
        3,
        _LITELLM_SETUP,
        "loop.run_until_complete(drain(source()))",
    ),
    "new_session": ("DoomLoopDetector()", 1, 5_000, "", "doomloop.DoomLoopDetector()"),
    "new_tool": ("ToolLoopDetector()", 1, 5_000, "", "doomloop.ToolLoopDetector()"),
    "import": ("import doomloop", 1, 1, "", ""),
    # What every per-call measure above includes besides the calls: an iteration of the
    # module-level loop (FOR_ITER, storing `i`). Subtracted, it gives the cost "above the
    # caller's loop" that the issue's targets name.
    "loop": ("iteration of the caller's loop (an empty body)", 1, 20_000, "", "pass"),
}


def _count(code: str) -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            check=True,
        )
    found = re.search(r"Collected : (\d+)", run.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no count:\n{run.stderr}")
    return int(found[1])


def measure(name: str) -> float:
    """Instructions per operation of one scenario."""
    _, per_n, n, setup, body = SCENARIOS[name]
    if name == "import":
        return float(_count("import doomloop") - _count("pass"))

    def script(repeats: int) -> str:
        return f"import doomloop\n{setup}\nfor i in range(3):\n    {body}\nfor i in range({repeats}):\n    {body}\n"

    return (_count(script(n)) - _count(script(0))) / (n * per_n)


NET_OF = {
    "session_fresh": "session_fresh_args",
    "session_fresh_recommended": "session_fresh_args",
    "tool_fresh": "tool_fresh_args",
}
"""Measures reported net of the loop that builds their arguments (the issue's definition)."""

BASELINE = Path(__file__).with_name("instruction_baseline.json")
TOLERANCE = 0.05
"""How much a path may grow over its baseline before ``--check`` fails."""
GUARDED = [
    "session",
    "session_recommended",
    "session_fresh",
    "session_fresh_recommended",
    "tool",
    "tool_fresh",
    "tool_nested",
    "monitor",
    "chant",
    "chant_source",
    "token",
    "registry",
    "registry_store",
    "registry_store_session",
    "blocked",
    "warned",
    "cycle_warned",
]
"""The paths the regression guard holds to the baseline."""


def main(names: list[str]) -> None:
    loop = measure("loop")
    built: dict[str, float] = {}
    for name in names or [name for name in SCENARIOS if not name.startswith("litellm_")]:
        count = loop if name == "loop" else measure(name)
        line = f"{name:8} {count:>14,.1f}  instructions per {SCENARIOS[name][0]}"
        if name in NET_OF:
            base = NET_OF[name]
            if base not in built:
                built[base] = measure(base)
            line += f" ({count - built[base]:,.1f} net of building its arguments)"
        elif SCENARIOS[name][1] == 1 and name not in ("loop", "import"):
            line += f" ({count - loop:,.1f} above the caller's loop)"
        print(line)


def check() -> int:
    """Measure the guarded paths against the baseline; 1 when one grew over the tolerance."""
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))["instructions"]
    failed = []
    for name, base in baseline.items():
        count = measure(name)
        growth = count / base - 1
        verdict = "OVER" if growth > TOLERANCE else "ok"
        print(f"{name:20} {count:>14,.1f}  baseline {base:>14,.1f}  {growth:+7.2%}  {verdict}")
        if growth > TOLERANCE:
            failed.append(name)
    if failed:
        print(
            f"instruction counts grew over {TOLERANCE:.0%} of {BASELINE.name}: {', '.join(failed)} "
            "(make them cheaper again, or update the baseline in a commit that says why)",
            file=sys.stderr,
        )
        return 1
    return 0


def update() -> None:
    counts = {name: round(measure(name), 1) for name in GUARDED}
    document = {
        "about": "Instruction counts per operation of the paths benches/instruction_counts.py --check guards, "
        "measured on the wheel CI builds (CPython 3.11, valgrind 3.19). Update in a commit that says why.",
        "instructions": counts,
    }
    BASELINE.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    for name, count in counts.items():
        print(f"{name:20} {count:>14,.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Instruction counts of doomloop's hot paths under callgrind.")
    parser.add_argument("names", nargs="*", help="measures to print (default: every one but the LiteLLM pair)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help=f"fail when a path grew over {TOLERANCE:.0%} of the baseline")
    mode.add_argument("--update", action="store_true", help="measure the baseline anew")
    arguments = parser.parse_args()
    if arguments.check:
        sys.exit(check())
    if arguments.update:
        update()
    else:
        main(arguments.names)
