"""ChantDetector's API, bad input, token arrays, threads, and REPEATED_OUTPUT in
DoomLoopDetector."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import doomloop
from doomloop import (
    ChantDetector,
    ChantEvent,
    ChantingDetected,
    ConfigError,
    DoomLoopConfig,
    DoomLoopDetector,
    DoomLoopType,
    RecoveryAction,
    _core,
)

CHANT = "I will call the tool again. " * 40  # period 28


def test_event_fields_and_dict() -> None:
    detector = ChantDetector()
    assert detector.feed("Sure!\n") is None
    event = detector.feed(CHANT)
    assert isinstance(event, ChantEvent)
    assert event.loop_type is DoomLoopType.REPEATED_OUTPUT
    assert (event.period, event.count, event.start) == (28, 8, 6)
    # 8 occurrences chained every 56 characters: at least 7 * 56 + 50 characters in.
    assert 6 + 7 * 56 + 50 <= event.end <= 6 + 50 + 8 * (28 + 50)
    assert event.window == ("Sure!\n" + CHANT)[event.end - 50 : event.end]
    assert event.to_dict() == {
        "loop_type": "repeated_output",
        "window": event.window,
        "count": 8,
        "period": 28,
        "start": 6,
        "end": event.end,
    }
    assert detector.event == event
    assert detector.position == event.end


def test_latches_until_reset_and_reset_reproduces_the_event() -> None:
    detector = ChantDetector()
    first = detector.feed(CHANT)
    assert first is not None
    assert detector.feed(CHANT) is None
    assert detector.event == first
    detector.reset()
    assert detector.event is None and detector.position == 0
    assert detector.feed(CHANT) == first


def test_window_is_truncated_for_display() -> None:
    event = ChantDetector(300, 3).feed("abcdefghij" * 200)
    assert event is not None and len(event.window) == 120
    assert event.period == 10


def test_exception_carries_the_event() -> None:
    event = ChantDetector().feed(CHANT)
    assert event is not None
    error = ChantingDetected(event)
    assert error.event is event and "period 28" in str(error)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"content_chunk_size": 0}, ValueError),
        ({"max_repeated_chunks": 0}, ValueError),
        ({"max_period": 0}, ValueError),
        ({"content_chunk_size": 5.0}, TypeError),
        ({"max_repeated_chunks": True}, TypeError),
        ({"ignore_whitespace": 1}, TypeError),
        ({"max_period": 70_000}, ValueError),
        ({"max_repeated_chunks": 100_000}, ValueError),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, object], error: type) -> None:
    (name,) = kwargs
    with pytest.raises(error, match=rf"^ChantDetector\.{name}: must be ") as caught:
        ChantDetector(**kwargs)  # type: ignore[arg-type]
    assert error is TypeError or isinstance(caught.value, ConfigError)


def test_joint_limits_name_the_option_and_the_others() -> None:
    with pytest.raises(ConfigError, match=r"^ChantDetector\.content_chunk_size: must be <= 535 with max_period=65000, got 600$"):
        ChantDetector(600, max_period=65_000)
    with pytest.raises(ConfigError, match=r"^ChantDetector\.max_repeated_chunks: must be <= "):
        ChantDetector(1000, 5000, max_period=1000)


def test_bad_chunks() -> None:
    detector = ChantDetector()
    for bad in (b"bytes", 5, None, ["a"]):
        with pytest.raises(TypeError, match="text must be a str"):
            detector.feed(bad)  # type: ignore[arg-type]
    assert detector.feed("") is None
    assert detector.position == 0


def test_lone_surrogates_are_code_points() -> None:
    detector = ChantDetector()
    event = detector.feed("\ud800\udfff!" * 300)  # lone surrogates, not a pair
    assert event is not None and event.period == 3
    # Positions count code points, as for any other text.
    assert ChantDetector().feed("x\ud800" * 10) is None
    half = ChantDetector()
    half.feed("\ud83d")
    assert half.position == 1
    # Long text with lone surrogates is copied out as code points: the same verdict.
    long = ChantDetector()
    event = long.feed("\ud800\udfff!" * 500)
    assert event is not None and event.period == 3 and event.start == 0
    assert long.position == event.end


def test_long_non_ascii_text_matches_small_pieces() -> None:
    # Long non-ASCII chunks are read as code points (into a buffer reused across feeds),
    # short ones as UTF-8: the same text gives the same event either way, and a shorter
    # long chunk after a longer one sees only its own code points.
    rng = random.Random(7)
    alphabet = "\u7684\u4e00\u662f\u4e0d\u4e86\u4eba\u6211 \U0001f600\u00e9"
    prose = "".join(rng.choice(alphabet) for _ in range(5000))
    chant = prose[:1500] + "\u4f60\u597d\u4e16\u754c\uff01" * 200
    for text in (prose + chant, chant):
        whole = ChantDetector(_hash_key=(3, 5))
        pieces = ChantDetector(_hash_key=(3, 5))
        expected = None
        for at in range(0, len(text), 7):
            expected = expected or pieces.feed(text[at : at + 7])
        assert expected is not None
        assert whole.feed(text) == expected


class _LyingLength(str):
    """A str whose ``__len__`` and ``isascii`` lie; the engine must read the str itself."""

    claimed = 0

    def __len__(self) -> int:
        return self.claimed

    def isascii(self) -> bool:
        return not str.isascii(self)


def test_str_subclasses_are_read_from_the_str_itself() -> None:
    rng = random.Random(11)
    prose = "".join(rng.choice("\u7684\u4e00\u662f\u4e0d\u4e86\u00e9 ") for _ in range(4000))
    for text in (prose + "\u4f60\u597d\u4e16\u754c\uff01" * 200, "ascii text, " * 10 + CHANT, prose):
        for claimed in (2**62, len(text) + 5, len(text) - 5, 0):
            liar = _LyingLength(text)
            liar.claimed = claimed
            # Another stream first leaves other code points in this thread's reused buffer.
            ChantDetector().feed("\u00fc" * 6000)
            lied, plain = ChantDetector(_hash_key=(3, 5)), ChantDetector(_hash_key=(3, 5))
            found = plain.feed(text)
            assert lied.feed(liar) == found
            assert lied.position == plain.position
            session, reference = DoomLoopDetector(), DoomLoopDetector()
            session.record_response(liar)
            reference.record_response(text)
            assert session.get_loop_type() == reference.get_loop_type()
            guarded = list(doomloop.guard_stream([liar], ChantDetector(_hash_key=(3, 5)), on_chant="stop"))
            assert guarded == ([] if found else [liar])


def test_long_non_ascii_text_is_scanned_in_bounded_pieces() -> None:
    # Longer than one piece (a million code points): a chant straddling the boundary between
    # pieces is found exactly as when fed in small chunks, and the scan's extra memory stays
    # far below the text's own size.
    rng = random.Random(5)
    prose = "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range((1 << 20) - 300))
    text = prose + "\u4f60\u597d\u4e16\u754c\uff01" * 400
    whole, pieces = ChantDetector(_hash_key=(3, 5)), ChantDetector(_hash_key=(3, 5))
    expected = None
    for at in range(0, len(text), 4096):
        expected = expected or pieces.feed(text[at : at + 4096])
    assert expected is not None and expected.start == len(prose)
    assert whole.feed(text) == expected
    session = DoomLoopDetector()
    session.record_response(text)
    assert session.get_loop_type() is DoomLoopType.REPEATED_OUTPUT


def test_peak_memory_stays_bounded_for_long_non_ascii_text() -> None:
    # The text is built with a peak of twice its size (its UTF-16 bytes, then the str), so a
    # feed that copied it whole (4 bytes a code point: twice the str again) would raise the
    # process's peak; one that copies a piece at a time stays under it.
    code = (
        "import random, resource\n"
        "from doomloop import ChantDetector, DoomLoopDetector\n"
        "rng = random.Random(3)\n"
        "units = bytearray()\n"
        "for _ in range(250):\n"
        "    units += b''.join((0x4E00 + rng.randrange(20000)).to_bytes(2, 'little') for _ in range(100_000))\n"
        "text = units.decode('utf-16-le')\n"
        "del units\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "assert ChantDetector().feed(text) is None\n"
        "DoomLoopDetector().record_response(text)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) // 1024)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    # 25 million code points: a whole copy would add 100 MB to the live 50 MB str.
    assert int(result.stdout) < 10, f"the peak rose by {result.stdout.strip()} MB"


def test_an_event_that_fails_to_build_is_handed_out_later() -> None:
    failures = [KeyboardInterrupt("arrived while the event was built")]

    def flaky_event(**fields: object) -> ChantEvent:
        if failures:
            raise failures.pop()
        return ChantEvent(**fields)  # type: ignore[arg-type]

    detector = _core.ChantEngine(tuple(row[1] for row in _core.settings_of("ChantDetector")), _event_type=flaky_event)
    with pytest.raises(KeyboardInterrupt):
        detector.feed(CHANT)
    event = detector.feed("more text")
    assert isinstance(event, ChantEvent) and event.period == 28
    assert detector.event is event and detector.feed(CHANT) is None
    failures.append(KeyboardInterrupt())
    detector.reset()
    with pytest.raises(KeyboardInterrupt):
        detector.feed(CHANT)
    assert detector.event == event  # the property builds it when the feed could not


def test_huge_chunks() -> None:
    filler = "".join(f"line {i}: value={i * 7919 % 10007}\n" for i in range(200_000))  # ~5 MB
    detector = ChantDetector()
    assert detector.feed(filler) is None
    assert detector.position == len(filler)
    event = detector.feed(filler[:1000] + CHANT)
    assert event is not None and event.start == len(filler) + 1000


def test_token_arrays() -> None:
    chant = np.tile(np.array([5, 17, 99, 3], dtype=np.int64), 200)
    for dtype in (np.int32, np.int64, np.uint32):
        event = ChantDetector().feed_tokens(chant.astype(dtype))
        assert event is not None and event.period == 4
        assert isinstance(event.window, tuple) and len(event.window) == 50
        assert event.window[:4] in {(5, 17, 99, 3), (17, 99, 3, 5), (99, 3, 5, 17), (3, 5, 17, 99)}
        assert event.to_dict()["window"] == list(event.window)
    negative = ChantDetector().feed_tokens(np.tile(np.array([-1, 2**31 - 1], dtype=np.int32), 300))
    assert negative is not None and set(negative.window) == {-1, 2**31 - 1}
    big = ChantDetector().feed_tokens(np.tile(np.array([2**40, 1], dtype=np.int64), 300))
    assert big is not None and set(big.window) == {2**40, 1}
    strided = ChantDetector().feed_tokens(np.tile(np.array([1, 0, 2, 0], dtype=np.int32), 300)[::2])
    assert strided is not None and strided.period == 2


def test_bad_token_arrays() -> None:
    detector = ChantDetector()
    with pytest.raises(TypeError, match="dtype int32, int64 or uint32"):
        detector.feed_tokens(np.zeros(10, dtype=np.float64))
    with pytest.raises(TypeError, match="dtype"):
        detector.feed_tokens(np.zeros(10, dtype=np.int16))
    with pytest.raises(ValueError, match="1-D"):
        detector.feed_tokens(np.zeros((2, 5), dtype=np.int32))
    with pytest.raises(TypeError, match="a list of ints or a 1-D numpy array, got tuple"):
        detector.feed_tokens((1, 2, 3))
    assert detector.feed_tokens(np.zeros(0, dtype=np.int32)) is None


def test_a_list_of_ints_reads_as_the_int64_array_of_its_ids() -> None:
    ids = [5, -17, 2**40, 3] * 200
    from_list = ChantDetector(seed=3).feed_tokens(ids)
    from_array = ChantDetector(seed=3).feed_tokens(np.array(ids, dtype=np.int64))
    assert from_list is not None and from_list == from_array and from_list.period == 4
    # Fed in two lists, the stream is the same as in one.
    split = ChantDetector(seed=3)
    assert split.feed_tokens(ids[:101]) is None
    assert split.feed_tokens(ids[101:]) == from_array
    # A long list is scanned with the interpreter released, with the same verdict.
    filler = list(range(_core.CHANT_DETACH_THRESHOLD * 2))
    long_list = ChantDetector(seed=3)
    assert long_list.feed_tokens(filler) is None and long_list.position == len(filler)
    assert long_list.feed_tokens(ids) is not None


def test_a_bad_item_of_a_token_list_is_refused_and_feeds_nothing() -> None:
    detector = ChantDetector()
    for bad, error, message in (
        ([1, 2, "3"], TypeError, "list of ints, got str at index 2"),
        ([1, True], TypeError, "got bool at index 1"),
        ([1, 2.0], TypeError, "got float at index 1"),
        ([1, 2**63], ValueError, r"tokens\[1\] does not fit in 64 bits"),
    ):
        with pytest.raises(error, match=message):
            detector.feed_tokens(bad)
        assert detector.position == 0
    assert detector.feed_tokens([-(2**63), 2**63 - 1]) is None and detector.position == 2


def test_feed_tokens_without_numpy_takes_a_list_and_names_the_extra_for_anything_else() -> None:
    code = (
        "import sys\n"
        "sys.modules['numpy'] = None  # numpy cannot be imported\n"
        "from doomloop import ChantDetector\n"
        "detector = ChantDetector()\n"
        "assert detector.feed_tokens([1, 2, 3]) is None and detector.position == 3\n"
        "assert ChantDetector().feed_tokens([5, 17, 99, 3] * 200).period == 4\n"
        "try:\n"
        "    detector.feed_tokens((1, 2, 3))\n"
        "except TypeError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "PanicException" not in result.stderr
    assert result.stdout.strip() == (
        "tokens must be a list of ints or a 1-D numpy array, got tuple (numpy arrays need the numpy "
        'extra: pip install ".[numpy]" from doomloop\'s project root)'
    )


def test_text_and_tokens_do_not_mix_until_reset() -> None:
    detector = ChantDetector()
    detector.feed("hello")
    with pytest.raises(ValueError, match="fed text"):
        detector.feed_tokens(np.zeros(3, dtype=np.int32))
    detector.reset()
    detector.feed_tokens(np.zeros(3, dtype=np.int32))
    with pytest.raises(ValueError, match="fed token ids"):
        detector.feed("hello")


def test_threads_sharing_a_detector_lose_no_chunk() -> None:
    detector = ChantDetector()
    pieces = [f"<{i}>" for i in range(4000)]

    def work(part: list[str]) -> None:
        for piece in part:
            detector.feed(piece)

    threads = [threading.Thread(target=work, args=(pieces[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert detector.position == sum(map(len, pieces))


def test_long_chunks_release_the_interpreter() -> None:
    assert _core.CHANT_DETACH_THRESHOLD == 1 << 14
    text = "".join(f"{i:x} " for i in range(3_000_000))  # ~20 MB, no chant
    stamps: list[float] = []
    running = threading.Event()
    stop = threading.Event()

    def tick() -> None:
        running.set()
        while not stop.is_set():
            stamps.append(time.perf_counter())

    thread = threading.Thread(target=tick)
    thread.start()
    running.wait()
    begin = time.perf_counter()
    assert ChantDetector().feed(text) is None
    end = time.perf_counter()
    stop.set()
    thread.join()
    assert any(begin < s < end for s in stamps), "no other thread ran during a long feed"


def test_documented_history_size() -> None:
    assert ChantDetector().history_size == 9_491


# --- REPEATED_OUTPUT in DoomLoopDetector ---------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_record_response_reports_repeated_output_without_actions() -> None:
    detector = DoomLoopDetector()
    detector.start_session()
    detector.record_response("A perfectly normal answer.")
    assert detector.get_loop_type() is None
    detector.record_response(CHANT)
    assert detector.is_doom_loop()
    assert detector.get_loop_type() is DoomLoopType.REPEATED_OUTPUT
    event = detector.get_loop_event()
    assert event is not None
    assert event.description == "Model output repeating — 8+ identical chunks detected"
    assert event.recovery_action is RecoveryAction.RETRY_DIFFERENT
    assert detector.get_stats()["loop_events"] == 1


def test_the_verdict_lasts_until_the_next_response() -> None:
    detector = DoomLoopDetector()
    detector.record_response(CHANT)
    assert detector.get_loop_type() is DoomLoopType.REPEATED_OUTPUT
    detector.record_response("Something new.")
    assert detector.get_loop_type() is None
    detector.record_response(CHANT)
    detector.start_session()
    assert detector.get_loop_type() is None


def test_streamed_pieces_share_windows_but_responses_do_not() -> None:
    streamed = DoomLoopDetector()
    for i in range(0, len(CHANT), 7):
        streamed.record_output_chunk(CHANT[i : i + 7])
    assert streamed.get_loop_type() is DoomLoopType.REPEATED_OUTPUT
    streamed.end_response()
    assert streamed.get_loop_type() is DoomLoopType.REPEATED_OUTPUT
    streamed.record_output_chunk("A new response starts here.")
    assert streamed.get_loop_type() is None

    # No window spans two responses: the same response again and again is no chant, but it is
    # a repeated response (from the eighth, as upstream's chunk counts find it).
    separate = DoomLoopDetector()
    for _ in range(7):
        separate.record_response("I will call the tool again. ")
    assert separate.get_loop_type() is None
    for _ in range(33):
        separate.record_response("I will call the tool again. ")
    event = separate.get_loop_event()
    assert event is not None and event.metadata["rule"] == "repeated_response"


def test_repeated_output_has_the_lowest_precedence() -> None:
    clock = Clock()
    detector = DoomLoopDetector(DoomLoopConfig(max_total_time=10.0), clock=clock)
    detector.start_session()
    detector.record_response(CHANT)
    clock.now = 11.0
    assert detector.get_loop_type() is DoomLoopType.RESOURCE_EXHAUSTION
    clock.now = 0.0
    for _ in range(3):
        detector.record_action("search", {"q": "x"}, "same", True)
    assert detector.get_loop_type() is DoomLoopType.REPEATED_ACTION


def test_config_window_and_threshold_apply() -> None:
    detector = DoomLoopDetector(DoomLoopConfig(content_chunk_size=10, max_repeated_chunks=3))
    # The bound for period 10: 10 + 3 * (10 + 10) characters.
    detector.record_response("0123456789" * 7)
    assert detector.get_loop_type() is DoomLoopType.REPEATED_OUTPUT
    assert detector.get_loop_event().description.startswith("Model output repeating — 3+")  # type: ignore[union-attr]


def test_session_output_rejects_non_str() -> None:
    detector = DoomLoopDetector()
    with pytest.raises(TypeError, match="text must be a str"):
        detector.record_response(b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="chunk must be a str"):
        detector.record_output_chunk(None)  # type: ignore[arg-type]
    detector.record_response("")
    detector.record_response("\ud800" * 10)
    assert detector.get_loop_type() is None


def test_colliding_hash_key_never_raises_a_false_alarm() -> None:
    # Base 1 makes a window's hash the sum of its code points: any two windows with the
    # same letters in another order collide. Only confirmation against the text stands
    # between those collisions and an alarm.
    import random

    rng = random.Random(3)
    text = "".join(rng.choice("ab") for _ in range(50_000))
    for window, repeats in ((50, 8), (8, 3), (4, 2)):
        detector = ChantDetector(window, repeats, _hash_key=(0, 0))
        event = detector.feed(text)
        if event is not None:
            # Short windows over two letters do repeat for real: the event must be true.
            assert event.period is not None
            span = text[event.start : event.end]
            assert all(span[j] == span[j - event.period] for j in range(event.period, len(span)))
            assert event.end - event.start >= window + (repeats - 1) * event.period
    assert ChantDetector(_hash_key=(0, 0)).feed(text) is None
