"""ChantDetector snapshots: a restored detector reports every continuation as its
never-snapshotted twin does (text and tokens, narrow and widened rings, wrapped rings, a chant
already found), and bad data is a SnapshotError naming what is wrong."""

from __future__ import annotations

import copy
import json
import pickle
import struct
from typing import Any, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from doomloop import ChantDetector, DoomLoopDetector, LoopEvent, SnapshotError, ToolLoopDetector
from support import DATA, sealed, snapshot_body

# (what, payload): "text" a str chunk, "tokens" a list of ids, "reset".
Step = Tuple[str, Any]

# Units that chant when repeated, and text that rarely does; characters below U+0100 keep a
# text ring narrow, the others widen it; ids of 2**32 and more widen a token ring.
_UNITS = ["ab", "abc ", "la la ", "Wait, let me think. ", "é è ", "Ω≈", "\U0001f600!"]
_text = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz .\né", max_size=30),
    st.builds(lambda unit, n: unit * n, st.sampled_from(_UNITS), st.integers(1, 12)),
    st.text(max_size=6),
)
_ids = st.one_of(st.integers(0, 40), st.sampled_from([2**32, 2**40 + 7, -1, -(2**63)]))
_tokens = st.one_of(
    st.lists(_ids, max_size=20),
    st.builds(lambda unit, n: unit * n, st.lists(st.integers(0, 9), min_size=1, max_size=5), st.integers(1, 15)),
)
steps = st.one_of(
    st.tuples(st.just("text"), _text),
    st.tuples(st.just("tokens"), _tokens),
    st.tuples(st.just("reset"), st.none()),
)


def _feed(detector: ChantDetector, step: Step) -> Any:
    what, payload = step
    try:
        if what == "reset":
            detector.reset()
            return None
        if what == "text":
            event = detector.feed(payload)
        else:
            event = detector.feed_tokens(np.array(payload, dtype=np.int64))
    except ValueError as error:  # text fed to a token stream, or the reverse
        return ("ValueError", str(error))
    return None if event is None else event.to_dict()


def _answers(detector: ChantDetector, script: List[Step]) -> List[Any]:
    out: List[Any] = []
    for step in script:
        found = _feed(detector, step)
        event = detector.event
        out.append((found, detector.position, None if event is None else event.to_dict()))
    return out


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(steps, max_size=40),
    after=st.lists(steps, max_size=40),
    window=st.integers(1, 6),
    repeats=st.integers(1, 5),
    period=st.integers(1, 24),
    ignore_whitespace=st.booleans(),
    seed=st.one_of(st.none(), st.integers(0, 2**64 - 1)),
)
def test_a_restored_detector_reports_as_its_twin(
    before: List[Step],
    after: List[Step],
    window: int,
    repeats: int,
    period: int,
    ignore_whitespace: bool,
    seed: Optional[int],
) -> None:
    options = dict(ignore_whitespace=ignore_whitespace, max_period=period, seed=seed)
    original = ChantDetector(window, repeats, **options)  # type: ignore[arg-type]
    # With a seed the twin is a second detector fed everything; without one (a secret key
    # each) it is the original, continued unsnapshotted beside its restored copy.
    twin = ChantDetector(window, repeats, **options) if seed is not None else original  # type: ignore[arg-type]
    _answers(original, before)
    if twin is not original:
        _answers(twin, before)
    data = original.to_bytes()
    restored = ChantDetector.from_bytes(data)
    assert restored.to_bytes() == data
    assert _answers(restored, after) == _answers(twin, after)


