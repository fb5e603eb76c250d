"""The plain records every trace reader yields: a :class:`Run` of :class:`Step` s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["Run", "Step"]

KINDS = ("tool", "user", "assistant", "compaction")
"""The kinds of :class:`Step`."""


@dataclass(frozen=True)
class Step:
    """One step of a run: a tool call with its result, a user turn, an assistant answer or a
    compaction of the context.

    The first seven fields are positional (a tool call, as the run format records it); the
    rest are keyword fields with defaults.

    Attributes:
        tool: the tool's name for a ``"tool"`` step; None for the other kinds.
        arguments: the call's arguments, parsed from JSON (usually a dict); the raw string
            when it is not valid JSON.
        call_id: the tool call's id, if the trace has one.
        thought: the assistant message's text that carried the call; None when the trace has
            none (e.g. the second call of one message).
        result_text: what the tool returned; None when no result was recorded (the run ended
            first, or the tool failed to run: see ``error``).
        returncode: the command's return code, read from a leading
            ``<returncode>N</returncode>`` (or recorded as such); None when there is none.
        is_error: the call failed: a nonzero return code, a result the trace marks as an
            error, or a tool that could not run.
        kind: ``"tool"``, ``"user"``, ``"assistant"`` or ``"compaction"``.
        text: the message text of a ``"user"`` or ``"assistant"`` step (the summary of a
            ``"compaction"``, when the trace has one).
        error: the error text when the tool failed to run (as opposed to a result).
        input_tokens, output_tokens: the token usage of the model response that produced
            this step, where the trace has it.
        started, ended: when the step started and ended, in seconds since the epoch.
        line: the 1-based line of the source file the step was read from (None when the
            source is one JSON document, or a message list given in memory).
    """

    tool: Optional[str]
    arguments: Any
    call_id: Optional[str]
    thought: Optional[str]
    result_text: Optional[str]
    returncode: Optional[int]
    is_error: bool
    kind: str = "tool"
    text: Optional[str] = None
    error: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    started: Optional[float] = None
    ended: Optional[float] = None
    line: Optional[int] = None


_new = object.__new__
_set = object.__setattr__


def new_step(
    tool: Optional[str],
    arguments: Any,
    call_id: Optional[str],
    thought: Optional[str],
    result_text: Optional[str],
    returncode: Optional[int],
    is_error: bool,
    kind: str = "tool",
    text: Optional[str] = None,
    error: Optional[str] = None,
    input_tokens: Optional[int] = None,
    output_tokens: Optional[int] = None,
    started: Optional[float] = None,
    ended: Optional[float] = None,
    line: Optional[int] = None,
) -> Step:
    """A :class:`Step`, built the fast way: the readers build one per event, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) costs three times as much
    as setting the instance's dict at once. The result equals, hashes and pickles as
    ``Step(...)`` with the same fields does."""
    step = _new(Step)
    _set(
        step,
        "__dict__",
        {
            "tool": tool,
            "arguments": arguments,
            "call_id": call_id,
            "thought": thought,
            "result_text": result_text,
            "returncode": returncode,
            "is_error": is_error,
            "kind": kind,
            "text": text,
            "error": error,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "started": started,
            "ended": ended,
            "line": line,
        },
    )
    return step


def replaced(step: Step, **changes: Any) -> Step:
    """``step`` with ``changes`` (fields by name), built as :func:`new_step` builds one: a
    reader learns a call's result, time or usage after it made the step."""
    return new_step(**{**step.__dict__, **changes})


@dataclass(frozen=True)
class Run:
    """One agent run (a session): where it came from, how it ended, and its steps in order.

    Attributes:
        path: the run's origin as the trace names it (e.g. the trajectory file it was
            exported from); None when the trace does not say.
        exit_status: how the run ended (``"Submitted"``, ``"Timeout"``, ...), or None.
        steps: the steps, oldest first.
        session_id: the session (conversation) id the trace gives the run, or None.
        run_id: the run id the trace gives it, or None.
        source: the file the run was read from (``"-"`` for stdin), or None.
        format: the name of the reader that read it (one of
            :data:`doomloop.traces.FORMATS`), or None.
    """

    path: Optional[str]
    exit_status: Optional[str]
    steps: Tuple[Step, ...]
    session_id: Optional[str] = None
    run_id: Optional[str] = None
    source: Optional[str] = None
    format: Optional[str] = None
