"""Reader of OpenAI Codex CLI session files (format ``"codex"``): the "rollout" JSON Lines
Codex writes for each session, ``sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`` under its
home directory.

A line is ``{"timestamp": "<RFC 3339>", "type": T, "payload": {...}}``, by ``type``:

- ``session_meta``: the session (``id``, ``cwd``, ``cli_version``, ...); its ``id`` is the
  run's ``session_id`` (without one, the uuid at the end of the file's name);
- ``response_item``: one OpenAI Responses item, read as
  :mod:`doomloop.traces.openai_responses` reads items (``function_call`` and
  ``custom_tool_call`` with their ``*_output`` by ``call_id``, ``message``, ``reasoning``,
  ``compaction``), and beyond it:

  - a ``local_shell_call`` is a call of the tool ``local_shell``, its ``action`` the
    arguments; its output is a ``function_call_output`` with the same ``call_id``;
  - the exit code Codex writes in a command's output (older versions: JSON text
    ``{"output": ..., "metadata": {"exit_code": N, ...}}``; newer: text whose header lines,
    before ``Output:``, say ``Exit code: N`` or ``Process exited with code N``) is the step's
    ``returncode``, nonzero an error; the whole output is its result;
  - a user message Codex adds as context (``<environment_context>``, ``<user_instructions>``,
    the AGENTS.md instructions, ``<turn_aborted>``, ...) is not a user turn;
  - the items Codex adds of its own (``ghost_snapshot``) and kinds later versions add are not
    steps;

- ``event_msg``: the events the UI shows, which repeat the items; only ``token_count`` is
  read: its ``info.last_token_usage`` is the usage of the model response just before it, and
  goes on the first item that response produced (OpenAI's ``input_tokens`` count the cached
  part already);
- ``compacted``: a ``"compaction"`` step, its ``message`` (the summary, empty when the server
  compacted) the step's text; a ``compaction`` item next to it is the same compaction;
- ``turn_context`` and the kinds of line later versions add: not steps.

A step's ``started`` is its line's ``timestamp``, and a call's ``ended`` that of the line
holding its output.

The legacy format (Codex before September 2025) is read too: a first line ``{"id",
"timestamp", "instructions"}`` (the session), then the Responses items themselves, one a line,
and ``{"record_type": "state"}`` lines (not steps).

A file is one session: its items are held until the end of the file, then read as one run. A
line that cannot be read is reported and skipped. ``codex exec --json`` output is another
format (:mod:`doomloop.traces.codex_exec`).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .conversation import USAGE_KEY
from .decode import kind, maybe_json, optional_str, rfc3339_seconds
from .openai_responses import CALL_ITEMS, OUTPUT_ITEMS, QUIET_ITEMS, item_steps
from .records import Run, Step, replaced
from .source import Report

__all__ = ["NAME", "looks_like", "runs"]

NAME = "codex"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_LINES = ("session_meta", "response_item", "turn_context", "event_msg", "compacted")
# The items the Responses reader reads (a local_shell_call is handed to it as a function_call).
_ITEMS = CALL_ITEMS + OUTPUT_ITEMS + QUIET_ITEMS + ("message", "compaction")
# The items a model response produces: the first of them after a token_count carries the
# usage the next token_count gives.
_PRODUCED = CALL_ITEMS + ("reasoning", "local_shell_call", "web_search_call")
# How the user messages Codex adds for the model begin (compared in lower case): context, not
# a turn the user typed. A user turn resets the detectors' loop stretches, so this boilerplate
# (sent again at every turn that changes it) would split loops.
_CONTEXT = (
    "<environment_context>",
    "<user_instructions>",
    "# agents.md instructions",
    "<permissions instructions>",
    "<turn_aborted>",
    "<context_update>",
    "<user_shell_command>",
    "<skill>",
    "<subagent_notification>",
)
_LEGACY_META = frozenset(("id", "timestamp", "instructions", "git"))
_SESSION_FILE = re.compile(r"rollout-.*?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl", re.IGNORECASE)
_EXIT_CODE = re.compile(r"(?:Exit code:|Process exited with code) (-?[0-9]+)")
# The text outputs put a few header lines (exit code, wall time, chunk id, token count) before
# "Output:"; the exit code is looked for only there, never in the output itself.
_HEADER_LINES = 8


def looks_like(value: Any) -> int:
    """2 for a rollout line (``type`` one of Codex's line kinds and a ``payload`` object) or
    the legacy format's first line, 1 for the legacy format's other lines (a Responses item,
    a ``record_type``), 0 otherwise."""
    if not isinstance(value, dict):
        return 0
    line = value.get("type")
    if line in _LINES and isinstance(value.get("payload"), dict):
        return 2
    if _is_legacy_meta(value):
        return 2
    if line in _ITEMS or line == "local_shell_call" or value.get("record_type") == "state":
        return 1
    return 0


def _is_legacy_meta(value: Dict[str, Any]) -> bool:
    return (
        isinstance(value.get("id"), str)
        and isinstance(value.get("timestamp"), str)
        and "instructions" in value
        and _LEGACY_META.issuperset(value)
    )


class _Session:
    """A session's items as they are read: each with its line and time, the output times by
    call, the compactions' summaries and the response whose usage is still to come."""

    def __init__(self, session_id: Optional[str]) -> None:
        self.session_id = session_id
        self.items: List[Dict[str, Any]] = []
        self.lines: List[Optional[int]] = []
        self.times: Dict[int, Optional[float]] = {}
        # The time of the line holding each call's output, by the call's id.
        self.output_times: Dict[str, Optional[float]] = {}
        self.summaries: Dict[int, str] = {}
        # The index of the first item the current model response produced, which the next
        # token_count's usage goes on (None: nothing produced since the last one).
        self.first_produced: Optional[int] = None
        # The line of the compaction just added, while nothing came after it: a compaction
        # written both as an item and as a compacted line is one.
        self.open_compaction: Optional[int] = None

    def add(self, item: Dict[str, Any], line: Optional[int], time: Optional[float]) -> None:
        self.items.append(item)
        self.lines.append(line)
        if line is not None:
            self.times[line] = time

    def item(self, item: Dict[str, Any], line: Optional[int], time: Optional[float], report: Report) -> None:
        type_ = item.get("type", "message" if "role" in item else None)
        if not isinstance(type_, str):
            report("a response item without a type", line)
            return
        if type_ in ("compaction", "compaction_summary"):
            self.compaction(None, line, time)
            return
        # Any other item ends the compaction just read: the next one is another.
        self.open_compaction = None
        if type_ == "local_shell_call":
            # A model's shell call on its own: a tool call like the others.
            call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else item.get("id")
            item = {"type": "function_call", "name": "local_shell", "arguments": item.get("action"), "call_id": call_id}
        elif type_ not in _ITEMS:
            return  # Codex's own items (ghost_snapshot) and kinds later versions add: no step
        if type_ == "message" and item.get("role") == "user" and _is_context(item.get("content")):
            return
        if type_ in OUTPUT_ITEMS and isinstance(item.get("call_id"), str):
            self.output_times[item["call_id"]] = time
        if self.first_produced is None and (type_ in _PRODUCED or (type_ == "message" and item.get("role") == "assistant")):
            self.first_produced = len(self.items)
        self.add(item, line, time)

    def compaction(self, summary: Any, line: Optional[int], time: Optional[float]) -> None:
        at = self.open_compaction
        if at is None:
            self.add({"type": "compaction"}, line, time)
            self.open_compaction = at = line
        if at is not None and isinstance(summary, str) and summary:
            self.summaries[at] = summary

    def usage(self, info: Any) -> None:
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict) or self.first_produced is None:
            # No usage yet (info is null before the first response), or a token_count that
            # repeats the last one with nothing produced since: counted once.
            return
        first = self.first_produced
        self.items[first] = {**self.items[first], USAGE_KEY: last}
        self.first_produced = None

    def steps(self, report: Report) -> Tuple[Step, ...]:
        found = item_steps(self.items, report, self.lines.__getitem__)
        return tuple(self._completed(step) for step in found)

    def _completed(self, step: Step) -> Step:
        # What the rollout says beyond the items: the times, a compaction's summary, and the
        # exit code in a command's output.
        changes: Dict[str, Any] = {}
        if step.line is not None:
            changes["started"] = self.times.get(step.line)
            if step.kind == "compaction":
                changes["text"] = self.summaries.get(step.line)
        if step.call_id is not None and step.result_text is not None:
            changes["ended"] = self.output_times.get(step.call_id)
        code = _exit_code(step.result_text) if step.result_text is not None else None
        if code is not None:
            changes.update(returncode=code, is_error=code != 0)
        if not any(value is not None for value in changes.values()):
            return step
        return replaced(step, **changes)


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    session = _Session(None)
    for line, value in records:
        if not isinstance(value, dict):
            report(f"a rollout line is an object, got {kind(value)}", line)
            continue
        if "payload" in value:
            _line(session, value, line, report)
        elif _is_legacy_meta(value):
            session.session_id = session.session_id or optional_str(value, "id")
        elif "record_type" in value:
            continue  # the legacy format's state lines
        elif "type" in value or "role" in value:
            session.item(value, line, rfc3339_seconds(value.get("timestamp")), report)
        else:
            report("a rollout line without a type", line)
    if session.items or session.session_id is not None:
        session.session_id = session.session_id or _file_session(source)
        yield Run(None, None, session.steps(report), session.session_id, None, source, NAME)


