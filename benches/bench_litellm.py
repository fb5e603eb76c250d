"""Benchmarks of the LiteLLM guardrail's hooks, called as the proxy calls them, on the
request and chunk objects the proxy hands them:

- pre-call on a 200-message chat history with 80 tool calls: the first time a proxy sees it
  (every message read) and resent unchanged (the usual case: a client re-sends the whole
  history each turn);
- the stream hook over LiteLLM's ``ModelResponseStream`` chunks, against a hook that only
  passes them through (the difference per chunk is the guardrail's overhead).

Run: ``python -m pytest benches/bench_litellm.py --benchmark-enable --benchmark-only``
(without ``--benchmark-enable`` each body runs once, as a plain test). The targets on the
2-core reference machine: under 50 µs per resent request, under 2 µs per chunk.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, AsyncIterator, Dict, List

import pytest

from litellm_proxy import require_litellm

require_litellm()

from litellm.proxy._types import UserAPIKeyAuth  # noqa: E402 - after the check that litellm is installed
from litellm.types.utils import ModelResponseStream  # noqa: E402

from doomloop.integrations.litellm import DoomLoopGuardrail  # noqa: E402

KEY = UserAPIKeyAuth(api_key="hashed-bench-key", team_id="bench")
CHUNKS = 2_000


def history() -> List[Dict[str, Any]]:
    """200 messages: a system prompt, a task, 80 tool calls (each an assistant message and its
    result, on 80 different files) and 38 messages of conversation between them."""
    messages: List[Dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools to inspect and edit the repository. " * 8},
        {"role": "user", "content": "The test suite fails on the date parser; find out why and fix it."},
    ]
    for n in range(80):
        call = {
            "id": f"call_{n:04d}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/module_{n}.py"})},
        }
        messages.append(
            {"role": "assistant", "content": f"Reading module {n} next." if n % 4 == 0 else None, "tool_calls": [call]}
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": f"# module {n}\n" + f"def f{n}(x):\n    return x + {n}\n" * 20,
            }
        )
        if n % 4 == 3 and len(messages) < 198:
            messages.append({"role": "assistant", "content": f"Modules up to {n} look fine; the parser must be further on."})
            messages.append({"role": "user", "content": f"Keep going (step {n})."})
    while len(messages) < 200:
        messages.append({"role": "user", "content": "Any progress?"})
    assert len(messages) == 200
    return messages


def guardrail() -> DoomLoopGuardrail:
    return DoomLoopGuardrail(guardrail_name="doomloop", event_hook=["pre_call", "post_call"], default_on=True, metrics=False)


def run(coroutine: Any) -> Any:
    # The in-process hooks never wait on anything: one step of the coroutine finishes it, with
    # no event loop's cost in the figure.
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the hook awaited something")


@pytest.mark.benchmark(group="litellm: pre-call, 200 messages, 80 tool calls")
def test_pre_call_first_time(benchmark: Any) -> None:
    g = guardrail()
    messages = history()
    users = (f"user-{n}" for n in itertools.count())

    def call() -> None:
        # A new session each round: every message is read.
        run(g.async_pre_call_hook(KEY, None, {"model": "m", "messages": messages, "user": next(users)}, "acompletion"))

    benchmark.pedantic(call, rounds=200, iterations=1, warmup_rounds=2)


@pytest.mark.benchmark(group="litellm: pre-call, 200 messages, 80 tool calls")
def test_pre_call_resent(benchmark: Any) -> None:
    g = guardrail()
    messages = history()
    data = {"model": "m", "messages": messages, "user": "agent-1"}
    run(g.async_pre_call_hook(KEY, None, dict(data), "acompletion"))
    resent = json.loads(json.dumps(messages))  # a new request's objects, as the proxy parses them

    def call() -> None:
        run(g.async_pre_call_hook(KEY, None, {"model": "m", "messages": resent, "user": "agent-1"}, "acompletion"))

    benchmark.pedantic(call, rounds=50, iterations=200, warmup_rounds=1)


def chunks() -> List[ModelResponseStream]:
    words = [f"token{n} " for n in range(CHUNKS)]
    return [ModelResponseStream(id="chatcmpl-1", model="m", choices=[{"index": 0, "delta": {"content": w}}]) for w in words]


async def source(items: List[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def passthrough(items: List[Any]) -> int:
    count = 0
    async for _ in source(items):
        count += 1
    return count


async def guarded(g: DoomLoopGuardrail, items: List[Any], data: Dict[str, Any]) -> int:
    count = 0
    async for _ in g.async_post_call_streaming_iterator_hook(KEY, source(items), data):
        count += 1
    return count


@pytest.mark.benchmark(group=f"litellm: a stream of {CHUNKS} chunks")
def test_stream_passthrough(benchmark: Any) -> None:
    items = chunks()
    loop = asyncio.new_event_loop()
    try:
        assert benchmark.pedantic(lambda: loop.run_until_complete(passthrough(items)), rounds=20, warmup_rounds=1) == CHUNKS
    finally:
        loop.close()


@pytest.mark.benchmark(group=f"litellm: a stream of {CHUNKS} chunks")
def test_stream_guarded(benchmark: Any) -> None:
    g = guardrail()
    items = chunks()
    data = {"model": "m", "messages": [{"role": "user", "content": "write"}], "user": "agent-1"}
    loop = asyncio.new_event_loop()
    try:
        assert benchmark.pedantic(lambda: loop.run_until_complete(guarded(g, items, data)), rounds=20, warmup_rounds=1) == CHUNKS
    finally:
        loop.close()
