"""Replay a recorded :class:`~doomloop.traces.Run` through a :class:`~doomloop.Monitor`, as a
gateway would have run it live, and report what it found at which step of the run.

For each step, in order, by its kind:

- ``user``: ``record_user_message(text)`` (a new turn);
- ``assistant``: ``record_response(text)``;
- ``compaction``: ``record_compaction()``;
- ``tool``: the message that carried the call (``thought``), when it has text, is
  ``record_response``; then ``before_tool_call``; a call it blocks gets the veto as its
  result, as the model would, and everything else its recorded result or error
  (``after_tool_call``, ``success=not step.is_error``).

Arguments that are not a JSON object reach the monitor as ``{"arguments": value}`` (the tool
detector takes a mapping).

The monitor sees the run as it was recorded: a veto changes what the tool detector records,
not what the agent did next. The session clock is the monitor's own (traces are replayed far
faster than they ran), so time limits (``resource_exhaustion``) are not replayed.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Mapping, NamedTuple, Optional

from ..findings import CRITICAL, WARNING, Finding
from ..monitor import Monitor
from .records import Run, Step

__all__ = ["CRITICAL", "WARNING", "FirstFindings", "Replayed", "first_findings", "kind_of", "replay"]


class Replayed(NamedTuple):
    """One finding of a replay, where it was raised in the run."""

    step: int
    """The index of the step in ``run.steps``."""
    after_call: bool
    """Whether the step's call had run: False for a finding on the step's message or on the
    decision to run its call (a blocked call never runs), True for one raised after its
    result was recorded."""
    finding: Finding


class FirstFindings(NamedTuple):
    """The first finding of each kind in one run (None where there was none)."""

    session: Optional[Replayed] = None
    tool_loop: Optional[Replayed] = None
    """The first critical tool verdict (a blocked call)."""
    tool_warning: Optional[Replayed] = None
    chant: Optional[Replayed] = None
    guard: Optional[Replayed] = None

    @property
    def flags(self) -> List[Replayed]:
        """The findings a gateway acts on, earliest first: a session loop, a blocked call, a
        chant, a guard abort."""
        found = [one for one in (self.session, self.tool_loop, self.chant, self.guard) if one is not None]
        return sorted(found, key=lambda one: (one.step, one.after_call))

    @property
    def flagged(self) -> bool:
        """Whether anything a gateway acts on was found."""
        return bool(self.flags)


def replay(run: Run, monitor: Monitor) -> Iterator[Replayed]:
    """Feed ``run`` to ``monitor`` step by step and yield every finding in the order it was
    raised. A loop that holds is reported at every step it holds."""
    # One loop with the tool call inline: a scan runs it once per step of every session, and
    # a generator per step would cost more than the call's own bookkeeping.
    before, after = monitor.before_tool_call, monitor.after_tool_call
    for index, step in enumerate(run.steps):
        if step.kind != "tool":
            for finding in _other_step(step, monitor):
                yield Replayed(index, False, finding)
            continue
        tool = step.tool or ""
        call_id = step.call_id
        if step.thought:
            for finding in monitor.record_response(step.thought):
                yield Replayed(index, False, finding)
        params = step.arguments
        if params is not None and type(params) is not dict:
            params = _params(params)
        decision = before(tool, params, call_id=call_id)
        for finding in decision.findings:
            yield Replayed(index, False, finding)
        if decision.blocked:
            found = after(tool, params, result=decision.blocked_result, call_id=call_id)
        elif step.error is not None or (step.is_error and step.returncode is None):
            # The tool could not run at all: that is an error, which the detector keeps apart
            # from results (and reads for an unknown tool's name).
            error = step.error if step.error is not None else step.result_text
            found = after(tool, params, error=error, call_id=call_id)
        else:
            found = after(tool, params, result=step.result_text, call_id=call_id, success=not step.is_error)
        for finding in found:
            yield Replayed(index, True, finding)


def first_findings(run: Run, monitor: Monitor) -> FirstFindings:
    """The first finding of each kind (see :class:`FirstFindings`) over the whole of ``run``."""
    first: dict[str, Replayed] = {}
    for one in replay(run, monitor):
        first.setdefault(kind_of(one.finding), one)
    return FirstFindings(**first)


def kind_of(finding: Finding) -> str:
    """The :class:`FirstFindings` field a finding counts under."""
    if finding.detector == "tool_loop":
        return "tool_warning" if finding.level == WARNING else "tool_loop"
    return finding.detector


def _other_step(step: Step, monitor: Monitor) -> List[Finding]:
    kind = step.kind
    if kind == "user":
        return monitor.record_user_message(step.text or "")
    if kind == "assistant":
        return monitor.record_response(step.text or "")
    return monitor.record_compaction()


def _params(arguments: Any) -> Optional[Mapping[str, Any]]:
    # The tool detector takes a mapping; arguments that are not a JSON object (raw text that
    # failed to parse, a bare list) keep their identity under one key.
    if arguments is None or isinstance(arguments, Mapping):
        return arguments
    return {"arguments": arguments}
