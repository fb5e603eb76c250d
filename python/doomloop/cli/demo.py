"""``doomloop demo``: a scripted agent session that gets stuck in each kind of loop the
session detector knows, and what doomloop says about it at every step."""

from __future__ import annotations

import argparse
from typing import Any

from .. import DoomLoopConfig, DoomLoopDetector


class _StepClock:
    """A demo clock the script moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _report(detector: DoomLoopDetector, label: str) -> None:
    event = detector.get_loop_event()
    verdict = f"{event.loop_type.value}: {event.description} -> {event.recovery_action.value}" if event else "no loop"
    print(f"  {label:<44} {verdict}")


def add_parser(commands: Any) -> None:
    command = commands.add_parser("demo", help="run a scripted agent session through the session detector")
    command.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    clock = _StepClock()
    detector = DoomLoopDetector(DoomLoopConfig(max_total_time=120.0), clock=clock)
    detector.start_session()
    print("doomloop demo: one agent session, step by step\n")

    for attempt in range(3):
        detector.record_action("read_file", {"path": "app.py"}, "def main(): ...", success=True)
        _report(detector, f"read_file app.py (#{attempt + 1})")
    detector.mark_progress("understood app.py")
    detector.increment_recovery()

    for name in ("pytest", "pytest -x", "pytest -k api"):
        detector.record_action("run_tests", {"cmd": name}, "1 failed", success=False)
        _report(detector, f"run_tests {name!r} fails")
    detector.mark_progress("fixed the import")

    for _ in range(4):
        detector.record_action("open_page", {"url": "/docs"}, "Docs", success=True)
        _report(detector, "open_page /docs")
        detector.record_action("go_back", {}, "Home", success=True)
        _report(detector, "go_back")

    detector.mark_progress("found the answer in the docs")
    clock.now = 121.0
    _report(detector, "two minutes later")
    stats = detector.get_stats()
    print(
        f"\nstats: {stats['total_actions']} actions, {stats['failed_actions']} failed, "
        f"{stats['loop_events']} loop episodes, {stats['recovery_attempts']} recovery attempt(s)"
    )
    return 0