def test_long_streams_wrap_the_ring_and_restore_at_every_turn() -> None:
    # A history of 4 * 10 + 3 symbols in a ring of 299: many turns, narrow then wide.
    text = "".join(f"{i * 7919 % 1013} " for i in range(400)) + "Ω" + "".join(f"{i} " for i in range(300))
    text += "la la " * 10
    whole = ChantDetector(3, 3, max_period=8, seed=5)
    expected = [whole.feed(text[at : at + 37]) for at in range(0, len(text), 37)]
    assert any(e is not None for e in expected)
    for cut in range(0, len(text), 37 * 9):
        first = ChantDetector(3, 3, max_period=8, seed=5)
        for at in range(0, cut, 37):
            first.feed(text[at : at + 37])
        restored = ChantDetector.from_bytes(first.to_bytes())
        assert [restored.feed(text[at : at + 37]) for at in range(cut, len(text), 37)] == expected[cut // 37 :]


def test_copy_deepcopy_and_pickle_carry_the_state_and_the_options() -> None:
    seen: List[LoopEvent] = []
    detector = ChantDetector(on_event=seen.append, session_key="s-1")
    chant = "I will call the tool again. " * 40
    assert detector.feed(chant[:300]) is None
    data = detector.to_bytes()
    twins = [copy.copy(detector), copy.deepcopy(detector)]
    for twin in twins:
        assert twin.to_bytes() == data and twin.session_key == "s-1" and twin.on_event == seen.append
    expected = detector.feed(chant[300:])
    assert expected is not None
    assert [twin.feed(chant[300:]) for twin in twins] == [expected, expected]
    assert [event.session_key for event in seen] == ["s-1"] * 3
    seeded = ChantDetector(seed=3, session_key="p")
    seeded.feed(chant[:300])
    pickled = pickle.loads(pickle.dumps(seeded))
    assert pickled.to_bytes() == seeded.to_bytes()
    assert (pickled.session_key, pickled.on_event) == ("p", None)
    assert pickled.feed(chant[300:]) == seeded.feed(chant[300:])


def test_a_chant_already_reported_is_not_reported_again() -> None:
    seen: List[LoopEvent] = []
    detector = ChantDetector(on_event=seen.append)
    event = detector.feed("I will call the tool again. " * 40)
    assert event is not None and len(seen) == 1
    restored = ChantDetector.from_bytes(detector.to_bytes(), on_event=seen.append)
    assert restored.event == event and restored.position == detector.position
    assert restored.feed("more") is None and len(seen) == 1
    restored.reset()
    assert restored.feed("I will call the tool again. " * 40) == event and len(seen) == 2


def test_from_bytes_takes_only_runtime_options_and_the_same_settings() -> None:
    data = ChantDetector(10, 3, max_period=40, seed=9).to_bytes()
    restored = ChantDetector.from_bytes(data, session_key="k")
    assert (restored.history_size, restored.session_key) == (ChantDetector(10, 3, max_period=40).history_size, "k")
    with pytest.raises(TypeError, match="unknown option"):
        ChantDetector.from_bytes(data, max_period=5)
    with pytest.raises(ValueError, match="settings"):
        ChantDetector(10, 3)._restore(data)
    for form in (bytearray(data), memoryview(data)):
        assert ChantDetector.from_bytes(form).to_bytes() == data  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes, bytearray or memoryview"):
        ChantDetector.from_bytes(data.hex())  # type: ignore[arg-type]


# --- bad data ------------------------------------------------------------------------------------


def _busy() -> bytes:
    detector = ChantDetector(4, 3, max_period=16, seed=1)
    detector.feed("".join(f"{i} " for i in range(60)) + "é")
    return detector.to_bytes()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:-1], "truncated or padded"),
        (lambda b: b[:12], "truncated or padded|ends inside"),
        (lambda b: b"", "not a doomloop snapshot"),
        (lambda b: b + b"\0", "truncated or padded"),
        (lambda b: b[:4] + b"\x02\x00" + b[6:], "format version 2 is newer"),
        (lambda b: b[:6] + b"\x09" + b[7:], "unknown snapshot kind 9"),
        (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], "checksum"),
        (lambda b: sealed(b[:8] + bytes(8), snapshot_body(b)), "other ChantDetector settings"),
        (lambda b: sealed(b, snapshot_body(b)[:-1]), "ends inside"),
        (lambda b: sealed(b, snapshot_body(b) + b"\0"), "1 bytes follow the state"),
    ],
)
def test_bad_data_is_a_snapshot_error_naming_the_problem(mutate: Any, message: str) -> None:
    with pytest.raises(SnapshotError, match=message) as caught:
        ChantDetector.from_bytes(mutate(_busy()))
    assert isinstance(caught.value, ValueError)


def test_another_detectors_snapshot_is_refused_by_kind() -> None:
    with pytest.raises(SnapshotError, match="ToolLoopDetector snapshot cannot restore a ChantDetector"):
        ChantDetector.from_bytes(ToolLoopDetector().to_bytes())
    detector = DoomLoopDetector()
    detector.start_session()
    with pytest.raises(SnapshotError, match="ChantDetector snapshot cannot restore a DoomLoopDetector"):
        DoomLoopDetector.from_bytes(ChantDetector().to_bytes())


def _stream_offset() -> int:
    """Where the stream kind is in the body of `_busy()`'s snapshot: after the settings (a u32
    count, then a tag and a u64 for each count, the seed included, and a tag and a byte for
    the switch) and the hash key."""
    return 4 + 9 + 9 + 2 + 9 + 9 + 16


