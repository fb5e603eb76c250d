"""Detection quality against peers: doomloop's recommended profile and four open-source loop
guards, on the runs and planted loops of ``benches/quality.py``.

Run: ``python benches/peer_quality.py [--corpus PATH] [--seed N] [--markdown] [--guard NAME ...]``. Each guard
(:data:`peers.GUARDS`, at its own defaults; how each is driven is in its module under
``benches/peers/``) watches every run through a fresh instance per run:

- the runs as recorded: a run it warned on (any flag) or stopped is a false positive;
- every run once per planted kind (:data:`quality.KINDS`, planted by :func:`quality.planted_runs`),
  the first warning and the first stop within the planted steps, with their delay: the planted
  calls that had run by then, as quality.py counts doomloop's (a flag before a call does not
  count that call);
- the time it takes: every step it was fed, over the steps fed.

The method and the tables are in docs/quality.md ("Against peers").
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Type

import quality
from doomloop.traces import Run, read_runs
from peers import GUARDS, STOP, Guard

# --- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Watched:
    """What a guard raised over one run's steps of interest (``steps[start:end]``)."""

    warned: Optional[int]
    """The delay at the first flag of any level, or None."""
    stopped: Optional[int]
    """The delay at the first stop, or None."""
    flagging_before: bool
    """Whether it flagged the step just before ``start`` (a catch then says little)."""


@dataclass
class Clock:
    """The time spent in a guard, and the steps it was fed."""

    seconds: float = 0.0
    steps: int = 0

    @property
    def microseconds_per_step(self) -> float:
        return 1e6 * self.seconds / self.steps if self.steps else 0.0


def watch(guard_type: Type[Guard], run: Run, start: int = 0, end: Optional[int] = None, clock: Optional[Clock] = None) -> Watched:
    """Feed ``run.steps[:end]`` to a fresh guard; the flags on ``steps[start:end]`` count, with
    delays from ``start`` (quality.py's ``_delay``: the step's offset, plus one once its call ran).
    Feeding ends at the first stop that counts (a stop is a warning too), or at ``end``: the
    steps after cannot change what counts (and some guards slow down as a run grows)."""
    warned = stopped = None
    before = False
    fed = 0
    began = time.perf_counter()
    guard = guard_type()
    try:
        for index, step in enumerate(run.steps[:end]):
            fed += 1
            for flag in guard.flags(step):
                if index < start:
                    before = before or index == start - 1
                    continue
                delay = index - start + flag.after_call
                warned = delay if warned is None else warned
                stopped = delay if stopped is None and flag.level == STOP else stopped
            if stopped is not None:
                break
    finally:
        guard.close()
    if clock is not None:
        clock.seconds += time.perf_counter() - began
        clock.steps += fed
    return Watched(warned, stopped, before)


@dataclass
class GuardResult:
    """One guard's numbers."""

    guard: Type[Guard]
    runs: int = 0
    warned: int = 0
    """Clean runs it flagged at any level."""
    stopped: int = 0
    """Clean runs it stopped."""
    kinds: Dict[str, List[Watched]] = field(default_factory=dict)
    """Per planted kind, one per run."""
    clock: Clock = field(default_factory=Clock)


def measure(guard_type: Type[Guard], runs: Sequence[Run], planted: Dict[str, List[quality.Planted]]) -> GuardResult:
    """A guard on the clean runs and on every planted kind."""
    result = GuardResult(guard_type, runs=len(runs))
    for run in runs:
        one = watch(guard_type, run, clock=result.clock)
        result.warned += one.warned is not None
        result.stopped += one.stopped is not None
    for kind in quality.KINDS:
        result.kinds[kind.name] = [
            watch(guard_type, one.run, one.start, one.start + one.length, result.clock) for one in planted[kind.name]
        ]
    return result


# --- tables -----------------------------------------------------------------------------------


def _delays(watched: Sequence[Watched], stops: bool) -> List[int]:
    found = (one.stopped if stops else one.warned for one in watched)
    return [delay for delay in found if delay is not None]


def _warned(watched: Sequence[Watched]) -> str:
    return quality._caught(_delays(watched, stops=False), len(watched))


def _stopped(watched: Sequence[Watched]) -> str:
    return quality._caught(_delays(watched, stops=True), len(watched))


def _flagging_before(watched: Sequence[Watched]) -> str:
    return quality._share(sum(one.flagging_before for one in watched), len(watched))


def _kind_rows(results: Sequence[GuardResult], cell: Callable[[Sequence[Watched]], str]) -> List[List[str]]:
    # One row per planted kind, whichever kinds quality.py plants; one cell per guard.
    return [[kind.label, *(cell(result.kinds[kind.name]) for result in results)] for kind in quality.KINDS]


def summary_tables(results: Sequence[GuardResult], markdown: bool) -> str:
    """The clean runs and cost per guard, then the planted kinds warned, stopped and already
    flagged, one column per guard."""
    clean_rows = [
        [
            result.guard.label(),
            result.guard.checks,
            quality._share(result.warned, result.runs),
            quality._share(result.stopped, result.runs),
            f"{result.clock.microseconds_per_step:.0f}",
        ]
        for result in results
    ]
    clean_headers = ["guard", "decides", "clean runs warned", "clean runs stopped", "µs per step"]
    headers = ["planted kind", *(result.guard.label() for result in results)]
    return "\n\n".join(
        [
            "Clean runs flagged, and the time per step fed:",
            quality._table(clean_headers, clean_rows, markdown),
            f"Planted loops warned (the first flag of any level) within the planted steps ({quality.LOOP_STEPS};"
            " the chant is one answer), delay median / max:",
            quality._table(headers, _kind_rows(results, _warned), markdown),
            "Planted loops stopped (the first stop) within the planted steps, delay median / max:",
            quality._table(headers, _kind_rows(results, _stopped), markdown),
            "Planted runs already flagged at the step before the loop began (a catch there says nothing about the loop):",
            quality._table(headers, _kind_rows(results, _flagging_before), markdown),
        ]
    )


# --- command line -----------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--corpus", type=Path, default=quality.CORPUS, help="a run file (.jsonl, .jsonl.gz); default: the public corpus"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the planting (default 0)")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument(
        "--guard",
        action="append",
        choices=[guard.package for guard in GUARDS],
        help="measure only this guard (repeatable; default: all, agent-vitals taking most of the time)",
    )
    args = parser.parse_args(argv)
    guards = [guard for guard in GUARDS if args.guard is None or guard.package in args.guard]
    # runfuse logs every hard trip at ERROR; the trips are counted here, not read off stderr.
    logging.getLogger("runfuse").setLevel(logging.CRITICAL)

    began = time.perf_counter()
    runs = list(read_runs(args.corpus))
    planted = {kind.name: quality.planted_runs(runs, kind, args.seed) for kind in quality.KINDS}
    results = [measure(guard, runs, planted) for guard in guards]
    seconds = time.perf_counter() - began

    print(f"{len(runs)} runs from {args.corpus.name}, seed {args.seed}, {seconds:.1f} s ({_seconds(results)})\n")
    print(summary_tables(results, args.markdown))
    return 0


def _seconds(results: Sequence[GuardResult]) -> str:
    spent: List[Tuple[str, float]] = [(result.guard.package, result.clock.seconds) for result in results]
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in spent)


if __name__ == "__main__":
    sys.exit(main())
