"""Threads and the detectors: no lost update, no deadlock, no crash when threads share one
detector, and no stall of unrelated Python threads while a long chunk is scanned.

Shared-detector tests run 8 threads against one detector and check exact counters afterwards;
threads are daemons joined with a timeout, so a deadlock fails the test instead of hanging
the run. Stall tests run a tight loop in an unrelated thread that records the longest gap
between its iterations while another thread scans a long text or token array; the gap must
stay a small fraction of the scan (ratios only, never absolute times, best of three attempts:
a noisy 2-core VM and the 5 ms switch interval make gaps of a few intervals normal).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest

from doomloop import ChantDetector, DoomLoopDetector, Profile, ToolLoopDetector
from doomloop.chant import CHANT_DETACH_THRESHOLD
from doomloop.gateway import SessionRegistry

THREADS = 8
JOIN_TIMEOUT = 60.0
"""Seconds a group of threads may take before the test calls it a deadlock."""


def run_threads(work: Callable[[int], None], count: int = THREADS, timeout: float = JOIN_TIMEOUT) -> None:
    """Run ``work(index)`` in ``count`` threads released together; fail on any exception or
    on a thread still running after ``timeout`` seconds."""
    errors: List[BaseException] = []
    barrier = threading.Barrier(count)

    def body(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except BaseException as error:  # noqa: BLE001 - PanicException derives from BaseException
            errors.append(error)

    threads = [threading.Thread(target=body, args=(i,), daemon=True, name=f"worker-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [thread.name for thread in threads if thread.is_alive()]
    assert not alive, f"still running after {timeout:.0f} s (deadlock?): {alive}"
    assert not errors, f"{len(errors)} thread(s) failed, first: {errors[0]!r}"


LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
CJK = "".join(chr(0x4E00 + i) for i in range(3_000))


def random_text(rng: random.Random, size: int, alphabet: str = LETTERS) -> str:
    """Text with no repetition a chant detector could report (random characters)."""
    return "".join(rng.choices(alphabet, k=size))


# --- shared detectors ------------------------------------------------------------------------


def test_shared_session_detector_counts_every_action() -> None:
    """8 threads record actions (and responses, some scanned with the interpreter released,
    plans and progress markers) on one DoomLoopDetector with a Python clock: every action is
    counted, exactly."""
    actions = 2_000
    detector = DoomLoopDetector(clock=time.monotonic)
    detector.start_session()

    def work(index: int) -> None:
        rng = random.Random(index)
        for j in range(actions):
            detector.record_action(f"tool{index}", {"j": j}, j % 7, j % 2 == 0, duration=0.01)
            if j % 100 == 0:
                detector.mark_progress(f"step {j}")
                detector.record_plan({"thread": index, "j": j})
                # Every fifth response is long enough to be scanned with the interpreter released.
                detector.record_response(random_text(rng, CHANT_DETACH_THRESHOLD + 100 if j % 500 == 0 else 300))
                detector.is_doom_loop()
                detector.get_stats()

    run_threads(work)
    stats = detector.get_stats()
    assert stats["total_actions"] == THREADS * actions
    assert stats["successful_actions"] == stats["failed_actions"] == THREADS * actions // 2
    assert stats["progress_markers"] == THREADS * actions // 100


def test_shared_tool_loop_detector_loses_no_call() -> None:
    """8 threads run before/after_tool_call (with a Python normaliser) and check() on one
    ToolLoopDetector: every call lands in the history and the repeat count is exactly the
    number of calls made."""
    calls = 500
    total = THREADS * calls
    detector = ToolLoopDetector(
        history_size=10_000,
        warning_threshold=total,
        critical_threshold=total + 1,
        global_circuit_breaker_threshold=total + 2,
        normalisers={"read": lambda result, params: {"normalised": result}},
    )
    params = {"path": "same.txt"}

    def work(index: int) -> None:
        for j in range(calls):
            call_id = f"{index}-{j}"
            decision = detector.before_tool_call("read", params, run_id="run", tool_call_id=call_id)
            assert not decision.blocked and not decision.verdict.stuck
            detector.after_tool_call("read", params, result="same", run_id="run", tool_call_id=call_id)
            if j % 10 == 0:
                # Only the very last state (every call recorded) reaches the warning.
                assert detector.check("read", params, run_id="run").count in (0, total)

    run_threads(work)
    assert detector.history_len == total
    verdict = detector.check("read", params, run_id="run")
    assert (verdict.level, verdict.detector, verdict.count) == ("warning", "generic_repeat", total)


def test_shared_session_registry_keeps_its_counts_while_sessions_come_and_go() -> None:
    """8 threads drive 12 sessions through a registry that keeps 4: sessions are created,
    touched and evicted under every thread, and each loop warning's event calls back into
    the registry (len, in, stats) while the hook that raised it runs. No deadlock, no lost
    session: every session created is live or was evicted. Then discards join in."""
    events: List[Tuple[Optional[str], int]] = []

    def on_event(event: Any) -> None:
        # Re-entrant: the registry is used from inside one of its own hooks (another thread
        # may have evicted this very session meanwhile).
        events.append((event.session_key, len(registry)))
        assert isinstance(event.session_key in registry, bool) and registry.stats()["live"] <= 4

    registry = SessionRegistry(
        max_sessions=4,
        on_event=on_event,
        profile=Profile.recommended().replace(
            warning_threshold=3, critical_threshold=10**6, global_circuit_breaker_threshold=10**6 + 1
        ),
    )

    def work(index: int, discard: bool = False) -> None:
        rng = random.Random(index)
        for i in range(300):
            key = f"k{rng.randrange(12)}"
            registry.before_tool_call(key, "read", {"p": i % 2})
            registry.after_tool_call(key, "read", {"p": i % 2}, result="same")
            if i % 10 == 0:
                registry.record_action(key, "read", {"p": 1}, "ok", True)
            if discard and i % 25 == 0:
                registry.discard(f"k{rng.randrange(12)}")

    run_threads(work)
    stats = registry.stats()
    assert stats["live"] == len(registry) == 4 and stats["expired"] == 0
    assert stats["created"] == stats["live"] + stats["evicted"] > 12
    assert events and all(key is not None and live <= 4 for key, live in events)
    run_threads(lambda index: work(index, discard=True))
    assert len(registry) <= 4


def test_shared_chant_detector_consumes_every_chunk() -> None:
    """8 threads feed one ChantDetector random text -- short ASCII and non-ASCII chunks, and
    chunks past CHANT_DETACH_THRESHOLD scanned with the interpreter released -- and 8 feed
    another one token arrays: no chant is reported and each position is exactly the number
    of characters or tokens fed."""
    text_detector = ChantDetector()
    token_detector = ChantDetector()
    long = CHANT_DETACH_THRESHOLD + 1_000
    fed: Dict[int, int] = {}
    tokens_fed: Dict[int, int] = {}

    def work(index: int) -> None:
        rng = random.Random(index)
        np_rng = np.random.default_rng(index)
        characters = tokens = 0
        for j in range(40):
            alphabet = CJK if j % 2 else LETTERS
            size = long if j % 10 == 0 else rng.randrange(1, 400)
            chunk = random_text(rng, size, alphabet)
            assert text_detector.feed(chunk) is None
            characters += len(chunk)
            array = np_rng.integers(0, 2**31 - 1, size=long if j % 10 == 5 else rng.randrange(1, 400), dtype=np.int64)
            assert token_detector.feed_tokens(array) is None
            tokens += len(array)
        fed[index] = characters
        tokens_fed[index] = tokens

    run_threads(work)
    assert text_detector.event is None and token_detector.event is None
    assert text_detector.position == sum(fed.values())
    assert token_detector.position == sum(tokens_fed.values())


# --- stalls ----------------------------------------------------------------------------------

STALL_FRACTION = 0.15
"""Largest gap the unrelated thread may see, as a fraction of the long scan's duration."""
ATTEMPTS = 3


