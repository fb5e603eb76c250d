"""Snapshots: a restored detector answers every continuation as its never-snapshotted twin,
and bad data is a SnapshotError naming what is wrong (never a crash or a half-restored
detector)."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any, List, Tuple

import pytest
from hypothesis import given, settings, strategies as st

from doomloop import DoomLoopConfig, DoomLoopDetector, LoopDetectionConfig, SnapshotError, ToolLoopDetector
from support import DATA, FakeClock, sealed, snapshot_body

TOOLS = ["read", "list", "exec", "process"]
# (tool, params, result, error, run id, call id, arm the guard first)
Step = Tuple[str, Any, Any, Any, Any, Any, bool]

steps = st.tuples(
    st.sampled_from(TOOLS),
    st.one_of(st.none(), st.fixed_dictionaries({"p": st.integers(0, 2)}), st.fixed_dictionaries({"action": st.just("poll")})),
    st.one_of(st.none(), st.sampled_from(["same", "other", {"content": [{"type": "text", "text": "t"}]}])),
    st.one_of(st.none(), st.just("Tool ghost not found")),
    st.one_of(st.none(), st.sampled_from(["r1", "r2"])),
    st.one_of(st.none(), st.sampled_from(["c1", "c2"])),
    st.booleans(),
)


def _answers(detector: ToolLoopDetector, script: List[Step]) -> List[Any]:
    out: List[Any] = []
    for tool, params, result, error, run, call_id, arm in script:
        if arm:
            out.append(detector.arm_post_compaction())
        decision = detector.before_tool_call(tool, params, run_id=run, tool_call_id=call_id)
        out.append((decision.blocked, decision.emit_warning, decision.verdict.to_dict()))
        if not decision.blocked:
            outcome = detector.after_tool_call(tool, params, result=result, error=error, run_id=run, tool_call_id=call_id)
            out.append((outcome.result_hash, outcome.unknown_tool_name, repr(outcome.guard)))
    out.append((detector.history_len, detector.guard_remaining, detector._warning_keys))
    return out


@settings(max_examples=150, deadline=None)
@given(
    before=st.lists(steps, max_size=40),
    after=st.lists(steps, max_size=30),
    thresholds=st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 9), st.integers(2, 12)),
)
def test_a_restored_tool_loop_detector_answers_as_its_twin(
    before: List[Step], after: List[Step], thresholds: Tuple[int, int, int, int]
) -> None:
    warning, critical, unknown, history = thresholds
    # Unordered thresholds (raised at run time) only in OpenClaw's configuration: doomloop's
    # own switches off.
    openclaw = {} if warning < critical else {"cycle": False, "argument_churn": False, "hash_plain_results": False}
    config = LoopDetectionConfig(
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=unknown,
        history_size=history,
        global_circuit_breaker_threshold=critical + 3,
        **openclaw,
    )
    original, twin = ToolLoopDetector(config), ToolLoopDetector(config)
    assert _answers(original, before) == _answers(twin, before)
    data = twin.to_bytes()
    restored = ToolLoopDetector.from_bytes(data)
    assert restored.config == config
    assert restored.to_bytes() == data
    assert _answers(restored, after) == _answers(original, after)


def _busy_detector() -> ToolLoopDetector:
    detector = ToolLoopDetector(warning_threshold=2, critical_threshold=4)
    detector.arm_post_compaction()
    for i in range(6):
        detector.before_tool_call("read", {"p": i % 2})
        detector.after_tool_call("read", {"p": i % 2}, result="same", error="Tool ghost not found" if i == 3 else None)
    return detector


def test_copy_deepcopy_and_pickle_restore_the_state() -> None:
    detector = _busy_detector()
    data = detector.to_bytes()
    for twin in (copy.copy(detector), copy.deepcopy(detector), pickle.loads(pickle.dumps(detector))):
        assert type(twin) is ToolLoopDetector and twin is not detector
        assert twin.to_bytes() == data


def test_extension_points_are_passed_again_and_carried_by_copies() -> None:
    aliases = {"bash": "exec"}
    detector = ToolLoopDetector(tool_aliases=aliases, raise_on_compaction_loop=True)
    detector.before_tool_call("bash", {"command": "ls"})
    twin = copy.deepcopy(detector)
    assert twin.raise_on_compaction_loop and twin.to_bytes() == detector.to_bytes()
    aliased = twin.before_tool_call("bash", {"command": "ls"}).verdict
    assert aliased == detector.before_tool_call("exec", {"command": "ls"}).verdict
    with pytest.raises(TypeError, match="unknown option"):
        ToolLoopDetector.from_bytes(detector.to_bytes(), tool_alias={})


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:-1], "truncated or padded"),
        (lambda b: b[:10], "truncated or padded|ends inside"),
        (lambda b: b"", "not a doomloop snapshot"),
        (lambda b: b"{}" + b, "not a doomloop snapshot"),
        (lambda b: b + b"\0", "truncated or padded"),
        (lambda b: b[:4] + b"\x09\x00" + b[6:], "format version 9 is newer"),
        (lambda b: b[:6] + b"\x01" + b[7:], "DoomLoopDetector snapshot cannot restore a ToolLoopDetector"),
        (lambda b: b[:6] + b"\x07" + b[7:], "unknown snapshot kind 7"),
        (lambda b: b[:30] + bytes([b[30] ^ 1]) + b[31:], "checksum"),
    ],
)
def test_bad_data_is_a_snapshot_error_naming_the_problem(mutate: Any, message: str) -> None:
    data = mutate(_busy_detector().to_bytes())
    with pytest.raises(SnapshotError, match=message) as caught:
        ToolLoopDetector.from_bytes(data)
    assert isinstance(caught.value, ValueError)


def test_every_truncation_and_flipped_byte_is_refused() -> None:
    data = _busy_detector().to_bytes()
    for n in range(len(data)):
        with pytest.raises(SnapshotError):
            ToolLoopDetector.from_bytes(data[:n])
    for i in range(len(data)):
        with pytest.raises(SnapshotError):
            ToolLoopDetector.from_bytes(data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1 :])


def test_a_failed_restore_leaves_the_detector_as_it_was() -> None:
    detector = _busy_detector()
    data = detector.to_bytes()
    with pytest.raises(SnapshotError):
        detector._restore(data[:-2])
    other = ToolLoopDetector(warning_threshold=3).to_bytes()
    with pytest.raises(ValueError, match="settings"):
        detector._restore(other)
    assert detector.to_bytes() == data


def test_snapshot_input_types() -> None:
    data = _busy_detector().to_bytes()
    for form in (bytearray(data), memoryview(data)):
        assert ToolLoopDetector.from_bytes(form).to_bytes() == data  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes, bytearray or memoryview"):
        ToolLoopDetector.from_bytes(data.hex())  # type: ignore[arg-type]


# --- the session detector -------------------------------------------------------------------

# (action type, args, result, success, progress marker?, plan state, response text)
SessionStep = Tuple[str, Any, Any, bool, bool, Any, Any]

session_steps = st.tuples(
    st.sampled_from(["read", "bash", "grep"]),
    st.one_of(st.none(), st.fixed_dictionaries({"p": st.integers(0, 2)})),
    st.sampled_from(["ok", "same", "error: 1"]),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.sampled_from(["fine", "again " * 30, ""])),
)


def _session_answers(detector: DoomLoopDetector, clock: FakeClock, script: List[SessionStep]) -> List[Any]:
    out: List[Any] = []
    for action, args, result, success, marker, plan, response in script:
        clock.now += 1.5
        detector.record_action(action, args, result, success)
        if marker:
            detector.mark_progress("m")
        if plan is not None:
            detector.record_plan(plan)
        if response is not None:
            detector.record_response(response)
        event = detector.get_loop_event()
        out.append((detector.get_loop_type(), detector.get_recovery_action(), None if event is None else event.description))
        out.append(detector.get_stats())
        if detector.is_doom_loop() and detector.increment_recovery():
            out.append(detector._next_backoff())
    return out


@settings(max_examples=100, deadline=None)
@given(
    before=st.lists(session_steps, max_size=30),
    after=st.lists(session_steps, max_size=20),
    identical=st.integers(2, 5),
    recommended=st.booleans(),
)
def test_a_restored_session_detector_answers_as_its_twin(
    before: List[SessionStep], after: List[SessionStep], identical: int, recommended: bool
) -> None:
    make = DoomLoopConfig.recommended if recommended else DoomLoopConfig
    config = make(max_identical_actions=identical, max_total_time=40.0, content_chunk_size=5, max_repeated_chunks=3)
    # (Two detectors have different chant hash keys, so the twin is the one snapshotted,
    # continued unsnapshotted beside its restored copy.)
    clock = FakeClock(100.0)
    twin = DoomLoopDetector(config, clock=clock)
    twin.start_session()
    _session_answers(twin, clock, before)
    data = twin.to_bytes()
    # Another process, another clock: the elapsed time carries over.
    elsewhere = FakeClock(clock.now + 5000.0)
    restored = DoomLoopDetector.from_bytes(data, clock=elsewhere)
    assert restored.config == config and restored.to_bytes() == data
    assert _session_answers(restored, elsewhere, after) == _session_answers(twin, clock, after)


def test_session_snapshots_copy_pickle_and_refuse_bad_data() -> None:
    clock = FakeClock(0.0)
    detector = DoomLoopDetector(clock=clock, session_key="s")
    detector.start_session()
    for _ in range(4):
        detector.record_action("read", {"p": 1}, "same", True)
    clock.now = 10.0
    data = detector.to_bytes()
    for twin in (copy.deepcopy(detector), pickle.loads(pickle.dumps(detector))):
        assert twin.to_bytes() == data and twin.session_key == "s"
        assert twin.get_loop_event() is not None
    with pytest.raises(SnapshotError, match="ToolLoopDetector snapshot cannot restore a DoomLoopDetector"):
        DoomLoopDetector.from_bytes(ToolLoopDetector().to_bytes())
    for n in range(len(data)):
        with pytest.raises(SnapshotError):
            DoomLoopDetector.from_bytes(data[:n])
    detector.record_output_chunk("streaming...")
    # Nothing is corrupt: the state cannot be saved until the response ends, and the error says so.
    with pytest.raises(SnapshotError, match=r"^no snapshot while a response is being streamed .*end_response\(\) first"):
        detector.to_bytes()
    for copier in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(SnapshotError, match=r"^no snapshot while a response is being streamed"):
            copier(detector)
    detector.end_response()
    assert DoomLoopDetector.from_bytes(detector.to_bytes(), clock=clock).get_stats() == detector.get_stats()


# --- format vectors --------------------------------------------------------------------------

VECTORS = json.loads((DATA / "snapshot_vectors.json").read_text(encoding="utf-8"))


def test_the_version_1_vectors_still_restore() -> None:
    tool_data = bytes.fromhex(VECTORS["tool_loop"]["hex"])
    # The header, read by hand: magic, version 1, kind 2 (tool loop), reserved 0.
    assert tool_data[:4] == b"DLSN" and tool_data[4:6] == b"\x01\x00" and tool_data[6:8] == b"\x02\x00"
    tools = ToolLoopDetector.from_bytes(tool_data)
    assert (tools.config.warning_threshold, tools.config.critical_threshold) == (3, 5)
    assert tools.history_len == 5 and tools.get_stats()["calls"] == 5 and tools.get_stats()["warnings"] == 1
    assert tools.before_tool_call("exec", {"command": "make test"}).blocked
    # The same calls still make the same bytes: the encoding has not drifted.
    again = ToolLoopDetector(warning_threshold=3, critical_threshold=5)
    for _ in range(5):
        again.before_tool_call("exec", {"command": "make test"})
        again.after_tool_call("exec", {"command": "make test"}, result="1 failed")
    assert again.to_bytes() == tool_data

    session_data = bytes.fromhex(VECTORS["session"]["hex"])
    assert session_data[:8] == b"DLSN\x01\x00\x01\x00"
    session = DoomLoopDetector.from_bytes(session_data, clock=FakeClock(50.0))
    stats = session.get_stats()
    assert (stats["total_actions"], stats["progress_markers"], stats["elapsed_time"]) == (3, 1, 7.0)
    assert session._recent_action_types() == ["read"] * 3


def test_a_snapshot_carries_a_retry_storm_on_and_one_without_its_failure_digest_still_restores() -> None:
    def failing(detector: DoomLoopDetector, n: int) -> Any:
        # Each error quotes the version tried: only the masked failures are alike.
        detector.record_action(
            "bash", {"command": f"pip install 'pkg==1.0.{n}'"}, f"No matching distribution for pkg==1.0.{n}", False
        )
        return detector.get_loop_event()

    detector = DoomLoopDetector(DoomLoopConfig.recommended())
    assert [failing(detector, n) for n in range(3)] == [None] * 3
    data = detector.to_bytes()
    event = failing(DoomLoopDetector.from_bytes(data), 3)
    assert event is not None and event.metadata["rule"] == "retry_storm"
    # Written before the failure digest, a snapshot ends before it and the policy byte (its
    # last 9 bytes): its newest failure reads as its newest result, so the storm counts again
    # from the next one.
    older = DoomLoopDetector.from_bytes(sealed(data, snapshot_body(data)[:-9]))
    assert [failing(older, n) for n in range(3, 6)] == [None] * 3
    assert failing(older, 6) is not None
