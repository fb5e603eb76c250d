"""trajectory-fuse as a guard: one ``AgentFuse()`` per run, at its defaults.

The defaults (``FuseConfig()``): a window of the last 32 actions; a *direct repeat* at 3
identical (tool, arguments) in a row; an *N-cycle* when the last 2 to 6 actions repeat the
ones before them; *semantic stagnation* at 4 consecutive failures of one tool whose results
are at least 0.9 alike (Jaccard over word tokens); no allowlist, no budgets, no store.

Checks both before the call and after its result, as its own tool wrappers (``AgentFuse.wrap``,
``integrations.generic.observe_call``) drive it:

- before the call, ``check(tool, arguments)``: a detection is where the wrapper raises
  ``DeadlockDetected`` instead of running the tool, so it is a stop before the call, and the
  call is not recorded (it never ran);
- after the call, ``observe(Action(tool, arguments, result, success))``, which raises
  ``DeadlockDetected`` on a loop: a stop after the call.

Fed: ``step.tool``, ``step.arguments``, the recorded result (the error of a call that could not
run) and ``success=not step.is_error`` (a nonzero return code is a failure, as doomloop's replay
has it). The assistant's text is not read: the guard watches tool calls only.

Mapping: the guard has no warning tier (every detection raises), so every flag is a stop.
"""

from __future__ import annotations

from typing import List

from trajectory_fuse import Action, AgentFuse, DeadlockDetected

from doomloop.traces import Step
from peers.base import STOP, Flag, Guard, arguments_of, result_of


class TrajectoryFuseGuard(Guard):
    """trajectory-fuse's ``AgentFuse`` with ``FuseConfig()``."""

    package = "trajectory-fuse"
    checks = "before the call and after the result"

    def __init__(self) -> None:
        self._fuse = AgentFuse()

    def flags(self, step: Step) -> List[Flag]:
        if step.kind != "tool":
            return []  # it has no notion of a message
        tool, arguments = step.tool or "", dict(arguments_of(step))
        # With the defaults (no allowlist, no allow_repeats) the wrappers refuse the call on
        # every detection of the preflight.
        if self._fuse.check(tool, arguments) is not None:
            return [Flag(STOP, after_call=False)]
        try:
            self._fuse.observe(Action(tool=tool, args=arguments, result=result_of(step), success=not step.is_error))
        except DeadlockDetected:
            return [Flag(STOP, after_call=True)]
        return []

    def close(self) -> None:
        self._fuse.close()
