"""The latency guarantee holds for every hash key: a chant of period p <= max_period (not
only whitespace) is reported within ``content_chunk_size + max_repeated_chunks * (p +
content_chunk_size)`` characters of its start, however the detector's key falls. Each case
runs over thousands of keys (``seed``), on periods in which windows recur: the shapes that
once went unreported for some keys (a sentence repeated four and a half times as the
period: the window the key tracked occurred three times a period, its counted
occurrences alternated between two gaps, and it never chained)."""

from __future__ import annotations

import random
from typing import Callable, List, Tuple

import pytest

from doomloop import ChantDetector

W, K = 50, 8
WORDS = "the a model tool call file read write loop test again check result value line".split()


def bound(period: int, window: int = W, repeats: int = K) -> int:
    return window + repeats * (period + window)


def sentence(rng: random.Random, length: int) -> str:
    """Words and spaces, exactly `length` characters, ending in '. '."""
    text = ""
    while len(text) < length:
        text += rng.choice(WORDS) + " "
    return text[: length - 2] + ". "


def smallest_period(text: str) -> int:
    return next(q for q in range(1, len(text) + 1) if len(text) % q == 0 and text == text[q:] + text[:q])


def chant_start(text: str, at: int, period: int) -> int:
    """Where the periodic run that the chant starting at `at` belongs to really starts (the
    text before it may already follow the period)."""
    while at > 0 and text[at - 1] == text[at - 1 + period]:
        at -= 1
    return at


