"""Detection latency: every chant of period 1..1000 (not only whitespace) is caught within
``content_chunk_size + max_repeated_chunks * (p + content_chunk_size)`` characters of its
start, and one detector reports the same event however the text is split."""

from __future__ import annotations

import random

import numpy as np
import pytest

from doomloop import ChantDetector

W, K = 50, 8
PRIMES = [p for p in range(2, 1001) if all(p % d for d in range(2, int(p**0.5) + 1))]
PERIODS = sorted(set(range(1, 71)) | set(PRIMES) | set(range(40, 61)) | set(range(95, 106)) | set(range(990, 1001)))
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?()[]{}<>=+-*/'\"\n\t",
    "\u7684\u4e00\u662f\u4e0d\u4e86\u4eba\u6211\u5728\u6709\u4ed6\u8fd9\u4e2d\u5927\u6765\u4e0a\u56fd"
    " \U0001f600\U0001f680\u00e9\u00df",
]


def chant_case(period: int, rng: random.Random) -> tuple[str, int]:
    alphabet = ALPHABETS[period % 2]
    unit = "".join(rng.choice(alphabet) for _ in range(period))
    while unit.isspace():
        unit = "".join(rng.choice(alphabet) for _ in range(period))
    start = rng.randrange(0, 400)
    before = "".join(rng.choice(alphabet) for _ in range(start))
    bound = W + K * (period + W)
    body = (unit * (bound // period + 2))[: bound + 100]
    return before + body, start


def split(text: str, rng: random.Random) -> list[str]:
    pieces, at = [], 0
    while at < len(text):
        size = rng.choice([1, 2, 3, 5, 8, 13, 64, 1000])
        pieces.append(text[at : at + size])
        at += size
    return pieces


def first_event(detector: ChantDetector, pieces: list[str]) -> object:
    for piece in pieces:
        event = detector.feed(piece)
        if event is not None:
            return event
    return None


@pytest.mark.parametrize("period", PERIODS)
def test_chant_is_caught_within_the_bound_however_split(period: int) -> None:
    rng = random.Random(period)
    text, start = chant_case(period, rng)
    bound = W + K * (period + W)
    detector = ChantDetector(W, K)
    whole = detector.feed(text)
    assert whole is not None, f"period {period} not caught"
    assert whole.end - start <= bound, (whole.end - start, bound)
    assert whole.period is not None and period % whole.period == 0
    assert whole.start <= start
    repeated = text[whole.start : whole.end]
    assert all(repeated[j] == repeated[j - whole.period] for j in range(whole.period, len(repeated)))
    detector.reset()
    assert first_event(detector, split(text, rng)) == whole
    if period in (1, 7, 50, 101, 997):
        detector.reset()
        assert first_event(detector, list(text)) == whole


@pytest.mark.parametrize("period", [1, 3, 50, 51, 499, 1000])
def test_token_chants_are_caught_within_the_bound(period: int) -> None:
    rng = np.random.default_rng(period)
    unit = rng.integers(0, 50_000, size=period)
    start = int(rng.integers(0, 400))
    bound = W + K * (period + W)
    tokens = np.concatenate([rng.integers(0, 50_000, size=start), np.tile(unit, bound // period + 2)])
    for dtype in (np.int32, np.int64, np.uint32):
        detector = ChantDetector(W, K)
        event = detector.feed_tokens(tokens.astype(dtype))
        assert event is not None and event.end - start <= bound
        detector.reset()
        pieces = [detector.feed_tokens(tokens[i : i + 7].astype(dtype)) for i in range(0, len(tokens), 7)]
        assert [e for e in pieces if e is not None] == [event]


def test_a_whitespace_only_chant_is_not_reported_by_default() -> None:
    assert ChantDetector().feed(" \t\n" * 5000) is None
    assert ChantDetector(ignore_whitespace=False).feed(" \t\n" * 5000) is not None


@pytest.mark.parametrize(("window", "repeats"), [(1, 2), (2, 2), (5, 3), (10, 3), (20, 2), (50, 2)])
def test_small_windows_and_thresholds_keep_the_bound(window: int, repeats: int) -> None:
    rng = random.Random(window * 100 + repeats)
    for period in list(range(1, 41)) + [97, 251]:
        alphabet = ALPHABETS[0]
        unit = "".join(rng.choice(alphabet) for _ in range(period))
        while unit.isspace():
            unit = "".join(rng.choice(alphabet) for _ in range(period))
        start = rng.randrange(0, 200)
        bound = window + repeats * (period + window)
        text = "".join(rng.choice(alphabet) for _ in range(start)) + (unit * (bound // period + 2))[: bound + 50]
        for _ in range(3):
            event = ChantDetector(window, repeats).feed(text)
            assert event is not None and event.end - start <= bound, (period, event, bound)
