"""Benchmarks of the chant detector (REPEATED_OUTPUT) against praisonaiagents 1.7.17.

Run: python -m pytest benches/bench_chant.py --benchmark-enable --benchmark-only
(as plain tests, with benchmarks disabled, each body runs once and checks its result).
Ratios are printed by the last test from the medians measured in the same run.
"""

from __future__ import annotations

import importlib.metadata
import os
import random
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from doomloop import ChantDetector, DoomLoopDetector, guard_stream

CHUNK = 64 * 1024
MEDIANS: Dict[str, float] = {}


def corpus(size: int) -> str:
    """Mixed prose and code nobody here wrote: package descriptions and stdlib sources."""
    parts: List[str] = []
    total = 0
    for dist in importlib.metadata.distributions():
        text = dist.metadata.get_payload() or ""  # type: ignore[attr-defined]
        if isinstance(text, str):
            parts.append(text)
            total += len(text)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")):
        if total >= size:
            break
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        total += len(text)
    text = "".join(parts)
    while len(text) < size:
        text += text
    return text[:size]


TEXT = corpus(8 << 20)
CHUNKS = [TEXT[i : i + CHUNK] for i in range(0, len(TEXT), CHUNK)]
TOKENS = [TEXT[i : i + 1 + (i % 8)] for i in range(0, 600_000, 5)][:100_000]


def record(benchmark: Any, name: str) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        MEDIANS[name] = stats.stats.median


def feed_all(chunks: List[str]) -> Any:
    detector = ChantDetector()
    for chunk in chunks:
        if detector.feed(chunk) is not None:
            return detector.event
    return None


def test_feed_64k_chunks(benchmark: Any) -> None:
    benchmark.group = "64 KiB chunks, 8 MiB of prose and code"
    assert benchmark.pedantic(feed_all, args=(CHUNKS,), rounds=7, warmup_rounds=1) is None
    record(benchmark, "feed_64k")


def test_praisonai_record_response_64k_chunks(benchmark: Any) -> None:
    from praisonaiagents.escalation.doom_loop import DoomLoopDetector as Reference  # type: ignore[import-untyped]

    def run() -> bool:
        reference = Reference()
        for chunk in CHUNKS:
            reference.record_response(chunk)
        return bool(reference.is_doom_loop())

    benchmark.group = "64 KiB chunks, 8 MiB of prose and code"
    benchmark.pedantic(run, rounds=3, warmup_rounds=0)
    record(benchmark, "praisonai_64k")


def test_session_record_response_64k_chunks(benchmark: Any) -> None:
    def run() -> bool:
        detector = DoomLoopDetector()
        for chunk in CHUNKS:
            detector.record_response(chunk)
        return detector.is_doom_loop()

    benchmark.group = "64 KiB chunks, 8 MiB of prose and code"
    benchmark.pedantic(run, rounds=7, warmup_rounds=1)
    record(benchmark, "session_64k")


def test_feed_token_sized_chunks(benchmark: Any) -> None:
    def run() -> None:
        feed = ChantDetector().feed
        for chunk in TOKENS:
            feed(chunk)

    benchmark.group = "100,000 token-sized chunks (1-8 chars)"
    benchmark.pedantic(run, rounds=7, warmup_rounds=1)
    record(benchmark, "feed_tokens")


def test_bare_iterator(benchmark: Any) -> None:
    def run() -> None:
        for _ in iter(TOKENS):
            pass

    benchmark.group = "100,000 token-sized chunks (1-8 chars)"
    benchmark.pedantic(run, rounds=7, warmup_rounds=1)
    record(benchmark, "bare")


def test_stream_guard(benchmark: Any) -> None:
    def run() -> int:
        count = 0
        for _ in guard_stream(iter(TOKENS), ChantDetector()):
            count += 1
        return count

    benchmark.group = "100,000 token-sized chunks (1-8 chars)"
    assert benchmark.pedantic(run, rounds=7, warmup_rounds=1) == len(TOKENS)
    record(benchmark, "guard")


