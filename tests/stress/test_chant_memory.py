"""Memory per chant stream: a gateway holds 10,000 concurrent streams at default settings in
at most 200 MB, 20 KB per ASCII stream (docs/chanting.md, "Bounds, threads, bad input").

The exact figure is the engine's own accounting (``sys.getsizeof``, which includes the Rust
state via ``_state_size``); RSS over 10,000 streams checks that accounting against what the
process really holds."""

from __future__ import annotations

import gc
import os
import random
import sys

import numpy as np
import pytest

from doomloop import ChantDetector

STREAMS = 10_000
STREAM_CHARS = 20_000
ASCII_LIMIT = 20_000  # bytes per ASCII stream


def prose(rng: random.Random, alphabet: str, size: int) -> str:
    """Text that never chants: words of random letters and numbers."""
    words, length = [], 0
    while length < size:
        word = "".join(rng.choice(alphabet) for _ in range(rng.randrange(2, 9)))
        words.append(f"{word}{rng.randrange(10_000)} ")
        length += len(words[-1])
    return "".join(words)[:size]


def fed(text: str, piece: int = 1000) -> ChantDetector:
    detector = ChantDetector()
    for at in range(0, len(text), piece):
        assert detector.feed(text[at : at + piece]) is None
    assert detector.position == len(text)
    return detector


def test_a_fresh_detector_holds_no_rust_state() -> None:
    detector = ChantDetector()
    assert detector._state_size() == 0
    assert sys.getsizeof(detector) < 1024


def test_an_ascii_stream_fits_20_kb() -> None:
    rng = random.Random(1)
    detector = fed(prose(rng, "abcdefghijklmnopqrstuvwxyz", STREAM_CHARS))
    # History ring (a byte a character, the history and a batch), chain table, object.
    assert 9_491 < detector._state_size() <= 15_000
    assert sys.getsizeof(detector) <= ASCII_LIMIT
    # More text, and a reset and a new stream, hold no more.
    size = sys.getsizeof(detector)
    detector.feed(prose(rng, "abcdefghijklmnopqrstuvwxyz", 100_000))
    assert sys.getsizeof(detector) == size
    detector.reset()
    detector.feed(prose(rng, "abcdefghijklmnopqrstuvwxyz", STREAM_CHARS))
    assert size <= sys.getsizeof(detector) <= size + 256


def test_latin_1_costs_what_ascii_does_and_wider_text_four_times() -> None:
    rng = random.Random(2)
    ascii_size = fed(prose(rng, "abcdefghij", STREAM_CHARS)).__sizeof__()
    latin_1 = fed(prose(rng, "abcd\u00e9\u00e8\u00fc\u00df\u00e7", STREAM_CHARS))
    assert latin_1.__sizeof__() == ascii_size
    cjk = fed(prose(rng, "\u7684\u4e00\u662f\u4e0d\u4e86\u4eba\u6211\u5728", STREAM_CHARS))
    emoji = fed(prose(rng, "ab\U0001f600\U0001f680", STREAM_CHARS))
    # Only the history ring widens (to 4 bytes a code point), by the history and a batch.
    widened = 3 * (9_491 + 256)
    assert cjk.__sizeof__() == emoji.__sizeof__() == ascii_size + widened
    # A stream that turns non-ASCII late widens then.
    late = fed(prose(rng, "abcdefghij", STREAM_CHARS))
    assert late.__sizeof__() == ascii_size
    late.feed("\u4e00")
    assert late.__sizeof__() == ascii_size + widened
    # A reset narrows it again, for the next stream (in between, the reset detector is kept
    # in a box of a few hundred bytes).
    late.reset()
    assert ascii_size < late.__sizeof__() <= ascii_size + 512
    late.feed(prose(rng, "abcdefghij", STREAM_CHARS))
    assert late.__sizeof__() == ascii_size


def test_token_ids_below_2_to_the_32_take_4_bytes() -> None:
    rng = np.random.default_rng(3)
    small = ChantDetector()
    assert small.feed_tokens(rng.integers(0, 200_000, size=STREAM_CHARS).astype(np.int64)) is None
    large = ChantDetector()
    assert large.feed_tokens(rng.integers(0, 2**40, size=STREAM_CHARS).astype(np.int64)) is None
    assert large._state_size() - small._state_size() == 4 * (9_491 + 256)


def rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc")
def test_10_000_ascii_streams_fit_200_mb() -> None:
    rng = random.Random(4)
    texts = [prose(rng, "etaoinshrdlucmfwypvbgkqjxz", STREAM_CHARS + 1000) for _ in range(16)]
    gc.collect()
    before = rss()
    detectors = []
    for k in range(STREAMS):
        text = texts[k % 16]
        detector = ChantDetector()
        for at in range(k % 1000, k % 1000 + STREAM_CHARS, 2000):
            detector.feed(text[at : at + 2000])
        detectors.append(detector)
    gc.collect()
    per_stream = (rss() - before) / STREAMS
    assert all(d.event is None and d.position == STREAM_CHARS for d in detectors)
    # The engine's accounting bounds what the process holds (within the allocator's overhead;
    # only an upper bound: memory freed by earlier tests in this process is reused).
    accounted = sys.getsizeof(detectors[0]) + 8  # and a list slot
    assert per_stream <= accounted * 1.25, (per_stream, accounted)
    assert per_stream <= ASCII_LIMIT
