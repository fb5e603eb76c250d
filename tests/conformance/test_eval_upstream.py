"""Property test: doomloop's LoopEvaluator agrees with upstream's wherever upstream is right.

Upstream (praisonaiagents, the `bench` extra) is the reference. Inputs are limited to those
its known defects do not touch: no string flags, no empty history (upstream's reasoning does
not say it is empty) and at most one doom-loop signal per event (upstream lets a false
``is_loop`` veto the others).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest
from hypothesis import given, settings, strategies as st

from doomloop import DoomLoopType
from doomloop.eval import DOOM_LOOP_MARKERS, EvaluationLoopResult, IterationResult, LoopEvaluator

upstream_eval = pytest.importorskip("praisonaiagents.eval")

scores = st.lists(st.integers(min_value=0, max_value=100).map(lambda tenths: tenths / 10), min_size=1, max_size=12)
thresholds = st.one_of(st.none(), st.sampled_from([5.0, 7.5, 8.0, 9.0]))
signal = st.one_of(
    st.builds(lambda v: {"is_loop": v}, st.booleans()),
    st.builds(lambda t: {"loop_type": t}, st.sampled_from(list(DoomLoopType))),
    st.builds(lambda v: {"doom_loop": v}, st.booleans()),
    st.builds(lambda v: {"doom_loop_fired": v}, st.booleans()),
    st.builds(lambda m: {"type": m}, st.sampled_from(sorted(DOOM_LOOP_MARKERS) + ["tool_call", "note"])),
    st.builds(lambda m: {"event": m.upper()}, st.sampled_from(sorted(DOOM_LOOP_MARKERS) + ["retry"])),
    st.just({"reason": "nothing"}),
)


class Event:
    def __init__(self, fields: Dict[str, Any]) -> None:
        self.__dict__.update(fields)


class UpstreamLoopResult:
    """The attributes upstream reads, with upstream's types (success is always a bool there)."""

    def __init__(self, scores: List[float], threshold: float, mode: str, success: bool) -> None:
        self.score_history = scores
        self.threshold = threshold
        self.total_duration_seconds = 1.5
        self.mode = mode
        self.success = success


@settings(max_examples=300, deadline=None)
@given(
    scores=scores,
    loop_threshold=st.sampled_from([6.0, 8.0]),
    threshold=thresholds,
    mode=st.sampled_from(["optimize", "review", "Review"]),
    success=st.booleans(),
    max_wasted=st.integers(min_value=0, max_value=2),
    events=st.lists(st.tuples(signal, st.booleans()), max_size=4),
)
def test_agrees_with_upstream(
    scores: List[float],
    loop_threshold: float,
    threshold: Optional[float],
    mode: str,
    success: bool,
    max_wasted: int,
    events: List[Any],
) -> None:
    guard_events = [Event(fields) if as_object else dict(fields) for fields, as_object in events]
    ours = (
        LoopEvaluator(threshold=threshold, max_wasted_iterations=max_wasted)
        .run(
            EvaluationLoopResult(
                iterations=[IterationResult(i, s) for i, s in enumerate(scores, start=1)],
                success=success,
                total_duration_seconds=1.5,
                threshold=loop_threshold,
                mode=mode,
            ),
            guard_events=guard_events,
        )
        .to_dict()
    )
    theirs = (
        upstream_eval.LoopEvaluator(threshold=threshold, max_wasted_iterations=max_wasted)
        .run(
            UpstreamLoopResult(scores, loop_threshold, mode, success),
            guard_events=guard_events,
        )
        .to_dict()
    )
    assert ours.pop("metadata")["num_iterations"] == theirs.pop("metadata")["num_iterations"]
    assert ours == theirs


def test_upstreams_loop_result_dict_is_a_valid_loop_result() -> None:
    # Every key of upstream's EvaluationLoopResult.to_dict() is known (an unknown key is an
    # error here), and the dict scores as upstream scores the object it came from.
    upstream_result = upstream_eval.EvaluationLoopResult(
        iterations=[upstream_eval.IterationResult(i, f"draft {i}", s, "ok") for i, s in enumerate([6.0, 8.5, 9.0], start=1)],
        success=True,
        total_duration_seconds=3.0,
        threshold=8.0,
        mode="optimize",
    )
    ours = LoopEvaluator().run(upstream_result.to_dict()).to_dict()
    theirs = upstream_eval.LoopEvaluator().run(upstream_result).to_dict()
    assert ours.pop("metadata")["num_iterations"] == theirs.pop("metadata")["num_iterations"] == 3
    assert ours == theirs