def check(
    unit: str,
    seeds: range,
    prefix: str = "Sure, here is the plan for the next step.\n",
    window: int = W,
    repeats: int = K,
    whole_period: bool = True,
    ignore_whitespace: bool = True,
) -> None:
    """Every seed reports the chant of `unit` within the bound; as the chant of the whole
    unit, unless `whole_period` is False (with a small window and threshold a unit may hold a
    shorter chant of its own, which may be reported first)."""
    period = smallest_period(unit)
    assert period == len(unit), "the unit must be primitive"
    limit = bound(period, window, repeats)
    text = prefix + unit * (limit // period + 2)
    start = chant_start(text, len(prefix), period)
    for seed in seeds:
        event = ChantDetector(window, repeats, ignore_whitespace=ignore_whitespace, seed=seed).feed(text)
        assert event is not None, f"seed {seed}: period {period} not reported"
        assert event.end - start <= limit, (seed, event.end - start, limit)
        assert event.count == repeats and event.window == text[event.end - window : event.end]
        if whole_period:
            assert (event.period, event.start) == (period, start), seed
        else:
            assert event.period is not None
            repeated = text[event.start : event.end]
            assert repeated[event.period :] == repeated[: -event.period], seed


def four_and_a_half(line: str) -> str:
    """A period made of a sentence repeated four and a half times."""
    return line * 4 + line[: len(line) // 2]


def test_the_issue_period_a_33_character_sentence_four_and_a_half_times() -> None:
    # 148 characters: 5% of keys used to miss it however long it ran.
    unit = four_and_a_half("I will check the file once more. ")
    assert len(unit) == 148
    check(unit, range(3000))


def test_random_periods_of_116_to_225_made_that_way() -> None:
    rng = random.Random(1)
    for _ in range(120):
        period = rng.randrange(116, 226)
        line = sentence(rng, round(period / 4.5))
        first = rng.randrange(2**64 - 40)
        check(four_and_a_half(line), range(first, first + 40))


def with_gap(a: str, x: str, y: str) -> str:
    """``a x a y``: every window inside `a` occurs twice a period."""
    return a + x + a + y


SHAPES: List[Tuple[str, Callable[[random.Random], str]]] = [
    # The windows inside A recur at half the period, with different text between (X, then Y).
    ("abXabY, equal halves", lambda r: with_gap(sentence(r, 70), "X1. ", "Y2. ")),
    ("abXabY, unequal halves", lambda r: with_gap(sentence(r, 64), "X. ", "and Y instead. ")),
    # A local period (a line repeated five times) inside a longer one.
    ("s^5 t", lambda r: sentence(r, 60) * 5 + "then stop. "),
    # Two levels: (S S T)(S S T'), every window of S four times a period.
    ("(SST)(SST')", lambda r: (lambda s: s + s + "one. " + s + s + "two! ")(sentence(r, 55))),
    # Three different gaps between a window's counted occurrences.
    ("a b a c a d", lambda r: (lambda a: a + "b. " + a + "cc. " + a + "ddd. ")(sentence(r, 60))),
    # A long line of dashes inside the period: its windows recur at every offset.
    ("divider inside", lambda r: "-" * 120 + "\n" + sentence(r, 40) + "\n"),
    # Mostly whitespace: the blank windows have no rank, only the few others do.
    ("blank lines", lambda r: sentence(r, 12) + "\n" * 70),
]


@pytest.mark.parametrize(("name", "make"), SHAPES, ids=[name for name, _ in SHAPES])
def test_periods_with_windows_that_recur(name: str, make: Callable[[random.Random], str]) -> None:
    rng = random.Random(name)
    for trial in range(3):
        check(make(rng), range(trial * 1000, trial * 1000 + 400))


@pytest.mark.parametrize(("window", "repeats"), [(5, 3), (10, 4), (20, 2)])
def test_small_windows_keep_the_bound_for_every_key(window: int, repeats: int) -> None:
    rng = random.Random(window)
    units = [
        "abcab" * 3 + "d",
        "ab" * 7 + "c" + "ab" * 7 + "dd",
        four_and_a_half(sentence(rng, 3 * window)),
        with_gap(sentence(rng, 2 * window), "x", "yy"),
    ]
    for unit in units:
        check(unit, range(500), prefix="ok. ", window=window, repeats=repeats, whole_period=False)


def test_whitespace_only_streams() -> None:
    """Only whitespace: never a chant by default (padding and blank lines must not alarm);
    with whitespace counted, a repeating pattern is one, within the bound for every key, and
    whitespace that varies without repeating is not."""
    rng = random.Random(6)
    patterned = "\n\n   \n \t\n" + " " * 9
    varying = "".join(rng.choice(" \n\n\t") for _ in range(20_000))
    for seed in range(100):
        assert ChantDetector(seed=seed).feed(patterned * 1000) is None
        assert ChantDetector(seed=seed).feed(varying) is None
        assert ChantDetector(ignore_whitespace=False, seed=seed).feed(varying) is None
    check(patterned, range(1000), prefix="\n", ignore_whitespace=False)
    check(" ", range(100), prefix="", ignore_whitespace=False)


def test_the_same_seed_gives_the_same_events_and_positions() -> None:
    rng = random.Random(4)
    text = "".join(sentence(rng, 40) for _ in range(20)) + four_and_a_half(sentence(rng, 33)) * 14
    for seed in (0, 1, 2**63, 2**64 - 1):
        whole = ChantDetector(seed=seed).feed(text)
        again = ChantDetector(seed=seed)
        pieces = [again.feed(text[at : at + 7]) for at in range(0, len(text), 7)]
        assert whole is not None and [e for e in pieces if e is not None] == [whole]
        assert again.position == whole.end
    # Different seeds track different windows: the reports differ in where they end.
    ends = {ChantDetector(seed=seed).feed(text).end for seed in range(50)}  # type: ignore[union-attr]
    assert len(ends) > 5


@pytest.mark.parametrize(
    ("seed", "error", "message"),
    [
        (-1, ValueError, "ChantDetector.seed: must be >= 0, got -1"),
        (2**64, ValueError, "ChantDetector.seed: must be <= 18446744073709551615, got 18446744073709551616"),
        ("7", TypeError, "ChantDetector.seed: must be an int or None, got str"),
        (7.0, TypeError, "ChantDetector.seed: must be an int or None, got float"),
        (True, TypeError, "ChantDetector.seed: must be an int or None, got bool"),
    ],
)
def test_bad_seeds_name_the_option(seed: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        ChantDetector(seed=seed)  # type: ignore[arg-type]


def test_seed_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        ChantDetector(50, 8, True, 1000, 7)  # type: ignore[misc]
