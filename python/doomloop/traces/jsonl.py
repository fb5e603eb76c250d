"""Reader of run files: JSON Lines, optionally gzip-compressed, one agent run per line.

Each line is an object ``{"path": str, "exit_status": str | null, "calls": [...]}`` where
every call is ``{"id", "name", "arguments", "thought", "result"}``: ``arguments`` is the JSON
string the OpenAI API sends, ``thought`` the assistant message that carried the call (or null)
and ``result`` the tool's output, starting with ``<returncode>N</returncode>`` (or null when
the run ended first). This is the format of the public corpus of coding-agent runs
(``tests/data/corpus/README.md`` in the repository).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from typing import Any, Iterator, Mapping, Optional, Tuple, Union

from .errors import TraceFormatError
from .records import Run, Step

__all__ = ["parse_result", "parse_run", "read_runs"]

_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
# What mini-swe-agent writes when the command could not be run at all (a timeout, a dead
# container): there is no return code, and the call failed.
_EXCEPTION = "<exception>"
_GZIP_MAGIC = b"\x1f\x8b"


def read_runs(path: Union[str, os.PathLike[str]]) -> Iterator[Run]:
    """Yield the runs of a run file in order, reading it lazily.

    The file may be gzip-compressed (recognised by its first bytes, whatever its name).
    Blank lines are skipped. A line that is not UTF-8, not JSON or not a run raises
    :class:`~doomloop.traces.TraceFormatError` naming the file and the line number.
    """
    name = os.fspath(path)
    with _open(name) as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                yield parse_run(record)
            except TraceFormatError as error:
                raise TraceFormatError(error.problem, name, number) from None
            except UnicodeDecodeError as error:
                raise TraceFormatError(f"not UTF-8 ({error.reason} at byte {error.start})", name, number) from None
            except json.JSONDecodeError as error:
                raise TraceFormatError(f"not JSON ({error.msg}, column {error.colno})", name, number) from None


def _open(path: str) -> io.BufferedIOBase:
    with open(path, "rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else open(path, "rb")


def parse_run(record: Any) -> Run:
    """One run from its decoded JSON object; raises :class:`~doomloop.traces.TraceFormatError`
    naming the offending field."""
    if not isinstance(record, Mapping):
        raise TraceFormatError(f"a run must be a JSON object, got {_kind(record)}")
    calls = record.get("calls")
    if not isinstance(calls, list):
        raise TraceFormatError(f"calls: expected an array, got {_kind(calls)}")
    return Run(
        path=_optional_str(record, "path"),
        exit_status=_optional_str(record, "exit_status"),
        steps=tuple(_parse_step(call, f"calls[{index}]") for index, call in enumerate(calls)),
    )


def _parse_step(call: Any, where: str) -> Step:
    if not isinstance(call, Mapping):
        raise TraceFormatError(f"{where}: expected an object, got {_kind(call)}")
    tool = call.get("name")
    if not isinstance(tool, str):
        raise TraceFormatError(f"{where}.name: expected a string, got {_kind(tool)}")
    arguments = call.get("arguments")
    if not isinstance(arguments, str):
        raise TraceFormatError(f"{where}.arguments: expected a JSON string, got {_kind(arguments)}")
    result = _optional_str(call, "result", f"{where}.result")
    returncode, is_error = parse_result(result)
    return Step(
        tool=tool,
        arguments=_parse_arguments(arguments),
        call_id=_optional_str(call, "id", f"{where}.id"),
        thought=_optional_str(call, "thought", f"{where}.thought"),
        result_text=result,
        returncode=returncode,
        is_error=is_error,
    )


def _parse_arguments(text: str) -> Any:
    # A model can emit arguments that are not JSON; the raw text is still the call's identity.
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


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
        raise TraceFormatError(f"{where or key}: expected a string or null, got {_kind(value)}")
    return value


# How the messages name what json.loads gave instead.
_JSON_KINDS = {bool: "a boolean", str: "a string", int: "a number", float: "a number", list: "an array", dict: "an object"}


def _kind(value: Any) -> str:
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)