def test_guard_consumer_baseline(benchmark: Any) -> None:
    # What the guard replaces: the consumer's own loop calling feed on each chunk.
    def run() -> int:
        count = 0
        feed = ChantDetector().feed
        for chunk in iter(TOKENS):
            feed(chunk)
            count += 1
        return count

    benchmark.group = "100,000 token-sized chunks (1-8 chars)"
    assert benchmark.pedantic(run, rounds=7, warmup_rounds=1) == len(TOKENS)
    record(benchmark, "manual_guard")


RESPONSE = TEXT[:1024]


def filler(count: int) -> List[str]:
    """`count` distinct 1 KiB responses of generated prose that never chant (and share no
    50-character block, so praisonaiagents raises no alarm either and keeps checking)."""
    rng = random.Random(5)
    words = "the a model tool call result file search answer user plan step data value error retry".split()
    out = []
    for k in range(count):
        text = f"Response {k}: " + " ".join(f"{rng.choice(words)}{rng.randrange(1000)}" for _ in range(200))
        out.append(text[:1024])
    return out


FILLER = filler((10 << 20) // 1024)


def per_call(make: Callable[[], Any], grown: bool) -> Callable[[], None]:
    """One record_response + is_doom_loop of a 1 KiB response, on a fresh session or on one
    that already recorded 10 MB of responses."""
    detector = make()
    if grown:
        for response in FILLER:
            detector.record_response(response)

    def call() -> None:
        detector.record_response(RESPONSE)
        detector.is_doom_loop()

    return call


@pytest.mark.parametrize("grown", [False, True], ids=["fresh", "after-10MB"])
@pytest.mark.parametrize("impl", ["doomloop", "praisonai"])
def test_record_response_per_call(benchmark: Any, impl: str, grown: bool) -> None:
    if impl == "praisonai":
        from praisonaiagents.escalation.doom_loop import DoomLoopDetector as make
    else:
        make = DoomLoopDetector
    call = per_call(make, grown)
    benchmark.group = "record_response(1 KiB) + is_doom_loop()"
    benchmark.pedantic(call, rounds=100, iterations=1, warmup_rounds=2)
    record(benchmark, f"{impl}_{'grown' if grown else 'fresh'}")


def threaded_throughput(threads: int) -> float:
    """MB/s of `threads` threads each feeding its own detector all 64 KiB chunks."""

    def work() -> None:
        feed_all(CHUNKS)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    begin = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return threads * len(TEXT) / (time.perf_counter() - begin) / 1e6


def test_two_threads_scale() -> None:
    """Measured, not asserted: the machine may be shared. One and two threads alternate, so a
    change in the machine's speed during the test weighs on both alike."""
    ones, twos = [], []
    for _ in range(3):
        ones.append(threaded_throughput(1))
        twos.append(threaded_throughput(2))
    one, two = sorted(ones)[1], sorted(twos)[1]
    print(f"\nthreads: 1 -> {one:.0f} MB/s, 2 -> {two:.0f} MB/s, scaling {two / one:.2f}x")
    assert one > 0 and two > 0


def test_guard_overhead_interleaved() -> None:
    """The guard against what it saves the consumer (the bare iterator plus a feed per chunk),
    timed in alternation, 7 times each; the median ratio is printed (measured, not asserted)."""

    def bare() -> None:
        for _ in iter(TOKENS):
            pass

    def feed() -> None:
        feed = ChantDetector().feed
        for chunk in TOKENS:
            feed(chunk)

    def guard() -> None:
        for _ in guard_stream(iter(TOKENS), ChantDetector()):
            pass

    def timed(run: Callable[[], None]) -> float:
        begin = time.perf_counter()
        run()
        return time.perf_counter() - begin

    ratios = [timed(guard) / (timed(bare) + timed(feed)) for _ in range(7)]
    ratio = sorted(ratios)[3]
    print(f"\nstream guard, interleaved: {ratio - 1:+.1%} over bare iterator + detector")
    assert ratio > 0


# Run in a fresh interpreter per measure: memory freed by an earlier one stays in the
# allocator's free lists and would be reused without raising RSS.
MEMORY_SCRIPT = """
import gc, random, sys
from doomloop import ChantDetector

def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * __import__("os").sysconf("SC_PAGE_SIZE")

alphabet, streams, chars = sys.argv[1], int(sys.argv[2]), 20_000
rng = random.Random(9)
words = (
    "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 8))) + str(rng.randrange(10**4))
    for _ in range(12_000)
)
text = " ".join(words)
gc.collect()
before = rss()
detectors = []
for k in range(streams):
    detector = ChantDetector()
    start = (k * 997) % (len(text) - chars)
    for at in range(start, start + chars, 2000):
        detector.feed(text[at : at + 2000])
    detectors.append(detector)
gc.collect()
assert all(d.event is None for d in detectors)
print((rss() - before) / streams, sys.getsizeof(detectors[0]))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc")
def test_memory_per_stream() -> None:
    """Bytes per concurrent stream at default settings once each has outgrown the history
    (20,000 characters, fed 2,000 at a time): 10,000 ASCII streams (the gateway's budget:
    200 MB), then 2,000 each of Latin-1, CJK and emoji text, by RSS and by
    ``sys.getsizeof``. Printed; ASCII is bounded at 20 KB."""
    print()
    results = {}
    for name, alphabet, streams in (
        ("ASCII", "etaoinshrdlucmfwypvbgkqjxz", 10_000),
        ("Latin-1", "abcdefg\u00e9\u00e8\u00fc\u00df", 2_000),
        ("CJK", "\u7684\u4e00\u662f\u4e0d\u4e86\u4eba\u6211\u5728", 2_000),
        ("emoji", "abc \U0001f600\U0001f680", 2_000),
    ):
        out = subprocess.run(
            [sys.executable, "-c", MEMORY_SCRIPT, alphabet, str(streams)], capture_output=True, text=True, check=True
        ).stdout.split()
        results[name] = float(out[0])
        print(f"{name:8} {float(out[0]):>9,.0f} B per stream by RSS ({streams:,} streams), {int(out[1]):,} B by sys.getsizeof")
    assert results["ASCII"] <= 20_000


def test_zz_ratios() -> None:
    """Print the ratios of the medians measured above (benchmarks enabled only)."""
    m = MEDIANS
    if "feed_64k" in m:
        print(f"\nfeed 64 KiB chunks: {len(TEXT) / m['feed_64k'] / 1e6:.0f} MB/s")
    if {"feed_64k", "praisonai_64k"} <= m.keys():
        print(f"vs praisonai record_response on the same chunks: {m['praisonai_64k'] / m['feed_64k']:.1f}x faster")
    if {"session_64k", "praisonai_64k"} <= m.keys():
        print(f"DoomLoopDetector.record_response vs praisonai: {m['praisonai_64k'] / m['session_64k']:.1f}x faster")
    if "feed_tokens" in m:
        print(f"feed token-sized chunks: {m['feed_tokens'] / len(TOKENS) * 1e9:.0f} ns per call")
    if {"bare", "feed_tokens", "guard"} <= m.keys():
        overhead = m["guard"] / (m["bare"] + m["feed_tokens"]) - 1
        print(f"stream guard: {m['guard'] / len(TOKENS) * 1e9:.0f} ns per chunk, {overhead:+.1%} over bare iterator + detector")
    for impl in ("doomloop", "praisonai"):
        if {f"{impl}_fresh", f"{impl}_grown"} <= m.keys():
            fresh, grown = m[f"{impl}_fresh"], m[f"{impl}_grown"]
            print(
                f"{impl} record_response(1 KiB)+is_doom_loop: fresh {fresh * 1e6:.1f} us, "
                f"after 10 MB {grown * 1e6:.1f} us ({grown / fresh:.2f}x)"
            )
    assert all(v > 0 for v in m.values())
