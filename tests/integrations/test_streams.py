"""Stream guards for every SDK shape: chat-completion chunks (every choice's content and
tool-call arguments), Responses API events and Anthropic Messages events, read from recorded
SSE streams by the ``openai`` and ``anthropic`` SDKs themselves, sync and async, and as dicts."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, List

import anthropic
import openai
import pytest

from doomloop import ChantDetector, ChantingDetected, guard_chat_stream as top_level_guard
from doomloop.integrations.anthropic import guard_message_stream, guard_message_stream_async, message_pieces
from doomloop.integrations.openai import (
    chat_pieces,
    guard_chat_stream,
    guard_chat_stream_async,
    guard_responses_stream,
    guard_responses_stream_async,
    responses_pieces,
)
from sse import (
    Recorded,
    anthropic_json,
    anthropic_stream,
    anthropic_text,
    chat_stream,
    function_arguments,
    output_text,
    responses_stream,
    sdk_http,
    text_delta,
    tool_delta,
)

PROSE = [f"Sentence {i} says something new about topic {i * 7 % 13}. " for i in range(30)]
CHANT = ["and again, ", "and again, ", "and again! "] * 60
# A tool call whose arguments never end: the model writes the same clause over and over.
ARGS_OK = ['{"query": "', "weather in Lisbon", " tomorrow", '", "units": "metric"}']
ARGS_CHANT = ['{"query": "'] + ["retry the same search, "] * 80


def openai_client(recorded: Recorded) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url="http://recorded/v1", http_client=recorded.sync(), max_retries=0)


def openai_async(recorded: Recorded) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="sk-test", base_url="http://recorded/v1", http_client=recorded.asynchronous(), max_retries=0
    )


def chat(recorded: Recorded) -> Any:
    return openai_client(recorded).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)


def healthy_chat() -> bytes:
    pieces: List[Dict[str, Any]] = []
    for i, text in enumerate(PROSE):
        pieces.append(text_delta(0, text))
        pieces.append(text_delta(1, PROSE[-1 - i]))
    pieces += [tool_delta(0, 0, ARGS_OK[0], first=True)] + [tool_delta(0, 0, a) for a in ARGS_OK[1:]]
    pieces += [tool_delta(0, 1, ARGS_OK[0], first=True)] + [tool_delta(0, 1, a) for a in ARGS_OK[1:]]
    return chat_stream(pieces, choices=2)


def test_healthy_chat_stream_passes_unchanged() -> None:
    unguarded = [chunk.model_dump() for chunk in chat(Recorded(healthy_chat()))]
    guarded = [chunk.model_dump() for chunk in guard_chat_stream(chat(Recorded(healthy_chat())))]
    assert guarded == unguarded and len(guarded) > len(PROSE) * 2


def test_second_choice_chanting_is_caught() -> None:
    # Choice 0 stays healthy; choice 1 chants. The old guard read only choices[0].
    pieces = [piece for i, text in enumerate(CHANT) for piece in (text_delta(0, PROSE[i % 30]), text_delta(1, text))]
    recorded = Recorded(chat_stream(pieces, choices=2))
    passed: List[Any] = []
    with pytest.raises(ChantingDetected) as caught:
        for chunk in guard_chat_stream(chat(recorded)):
            passed.append(chunk)
    assert caught.value.event.window in "".join(CHANT)
    # The chunk that completed the chant is held back, and the HTTP response is closed.
    choice_one = "".join(c.choices[0].delta.content or "" for c in passed if c.choices and c.choices[0].index == 1)
    assert len(choice_one) < caught.value.event.end + len(CHANT[0]) and recorded.closed == 1


def test_top_level_name_is_the_openai_guard() -> None:
    assert top_level_guard is guard_chat_stream


@pytest.mark.parametrize("call", [0, 1])
def test_repeating_tool_arguments_are_caught(call: int) -> None:
    pieces = [tool_delta(0, 0, ARGS_OK[0], first=True)] + [tool_delta(0, 0, a) for a in ARGS_OK[1:]]
    pieces += [tool_delta(0, call, ARGS_CHANT[0], first=call == 1)] + [tool_delta(0, call, a) for a in ARGS_CHANT[1:]]
    if call == 0:
        del pieces[: len(ARGS_OK)]
    detector = ChantDetector()
    recorded = Recorded(chat_stream(pieces))
    out = list(guard_chat_stream(chat(recorded), detector, on_chant="stop"))
    chunks_sent = len(list(chat(Recorded(chat_stream(pieces)))))
    assert len(out) < chunks_sent and recorded.closed == 1


def test_tool_calls_are_accumulated_by_index() -> None:
    # Two calls' argument deltas interleaved: each stream on its own is the same healthy
    # arguments, so nothing is found; their concatenation would not be read as one stream.
    pieces = [tool_delta(0, 0, ARGS_OK[0], first=True), tool_delta(0, 1, ARGS_OK[0], first=True)]
    for text in PROSE:
        pieces += [tool_delta(0, 0, text), tool_delta(0, 1, text)]
    made: List[ChantDetector] = []

    def factory() -> ChantDetector:
        made.append(ChantDetector())
        return made[-1]

    assert len(list(guard_chat_stream(chat(Recorded(chat_stream(pieces))), factory))) == len(pieces) + 3
    assert len(made) == 2 and all(d.event is None for d in made)


def test_async_chat_stream_with_sdk_objects() -> None:
    pieces = [text_delta(0, text) for text in PROSE + CHANT]
    recorded = Recorded(chat_stream(pieces))

    async def consume() -> List[Any]:
        stream = await openai_async(recorded).chat.completions.create(model="m", messages=[], stream=True)
        return [chunk async for chunk in guard_chat_stream_async(stream, on_chant="stop")]

    out = asyncio.run(consume())
    assert 0 < len(out) < len(pieces) and recorded.closed == 1
    texts = [c.choices[0].delta.content for c in out[1:]]
    assert texts == (PROSE + CHANT)[: len(texts)]


def test_chat_dicts_read_as_the_sdk_objects() -> None:
    body = healthy_chat()
    dicts = [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: {")]
    objects = list(chat(Recorded(body)))
    assert [chat_pieces(d) for d in dicts] == [chat_pieces(o) for o in objects]
    assert sum(len(chat_pieces(d)) for d in dicts) == 2 * len(PROSE) + 2 * len(ARGS_OK)


def responses(recorded: Recorded) -> Any:
    return openai_client(recorded).responses.create(model="m", input="hi", stream=True)


@pytest.mark.parametrize("kind", [output_text, function_arguments])
def test_responses_stream(kind: Callable[[int, str], Dict[str, Any]]) -> None:
    healthy = [kind(0, text) for text in PROSE]
    unguarded = [e.model_dump() for e in responses(Recorded(responses_stream(healthy)))]
    assert [e.model_dump() for e in guard_responses_stream(responses(Recorded(responses_stream(healthy))))] == unguarded
    # A second output item that repeats itself, interleaved with the healthy first.
    chanting = [event for i, text in enumerate(CHANT) for event in (kind(0, PROSE[i % 30]), kind(1, text))]
    recorded = Recorded(responses_stream(chanting))
    with pytest.raises(ChantingDetected):
        list(guard_responses_stream(responses(recorded)))
    assert recorded.closed == 1


def test_async_responses_stream() -> None:
    recorded = Recorded(responses_stream([output_text(0, text) for text in PROSE + CHANT]))

    async def consume() -> int:
        stream = await openai_async(recorded).responses.create(model="m", input="hi", stream=True)
        seen = 0
        with pytest.raises(ChantingDetected):
            async for _ in guard_responses_stream_async(stream):
                seen += 1
        return seen

    assert 0 < asyncio.run(consume()) < len(PROSE + CHANT) and recorded.closed == 1


def test_responses_pieces_of_other_events() -> None:
    assert list(responses_pieces({"type": "response.output_text.done", "text": "x" * 100})) == []
    assert list(responses_pieces({"type": "response.output_text.delta", "output_index": 0, "delta": ""})) == []


def messages(recorded: Recorded) -> Any:
    client = anthropic.Anthropic(
        api_key="sk-test", base_url="http://recorded", http_client=recorded.sync(sdk_http(anthropic)), max_retries=0
    )
    return client.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}], stream=True)


BLOCKS = [{"type": "text", "text": ""}, {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}]


@pytest.mark.parametrize("block", [0, 1])
def test_anthropic_stream(block: int) -> None:
    healthy = [anthropic_text(0, text) for text in PROSE] + [anthropic_json(1, a) for a in ARGS_OK]
    unguarded = [e.model_dump() for e in messages(Recorded(anthropic_stream(BLOCKS, healthy)))]
    assert [e.model_dump() for e in guard_message_stream(messages(Recorded(anthropic_stream(BLOCKS, healthy))))] == unguarded
    chant = [anthropic_text(0, t) for t in CHANT] if block == 0 else [anthropic_json(1, a) for a in ARGS_CHANT]
    recorded = Recorded(anthropic_stream(BLOCKS, [anthropic_text(0, PROSE[0]), *chant]))
    detector = ChantDetector()
    out = list(guard_message_stream(messages(recorded), detector, on_chant="stop"))
    assert recorded.closed == 1 and 0 < len(out) < len(chant)
    # The given detector watches the first block with text; the tool input gets a copy.
    assert (detector.event is not None) == (block == 0)


def test_async_anthropic_stream_and_dicts() -> None:
    deltas = [anthropic_text(0, text) for text in PROSE + CHANT]
    recorded = Recorded(anthropic_stream(BLOCKS[:1], deltas))

    async def consume() -> int:
        client = anthropic.AsyncAnthropic(
            api_key="k", base_url="http://recorded", http_client=recorded.asynchronous(sdk_http(anthropic)), max_retries=0
        )
        stream = await client.messages.create(model="m", max_tokens=9, messages=[], stream=True)
        return len([e async for e in guard_message_stream_async(stream, on_chant="stop")])

    assert 0 < asyncio.run(consume()) < len(deltas) and recorded.closed == 1
    assert [list(message_pieces(d)) for d in deltas[:2]] == [[((0, "text"), PROSE[0])], [((0, "text"), PROSE[1])]]
    assert list(message_pieces({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta"}})) == []


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="on_chant"):
        guard_message_stream([], on_chant="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="detector"):
        guard_responses_stream([], detector=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must return a ChantDetector"):
        list(guard_chat_stream([{"choices": [{"delta": {"content": "x"}}]}], lambda: "nope"))  # type: ignore[arg-type,return-value]
