"""DoomLoopGuardrail's hooks called as the LiteLLM proxy calls them, with the request bodies of
each endpoint: what is fed once, compactions and turns, blocks and notes, modes, session keys
and tenants, bad input, the stream hook, and the conversation blobs a shared store keeps."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any, AsyncIterator, Dict, List

import pytest

from litellm_proxy import require_litellm

require_litellm()

from fastapi import HTTPException  # noqa: E402 - after the check that litellm is installed
from litellm.proxy._types import UserAPIKeyAuth  # noqa: E402

from doomloop import Monitor, SnapshotError  # noqa: E402
from doomloop.integrations.litellm import DoomLoopGuardrail, LoopInStream  # noqa: E402
from doomloop.integrations.litellm.conversation import Conversation  # noqa: E402
from doomloop.integrations.litellm.keys import session_key  # noqa: E402
from doomloop.profile import ESCALATE_AFTER, Profile  # noqa: E402
from doomloop.traces import openai_chat  # noqa: E402

KEY = UserAPIKeyAuth(api_key="hashed-key-1")
ARGS = '{"path": "notes/a.txt"}'


def guardrail(**options: Any) -> DoomLoopGuardrail:
    return DoomLoopGuardrail(
        guardrail_name="doomloop", event_hook=["pre_call", "post_call"], default_on=True, metrics=False, **options
    )


def pre(g: DoomLoopGuardrail, data: Dict[str, Any], call_type: str = "acompletion", key: Any = KEY) -> Any:
    return asyncio.run(g.async_pre_call_hook(key, None, data, call_type))


def chat_history(calls: int, *, task: str = "fix the bug") -> List[Dict[str, Any]]:
    messages: List[Dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": task}]
    for n in range(calls):
        call = {"id": f"call_{n}", "type": "function", "function": {"name": "read_file", "arguments": ARGS}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": "line 1: TODO"})
    return messages


# OpenClaw's critical threshold: after 20 identical calls with identical outcomes, the next
# one is refused (the parity profile, which keeps the detectors' own levels).
CRITICAL_AT = 20
# Warn first, then stop (the recommended profile): the session detector warns at the third
# identical call, and the loop still going on 5 steps later stops the run: the request that
# carries the eighth call's result is refused.
STOPPED_AT = 3 + ESCALATE_AFTER


def drive(g: DoomLoopGuardrail, make: Any, call_type: str, turns: int = 25, code: str = "session.repeated_action") -> int:
    """Send histories of 1, 2, ... calls; the number of calls of the first refused, which must
    be refused for ``code``."""
    for calls in range(1, turns + 1):
        try:
            pre(g, make(calls), call_type)
        except HTTPException as error:
            assert error.status_code == 400
            detail = error.detail["error"]  # type: ignore[index]
            assert detail["code"] == f"doomloop.{code}" and detail["detector"] == code.partition(".")[0]
            assert detail["message"] and detail["tool"] == "read_file"
            return calls
    raise AssertionError("never blocked")


def test_chat_history_is_warned_then_stopped() -> None:
    assert drive(guardrail(), lambda n: {"model": "m", "messages": chat_history(n)}, "acompletion") == STOPPED_AT


def test_chat_history_is_blocked_at_the_critical_threshold_under_parity() -> None:
    found = drive(
        guardrail(profile="parity"),
        lambda n: {"model": "m", "messages": chat_history(n)},
        "acompletion",
        code="tool_loop.generic_repeat",
    )
    assert found == CRITICAL_AT + 1


def test_responses_input_items_are_read() -> None:
    def body(calls: int) -> Dict[str, Any]:
        items: List[Dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
        for n in range(calls):
            items.append({"type": "function_call", "call_id": f"fc_{n}", "name": "read_file", "arguments": ARGS})
            items.append({"type": "function_call_output", "call_id": f"fc_{n}", "output": "line 1: TODO"})
        return {"model": "m", "input": items}

    assert drive(guardrail(), body, "aresponses") == STOPPED_AT


def test_anthropic_messages_are_read() -> None:
    def body(calls: int) -> Dict[str, Any]:
        messages: List[Dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
        for n in range(calls):
            use = {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file", "input": json.loads(ARGS)}
            messages.append({"role": "assistant", "content": [use]})
            messages.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "line 1: TODO"}]}
            )
        return {"model": "m", "max_tokens": 100, "system": "agent", "messages": messages}

    assert drive(guardrail(), body, "anthropic_messages") == STOPPED_AT


def test_a_resent_history_is_fed_once() -> None:
    conversation = Conversation(Profile.recommended())
    history = chat_history(5)
    conversation.observe(history, openai_chat.steps)
    steps = conversation.step
    for _ in range(3):
        observed = conversation.observe(copy.deepcopy(history), openai_chat.steps)
        assert observed.findings == [] and not observed.compacted
    assert conversation.step == steps
    conversation.observe(chat_history(6), openai_chat.steps)
    assert conversation.step == steps + 1  # the one new call


def test_a_shrunk_history_is_a_compaction_and_old_calls_are_not_fed_again() -> None:
    conversation = Conversation(Profile.recommended())
    conversation.observe(chat_history(8), openai_chat.steps)
    compacted = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Summary: read notes/a.txt 8 times."}]
    compacted += chat_history(8)[-2:]
    steps = conversation.step
    observed = conversation.observe(compacted, openai_chat.steps)
    assert observed.compacted
    # Only the compaction itself is a step: call_7 was recorded before, the summary is no turn.
    assert conversation.step == steps + 1 and conversation.turn == 1


def test_a_new_user_message_is_a_new_turn() -> None:
    conversation = Conversation(Profile.recommended())
    history = chat_history(3)
    conversation.observe(history, openai_chat.steps)
    assert conversation.turn == 1
    conversation.observe(history + [{"role": "user", "content": "try again"}], openai_chat.steps)
    assert conversation.turn == 2


def test_warnings_add_a_note_without_changing_the_clients_list() -> None:
    g = guardrail()
    for calls in range(1, STOPPED_AT):
        data = {"model": "m", "messages": chat_history(calls)}
        sent = data["messages"]
        out = pre(g, data)
    assert sent == chat_history(STOPPED_AT - 1)  # the client's own list is left alone
    note = out["messages"][-1]
    assert note["role"] == "system" and "[doomloop]" in note["content"] and ARGS in note["content"]


@pytest.mark.parametrize("mode", ["warn", "observe"])
def test_modes_that_never_block(mode: str) -> None:
    g = guardrail(doomloop_mode=mode)
    for calls in range(1, 25):
        out = pre(g, {"model": "m", "messages": chat_history(calls)})
    noted = out["messages"][-1]["role"] == "system"
    assert noted == (mode == "warn")


def test_bad_options() -> None:
    from doomloop import ConfigError

    with pytest.raises(ConfigError, match="doomloop_mode"):
        guardrail(doomloop_mode="loud")
    with pytest.raises(ConfigError, match="session_key"):
        guardrail(session_key="no_such_module_here.name")


@pytest.mark.parametrize(
    "messages",
    [
        "not a list",
        [
            {"role": "wizard", "content": "?"},
            42,
            {"role": "assistant", "tool_calls": [{"function": {"name": "x", "arguments": "{not json"}}]},
        ],
        [{"role": "tool", "content": "a result with no call"}],
    ],
)
def test_malformed_messages_are_forwarded_unchanged(messages: Any, caplog: pytest.LogCaptureFixture) -> None:
    data = {"model": "m", "messages": messages}
    before = copy.deepcopy(data)
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        out = pre(guardrail(), data)
    assert out == before
    assert any("forwarded" in record.getMessage() for record in caplog.records)


def test_session_key_order_and_tenants() -> None:
    base = {"messages": [{"role": "user", "content": "hi"}]}
    team = UserAPIKeyAuth(api_key="k", team_id="team-a")
    other = UserAPIKeyAuth(api_key="k2", team_id="team-b")
    full = {
        **base,
        "litellm_session_id": "L",
        "metadata": {"session_id": "M"},
        "proxy_server_request": {"headers": {"x-doomloop-session": "H"}},
        "user": "U",
    }
    names = []
    for drop in (None, "litellm_session_id", "metadata", "proxy_server_request", "user"):
        if drop is not None:
            full.pop(drop)
        names.append(session_key(full, team, full["messages"], None))
    assert names[:4] == ["team:team-a/litellm:L", "team:team-a/session:M", "team:team-a/header:H", "team:team-a/user:U"]
    assert names[4].startswith("team:team-a/digest:")
    # The digest is of the first messages: the same as the conversation grows.
    longer = base["messages"] + [{"role": "assistant", "content": "hello"}]
    assert session_key({"messages": longer[:2]}, team, longer[:2], None) == session_key(
        {"messages": longer[:2] + [{"role": "user", "content": "more"}]},
        team,
        longer[:2] + [{"role": "user", "content": "more"}],
        None,
    )
    # One session name in two tenants: two sessions.
    assert session_key({"user": "U"}, team, [], None) != session_key({"user": "U"}, other, [], None)
    assert session_key({"user": "U"}, UserAPIKeyAuth(api_key="k3"), [], None).startswith("key:")
    assert session_key({"user": "U"}, team, [], lambda data, key: "mine") == "team:team-a/custom:mine"


def test_tenants_never_share_a_session() -> None:
    g = guardrail()
    first, second = UserAPIKeyAuth(api_key="a", team_id="t1"), UserAPIKeyAuth(api_key="b", team_id="t2")
    # Each tenant's agent is stopped at its own eighth call, not at the fourth (the sum).
    for calls in range(1, STOPPED_AT):
        for key in (first, second):
            pre(g, {"model": "m", "user": "same-name", "messages": chat_history(calls)}, key=key)
    for key in (first, second):
        with pytest.raises(HTTPException):
            pre(g, {"model": "m", "user": "same-name", "messages": chat_history(STOPPED_AT)}, key=key)


def chat_chunk(text: str) -> Dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


async def chunks(items: List[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def stream_through(g: DoomLoopGuardrail, items: List[Any], data: Dict[str, Any]) -> List[Any]:
    async def consume() -> List[Any]:
        out = []
        async for chunk in g.async_post_call_streaming_iterator_hook(KEY, chunks(items), data):
            out.append(chunk)
        return out

    return asyncio.run(consume())


def test_stream_hook_passes_healthy_chunks_and_cuts_a_chant() -> None:
    g = guardrail()
    data = {"model": "m", "messages": [{"role": "user", "content": "write"}]}
    healthy = [chat_chunk(f"Sentence {i} is new. ") for i in range(40)]
    out = stream_through(g, healthy, data)
    assert out == healthy and all(a is b for a, b in zip(out, healthy, strict=True))
    chant = [chat_chunk("again and again, ")] * 100
    with pytest.raises(LoopInStream) as caught:
        stream_through(g, healthy + chant, data)
    assert caught.value.finding.code == "chant" and caught.value.status_code == 400
    # The answer streamed so far was recorded, and is not recorded again when it comes back.
    conversation = g.sessions._registry.get(session_key(data, KEY, data["messages"], None))
    assert isinstance(conversation, Conversation)
    assert conversation.answer is not None and conversation.answer.startswith("Sentence 0 is new. ")


def message_frames(texts: List[str]) -> bytes:
    events: List[Dict[str, Any]] = [{"type": "message_start", "message": {"id": "msg_1", "content": []}}]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}} for t in texts]
    events.append({"type": "message_stop"})
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def pieces_of(data: bytes, size: int) -> List[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [7, 100, 100_000])
def test_raw_sse_bytes_are_read_and_passed_unchanged(size: int) -> None:
    # LiteLLM relays Anthropic's /v1/messages stream as the upstream's bytes, cut anywhere.
    g = guardrail()
    data = {"model": "claude", "messages": [{"role": "user", "content": "write"}]}
    healthy = message_frames([f"Sentence {i} is new. " for i in range(40)])
    out = stream_through(g, pieces_of(healthy, size), data)
    assert b"".join(out) == healthy
    conversation = g.sessions._registry.get(session_key(data, KEY, data["messages"], None))
    assert isinstance(conversation, Conversation) and conversation.answer == "".join(f"Sentence {i} is new. " for i in range(40))


@pytest.mark.parametrize("size", [7, 100, 100_000])
def test_a_chant_in_raw_sse_bytes_ends_with_an_error_event(size: int) -> None:
    g = guardrail()
    data = {"model": "claude", "messages": [{"role": "user", "content": "write"}]}
    chant = message_frames(["again and again, "] * 100)
    out = b"".join(stream_through(g, pieces_of(chant, size), data))
    *frames, last, empty = out.split(b"\n\n")
    assert empty == b"" and chant.startswith(b"\n\n".join(frames) + b"\n\n")
    assert len(frames) < 40  # cut well before the stream's 102 frames
    assert last.startswith(b"event: error\ndata: ")
    error = json.loads(last.split(b"data: ", 1)[1])["error"]
    assert error["type"] == "doomloop_loop" and error["code"] == "doomloop.chant" and error["detector"] == "chant"


def test_warn_mode_passes_a_raw_chant_whole() -> None:
    g = guardrail(doomloop_mode="warn")
    chant = message_frames(["again and again, "] * 100)
    out = stream_through(g, pieces_of(chant, 50), {"model": "claude", "messages": [{"role": "user", "content": "write"}]})
    assert b"".join(out) == chant


def test_conversation_blob_round_trip() -> None:
    conversation = Conversation(Profile.recommended())
    conversation.observe(chat_history(12), openai_chat.steps)
    conversation.record_answer("done")
    again = Conversation.from_bytes(conversation.to_bytes())
    assert (again.count, again.last, again.calls, again.user, again.answer) == (
        conversation.count,
        conversation.last,
        conversation.calls,
        conversation.user,
        conversation.answer,
    )
    assert (
        again.observe(chat_history(13), openai_chat.steps).findings
        == conversation.observe(chat_history(13), openai_chat.steps).findings
    )
    assert isinstance(again, Conversation)
    with pytest.raises(SnapshotError, match="not a Monitor snapshot"):
        Conversation.from_bytes(b"garbage")
    # A blob whose cursor cannot be read is a SnapshotError naming it (the registry then
    # starts the conversation afresh, with a logged warning).
    plain = Monitor(Profile.recommended()).to_bytes()
    with pytest.raises(SnapshotError, match="corrupt Conversation snapshot: bad state"):
        Conversation.from_bytes(plain)
