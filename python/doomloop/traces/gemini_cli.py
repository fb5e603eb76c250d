"""Reader of Gemini CLI session files (format ``"gemini-cli"``): the record of a session Gemini
CLI keeps to resume it, one file per session.

A session is ``{"sessionId", "projectHash", "startTime", "lastUpdated", "messages": [...]}``,
written as one JSON document (``session-*.json``), or as JSON Lines (``session-*.jsonl``): that
object without its messages on the first line, then a line per message, a ``{"$set": {...}}``
line for each change to the session's metadata and a ``{"$rewindTo": id}`` line where the user
rewound the conversation. A message is ``{"id", "timestamp", "type", "content", ...}``:

- ``"user"``: a ``"user"`` step with the text of its ``content`` (a string or Gemini parts,
  thoughts left out); a message without text is not a turn;
- ``"gemini"``: the model's turn. Each of its ``toolCalls`` (``{"id", "name", "args", "result":
  [parts], "status", "timestamp"}``) is a ``"tool"`` step, its result read from the
  ``functionResponse`` in ``result`` as :mod:`doomloop.traces.gemini` reads one (``{"output":
  text}`` is the text, ``{"error": text}`` the error); the call failed when that is an error or
  its ``status`` is ``"error"`` or ``"cancelled"``; a call without a ``result`` has none. The
  message's text is the first call's ``thought`` (or, without calls, an ``"assistant"``
  step's text) and its ``tokens`` go on that step: ``input``, and ``output`` plus ``thoughts``.
  Its ``thoughts`` (the model's thinking) are not steps;
- ``"info"``, ``"error"``, ``"warning"`` (the CLI's own notices to the user) and kinds later
  versions add: not steps.

A message written again with the same ``id`` (its tokens or calls added) replaces the one
before, in its place (its steps have the line of the last). A step's ``started`` is its
message's ``timestamp``, and the ``ended`` of a call with a result the call's own (written when
it completed). The session is ``sessionId``. ``$set`` and ``$rewindTo`` lines are not steps: a
rewind removes turns from what the CLI resumes, but the agent took them, and a loop it ran
before the rewind is one. A file is one session, held until its end (a message may be written
again at any point).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from .decode import count, kind, optional_str, rfc3339_seconds
from .gemini import field, parts_text, response_outcome
from .records import Run, Step, new_step, replaced
from .source import Report

__all__ = ["NAME", "looks_like", "runs"]

NAME = "gemini-cli"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_MESSAGES = ("user", "gemini", "info", "error", "warning")
_FAILED = ("error", "cancelled")


def looks_like(value: Any) -> int:
    """2 for a session (``sessionId`` and ``projectHash``) or a ``"gemini"`` message, 1 for
    the other lines a session file holds (a user message or a notice, ``$set``,
    ``$rewindTo``), 0 otherwise."""
    if not isinstance(value, dict):
        return 0
    if isinstance(value.get("sessionId"), str) and isinstance(value.get("projectHash"), str):
        return 2
    if isinstance(value.get("$set"), dict) or isinstance(value.get("$rewindTo"), str):
        return 1
    if (
        isinstance(value.get("id"), str)
        and "content" in value
        and value.get("type") in _MESSAGES
        and not ("message" in value or "sessionId" in value)
    ):
        return 2 if value["type"] == "gemini" else 1
    return 0


class _Session:
    """One session's messages as they are read: each with where it was read, by its id."""

    def __init__(self, session_id: Optional[str]) -> None:
        self.session_id = session_id
        # A message without an id is keyed by its position: an int, which no id is.
        self.messages: Dict[Union[str, int], Tuple[Dict[str, Any], str, Optional[int]]] = {}

    def add(self, message: Any, where: str, line: Optional[int], report: Report) -> None:
        if not isinstance(message, dict):
            report(f"{where}: expected an object, got {kind(message)}", line)
            return
        key = message["id"] if isinstance(message.get("id"), str) else len(self.messages)
        self.messages[key] = (message, where, line)

    def steps(self, report: Report) -> Tuple[Step, ...]:
        out: List[Step] = []
        for message, where, line in self.messages.values():
            type_ = message.get("type")
            started = rfc3339_seconds(message.get("timestamp"))
            text = parts_text(message.get("content"))
            if type_ == "user" and text is not None:
                out.append(new_step(None, None, None, None, None, None, False, "user", text, started=started, line=line))
            elif type_ == "gemini":
                out.extend(_turn(message, text, started, where, line, report))
        return tuple(out)


