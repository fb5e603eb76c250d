"""Reader of Claude Code session transcripts (format ``"claude-code"``): the JSON Lines a
session writes, one entry per line.

An entry ``{"type": "user" | "assistant", "message": {...}, "sessionId", "uuid",
"timestamp", "isSidechain", ...}`` carries one Anthropic message, read as
:mod:`doomloop.traces.anthropic` reads messages (``tool_use`` calls, their ``tool_result`` by
id, ``is_error``, text, ``usage``). Beyond the messages:

- an assistant message written over several entries (one per content block, each with the
  same ``message.id`` and a copy of the usage) is one message, its usage counted once;
- ``{"type": "system", "subtype": "compact_boundary"}`` is a ``"compaction"`` step, and the
  user entry after it marked ``isCompactSummary`` (the summary the session goes on from) is
  that step's text rather than a user turn; a summary without a boundary before it (older
  versions) is a compaction step of its own;
- a step's ``started`` is its entry's ``timestamp``, and a call's ``ended`` that of the entry
  holding its result;
- the session is ``sessionId``; a subagent's entries (``isSidechain``) are a run of their own,
  ``{sessionId}/{agentId}`` (``{sessionId}/sidechain`` without an ``agentId``);
- the other entries (``summary`` titles, ``file-history-snapshot``, the other ``system``
  entries, and kinds later versions add) are not steps.

Each session's messages are held until the end of the file (a file is one session, and a
subagent's entries interleave with it), then the runs are yielded in the order they first
appeared. An entry that cannot be read is reported and skipped.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .anthropic import message_steps
from .decode import kind, optional_str, rfc3339_seconds
from .records import Run, Step, replaced
from .source import Report

__all__ = ["NAME", "looks_like", "runs"]

NAME = "claude-code"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_MESSAGES = ("user", "assistant")
_OTHER_ENTRIES = ("summary", "file-history-snapshot", "system", "queue-operation")


def looks_like(value: Any) -> int:
    """2 for a message entry (``type`` user or assistant, a ``message`` object and a
    ``sessionId``), 1 for the other entries a transcript holds (a ``type`` and no message), 0
    otherwise."""
    if not isinstance(value, dict):
        return 0
    entry = value.get("type")
    if entry in _MESSAGES and isinstance(value.get("message"), dict) and isinstance(value.get("sessionId"), str):
        return 2
    if (entry in _OTHER_ENTRIES or (isinstance(entry, str) and "sessionId" in value)) and not (
        "message" in value or "messages" in value
    ):
        return 1
    return 0


class _Session:
    """One run's entries as they are read: the messages, and each one's line and time."""

    def __init__(self, session_id: Optional[str]) -> None:
        self.session_id = session_id
        self.messages: List[Dict[str, Any]] = []
        self.lines: List[Optional[int]] = []
        self.times: List[Optional[float]] = []
        # The time of the entry holding each tool_result, by the call's id.
        self.result_times: Dict[str, Optional[float]] = {}
        # The compaction step the next isCompactSummary entry gives its text to.
        self.open_compaction: Optional[int] = None

    def add(self, message: Dict[str, Any], line: Optional[int], time: Optional[float]) -> None:
        self.messages.append(message)
        self.lines.append(line)
        self.times.append(time)

    def steps(self, report: Report) -> Tuple[Step, ...]:
        found = message_steps(self.messages, report, self.lines.__getitem__)
        time_of_line = {line: time for line, time in zip(self.lines, self.times, strict=True) if line is not None}
        return tuple(self._timed(step, time_of_line) for step in found)

    def _timed(self, step: Step, time_of_line: Dict[int, Optional[float]]) -> Step:
        started = time_of_line.get(step.line) if step.line is not None else None
        ended = self.result_times.get(step.call_id) if step.call_id is not None else None
        if started is None and ended is None:
            return step
        return replaced(step, started=started, ended=ended)


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    sessions: Dict[Optional[str], _Session] = {}
    for line, value in records:
        if not isinstance(value, dict):
            report(f"a transcript entry is an object, got {kind(value)}", line)
            continue
        entry = value.get("type")
        if entry not in _MESSAGES and not (entry == "system" and value.get("subtype") == "compact_boundary"):
            # The client adds kinds of entries over time: one that is not a message is no step.
            continue
        key = _run_key(value)
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = _Session(key)
        _entry(session, value, entry, line, report)
    for session in sessions.values():
        yield Run(None, None, session.steps(report), session.session_id, None, source, NAME)


def _run_key(value: Dict[str, Any]) -> Optional[str]:
    session = optional_str(value, "sessionId")
    if value.get("isSidechain") is not True:
        return session
    return f"{session}/{optional_str(value, 'agentId') or 'sidechain'}"


def _entry(session: _Session, value: Dict[str, Any], entry: str, line: Optional[int], report: Report) -> None:
    time = rfc3339_seconds(value.get("timestamp"))
    if entry == "system":
        session.open_compaction = len(session.messages)
        session.add(_compaction(optional_str(value, "content")), line, time)
        return
    message = value.get("message")
    if not isinstance(message, dict):
        report(f"message: expected an object, got {kind(message)}", line)
        return
    if value.get("isMeta") is True:
        return  # what the client adds for the model (a local command's caveat), not a turn
    if value.get("isCompactSummary") is True:
        summary = message.get("content")
        if session.open_compaction is not None:
            session.messages[session.open_compaction] = _compaction(summary)
        else:
            session.add(_compaction(summary), line, time)
        session.open_compaction = None
        return
    session.open_compaction = None
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                session.result_times[block["tool_use_id"]] = time
    last = session.messages[-1] if session.messages else None
    message_id = message.get("id")
    if (
        entry == "assistant"
        and isinstance(message_id, str)
        and last is not None
        and last.get("role") == "assistant"
        and last.get("id") == message_id
        and isinstance(content, list)
        and isinstance(last.get("content"), list)
    ):
        # The next block of the message before: its entry repeats the message's usage.
        session.messages[-1] = {**last, "content": [*last["content"], *content]}
        return
    session.add(message, line, time)


def _compaction(summary: Any) -> Dict[str, Any]:
    # The compaction block the Anthropic reader reads as a "compaction" step.
    return {"role": "user", "content": [{"type": "compaction", "content": summary}]}
