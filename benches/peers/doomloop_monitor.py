"""doomloop's recommended profile as a guard: ``Monitor(Profile.recommended())``, one per run.

Each step goes through :func:`doomloop.traces.replay` exactly as ``benches/quality.py`` replays
a whole run (the step's message to ``record_response``, then ``before_tool_call``, then
``after_tool_call`` with the recorded result), here one step at a time against the run's one
monitor, so the two measure the same thing.

Checks both before the call and after its result: a finding raised on the message or by
``before_tool_call`` (a blocked call) is a flag before the call, one raised by
``after_tool_call`` a flag after it (``Replayed.after_call``).

Mapping: any finding is a warning; a critical finding (``Finding.level == CRITICAL``) is a stop,
as quality.py counts *warned* and *stopped*.
"""

from __future__ import annotations

from typing import List

from doomloop import Monitor, Profile
from doomloop.findings import CRITICAL
from doomloop.traces import Run, Step, replay
from peers.base import STOP, WARN, Flag, Guard


class DoomloopGuard(Guard):
    """doomloop's ``Monitor`` with the recommended profile."""

    package = "doomloop"
    checks = "before the call and after the result"
    profile = Profile.recommended()
    """Frozen, so one serves every run (quality.py shares one the same way)."""

    def __init__(self) -> None:
        self._monitor = Monitor(self.profile)

    def flags(self, step: Step) -> List[Flag]:
        # A run of this one step: the replay keeps no state of its own, the monitor keeps it all.
        return [
            Flag(STOP if one.finding.level == CRITICAL else WARN, one.after_call)
            for one in replay(Run(None, None, (step,)), self._monitor)
        ]