def _turn(
    message: Dict[str, Any], text: Optional[str], started: Optional[float], where: str, line: Optional[int], report: Report
) -> List[Step]:
    """The steps of a ``"gemini"`` message: its calls, or its answer."""
    given, produced = _tokens(message.get("tokens"))
    calls = message.get("toolCalls")
    if calls is not None and not isinstance(calls, list):
        report(f"{where}.toolCalls: expected an array, got {kind(calls)}", line)
        calls = None
    steps: List[Step] = []
    for number, call in enumerate(calls or ()):
        step = _call(call, f"{where}.toolCalls[{number}]", started, line, report)
        if step is not None:
            steps.append(step)
    if not steps:
        return [
            new_step(None, None, None, None, None, None, False, "assistant", text, None, given, produced, started, None, line)
        ]
    first = steps[0]
    steps[0] = replaced(first, thought=text, input_tokens=given, output_tokens=produced)
    return steps


def _call(call: Any, where: str, started: Optional[float], line: Optional[int], report: Report) -> Optional[Step]:
    name = call.get("name") if isinstance(call, dict) else None
    if not isinstance(call, dict) or not isinstance(name, str):
        report(f"{where}: a tool call without a name", line)
        return None
    result, error = _result(call.get("result"))
    failed = error is not None or call.get("status") in _FAILED
    # The call's timestamp is written when it completes: a call without a result has not.
    ended = rfc3339_seconds(call.get("timestamp")) if result is not None or error is not None else None
    return new_step(
        name,
        call.get("args"),
        optional_str(call, "id"),
        None,
        result,
        None,
        failed,
        error=error,
        started=started,
        ended=ended,
        line=line,
    )


def _result(result: Any) -> Tuple[Optional[str], Optional[str]]:
    """``(result_text, error)`` of a call's ``result``: the parts the CLI sent the model back
    (a ``functionResponse``, maybe with other parts); none without one."""
    if result is None:
        return None, None
    parts = [result] if isinstance(result, dict) else result if isinstance(result, list) else None
    if parts is None:
        return (result if isinstance(result, str) else None), None
    for part in parts:
        response = field(part, "functionResponse", "function_response")
        if isinstance(response, dict):
            return response_outcome(response.get("response"))
    return parts_text(parts) or "", None


def _tokens(tokens: Any) -> Tuple[Optional[int], Optional[int]]:
    # The CLI's summary of the response's usageMetadata: input is the prompt, output the
    # candidates, thoughts the thinking (output the model produced too).
    if not isinstance(tokens, dict):
        return None, None
    given, output, thoughts = (count(tokens.get(key)) for key in ("input", "output", "thoughts"))
    produced = None if output is None and thoughts is None else (output or 0) + (thoughts or 0)
    return given, produced


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    sessions: Dict[Optional[str], _Session] = {}
    current: Optional[_Session] = None
    for line, value in records:
        if not isinstance(value, dict):
            report(f"a session record is an object, got {kind(value)}", line)
            continue
        session_id = optional_str(value, "sessionId")
        if session_id is not None and "type" not in value:
            # A session: a JSON Lines file's first line, or a whole JSON document.
            current = sessions.get(session_id)
            if current is None:
                current = sessions[session_id] = _Session(session_id)
            _messages(current, value.get("messages"), line, report)
        elif "$set" in value or "$rewindTo" in value:
            continue  # the session's metadata, or a rewind: not steps (see the module's documentation)
        elif "type" not in value:
            report("a session record is a session, a message, $set or $rewindTo: no type", line)
        else:
            if current is None:
                current = sessions[None] = _Session(None)
            current.add(value, "message", line, report)
    for session in sessions.values():
        yield Run(None, None, session.steps(report), session.session_id, None, source, NAME)


def _messages(session: _Session, messages: Any, line: Optional[int], report: Report) -> None:
    if messages is None:
        return  # a JSON Lines file's first line: its messages follow
    if not isinstance(messages, list):
        report(f"messages: expected an array, got {kind(messages)}", line)
        return
    for index, message in enumerate(messages):
        session.add(message, f"messages[{index}]", line, report)