def _line(session: _Session, value: Dict[str, Any], line: Optional[int], report: Report) -> None:
    line_type = value.get("type")
    payload = value.get("payload")
    if line_type not in _LINES:
        return  # a kind of line later versions add: no step
    if not isinstance(payload, dict):
        report(f"payload: expected an object, got {kind(payload)}", line)
        return
    time = rfc3339_seconds(value.get("timestamp"))
    if line_type == "response_item":
        session.item(payload, line, time, report)
    elif line_type == "event_msg":
        if payload.get("type") == "token_count":
            session.usage(payload.get("info"))
    elif line_type == "compacted":
        session.compaction(payload.get("message"), line, time)
    elif line_type == "session_meta" and session.session_id is None:
        # A resumed or forked session's file may repeat the sessions it comes from: the
        # first is the file's.
        session.session_id = optional_str(payload, "id")


def _is_context(content: Any) -> bool:
    parts = content if isinstance(content, list) else [content]
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else part
        if isinstance(text, str) and text.lstrip()[:32].lower().startswith(_CONTEXT):
            return True
    return False


def _exit_code(text: str) -> Optional[int]:
    if text.startswith('{"output":'):
        value = maybe_json(text)
        metadata = value.get("metadata") if isinstance(value, dict) else None
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        return code if type(code) is int else None
    for header in text.split("\n", _HEADER_LINES)[:_HEADER_LINES]:
        if header == "Output:":
            break
        match = _EXIT_CODE.fullmatch(header)
        if match is not None:
            return int(match.group(1))
    return None


def _file_session(source: Optional[str]) -> Optional[str]:
    # The uuid Codex puts at the end of a rollout file's name, for a file without its meta line.
    match = _SESSION_FILE.search(os.path.basename(source)) if source else None
    return match.group(1) if match is not None else None
