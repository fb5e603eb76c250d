"""The plain records every trace reader yields: a :class:`Run` of :class:`Step` s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["Run", "Step"]


@dataclass(frozen=True)
class Step:
    """One step of a run: a tool call (with the assistant message that carried it and its
    result), a user message, an assistant message or a compaction.

    Attributes:
        tool: the tool's name (kind ``"tool"``).
        arguments: the call's arguments, parsed from JSON (usually a dict); the raw string
            when it is not valid JSON.
        call_id: the tool call's id, if the trace has one.
        thought: the assistant message's text before the call; None when the trace has
            none (e.g. the second call of one message).
        result_text: what the tool returned; None when the run ended before a result.
        returncode: the command's return code, read from a leading
            ``<returncode>N</returncode>``; None when the result has none.
        is_error: the call failed: a nonzero return code, or a result that reports the
            tool could not run (``<exception>...``).
        kind: ``"tool"``, ``"user"``, ``"assistant"`` or ``"compaction"``.
        text: the message's text (kinds ``"user"`` and ``"assistant"``).
        error: the error the call failed with, when the trace records one apart from results.
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


@dataclass(frozen=True)
class Run:
    """One agent run: where it came from, how it ended, and its tool calls in order.

    Attributes:
        path: the run's origin as the trace names it (e.g. the trajectory file it was
            exported from); None when the trace does not say.
        exit_status: how the run ended (``"Submitted"``, ``"Timeout"``, ...), or None.
        steps: the tool calls, oldest first.
    """

    path: Optional[str]
    exit_status: Optional[str]
    steps: Tuple[Step, ...]
