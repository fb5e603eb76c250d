"""benches/peers/ and benches/peer_quality.py: every guard catches the plainest loop, speaks only
the interface's levels, and the doomloop guard measures what benches/quality.py measures.

The peers are the ``bench`` extra (``pip install -e '.[bench]'``); one missing is an import
error when this module is collected, a failure, never a skip.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from typing import List, Optional, Type

import pytest

from doomloop import Profile
from doomloop.traces import Run, Step, read_runs
from support import ROOT

# benches/ is not a package on the test path; its modules import each other by name.
if str(ROOT / "benches") not in sys.path:
    sys.path.insert(0, str(ROOT / "benches"))

import peer_quality
import quality
from peers import GUARDS, LEVELS, STOP, WARN, DoomloopGuard, Flag, Guard

LABELS = [guard.package for guard in GUARDS]


def _repeats(count: int = 30) -> Run:
    """One call repeated with one result, each time with its own call id (as an API gives)."""
    call = quality._step("ls -la", "total 0")
    return Run(None, None, tuple(dataclasses.replace(call, call_id=f"repeat-{n}") for n in range(count)))


@pytest.fixture(scope="module")
def recorded() -> Run:
    """The first run of the public corpus."""
    if not quality.CORPUS.is_file():
        pytest.fail(f"corpus missing: {quality.CORPUS}")
    return next(itertools.islice(read_runs(quality.CORPUS), 1))


def _observe(guard_type: Type[Guard], steps: List[Step]) -> List[Optional[str]]:
    guard = guard_type()
    try:
        return [guard.observe(step) for step in steps]
    finally:
        guard.close()


@pytest.mark.parametrize("guard_type", GUARDS, ids=LABELS)
def test_every_guard_flags_thirty_identical_calls(guard_type: Type[Guard]) -> None:
    assert any(level is not None for level in _observe(guard_type, list(_repeats().steps)))


@pytest.mark.parametrize("guard_type", GUARDS, ids=LABELS)
def test_observe_speaks_only_none_warn_or_stop(guard_type: Type[Guard], recorded: Run) -> None:
    steps = list(recorded.steps[:20]) + list(_repeats().steps)
    assert set(_observe(guard_type, steps)) <= {None, WARN, STOP}
    guard = guard_type()
    try:
        for step in steps:
            assert all(flag.level in LEVELS and isinstance(flag.after_call, bool) for flag in guard.flags(step))
    finally:
        guard.close()


class _StopsBeforeCall(Guard):
    """Refuses the call of every step from the fourth on."""

    package = "doomloop"
    checks = "before the call"

    def __init__(self) -> None:
        self.seen = 0

    def flags(self, step: Step) -> List[Flag]:
        self.seen += 1
        return [Flag(STOP, after_call=False)] if self.seen >= 4 else []


def test_a_flag_before_a_call_does_not_count_the_call() -> None:
    # The fourth step is refused: three planted calls ran (steps 1 to 3 of a loop from step 1).
    watched = peer_quality.watch(_StopsBeforeCall, _repeats(10), start=1, end=10)
    assert (watched.warned, watched.stopped, watched.flagging_before) == (2, 2, False)
    assert peer_quality.watch(_StopsBeforeCall, _repeats(10), start=4, end=10).flagging_before


@pytest.mark.parametrize("kind", quality.KINDS, ids=[kind.name for kind in quality.KINDS])
def test_the_doomloop_guard_measures_what_the_quality_harness_measures(kind: quality.Kind, recorded: Run) -> None:
    (planted,) = quality.planted_runs([recorded], kind, seed=0)
    theirs = quality.measure_kind(Profile.recommended(), kind, [planted])
    ours = peer_quality.watch(DoomloopGuard, planted.run, planted.start, planted.start + planted.length)
    assert _listed(ours.warned) == theirs.warned and _listed(ours.stopped) == theirs.stopped


def _listed(delay: Optional[int]) -> List[int]:
    # quality.py keeps one delay per run that was flagged.
    return [] if delay is None else [delay]
