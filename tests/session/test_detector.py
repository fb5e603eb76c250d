"""DoomLoopDetector behaviour beyond the upstream vectors: doomloop's own decisions,
bounds, thread safety, bad input, logging and backoff (the property test against the
pure-Python model is tests/models/test_doom_loop_model.py)."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import tracemalloc
from typing import Any

import pytest

from doomloop import ConfigError, DoomLoopConfig, DoomLoopDetector, DoomLoopEvent, DoomLoopType, RecoveryAction
from support import FakeClock, shared_argument_dicts


def started(config: DoomLoopConfig | None = None, now: float = 1000.0) -> tuple[DoomLoopDetector, FakeClock]:
    clock = FakeClock(now)
    detector = DoomLoopDetector(config, clock=clock)
    detector.start_session()
    return detector, clock


# --- the documented quick start -------------------------------------------------------


def test_seed_quick_start() -> None:
    detector = DoomLoopDetector()
    detector.start_session()
    for _ in range(3):
        detector.record_action("read_file", {"path": "foo.py"}, "content", success=True)
    assert detector.is_doom_loop()
    assert detector.get_recovery_action() is RecoveryAction.RETRY_DIFFERENT


def test_early_marker_no_longer_suppresses_no_progress() -> None:
    detector, _ = started(DoomLoopConfig(max_no_progress_steps=5, max_consecutive_failures=10, max_similar_actions=10))
    detector.mark_progress("read config.yaml")
    for i in range(5):
        detector.record_action("retry", {"n": i}, "same error", success=False)
    # The window is the whole history, so the early marker still counts...
    assert detector.get_loop_type() is None
    detector.record_action("retry", {"n": 99}, "same error", success=False)
    # ...until an action falls before the window.
    assert detector.get_loop_type() is DoomLoopType.NO_PROGRESS


# --- doomloop's decisions -------------------------------------------------------------


def test_similar_case_says_what_it_is() -> None:
    detector, _ = started()
    for i in range(5):
        detector.record_action("search", {"q": i}, f"r{i}", success=True)
    event = detector.get_loop_event()
    assert event is not None and event.loop_type is DoomLoopType.REPEATED_ACTION
    assert event.description == "Same action type repeated 5 times"


def test_time_alone_starts_a_loop_even_without_actions() -> None:
    detector, clock = started()
    clock.now += 300.0
    assert not detector.is_doom_loop()
    clock.now += 0.5
    assert detector.is_doom_loop()
    assert detector.get_loop_type() is DoomLoopType.RESOURCE_EXHAUSTION
    assert detector.get_recovery_action() is RecoveryAction.ABORT
    event = detector.get_loop_event()
    assert event is not None and event.description == "Exceeded time limit of 300.0s"


def test_no_session_no_time_limit() -> None:
    clock = FakeClock(0.0)
    detector = DoomLoopDetector(clock=clock)
    clock.now = 10_000.0
    assert detector.get_loop_type() is None
    assert detector.get_stats()["elapsed_time"] == 0.0


def test_timed_out_action_counts_as_failed() -> None:
    detector, _ = started(DoomLoopConfig(max_time_per_action=5.0))
    for i in range(3):
        detector.record_action("slow", {"i": i}, f"r{i}", success=True, duration=6.0)
    assert detector.get_loop_type() is DoomLoopType.REPEATED_FAILURE
    stats = detector.get_stats()
    assert stats["failed_actions"] == 3 and stats["successful_actions"] == 0


def test_falsy_results_are_values() -> None:
    # Upstream turns every falsy result into "no result"; here 0, "" and None differ.
    detector, _ = started(DoomLoopConfig(max_similar_actions=10))
    results: tuple[Any, ...] = (0, "", None, [], 0, "")
    for result in results:
        detector.record_action("probe", {"x": str(result)}, result, success=True)
    assert detector.get_loop_type() is None


def test_abab_cycle_is_circular_plan_and_off_for_parity() -> None:
    for detect, expected in ((True, DoomLoopType.CIRCULAR_PLAN), (False, None)):
        detector, _ = started(DoomLoopConfig(detect_cycles=detect))
        for _ in range(3):
            detector.record_action("open", {"f": "a"}, "A", success=True)
            detector.record_action("close", {"f": "a"}, "B", success=True)
        assert detector.get_loop_type() is expected


def test_cycle_with_changing_results_is_work() -> None:
    detector, _ = started()
    for i in range(4):
        detector.record_action("poll", {"id": 1}, f"step {i}", success=True)
        detector.record_action("sleep", {"s": 1}, "ok", success=True)
    assert detector.get_loop_type() is None


def test_marker_inside_the_cycle_span_is_progress() -> None:
    detector, _ = started()
    for i in range(3):
        detector.record_action("open", {"f": "a"}, "A", success=True)
        if i == 1:
            detector.mark_progress("found something")
        detector.record_action("close", {"f": "a"}, "B", success=True)
    assert detector.get_loop_type() is None


def test_plan_state_revisits() -> None:
    detector, _ = started()
    detector.record_action("plan", {}, "a", success=True)
    detector.record_action("act", {}, "b", success=True)
    for state in ({"step": 1}, {"step": 2}, {"step": 1}, {"step": 2}):
        detector.record_plan(state)
    assert detector.get_loop_type() is None
    detector.record_plan({"step": 1})
    assert detector.get_loop_type() is DoomLoopType.CIRCULAR_PLAN
    event = detector.get_loop_event()
    assert event is not None and event.description == "Plan has looped back to a previous state"
    detector.mark_progress("moved on")
    assert detector.get_loop_type() is None


def test_recovery_ladder_and_attempts_last_the_session() -> None:
    detector, _ = started(DoomLoopConfig(max_recovery_attempts=3))
    for _ in range(3):
        detector.record_action("x", {}, "same", success=True)
    assert detector.get_recovery_action() is RecoveryAction.RETRY_DIFFERENT
    assert detector.increment_recovery()
    assert detector.get_recovery_action() is RecoveryAction.ESCALATE_MODEL
    assert detector.increment_recovery()
    detector.mark_progress("unrelated")  # neither markers nor loops clearing reset attempts
    assert detector.get_recovery_action() is RecoveryAction.REQUEST_HELP
    assert not detector.increment_recovery()
    assert detector.get_recovery_action() is RecoveryAction.ABORT
    detector.start_session()
    assert detector.get_stats()["recovery_attempts"] == 0
    assert detector.get_recovery_action() is RecoveryAction.CONTINUE


def test_no_escalation_when_disabled() -> None:
    detector, _ = started(DoomLoopConfig(escalate_on_loop=False, max_recovery_attempts=5))
    for _ in range(3):
        detector.record_action("x", {}, "same", success=True)
    detector.increment_recovery()
    assert detector.get_recovery_action() is RecoveryAction.REQUEST_HELP


def test_one_event_per_episode_and_logging(caplog: pytest.LogCaptureFixture) -> None:
    detector, _ = started()
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        for _ in range(6):
            detector.record_action("x", {}, "same", success=True)
            detector.is_doom_loop()
        detector.record_action("y", {}, "other", success=True)
        for _ in range(3):
            detector.record_action("z", {}, "z", success=False)
    assert detector.get_stats()["loop_events"] == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "doomloop"]
    assert messages == [
        "doom loop detected: Same action repeated 3 times",
        "doom loop detected: Same action repeated 3 times",
    ]


def test_event_to_dict() -> None:
    detector, _ = started()
    for i in range(12):
        detector.record_action(f"t{i % 2}", {"i": i % 2}, "r", success=True)
    detector.record_action("t1", {"i": 1}, "r", success=True)
    detector.record_action("t1", {"i": 1}, "r", success=True)
    event = detector.get_loop_event()
    assert isinstance(event, DoomLoopEvent)
    data = event.to_dict()
    assert list(data) == ["loop_type", "description", "action_history", "recovery_action", "timestamp", "metadata"]
    assert data["loop_type"] == "repeated_action"
    assert data["recovery_action"] == "retry_different"
    assert data["action_history"] == ["t0", "t1"] * 4 + ["t1", "t1"]
    assert data["metadata"] == {"action_count": 14, "recovery_attempts": 0, "rule": "identical_actions"}


def test_stats_count_every_call() -> None:
    detector, clock = started()
    detector.record_action("a", {}, "1", success=True)
    detector.record_action("b", {}, "2", success=False)
    detector.mark_progress("m")
    detector.mark_progress("m")
    clock.now += 12.5
    stats = detector.get_stats()
    assert stats == {
        "total_actions": 2,
        "successful_actions": 1,
        "failed_actions": 1,
        "loop_events": 0,
        "recovery_attempts": 0,
        "progress_markers": 2,
        "elapsed_time": 12.5,
        "current_backoff": 1.0,
    }


def test_backoff_is_capped_and_async_does_not_block() -> None:
    config = DoomLoopConfig(initial_backoff=0.001, backoff_multiplier=10.0, max_backoff=0.05)
    detector, _ = started(config)
    assert detector.apply_backoff() == 0.001
    assert detector.apply_backoff() == pytest.approx(0.01)
    assert detector.apply_backoff() == pytest.approx(0.05)
    assert detector.get_stats()["current_backoff"] == pytest.approx(0.05)
    detector.reset_backoff()
    assert detector.get_stats()["current_backoff"] == 0.001

    async def main() -> list[str]:
        order: list[str] = []

        async def other() -> None:
            order.append("other ran")

        slow = DoomLoopDetector(DoomLoopConfig(initial_backoff=0.05))
        await asyncio.gather(slow.apply_backoff_async(), other())
        order.append("backoff done")
        return order

    assert asyncio.run(main()) == ["other ran", "backoff done"]


# --- bounds and threads ---------------------------------------------------------------


def test_memory_does_not_grow_with_actions() -> None:
    detector, _ = started()
    for i in range(1_000):
        detector.record_action("read_file", {"path": f"f{i % 50}.py"}, "x" * 100, success=True)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(100_000):
        detector.record_action("read_file", {"path": f"f{i % 50}.py"}, "x" * 100, success=True)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert growth < 64 * 1024
    assert detector._history_capacity == 5  # max_cycle_period + 1, whatever the thresholds
    assert detector.get_stats()["total_actions"] == 101_000


def test_threads_lose_no_update() -> None:
    detector, _ = started(DoomLoopConfig(max_similar_actions=10**6, max_identical_actions=10**6))
    threads_n, per_thread = 8, 2_000

    def work(tid: int) -> None:
        for i in range(per_thread):
            detector.record_action(f"t{tid}", {"i": i}, i, success=i % 2 == 0)
            if i % 100 == 0:
                detector.mark_progress("p")
                detector.is_doom_loop()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = detector.get_stats()
    assert stats["total_actions"] == threads_n * per_thread
    assert stats["successful_actions"] == threads_n * per_thread // 2
    assert stats["progress_markers"] == threads_n * per_thread // 100


@pytest.mark.parametrize("profile", ["default", "recommended"])
@pytest.mark.parametrize("seed", range(6))
def test_the_default_clock_answers_as_a_clock_read_on_every_check(profile: str, seed: int) -> None:
    # With the default clock the time is read only when a check needs it, the inputs of the
    # newest action are remembered by identity and a standing loop is answered without the
    # lock: a twin whose clock is called on every check (and never reaches the time limit)
    # must see the same loops, episodes and descriptions after every call.
    rng = random.Random(seed)
    config = DoomLoopConfig.recommended() if profile == "recommended" else DoomLoopConfig()
    events: dict[str, list[str]] = {"lazy": [], "read": []}
    lazy = DoomLoopDetector(config, on_event=lambda e: events["lazy"].append(e.message))
    read = DoomLoopDetector(config, clock=lambda: 0.0, on_event=lambda e: events["read"].append(e.message))
    # Shared objects, so the same objects come back (the memo's case) as well as equal ones.
    types = ["read", "bash", "edit"]
    args = [{"path": "a.py", "line": 3}, {"path": "b.py"}, {"cmd": ["ls", "-l"]}, None]
    results = ["ok", "", 0, None, {"exit": 1}]
    for detector in (lazy, read):
        detector.start_session()
    for _ in range(400):
        op = rng.random()
        if op < 0.75:
            call = (rng.choice(types), rng.choice(args), rng.choice(results), rng.random() < 0.7)
            if rng.random() < 0.2:  # equal but fresh objects
                call = (call[0] + "", dict(call[1]) if call[1] else call[1], call[2], call[3])
            if rng.random() < 0.1 and isinstance(call[1], dict):  # the same dict, mutated
                call[1]["line"] = rng.randrange(3)
            for detector in (lazy, read):
                detector.record_action(*call)
        elif op < 0.82:
            for detector in (lazy, read):
                detector.mark_progress("p")
        elif op < 0.88:
            plan = rng.choice(["plan a", "plan b"])
            for detector in (lazy, read):
                detector.record_plan(plan)
        elif op < 0.96:
            text = rng.choice(["Same answer again.", "", "Now let me run the test again:"])
            for detector in (lazy, read):
                detector.record_response(text)
        else:
            for detector in (lazy, read):
                detector.start_session()
        assert lazy.is_doom_loop() == read.is_doom_loop()
        assert lazy.is_doom_loop() == read.is_doom_loop()
        assert lazy.get_loop_type() == read.get_loop_type()
        lazy_event, read_event = lazy.get_loop_event(), read.get_loop_event()
        assert (lazy_event is None) == (read_event is None)
        if lazy_event is not None and read_event is not None:
            assert lazy_event.description == read_event.description
        assert lazy.get_stats()["loop_events"] == read.get_stats()["loop_events"]
    assert events["lazy"] == events["read"]


@pytest.mark.parametrize("seed", range(4))
def test_arguments_sharing_objects_with_the_last_ones_hash_as_fresh_ones(seed: int) -> None:
    # A fresh arguments dict refreshes the snapshot of the last one in place, and a key or
    # value that is the very object held there is not hashed again: a twin handed equal dicts
    # it never remembers (and the same hash key: the same snapshot bytes) must end in the
    # same state.
    shared = DoomLoopDetector(clock=lambda: 0.0)
    shared.start_session()
    fresh = DoomLoopDetector.from_bytes(shared.to_bytes(), clock=lambda: 0.0)
    for step, (args, copy) in enumerate(shared_argument_dicts(seed, 300)):
        shared.record_action("read", args, "ok", True)
        fresh.record_action("read", copy, "ok", True)
        assert shared.to_bytes() == fresh.to_bytes(), f"step {step}: {args!r}"


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("max_identical_actions", 0, ValueError),
        ("max_similar_actions", -1, ValueError),
        ("max_no_progress_steps", 2.5, TypeError),
        ("max_consecutive_failures", True, TypeError),
        ("content_chunk_size", 0, ValueError),
        ("backoff_multiplier", 0.5, ValueError),
        ("initial_backoff", float("nan"), ValueError),
        ("max_total_time", 0, ValueError),
        ("max_time_per_action", "60", TypeError),
        ("max_cycle_period", 1, ValueError),
        ("min_cycle_repeats", 1, ValueError),
        ("similarity_threshold", 1.5, ValueError),
        ("detect_cycles", 1, TypeError),
        # Beyond what the engine can honour: refused with the range, never clamped or overflowed.
        ("max_identical_actions", 2**64, ValueError),
        ("max_recovery_attempts", 2**70, ValueError),
        ("max_cycle_period", 65, ValueError),
        ("min_cycle_repeats", 1025, ValueError),
        ("initial_backoff", 1e300, ValueError),
        ("max_backoff", float("inf"), ValueError),
        ("backoff_multiplier", float("inf"), ValueError),
        ("max_backoff", 10**400, ValueError),
        ("content_chunk_size", 2**64, ValueError),
    ],
)
def test_config_validation_names_the_field(field: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=field):
        DoomLoopConfig(**{field: value})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"content_chunk_size": 100_000}, r"DoomLoopConfig\.content_chunk_size: must be in 1\.\.=64535, got 100000"),
        (
            {"max_repeated_chunks": 5000},
            r"DoomLoopConfig\.max_repeated_chunks: must be in 1\.\.=1996 with content_chunk_size=50, got 5000",
        ),
        ({"max_cycle_period": 100}, r"DoomLoopConfig\.max_cycle_period: must be <= 64, got 100"),
    ],
)
def test_output_and_cycle_settings_beyond_the_engine_are_rejected(fields: dict[str, int], message: str) -> None:
    # Valid as ints, but beyond the engine: refused when the config is built, naming only
    # settings the caller can set (never clamped, as a cycle period of 100 once was).
    with pytest.raises(ConfigError, match=message):
        DoomLoopConfig(**fields)
    assert DoomLoopConfig(max_cycle_period=64, min_cycle_repeats=1024).max_cycle_period == 64


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        DoomLoopConfig().max_identical_actions = 9


def test_config_defaults_are_praisonai_documented_ones() -> None:
    # Written out by hand from upstream's documentation (the engine's table is what is tested).
    assert DoomLoopConfig().as_dict() == {
        "max_identical_actions": 3,
        "max_similar_actions": 5,
        "max_consecutive_failures": 3,
        "max_no_progress_steps": 5,
        "similarity_threshold": 0.85,
        "max_time_per_action": 60.0,
        "max_total_time": 300.0,
        "enable_auto_recovery": True,
        "max_recovery_attempts": 2,
        "escalate_on_loop": True,
        "initial_backoff": 1.0,
        "backoff_multiplier": 2.0,
        "max_backoff": 30.0,
        "max_repeated_chunks": 8,
        "content_chunk_size": 50,
        "detect_cycles": True,
        "max_cycle_period": 4,
        "min_cycle_repeats": 3,
        # doomloop's own rules: off, or (responses) as often as upstream's chunk counts flag.
        "similar_by_arguments": False,
        "failures_by_arguments": False,
        "no_progress_by_arguments": False,
        "max_repeated_responses": 8,
        "detailed_descriptions": False,
    }
    assert repr(DoomLoopConfig()) == "DoomLoopConfig()"
    assert repr(DoomLoopConfig(max_identical_actions=4)) == "DoomLoopConfig(max_identical_actions=4)"


def test_config_copies_and_pickles_by_value() -> None:
    import copy
    import pickle

    config = DoomLoopConfig(max_identical_actions=7, initial_backoff=2)
    for twin in (copy.copy(config), copy.deepcopy(config), pickle.loads(pickle.dumps(config))):
        assert twin == config and hash(twin) == hash(config) and twin is not config
        assert twin.initial_backoff == 2.0 and type(twin.initial_backoff) is float
    assert config.replace(max_identical_actions=3) == DoomLoopConfig(initial_backoff=2.0)
    with pytest.raises(TypeError, match="no field 'nope'"):
        config.replace(nope=1)


def test_out_of_range_is_a_config_error_and_wrong_type_a_type_error() -> None:
    with pytest.raises(ConfigError, match=r"DoomLoopConfig\.max_backoff: must be <= 1000000000\.0, got 1e\+300") as caught:
        DoomLoopConfig(max_backoff=1e300)
    assert caught.value.path == "DoomLoopConfig.max_backoff" and isinstance(caught.value, ValueError)
    with pytest.raises(TypeError, match=r"DoomLoopConfig\.detect_cycles: must be a bool, got int"):
        DoomLoopConfig(detect_cycles=1)  # type: ignore[arg-type]


def test_bad_arguments_raise_clear_errors() -> None:
    detector, _ = started()
    with pytest.raises(TypeError, match="config"):
        DoomLoopDetector({"max_identical_actions": 3})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clock"):
        DoomLoopDetector(clock=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="action_type"):
        detector.record_action(5, {}, "r", success=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="success"):
        detector.record_action("a", {}, "r", success="yes")  # type: ignore[arg-type]
    for duration, error in [
        (float("nan"), ValueError),
        (-1, ValueError),
        (-(2**2000), ValueError),
        ("1", TypeError),
        (True, TypeError),
        (None, None),
    ]:
        if error is None:
            detector.record_action("a", {}, "r", success=True, duration=duration)
            continue
        with pytest.raises(error, match="duration"):
            detector.record_action("a", {}, "r", success=True, duration=duration)
    with pytest.raises(TypeError, match="metadata"):
        detector.record_action("a", {}, "r", success=True, metadata=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="marker"):
        detector.mark_progress(3)  # type: ignore[arg-type]
    bad_clock = DoomLoopDetector(clock=lambda: "soon")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="clock"):
        bad_clock.start_session()
    assert detector.get_stats()["total_actions"] == 1  # only the duration=None action


def test_adversarial_arguments_never_crash() -> None:
    detector, _ = started()
    deep: Any = {}
    for _ in range(100_000):
        deep = {"k": deep}
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    for args, result in (
        (deep, cyclic),
        ({"n": float("nan"), "i": 2**4000, "z": -0.0}, float("inf")),
        ({"b": b"\xff" * 10, "s": {1, 2}, "t": (1, 2)}, "\udcff"),
        (None, object()),
        ({1: "int key", "1": "str key", None: 0, (1, 2): "tuple key"}, "x" * 5_000_000),
    ):
        detector.record_action("tool", args, result, success=True)
    assert detector.get_stats()["total_actions"] == 5
