"""One entry point for every trace format: :func:`read` and :func:`sniff`.

The formats, by name (:data:`FORMATS`):

- ``"doomloop"``: doomloop's own JSONL event format (:mod:`doomloop.traces.events`);
- ``"runs"``: the run format of the public corpus (:mod:`doomloop.traces.runs`);
- ``"openai-chat"``: OpenAI chat-completions message lists (:mod:`doomloop.traces.openai_chat`);
- ``"openai-responses"``: OpenAI Responses API items (:mod:`doomloop.traces.openai_responses`);
- ``"codex"``: OpenAI Codex CLI session files (:mod:`doomloop.traces.codex`);
- ``"codex-exec"``: ``codex exec --json`` output (:mod:`doomloop.traces.codex_exec`);
- ``"anthropic"``: Anthropic Messages (:mod:`doomloop.traces.anthropic`);
- ``"claude-code"``: Claude Code session transcripts (:mod:`doomloop.traces.claude_code`);
- ``"gemini"``: Google Gemini contents, requests and responses (:mod:`doomloop.traces.gemini`);
- ``"gemini-cli"``: Gemini CLI session files (:mod:`doomloop.traces.gemini_cli`);
- ``"otlp"``: OpenTelemetry GenAI spans as OTLP JSON (:mod:`doomloop.traces.otlp`).
"""

from __future__ import annotations

import os
from itertools import chain
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from . import anthropic, claude_code, codex, codex_exec, events, gemini, gemini_cli, openai_chat, openai_responses, otlp, runs
from .errors import TraceFormatError
from .records import Run
from .source import MAX_LINE_BYTES, Records, Report, Source, open_source

__all__ = ["FORMATS", "SNIFF_RECORDS", "read", "sniff"]

_MODULES = (events, runs, openai_chat, openai_responses, codex, codex_exec, anthropic, claude_code, gemini, gemini_cli, otlp)
_READERS: Dict[str, ModuleType] = {module.NAME: module for module in _MODULES}
FORMATS: Tuple[str, ...] = tuple(_READERS)
"""The names of the formats :func:`read` reads."""
SNIFF_RECORDS = 32
"""How many records ``format="auto"`` looks at, at most, before it gives up."""


def read(
    source: Source,
    *,
    format: str = "auto",
    on_skip: Optional[Callable[[TraceFormatError], None]] = None,
    strict: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[Run]:
    """Yield the runs of a trace file, reading it as it goes.

    Args:
        source: a path, ``"-"`` for stdin, or a binary file object (which is not closed).
            Gzip is recognised by its first bytes, whatever the name.
        format: one of :data:`FORMATS`, or ``"auto"`` to pick it from the first records
            (see :func:`sniff`); each run's ``format`` names the one used.
        on_skip: called with a :class:`TraceFormatError` (naming the file and the line) for
            each malformed line or record, which is then skipped.
        strict: raise that error instead of skipping.
        max_line_bytes: the longest line (or whole JSON document) read; a longer line is
            skipped and reported without being held in memory.

    Raises:
        TraceFormatError: the file cannot be read, ``format="auto"`` finds no format or
            several (the message lists them), or ``strict`` and a record is malformed.
    """
    if format != "auto" and format not in _READERS:
        raise ValueError(f"unknown trace format {format!r}: expected 'auto' or one of {', '.join(FORMATS)}")
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
    # The arguments are checked now, the file opened on the first run asked for.
    return _read(source, format, _reporter_for(on_skip, strict), max_line_bytes)


def _read(source: Source, format: str, reporter: Callable[[str], Report], max_line_bytes: int) -> Iterator[Run]:
    stream, name, close = open_source(source)
    try:
        report = reporter(name)
        found = Records(stream, report, max_line_bytes)
        held: List[Tuple[Optional[int], Any]] = []
        if format == "auto":
            sniffed, held = _sniff(iter(found), name)
            if sniffed is None:
                return
            format = sniffed
        reader = _READERS[format]
        # A reader that reads JSON Lines itself (the event format's, in Rust) takes the lines
        # the sniffing left undecoded.
        lines = found.raw_lines() if hasattr(reader, "runs_of_lines") else None
        if lines is None:
            yield from reader.runs(chain(held, found), report, name)
        else:
            yield from reader.runs_of_lines(held, lines, report, name)
    finally:
        close()


def read_runs(path: Union[str, os.PathLike[str]]) -> Iterator[Run]:
    """Yield the runs of a run file (the corpus format, :mod:`~doomloop.traces.runs`) in
    order, reading it lazily: ``read(path, format="runs", strict=True)``.

    The file may be gzip-compressed (recognised by its first bytes, whatever its name).
    Blank lines are skipped. A line that is not UTF-8, not JSON or not a run raises
    :class:`~doomloop.traces.TraceFormatError` naming the file and the line number.
    """
    return read(path, format=runs.NAME, strict=True)


def sniff(source: Source, *, max_line_bytes: int = MAX_LINE_BYTES) -> Optional[str]:
    """The format ``read(source)`` would pick, from the first records; None for a file with
    no records. Raises :class:`TraceFormatError` when no format fits or several do."""
    stream, name, close = open_source(source)
    try:
        found = iter(Records(stream, lambda problem, line: None, max_line_bytes))
        return _sniff(found, name)[0]
    finally:
        close()


def _sniff(found: Iterator[Tuple[Optional[int], Any]], name: str) -> Tuple[Optional[str], List[Tuple[Optional[int], Any]]]:
    # The first record that a format marks as its own decides (several: ambiguous); without
    # one in the first records, the formats that could have written all of them.
    held: List[Tuple[Optional[int], Any]] = []
    possible = set(FORMATS)
    for record in found:
        held.append(record)
        scores = {format: reader.looks_like(record[1]) for format, reader in _READERS.items()}
        sure = [format for format, score in scores.items() if score == 2]
        if len(sure) == 1:
            return sure[0], held
        if sure:
            raise TraceFormatError(f"ambiguous trace format: it could be {' or '.join(sure)} (pass the format)", name, record[0])
        possible &= {format for format, score in scores.items() if score}
        if len(held) == SNIFF_RECORDS:
            break
    if not held:
        return None, held
    candidates = [format for format in FORMATS if format in possible]
    if len(candidates) == 1:
        return candidates[0], held
    if candidates:
        raise TraceFormatError(f"ambiguous trace format: it could be {' or '.join(candidates)} (pass the format)", name)
    raise TraceFormatError(f"unknown trace format: no reader recognises its first records (formats: {', '.join(FORMATS)})", name)


def _reporter_for(on_skip: Optional[Callable[[TraceFormatError], None]], strict: bool) -> Callable[[str], Report]:
    # The report of one file, once its name is known.
    def reporter(name: str) -> Report:
        def report(problem: str, line: Optional[int]) -> None:
            error = TraceFormatError(problem, name, line)
            if strict:
                raise error
            if on_skip is not None:
                on_skip(error)

        return report

    return reporter
