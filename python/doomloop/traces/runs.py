"""Reader of run files (format ``"runs"``): JSON Lines, one agent run per line.

Each line is an object ``{"path": str, "exit_status": str | null, "calls": [...]}`` where
every call is ``{"id", "name", "arguments", "thought", "result"}``: ``arguments`` is the JSON
string the OpenAI API sends, ``thought`` the assistant message that carried the call (or null)
and ``result`` the tool's output, starting with ``<returncode>N</returncode>`` (or null when
the run ended first). This is the format of the public corpus of coding-agent runs
(``tests/data/corpus/README.md`` in the repository).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Mapping, Optional, Tuple

from .decode import kind, maybe_json
from .errors import TraceFormatError
from .records import Run, Step, new_step
from .source import Report

__all__ = ["NAME", "call_step", "looks_like", "parse_result", "parse_run", "runs"]

NAME = "runs"
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
# What mini-swe-agent writes when the command could not be run at all (a timeout, a dead
# container): there is no return code, and the call failed.
_EXCEPTION = "<exception>"


def looks_like(value: Any) -> int:
    """2 for a run of this format (an object with a ``calls`` array), 0 otherwise."""
    return 2 if isinstance(value, dict) and isinstance(value.get("calls"), list) and "messages" not in value else 0


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records, one per line; a line that is not a run is reported."""
    for line, record in records:
        try:
            run = parse_run(record, line=line)
        except TraceFormatError as error:
            report(error.problem, line)
            continue
        yield Run(run.path, run.exit_status, run.steps, None, None, source, NAME)


def parse_run(record: Any, *, line: Optional[int] = None) -> Run:
    """One run from its decoded JSON object (its steps on ``line``); raises
    :class:`~doomloop.traces.TraceFormatError` naming the offending field."""
    if not isinstance(record, Mapping):
        raise TraceFormatError(f"a run must be a JSON object, got {kind(record)}")
    calls = record.get("calls")
    if not isinstance(calls, list):
        raise TraceFormatError(f"calls: expected an array, got {kind(calls)}")
    return Run(
        path=_optional_str(record, "path"),
        exit_status=_optional_str(record, "exit_status"),
        steps=tuple(_parse_step(call, f"calls[{index}]", line) for index, call in enumerate(calls)),
    )


def _parse_step(call: Any, where: str, line: Optional[int]) -> Step:
    if not isinstance(call, Mapping):
        raise TraceFormatError(f"{where}: expected an object, got {kind(call)}")
    tool = call.get("name")
    if not isinstance(tool, str):
        raise TraceFormatError(f"{where}.name: expected a string, got {kind(tool)}")
    arguments = call.get("arguments")
    if not isinstance(arguments, str):
        raise TraceFormatError(f"{where}.arguments: expected a JSON string, got {kind(arguments)}")
    return call_step(
        tool,
        maybe_json(arguments),
        _optional_str(call, "id", f"{where}.id"),
        _optional_str(call, "thought", f"{where}.thought"),
        _optional_str(call, "result", f"{where}.result"),
        line=line,
    )


def call_step(
    tool: str,
    arguments: Any,
    call_id: Optional[str],
    thought: Optional[str],
    result: Optional[str],
    input_tokens: Optional[int] = None,
    output_tokens: Optional[int] = None,
    line: Optional[int] = None,
) -> Step:
    """The step of a tool call whose result is the tool's output text (None when it has none),
    its return code and failure read by :func:`parse_result`."""
    returncode, is_error = parse_result(result)
    return new_step(
        tool,
        arguments,
        call_id,
        thought,
        result,
        returncode,
        is_error,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        line=line,
    )


def parse_result(text: Optional[str]) -> Tuple[Optional[int], bool]:
    """``(returncode, is_error)`` of a tool result: the code of a leading
    ``<returncode>N</returncode>`` (None without one), and whether the call failed (a nonzero
    code, or an ``<exception>`` result: the command could not be run)."""
    if text is None:
        return None, False
    text = text.lstrip()
    match = _RETURNCODE.match(text)
    if match is None:
        return None, text.startswith(_EXCEPTION)
    returncode = int(match.group(1))
    return returncode, returncode != 0


def _optional_str(record: Mapping[str, Any], key: str, where: Optional[str] = None) -> Optional[str]:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise TraceFormatError(f"{where or key}: expected a string or null, got {kind(value)}")
    return value
