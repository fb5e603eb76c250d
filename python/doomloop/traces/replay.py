"""Replay a recorded :class:`~doomloop.traces.Run` through the detectors, as a gateway would
have run them live, and report what they found at which step.

For each step, in order:

1. the assistant message (``thought``), when it has text, goes to the session detector
   (``record_response``) and to a fresh chant scan (one answer is one stream);
2. the tool detector decides on the call (``before_tool_call``); a call it blocks gets the
   veto as its result, as the model would, and everything else the recorded result
   (``after_tool_call``; a result reporting that the command could not run is an ``error``);
3. the session detector records the action (``record_action(tool, arguments, result,
   success=not step.is_error)``).

Arguments that are not a JSON object reach the tool detector as ``{"arguments": value}``
(it takes a mapping).

Each detector sees the run as it was recorded: a veto changes what the tool detector
records, not what the agent did next. Traces carry no timestamps, so the session clock is
never started and time limits (``resource_exhaustion``) are not replayed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional

from ..chant import ChantDetector
from ..session import DoomLoopDetector
from ..tool_loop import ToolLoopDetector
from .records import Run, Step

__all__ = ["CRITICAL", "WARNING", "Detectors", "Finding", "FirstFindings", "first_findings", "replay"]

CRITICAL = "critical"
"""A finding a gateway acts on: a session loop, a blocked tool call, a chant."""
WARNING = "warning"
"""A tool-loop warning: reported, the call still runs."""


class Detectors(NamedTuple):
    """The three detectors one replayed session runs through, all fresh."""

    session: DoomLoopDetector
    tool_loop: ToolLoopDetector
    chant: ChantDetector


@dataclass(frozen=True)
class Finding:
    """What one detector reported after one step.

    Attributes:
        detector: ``"session"``, ``"tool_loop"`` or ``"chant"``.
        level: :data:`CRITICAL` or :data:`WARNING` (only the tool detector warns).
        step: the index of the step in ``run.steps``.
        after_call: whether the step's call had run: False for a finding on the step's
            message or on the decision to run its call (a blocked call never runs), True for
            the session's check after recording the action.
        kind: the session's loop type, the tool verdict's detector (``generic_repeat``, ...)
            or ``repeated_output`` for a chant.
        message: the detector's own description.
    """

    detector: str
    level: str
    step: int
    after_call: bool
    kind: str
    message: str


@dataclass(frozen=True)
class FirstFindings:
    """The first finding of each detector in one run (None where it found nothing)."""

    session: Optional[Finding] = None
    tool_loop: Optional[Finding] = None
    """The first critical tool verdict (a blocked call)."""
    tool_warning: Optional[Finding] = None
    chant: Optional[Finding] = None

    @property
    def flags(self) -> List[Finding]:
        """The critical findings, earliest first."""
        found = [finding for finding in (self.session, self.tool_loop, self.chant) if finding is not None]
        return sorted(found, key=lambda finding: (finding.step, finding.after_call))

    @property
    def flagged(self) -> bool:
        """Whether any detector raised a critical finding."""
        return bool(self.flags)


def replay(run: Run, detectors: Detectors) -> Iterator[Finding]:
    """Feed ``run`` to ``detectors`` step by step and yield every finding in the order it
    was raised. At each step: a chant in its message; the session loop that holds after the
    message; the tool verdict on its call (critical or warning); the session loop after the
    action, unless one was already reported at this step. A session loop that holds is
    reported at every step it holds."""
    for index, step in enumerate(run.steps):
        yield from _replay_step(index, step, detectors)


def first_findings(run: Run, detectors: Detectors) -> FirstFindings:
    """The first finding of each detector over the whole of ``run``."""
    first: Dict[str, Finding] = {}
    for finding in replay(run, detectors):
        key = "tool_warning" if finding.level == WARNING else finding.detector
        first.setdefault(key, finding)
    return FirstFindings(**first)


def _replay_step(index: int, step: Step, detectors: Detectors) -> Iterator[Finding]:
    tool = step.tool
    if tool is None:
        # A user turn, an answer or a compaction: this replay feeds the tool calls only.
        return
    session, tool_loop, chant = detectors
    if step.thought:
        session.record_response(step.thought)
        chant.reset()
        event = chant.feed(step.thought)
        if event is not None:
            message = f"period {event.period}, {event.count} repeats from offset {event.start}"
            yield Finding("chant", CRITICAL, index, False, event.loop_type.value, message)
    # A loop found after the previous action (or in this message) that still holds.
    before_call = session.get_loop_event()
    if before_call is not None:
        yield Finding("session", CRITICAL, index, False, before_call.loop_type.value, before_call.description)

    params = _params(step.arguments)
    decision = tool_loop.before_tool_call(tool, params, tool_call_id=step.call_id)
    verdict = decision.verdict
    if verdict.level is not None:
        yield Finding("tool_loop", verdict.level, index, False, verdict.detector or "", verdict.message or "")
    if decision.blocked:
        tool_loop.after_tool_call(tool, params, result=decision.blocked_result, tool_call_id=step.call_id)
    elif step.is_error and step.returncode is None:
        # The tool could not run at all: that is an error, which the detector keeps apart
        # from results (and reads for an unknown tool's name).
        tool_loop.after_tool_call(tool, params, error=step.result_text, tool_call_id=step.call_id)
    else:
        tool_loop.after_tool_call(tool, params, result=step.result_text, tool_call_id=step.call_id)

    session.record_action(tool, step.arguments, step.result_text, success=not step.is_error)
    after_call = None if before_call is not None else session.get_loop_event()
    if after_call is not None:
        yield Finding("session", CRITICAL, index, True, after_call.loop_type.value, after_call.description)


def _params(arguments: Any) -> Optional[Mapping[str, Any]]:
    # The tool detector takes a mapping; arguments that are not a JSON object (raw text that
    # failed to parse, a bare list) keep their identity under one key.
    if arguments is None or isinstance(arguments, Mapping):
        return arguments
    return {"arguments": arguments}
