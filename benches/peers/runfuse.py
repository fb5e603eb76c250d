"""runfuse as a guard: one ``Fuse`` per run, its loop fuse at the value its README gives.

``FusePolicy()`` has every limit unset, and ``Fuse()`` without a policy sets only
``max_cost_usd=10``, which a trace without costs never reaches: at its literal defaults runfuse
detects no loop at all. Its loop fuse is ``max_identical_tool_calls``, documented (README, "the
loop detector") at 10, so the policy is ``FusePolicy(max_identical_tool_calls=10)``: a hard trip
once any one (tool, arguments) signature has been called 10 times in the run, in a row or not.
Everything else stays unset: the budgets (cost, tokens, steps, wall time, errors) are not loop
detection and the traces carry no cost or time, and the fuzzy fuse (``max_similar_tool_calls``)
has no default or documented value. ``db_path=None`` keeps its event store in memory instead of a
``runfuse.db`` file; it plays no part in detection.

Checks before the call: each step is the event its SDK wrapper records for a model response
carrying that call (``record_event`` of an ``LLM_CALL`` with the call in ``tool_calls``, inside
``Fuse.run``), and a trip raises ``FuseTripped`` there, before the tool runs.

Fed: ``step.tool`` and ``step.arguments``; it never sees a result or the assistant's text.

Mapping: a hard trip (``FuseTripped``) is a stop. Soft trips (warnings at 80% of a limit) exist
only for the budgets, not for the loop fuse, so the guard never warns short of a stop.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import List

from runfuse import Event, EventKind, Fuse, FusePolicy, FuseTripped, ToolCall

from doomloop.traces import Step
from peers.base import STOP, Flag, Guard, arguments_of

README_LOOP_FUSE = 10
"""``max_identical_tool_calls`` in the README's first example."""


class RunfuseGuard(Guard):
    """runfuse's ``Fuse`` with ``FusePolicy(max_identical_tool_calls=10)``."""

    package = "runfuse"
    checks = "before the call"

    def __init__(self) -> None:
        self._fuse = Fuse(FusePolicy(max_identical_tool_calls=README_LOOP_FUSE), db_path=None)
        # The run scope is what attributes events to the run; it stays open until close().
        self._scope = ExitStack()
        self._run_id = self._scope.enter_context(self._fuse.run()).run_id

    def flags(self, step: Step) -> List[Flag]:
        if step.kind != "tool":
            return []  # it counts tool calls only
        call = ToolCall(name=step.tool or "", arguments=dict(arguments_of(step)))
        try:
            self._fuse.record_event(Event(run_id=self._run_id, kind=EventKind.LLM_CALL, tool_calls=[call]))
        except FuseTripped:
            return [Flag(STOP, after_call=False)]
        return []

    def close(self) -> None:
        self._scope.close()
        self._fuse.close()
