"""Property test: the session detector against the pure-Python model of its checks
(``doom_loop_model.py``) on random scripts of actions, progress markers, plan states and clock
steps."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from doom_loop_model import ModelDetector
from doomloop import DoomLoopConfig, DoomLoopDetector, DoomLoopType
from support import FakeClock

ARGS = [{}, {"a": 1}, {"a": 2}, {"b": "x"}]
RESULTS = ["ok", "err", "same", None]
steps = st.one_of(
    st.tuples(
        st.just("action"),
        st.sampled_from(["read", "write", "grep"]),
        st.sampled_from(range(len(ARGS))),
        st.sampled_from(range(len(RESULTS))),
        st.booleans(),
        st.sampled_from([0.0, 0.0, 61.0]),
    ),
    st.tuples(st.just("marker")),
    st.tuples(st.just("plan"), st.integers(0, 3)),
    st.tuples(st.just("advance"), st.floats(0, 200)),
)
configs = st.builds(
    DoomLoopConfig,
    max_identical_actions=st.integers(1, 5),
    max_similar_actions=st.integers(1, 7),
    max_consecutive_failures=st.integers(1, 5),
    max_no_progress_steps=st.integers(1, 7),
    max_cycle_period=st.integers(2, 4),
    min_cycle_repeats=st.integers(2, 4),
    detect_cycles=st.booleans(),
)


@given(configs, st.lists(steps, max_size=60))
@settings(max_examples=300, deadline=None)
def test_engine_matches_the_model(config: DoomLoopConfig, script: list[tuple[Any, ...]]) -> None:
    clock = FakeClock(0.0)
    detector = DoomLoopDetector(config, clock=clock)
    detector.start_session()
    reference = ModelDetector(config, started_at=0.0)
    names = {
        None: None,
        DoomLoopType.REPEATED_FAILURE: "repeated_failure",
        DoomLoopType.NO_PROGRESS: "no_progress",
        DoomLoopType.CIRCULAR_PLAN: "circular_plan",
        DoomLoopType.RESOURCE_EXHAUSTION: "resource_exhaustion",
    }
    for step in script:
        if step[0] == "action":
            _, kind, args, result, success, duration = step
            detector.record_action(kind, ARGS[args], RESULTS[result], success, duration)
            reference.record_action(kind, ARGS[args], RESULTS[result], success, duration)
        elif step[0] == "marker":
            detector.mark_progress("m")
            reference.mark_progress()
        elif step[0] == "plan":
            detector.record_plan({"state": step[1]})
            reference.record_plan(step[1])
        else:
            clock.now += step[1]
        expected = reference.finding(clock.now)
        loop_type = detector.get_loop_type()
        if expected in ("identical", "similar"):
            assert loop_type is DoomLoopType.REPEATED_ACTION
            event = detector.get_loop_event()
            assert event is not None
            assert event.description.startswith("Same action repeated" if expected == "identical" else "Same action type")
        else:
            assert names[loop_type] == expected