def test_values_the_state_cannot_hold_are_named() -> None:
    data = _busy()
    body = snapshot_body(data)
    at = _stream_offset()
    assert body[at] == 1  # a text stream
    cases = [
        (body[:at] + b"\x07" + body[at + 1 :], "stream kind 7"),
        # The stream's end before its start.
        (body[: at + 1] + struct.pack("<Q", 10**6) + body[at + 9 :], "ends before it starts"),
        # An even hash-key base (the engine only makes odd ones).
        (body[: at - 16] + bytes(8) + body[at - 8 :], "base is even"),
        # The reported flag with no chant found.
        (body[:-1] + b"\x01", "reported but none was found"),
        # More settings than the table has.
        (struct.pack("<I", 99) + body[4:], "the settings is 99"),
    ]
    for bad, message in cases:
        with pytest.raises(SnapshotError, match=message):
            ChantDetector.from_bytes(sealed(data, bad))


def test_every_truncation_and_flipped_byte_is_refused_or_restores_whole() -> None:
    data = _busy()
    for n in range(len(data)):
        with pytest.raises(SnapshotError):
            ChantDetector.from_bytes(data[:n])
    for i in range(len(data)):
        with pytest.raises(SnapshotError):
            ChantDetector.from_bytes(data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1 :])


def test_huge_lengths_allocate_nothing() -> None:
    data = _busy()
    body = bytearray(snapshot_body(data))
    # The rolling hash's eight bytes follow the stream's start (0) and end.
    position = ChantDetector.from_bytes(data).position
    high_half = body.index(struct.pack("<QQ", 0, position)) + 16 + 4
    # Every u32 in the body set to 2**32 - 1 in turn: a length field so large is refused
    # before anything is reserved (or is not a length, and is refused as a value or kept).
    for at in range(0, len(body) - 3):
        changed = bytes(body[:at]) + b"\xff\xff\xff\xff" + bytes(body[at + 4 :])
        bad = sealed(data, changed)
        try:
            restored = ChantDetector.from_bytes(bad)
        except SnapshotError:
            continue
        # Not a length, and a value the state may hold (a hash, a tag): restored whole. The
        # hash is mod 2^32 and its field eight bytes (a snapshot from when it was mod 2^64
        # holds that hash, whose low half is today's): a high half is read as its low half.
        kept = changed[:high_half] + bytes(4) + changed[high_half + 4 :]
        assert restored.to_bytes() == sealed(data, kept)


# --- format vector -------------------------------------------------------------------------------

VECTORS = json.loads((DATA / "snapshot_vectors.json").read_text(encoding="utf-8"))
_VECTOR_TEXT = "Let me try that again. " * 3


def test_the_version_1_chant_vector_still_restores() -> None:
    data = bytes.fromhex(VECTORS["chant"]["hex"])
    # The header, read by hand: magic, version 1, kind 3 (chant), reserved 0.
    assert data[:8] == b"DLSN\x01\x00\x03\x00"
    restored = ChantDetector.from_bytes(data)
    assert restored.position == len(_VECTOR_TEXT) and restored.event is None
    # The vector was made when the window hash was mod 2^64: its rolling hash reads as its
    # low half (today's hash), but its window ranks and chain places are the old hash's, so
    # the chant is found a few symbols later than a fresh detector finds it (89), within
    # the next repetition.
    event = restored.feed("Let me try that again. ") or restored.feed("Let me try that again. ")
    assert event is not None and (event.period, event.count, event.start) == (23, 4, 0)
    assert event.end <= len(_VECTOR_TEXT) + 2 * 23
    # The same feeds still make the same bytes: the encoding has not drifted.
    again = ChantDetector(8, 4, max_period=40, seed=2026)
    again.feed(_VECTOR_TEXT)
    # The same feeds still make the vector's layout: its header, settings, key and stream
    # positions, and its history where the vector has it. The fields the window hash makes
    # (the rolling hash, the window ranks, the chains: which windows have one, their tags
    # and places) are the hash mod 2^32's, which the vector, made when it was mod 2^64,
    # does not hold.
    fresh = again.to_bytes()
    assert fresh[:16] == data[:16]
    body, vector_body = snapshot_body(fresh), snapshot_body(data)
    positions = body.index(struct.pack("<QQ", 0, len(_VECTOR_TEXT))) + 16
    assert body[:positions] == vector_body[:positions]
    history = body.index(_VECTOR_TEXT.encode("ascii"))
    assert history == vector_body.index(_VECTOR_TEXT.encode("ascii"))
