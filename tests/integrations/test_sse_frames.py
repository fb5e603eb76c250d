"""SseFrames: whole frames out of an SSE body cut anywhere, the same bytes out as in, the data
of the wanted frames decoded, and bounded memory on a frame that never ends."""

from __future__ import annotations

import itertools
import json
from typing import Any, List, Optional, Tuple

from hypothesis import given, strategies as st

from doomloop.integrations._sse import MAX_FRAME, SseFrames

EVENTS = [
    {"type": "message_start", "message": {"id": "msg_1"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello, "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "wörld\n"}},
    {"type": "message_stop"},
]


def body(newline: str = "\n") -> bytes:
    frames = (f"event: {e['type']}{newline}data: {json.dumps(e)}{newline}{newline}" for e in EVENTS)
    return "".join(frames).encode()


def split(data: bytes, cuts: List[int]) -> List[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def read(pieces: List[bytes], wanted: bytes = b"delta") -> Tuple[bytes, List[Optional[Any]], SseFrames]:
    frames = SseFrames(wanted)
    out: List[bytes] = []
    data: List[Optional[Any]] = []
    for piece in pieces:
        for raw, event in frames.feed(piece):
            out.append(raw)
            data.append(event)
    out.append(frames.flush())
    return b"".join(out), data, frames


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_any_cut_gives_the_same_frames_and_bytes(cuts: List[int], newline: str) -> None:
    whole = body(newline)
    out, data, _ = read(split(whole, cuts))
    assert out == whole
    # Only whole frames, each decoded when it carries a delta.
    assert data == [None, EVENTS[1], EVENTS[2], None]


def test_data_lines_and_odd_frames() -> None:
    text = (
        b": a comment\n\n"
        b'data: {"delta": 1,\ndata:  "x": 2}\n\n'  # two data lines are one value, joined by a newline
        b"data: [DONE]\n\n"
        b"data: not json delta\n\n"
        b"event: ping\n\n"
    )
    out, data, _ = read([text], wanted=b"")
    assert out == text
    assert data == [None, {"delta": 1, "x": 2}, None, None, None]


def test_a_frame_that_never_ends_passes_unread_with_bounded_memory() -> None:
    frames = SseFrames(b"delta")
    head = b'data: {"delta": "' + b"x" * (MAX_FRAME + 10)
    passed = frames.feed(head)
    assert passed == [(head, None)] and frames.unread == 1
    # The rest of it passes as it comes, up to its end; the next frame is read again.
    assert frames.feed(b"yy") == [(b"yy", None)]
    tail = b'"}\n\ndata: {"delta": 2}\n\n'
    assert frames.feed(tail) == [(b'"}\n\n', None), (b'data: {"delta": 2}\n\n', {"delta": 2})]
    assert frames.flush() == b""