class Ticker:
    """A tight Python loop in its own thread, recording every gap over 1 ms between two of
    its iterations (each gap as its end time and length)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.gaps: List[Tuple[float, float]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self.stop.is_set():
            now = time.perf_counter()
            if now - last > 0.001:
                self.gaps.append((now, now - last))
            last = now

    def longest_gap(self, start: float, end: float) -> float:
        """The longest gap, clipped to the window ``[start, end]``."""
        return max((min(t, end) - max(t - gap, start) for t, gap in self.gaps if t > start and t - gap < end), default=0.0)


def stall_ratio(scan: Callable[[], object], contend: Optional[Callable[[random.Random], object]]) -> float:
    """Longest gap of an unrelated thread during ``scan()``, over the scan's duration. With
    ``contend``, a third thread calls it in a loop meanwhile (on the scanned detector)."""
    ticker = Ticker()
    ticker.thread.start()
    scanning_done = threading.Event()

    def contender(call: Callable[[random.Random], object]) -> None:
        rng = random.Random(1)
        while not scanning_done.is_set():
            call(rng)

    third = None if contend is None else threading.Thread(target=contender, args=(contend,), daemon=True)
    time.sleep(0.02)
    if third is not None:
        third.start()
        time.sleep(0.01)
    start = time.perf_counter()
    scan()
    end = time.perf_counter()
    scanning_done.set()
    if third is not None:
        third.join(JOIN_TIMEOUT)
        assert not third.is_alive(), "the contending thread did not finish"
    ticker.stop.set()
    ticker.thread.join(JOIN_TIMEOUT)
    return ticker.longest_gap(start, end) / (end - start)


@pytest.fixture(scope="module")
def long_inputs() -> Dict[str, Any]:
    """100 MB of ASCII text, 30 M code points of CJK text and 40 M int64 tokens, none of
    them chanting (a random block longer than max_period, repeated)."""
    rng = random.Random(7)
    block = 1_000_003
    ascii_text = random_text(rng, block) * 100
    cjk_text = random_text(rng, block, CJK) * 30
    tokens = np.tile(np.random.default_rng(7).integers(0, 50_000, size=block, dtype=np.int64), 40)
    return {"ascii": ascii_text, "non_ascii": cjk_text, "tokens": tokens}


def _short_text(rng: random.Random) -> str:
    return rng.choice(LETTERS)


def _stall_case(
    kind: str, inputs: Dict[str, Any], contended: bool
) -> Tuple[Callable[[], object], Optional[Callable[[random.Random], object]]]:
    if kind == "session":
        session = DoomLoopDetector()
        text = inputs["ascii"]
        return (lambda: session.record_response(text)), (
            (lambda rng: session.record_response(_short_text(rng))) if contended else None
        )
    detector = ChantDetector()
    if kind == "tokens":
        tokens = inputs["tokens"]
        return (lambda: detector.feed_tokens(tokens)), (
            (lambda rng: detector.feed_tokens(np.array([rng.randrange(50_000)], dtype=np.int64))) if contended else None
        )
    text = inputs[kind]
    return (lambda: detector.feed(text)), ((lambda rng: detector.feed(_short_text(rng))) if contended else None)


@pytest.mark.parametrize("contended", [False, True], ids=["alone", "contended"])
@pytest.mark.parametrize("kind", ["ascii", "non_ascii", "tokens", "session"])
def test_long_scans_do_not_stall_other_threads(kind: str, contended: bool, long_inputs: Dict[str, Any]) -> None:
    """While one thread scans a long chunk -- ChantDetector.feed of 100 MB of ASCII or 30 M
    code points of non-ASCII text, feed_tokens of 40 M tokens, DoomLoopDetector.record_response
    of 100 MB -- an unrelated Python thread keeps running: its longest gap stays under 15% of
    the scan. "contended": a third thread meanwhile calls the same detector with short
    input; it must wait for the detector with the interpreter released."""
    ratios = []
    for _ in range(ATTEMPTS):
        scan, contend = _stall_case(kind, long_inputs, contended)
        ratios.append(stall_ratio(scan, contend))
        if ratios[-1] < STALL_FRACTION:
            return
    pytest.fail(f"an unrelated thread stalled for {min(ratios):.0%} of the scan at best (attempts: {ratios})")


# --- memory safety -----------------------------------------------------------------------------

RESIZE_RACE = """
import threading
import numpy as np
import doomloop
from doomloop.chant import CHANT_DETACH_THRESHOLD

size = 200 * CHANT_DETACH_THRESHOLD
base = np.random.default_rng(0).integers(0, 50_000, size=size, dtype=np.int64)
for attempt in range(10):
    tokens = base.copy()
    go, stop = threading.Event(), threading.Event()

    def shrink() -> None:
        go.wait()
        while not stop.is_set():
            try:
                tokens.resize(10, refcheck=False)
            except ValueError:
                pass  # numpy refuses while a buffer is exported: that is fine too

    thread = threading.Thread(target=shrink)
    thread.start()
    detector = doomloop.ChantDetector()
    go.set()
    detector.feed_tokens(tokens)
    stop.set()
    thread.join()
    assert detector.position <= size, detector.position
print("ok")
"""


def test_shrinking_the_array_during_feed_tokens_is_safe() -> None:
    """Another thread shrinks the array (``resize(10, refcheck=False)``, freeing its memory)
    while feed_tokens scans it with the interpreter released: no crash (a segfault was the
    failure), ten times over, in a worker process."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    done = subprocess.run([sys.executable, "-c", RESIZE_RACE], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", f"exit status {done.returncode}\n{done.stderr[-3000:]}"
