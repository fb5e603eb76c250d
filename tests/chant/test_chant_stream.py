"""Stream guards around sync and async iterators of text and chat-completion chunks."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, AsyncIterator, Iterator

import pytest

from doomloop import ChantDetector, ChantingDetected, guard_chat_stream, guard_chat_stream_async, guard_stream, guard_stream_async

PROSE = [f"Sentence {i} says something new about topic {i * 7 % 13}. " for i in range(30)]
CHANT = ["and again, ", "and again, ", "and again! "] * 60


def test_text_stream_passes_chunks_through_unchanged() -> None:
    assert list(guard_stream(iter(PROSE))) == PROSE


def test_text_stream_raises_with_the_event() -> None:
    seen: list[str] = []
    detector = ChantDetector()
    with pytest.raises(ChantingDetected) as caught:
        for chunk in guard_stream(PROSE + CHANT, detector):
            seen.append(chunk)
    event = caught.value.event
    assert event is detector.event and event.period == 33
    # Everything before the chunk that completed the chant was passed on, nothing after.
    assert sum(map(len, seen)) < event.end <= sum(map(len, seen)) + len(CHANT[0])
    assert seen == (PROSE + CHANT)[: len(seen)]


def test_text_stream_stops_and_closes_the_source() -> None:
    closed = []

    def source() -> Iterator[str]:
        try:
            yield from PROSE + CHANT + PROSE
        finally:
            closed.append(True)

    detector = ChantDetector()
    out = list(guard_stream(source(), detector, on_chant="stop"))
    assert detector.event is not None and closed == [True]
    assert len(out) < len(PROSE + CHANT)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="on_chant"):
        guard_stream(PROSE, on_chant="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="detector"):
        guard_stream(PROSE, detector=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text must be a str"):
        list(guard_stream(["ok", 5]))  # type: ignore[list-item]


def chat_chunk(content: Any, as_dict: bool) -> Any:
    if as_dict:
        return {"choices": [{"index": 0, "delta": {"content": content}}]}
    return SimpleNamespace(choices=[SimpleNamespace(index=0, delta=SimpleNamespace(content=content))])


@pytest.mark.parametrize("as_dict", [False, True])
def test_chat_stream(as_dict: bool) -> None:
    role_only = (
        {"choices": [{"delta": {"role": "assistant"}}]}
        if as_dict
        else SimpleNamespace(choices=[SimpleNamespace(delta=SimpleNamespace(role="assistant"))])
    )
    usage = {"choices": [], "usage": {"total_tokens": 3}}
    plain = [role_only, usage] + [chat_chunk(text, as_dict) for text in PROSE] + [chat_chunk(None, as_dict)]
    assert list(guard_chat_stream(plain)) == plain
    chanting = plain + [chat_chunk(text, as_dict) for text in CHANT]
    with pytest.raises(ChantingDetected):
        list(guard_chat_stream(chanting))
    detector = ChantDetector()
    out = list(guard_chat_stream(chanting, detector, on_chant="stop"))
    assert detector.event is not None and out == chanting[: len(out)] and len(out) < len(chanting)


async def model_stream(pieces: list[str], produced: list[str]) -> AsyncIterator[str]:
    # A streaming producer: yields control to the event loop between tokens, like a client
    # reading server-sent events.
    for piece in pieces:
        await asyncio.sleep(0)
        produced.append(piece)
        yield piece


def test_async_guard_in_a_streaming_consumer() -> None:
    async def consume() -> tuple[list[str], list[str], int]:
        produced: list[str] = []
        received: list[str] = []
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.create_task(heartbeat())
        try:
            async for chunk in guard_stream_async(model_stream(PROSE + CHANT + PROSE, produced)):
                received.append(chunk)
        except ChantingDetected as caught:
            assert caught.event.period == 33
        else:
            raise AssertionError("no chant reported")
        finally:
            beat.cancel()
        return produced, received, ticks

    produced, received, ticks = asyncio.run(consume())
    # The producer was stopped right after the chunk that completed the chant.
    assert len(produced) == len(received) + 1
    assert received == (PROSE + CHANT)[: len(received)]
    assert ticks > len(received) // 2, "the guard must not block the event loop"


def test_async_chat_guard_stops() -> None:
    async def consume() -> list[Any]:
        chunks = [chat_chunk(t, True) for t in PROSE + CHANT]

        async def source() -> AsyncIterator[Any]:
            for chunk in chunks:
                await asyncio.sleep(0)
                yield chunk

        detector = ChantDetector()
        out = [c async for c in guard_chat_stream_async(source(), detector, on_chant="stop")]
        assert detector.event is not None
        return out

    out = asyncio.run(consume())
    assert 0 < len(out) < len(PROSE + CHANT)
    assert [c["choices"][0]["delta"]["content"] for c in out] == (PROSE + CHANT)[: len(out)]


def test_async_plain_stream_passes_through() -> None:
    async def consume() -> list[str]:
        return [c async for c in guard_stream_async(model_stream(PROSE, []))]

    assert asyncio.run(consume()) == PROSE
