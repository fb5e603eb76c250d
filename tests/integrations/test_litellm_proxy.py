"""The guardrail in a real LiteLLM proxy, end to end: proxies started from config.yaml files
holding the documented snippet, a fake OpenAI-compatible upstream behind them, and the
``openai`` client in front.

Five proxies start at once (each takes about a minute on two cores): one without the
guardrail (the baseline healthy traffic is compared with), one with it in memory, one in
``warn`` mode, and two sharing a private Redis server (``redis_on_error`` open and closed),
which the outage test kills last.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import httpx
import pytest

from doomloop.profile import ESCALATE_AFTER
from fake_upstream import CHANT_SENTENCE, HEALTHY, Upstream
from litellm_proxy import MASTER_KEY, Proxy, config, require_litellm
from redis_helpers import RedisServer

require_litellm()

import anthropic  # noqa: E402 - after the check that it is installed
import openai  # noqa: E402

# The recommended profile's chant detector: a window of 32 characters, 6 repeats. A chant of
# period p is reported within 32 + 6 * (p + 32) characters of its start.
CHANT_BOUND = 32 + 6 * (len(CHANT_SENTENCE) + 32)
# OpenClaw's tool-loop thresholds: a warning once a call was made 10 times, and the call after
# 20 identical calls with identical outcomes is refused (what warn mode reaches, never stopped).
WARN_AT, BLOCK_AT = 10, 20
# Warn first, then stop (the recommended profile): the session detector warns at the third
# identical call and stops the loop 5 steps later. Turn n of an agent sends n calls, so the
# note comes with turn 3 and the refusal at turn 8.
SESSION_WARN_AT = 3
STOPPED_AT = SESSION_WARN_AT + ESCALATE_AFTER


class Proxies:
    def __init__(self, directory: Path, upstream: Upstream, redis: RedisServer) -> None:
        self.upstream = upstream
        self.redis = redis
        shared = {"redis_url": redis.url, "redis_timeout": 0.2}
        specs = {
            "plain": None,
            "guarded": {},
            "warn": {"doomloop_mode": "warn"},
            "shared_open": dict(shared),
            "shared_closed": {**shared, "redis_on_error": "closed"},
        }
        self.all: Dict[str, Proxy] = {}
        try:
            for name, options in specs.items():
                self.all[name] = Proxy(directory, config(upstream.url, options, metrics=name == "warn"), name, wait=False)
            for proxy in self.all.values():
                proxy.wait()
        except BaseException:
            self.stop()
            raise

    def client(self, name: str) -> openai.OpenAI:
        return openai.OpenAI(api_key=MASTER_KEY, base_url=self.all[name].url, max_retries=0, timeout=60)

    def stop(self) -> None:
        for proxy in self.all.values():
            proxy.stop()


@pytest.fixture(scope="module")
def proxies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxies]:
    redis = RedisServer()
    redis.start()
    with Upstream() as upstream:
        running = Proxies(tmp_path_factory.mktemp("proxies"), upstream, redis)
        try:
            yield running
        finally:
            running.stop()
            redis.kill()


def raw(proxies: Proxies, name: str, body: Dict[str, Any]) -> httpx.Response:
    url = proxies.all[name].url + "/chat/completions"
    return httpx.post(url, json=body, headers={"authorization": f"Bearer {MASTER_KEY}"}, timeout=60)


# litellm stamps streamed chunks with its own clock: the one field that differs between two
# proxies' answers to the same upstream stream.
_CREATED = re.compile(rb'"created":\d+')


@pytest.mark.parametrize("stream", [False, True])
def test_healthy_traffic_passes_byte_for_byte(proxies: Proxies, stream: bool) -> None:
    body = {"model": "fake", "stream": stream, "messages": [{"role": "user", "content": "Summarise the report."}]}
    sent: List[bytes] = []
    upstream_bodies: List[Dict[str, Any]] = []
    for name in ("plain", "guarded"):
        before = len(proxies.upstream.requests)
        reply = raw(proxies, name, body)
        assert reply.status_code == 200, reply.text
        sent.append(_CREATED.sub(b'"created":0', reply.content))
        upstream_bodies.append(proxies.upstream.requests[before])
    # The fake upstream numbers its answers: the ids differ by one, nothing else.
    plain, guarded = (re.sub(rb"chatcmpl-fake\d+", b"chatcmpl-fake", text) for text in sent)
    assert guarded == plain
    assert _answer(guarded, stream) == "".join(HEALTHY)
    # And the upstream got the same request from both.
    assert upstream_bodies[0]["messages"] == upstream_bodies[1]["messages"] == body["messages"]


def _answer(body: bytes, stream: bool) -> str:
    if not stream:
        return json.loads(body)["choices"][0]["message"]["content"]
    chunks = [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_a_repeating_stream_is_cut_within_the_bound(proxies: Proxies) -> None:
    client = proxies.client("guarded")
    received = ""
    stream = client.chat.completions.create(model="fake", stream=True, messages=[{"role": "user", "content": "task: chant"}])
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            if chunk.choices:
                received += chunk.choices[0].delta.content or ""
    error = caught.value
    assert "doomloop" in error.message and "chant" in error.message
    assert isinstance(error.body, dict) and error.body.get("type") == "doomloop_loop"
    # Cut within the detector's bound (plus the chunk that completed the chant, held back).
    assert 0 < len(received) <= CHANT_BOUND and received == (CHANT_SENTENCE * 200)[: len(received)]


def messages_stream(proxies: Proxies, name: str, task: str) -> bytes:
    """The raw body of a streamed Anthropic /v1/messages request through proxy ``name``."""
    url = proxies.all[name].url.removesuffix("/v1") + "/v1/messages"
    body = {"model": "claude-fake", "max_tokens": 256, "stream": True, "messages": [{"role": "user", "content": task}]}
    with httpx.stream("POST", url, json=body, headers={"x-api-key": MASTER_KEY}, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        return reply.read()


def test_healthy_anthropic_stream_passes_byte_for_byte(proxies: Proxies) -> None:
    # LiteLLM relays /v1/messages streams as the upstream's SSE bytes: the guardrail reads them
    # frame by frame and passes them on unchanged.
    plain, guarded = (messages_stream(proxies, name, "Summarise the report.") for name in ("plain", "guarded"))
    plain, guarded = (re.sub(rb"msg_fake\d+", b"msg_fake", body) for body in (plain, guarded))
    assert guarded == plain
    text = "".join(
        json.loads(line[6:])["delta"]["text"] for line in guarded.decode().split("\n") if '"content_block_delta"' in line
    )
    assert text == "".join(HEALTHY)


def test_a_repeating_anthropic_stream_is_cut_within_the_bound(proxies: Proxies) -> None:
    client = anthropic.Anthropic(api_key=MASTER_KEY, base_url=proxies.all["guarded"].url.removesuffix("/v1"), max_retries=0)
    received = ""
    stream = client.messages.create(
        model="claude-fake", max_tokens=256, stream=True, messages=[{"role": "user", "content": "task: chant"}]
    )
    with pytest.raises(anthropic.APIStatusError) as caught:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                received += event.delta.text
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    error = body["error"]
    assert error["type"] == "doomloop_loop" and error["code"] == "doomloop.chant" and "repeats itself" in error["message"]
    assert 0 < len(received) <= CHANT_BOUND and received == (CHANT_SENTENCE * 200)[: len(received)]


def agent(client: openai.OpenAI, task: str, turns: int, **extra: Any) -> Iterator[Optional[openai.BadRequestError]]:
    """An agent stuck calling read_file: each turn sends the whole history with the last call's
    (unchanged) result; yields None for each answered turn, then the error that stopped it."""
    messages: List[Dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": task}]
    for _ in range(turns):
        try:
            reply = client.chat.completions.create(model="fake", messages=messages, **extra)  # type: ignore[call-overload]
        except openai.BadRequestError as error:
            yield error
            return
        call = reply.choices[0].message.tool_calls[0]
        messages.append({"role": "assistant", "content": None, "tool_calls": [call.model_dump()]})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "line 1: TODO\n"})
        yield None


def notes_in(request: Dict[str, Any]) -> List[str]:
    return [m["content"] for m in request["messages"] if m.get("role") == "system" and "[doomloop]" in str(m.get("content"))]


def test_a_repeated_tool_call_is_warned_then_stopped(proxies: Proxies) -> None:
    upstream = proxies.upstream
    warned_at = None
    for number, outcome in enumerate(agent(proxies.client("guarded"), "task: loop (warned)", BLOCK_AT + 5)):
        if outcome is not None:
            assert number == STOPPED_AT and outcome.status_code == 400
            # What the client sees: the finding's message, and its code and detector in the
            # body LiteLLM builds from the guardrail's HTTPException.
            body = outcome.body
            assert isinstance(body, dict) and "stopped" in body["message"]
            error = body["provider_specific_fields"]["error"]
            assert error["code"] == "doomloop.session.repeated_action" and error["detector"] == "session"
            assert error["tool"] == "read_file" and error["message"] == body["message"]
            break
        notes = notes_in(upstream.requests[-1])
        if warned_at is None and any("Same action repeated" in note for note in notes):
            warned_at = number
    else:
        raise AssertionError("never blocked")
    assert warned_at == SESSION_WARN_AT
    note = notes_in(upstream.requests[-1])[0]
    assert '{"path": "notes/a.txt"}' in note and "Do not repeat" in note


def test_warn_mode_never_blocks(proxies: Proxies) -> None:
    outcomes = list(agent(proxies.client("warn"), "task: loop (warn mode)", BLOCK_AT + 3))
    assert outcomes == [None] * (BLOCK_AT + 3)
    assert any("CRITICAL" in note for note in notes_in(proxies.upstream.requests[-1]))


def test_metrics_are_served_on_the_proxys_metrics(proxies: Proxies) -> None:
    # After the warn-mode agent above: its loop events are counted in the proxy's own /metrics.
    list(agent(proxies.client("warn"), "task: loop (metrics)", WARN_AT + 2))
    text = httpx.get(proxies.all["warn"].url.removesuffix("/v1") + "/metrics", timeout=30, follow_redirects=True).text
    counted = re.findall(r'doomloop_loop_events_total\{[^}]*detector="generic_repeat"[^}]*level="warning"[^}]*\} (\d+)', text)
    assert counted and int(float(counted[0])) >= 2, text[:2000]
    assert re.search(r"^doomloop_sessions_live \d", text, flags=re.M)


def test_two_sessions_do_not_interfere(proxies: Proxies) -> None:
    # The same conversation from two users: two sessions, each stopped at its own eighth call,
    # their turns interleaved.
    client = proxies.client("guarded")
    first = agent(client, "task: loop (two sessions)", BLOCK_AT + 5, user="alice")
    second = agent(client, "task: loop (two sessions)", BLOCK_AT + 5, user="bob")
    stopped = {}
    for number in range(BLOCK_AT + 5):
        for name, turns in (("alice", first), ("bob", second)):
            if name not in stopped and next(turns) is not None:
                stopped[name] = number
    assert stopped == {"alice": STOPPED_AT, "bob": STOPPED_AT}


def test_two_proxies_share_one_session_through_redis(proxies: Proxies) -> None:
    # One agent's requests alternate between two replicas: blocked at the same call as one.
    clients = [proxies.client("shared_open"), proxies.client("shared_closed")]
    messages: List[Dict[str, Any]] = [{"role": "user", "content": "task: loop (replicas)"}]
    for number in range(BLOCK_AT + 5):
        try:
            reply = clients[number % 2].chat.completions.create(model="fake", messages=messages)  # type: ignore[arg-type]
        except openai.BadRequestError as error:
            assert number == STOPPED_AT and "session.repeated_action" in str(error.body)
            return
        call = reply.choices[0].message.tool_calls[0]
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "line 1: TODO\n"},
        ]
    raise AssertionError("never blocked")


def test_a_redis_outage_follows_the_store_policy(proxies: Proxies) -> None:
    # Last: it kills the shared proxies' Redis. "open" serves from the proxy's own copy,
    # "closed" refuses with a 400 naming the store (never a 5xx, which clients retry).
    proxies.redis.kill()
    body = {"model": "fake", "messages": [{"role": "user", "content": "Summarise the report."}], "user": "outage"}
    served = raw(proxies, "shared_open", body)
    assert served.status_code == 200, served.text
    refused = raw(proxies, "shared_closed", body)
    assert refused.status_code == 400, refused.text
    assert "doomloop.store_unavailable" in refused.text
