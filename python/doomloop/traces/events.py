"""Reader of doomloop's own event format (format ``"doomloop"``): JSON Lines, one event per
line, several sessions interleaved in one file if need be. The schema is in ``docs/traces.md``
and ``docs/schemas/events-v1.json``.

Each event is an object with ``"v": 1`` and a ``type``: ``user``, ``assistant``,
``tool_call``, ``tool_result``, ``compaction`` or ``end``. ``session`` names its session (the
events without one make one session); a ``tool_result`` completes the earlier ``tool_call`` of
its session with the same ``call_id``, or the call carries its ``result`` (or ``error``)
itself. An ``end`` event closes its session, whose run is yielded then; the sessions still
open at the end of the file are yielded after, in the order they started. So the reader
holds the steps of the open sessions only.

An event that cannot be read (not an object, an unknown ``type`` or ``v``, a call without a
tool, a result whose call is not pending) is reported and skipped.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .._core import EventDecoder
from .decode import dumps, kind, rfc3339_seconds, tokens
from .records import Run, Step, _new, _set, new_step
from .source import Report, decoded_line

__all__ = ["NAME", "VERSION", "looks_like", "runs", "runs_of_lines"]

NAME = "doomloop"
VERSION = 1
"""The version of the event format this reader reads (each event's ``v``)."""
TYPES = ("user", "assistant", "tool_call", "tool_result", "compaction", "end")


class _Session:
    __slots__ = ("exit_status", "pending", "run_id", "steps")

    def __init__(self, run_id: Optional[str]) -> None:
        self.steps: List[Step] = []
        self.pending: Dict[str, int] = {}  # call id -> index in steps of a call awaiting its result
        self.run_id = run_id
        self.exit_status: Optional[str] = None


def looks_like(value: Any) -> int:
    """2 for an event of this format (``v`` and a known ``type``), 0 otherwise."""
    return 2 if isinstance(value, dict) and value.get("v") == VERSION and value.get("type") in TYPES else 0


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's events (see the module's documentation)."""
    sessions: Dict[Any, _Session] = {}
    for line, event in records:
        ended = _event(sessions, line, event, report)
        if ended is not None:
            yield _run(*ended, source)
    for key, state in sessions.items():
        yield _run(key, state, source)


def runs_of_lines(
    held: Iterable[Tuple[Optional[int], Any]], lines: Iterable[Tuple[int, bytes]], report: Report, source: Optional[str]
) -> Iterator[Run]:
    """:func:`runs` of the records already decoded (``held``), then of the file's lines not
    decoded yet: a ``tool_call`` line that the reader's rules read without a problem is read in
    Rust (``EventDecoder``: a scan reads one per call, and decoding it to Python objects cost
    several times what the detectors do with the call); every other line is decoded and read
    here, so the runs, and what is reported, are those of :func:`runs`."""
    sessions: Dict[Any, _Session] = {}
    for line, event in held:
        ended = _event(sessions, line, event, report)
        if ended is not None:
            yield _run(*ended, source)
    tool_call = EventDecoder().tool_call
    for line, raw in lines:
        read = tool_call(raw, line)
        if read is None:
            record = decoded_line(line, raw, report)
            ended = None if record is None else _event(sessions, line, record[1], report)
            if ended is not None:
                yield _run(*ended, source)
            continue
        key, run_id, fields, pending, times = read
        if times is not None:
            # A time as text: converted (or reported) as the Python reader does.
            ts, ended, has_outcome = times
            fields["started"], fields["ended"] = _call_times(ts, ended, has_outcome, report, line)
        state = sessions.get(key)
        if state is None:
            state = sessions[key] = _Session(run_id)
        if pending:
            state.pending[fields["call_id"]] = len(state.steps)
        step = _new(Step)
        _set(step, "__dict__", fields)
        state.steps.append(step)
    for key, state in sessions.items():
        yield _run(key, state, source)


def _event(sessions: Dict[Any, _Session], line: Optional[int], event: Any, report: Report) -> Optional[Tuple[Any, _Session]]:
    """Read one decoded event into its session; an ``end`` event's (key, session), which it
    closes, else None."""
    if type(event) is not dict:
        report(f"an event must be a JSON object, got {kind(event)}", line)
        return None
    get = event.get
    if get("v") != VERSION:
        report(f"v: expected {VERSION}, got {get('v')!r}", line)
        return None
    type_ = get("type")
    if type_ not in TYPES:
        report(f"type: unknown event type {type_!r}", line)
        return None
    key = get("session")
    if key is not None and type(key) is not str:
        report(f"session: expected a string, got {kind(key)}", line)
        return None
    state = sessions.get(key)
    if state is None:
        run_id = get("run")
        state = sessions[key] = _Session(run_id if type(run_id) is str else None)
    if type_ == "tool_call":
        tool = get("tool")
        call_id = get("call_id")
        if type(tool) is not str or (call_id is not None and type(call_id) is not str):
            report(
                f"tool: expected a string, got {kind(tool)}"
                if type(tool) is not str
                else f"call_id: expected a string, got {kind(call_id)}",
                line,
            )
            return None
        thought = get("thought")
        usage = get("usage")
        given, produced = (None, None) if usage is None else tokens(usage)
        has_outcome = "result" in event or "error" in event
        started, ended = _call_times(get("ts"), get("ended"), has_outcome, report, line)
        if has_outcome:
            result, error, returncode, is_error = _outcome(event)
        else:
            result = error = returncode = None
            is_error = False
            if call_id is not None:
                state.pending[call_id] = len(state.steps)
        step = _new(Step)
        _set(
            step,
            "__dict__",
            {
                "tool": tool,
                "arguments": get("arguments"),
                "call_id": call_id,
                "thought": thought if thought is None or type(thought) is str else None,
                "result_text": result,
                "returncode": returncode,
                "is_error": is_error,
                "kind": "tool",
                "text": None,
                "error": error,
                "input_tokens": given,
                "output_tokens": produced,
                "started": started,
                "ended": ended,
                "line": line,
            },
        )
        state.steps.append(step)
    elif type_ == "tool_result":
        _result(event, state, report, line)
    elif type_ != "end":  # user, assistant, compaction
        text = get("text")
        if text is not None and type(text) is not str:
            report(f"text: expected a string, got {kind(text)}", line)
            return None
        given, produced = tokens(get("usage"))
        ts = _time(get("ts"), report, line)
        state.steps.append(new_step(None, None, None, None, None, None, False, type_, text, None, given, produced, ts, ts, line))
    else:
        status = get("status")
        state.exit_status = status if type(status) is str else None
        del sessions[key]
        return key, state
    return None


def _run(key: Optional[str], state: _Session, source: Optional[str]) -> Run:
    return Run(None, state.exit_status, tuple(state.steps), key, state.run_id, source, NAME)


def _result(event: Dict[str, Any], state: _Session, report: Report, line: Optional[int]) -> None:
    call_id = event.get("call_id")
    index = state.pending.pop(call_id, None) if type(call_id) is str else None
    if index is None:
        report(f"a tool_result for call_id {call_id!r}, which no pending tool_call of this session has", line)
        return
    call = state.steps[index]
    result, error, returncode, is_error = _outcome(event)
    ended = _time(event.get("ts"), report, line)
    state.steps[index] = new_step(
        call.tool,
        call.arguments,
        call.call_id,
        call.thought,
        result,
        returncode,
        is_error,
        "tool",
        None,
        error,
        call.input_tokens,
        call.output_tokens,
        call.started,
        ended,
        call.line,
    )


def _call_times(
    ts: Any, ended: Any, has_outcome: bool, report: Report, line: Optional[int]
) -> Tuple[Optional[float], Optional[float]]:
    # (started, ended) of a tool_call: its ts; for a call with an outcome its ended, else ts
    # (a call awaiting its result has none yet, and its ended is not read).
    started = ts if ts is None or type(ts) is float else _time(ts, report, line)
    if not has_outcome:
        return started, None
    return started, started if ended is None else ended if type(ended) is float else _time(ended, report, line)


def _outcome(event: Dict[str, Any]) -> Tuple[Optional[str], Optional[str], Optional[int], bool]:
    # (result, error, returncode, is_error) of a call's outcome; a result or error that is not
    # a string is kept as its JSON text.
    get = event.get
    result = get("result")
    if result is not None and type(result) is not str:
        result = dumps(result)
    error = get("error")
    if error is not None and type(error) is not str:
        error = dumps(error)
    returncode = get("returncode")
    if type(returncode) is not int:
        returncode = None
    return result, error, returncode, error is not None or bool(returncode) or get("is_error") is True


def _time(value: Any, report: Report, line: Optional[int]) -> Optional[float]:
    # Epoch seconds, or an RFC 3339 time (UTC when it has no offset).
    if value is None:
        return None
    if type(value) is float or type(value) is int:
        return float(value)
    seconds = rfc3339_seconds(value)
    if seconds is not None:
        return seconds
    report(f"ts: expected epoch seconds or an RFC 3339 time, got {value!r} (kept without a time)", line)
    return None
