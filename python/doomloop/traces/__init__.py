"""Trace readers and replay: recorded agent runs, in every common trace format, as plain
records, and what the detectors would have said about them.

- :func:`read` reads a trace file (a path, ``"-"`` for stdin or a binary file object; gzip or
  not) in any of the :data:`FORMATS` into :class:`Run` records of :class:`Step` s, streaming:
  doomloop's JSONL events (:mod:`~doomloop.traces.events`), the corpus run format
  (:mod:`~doomloop.traces.runs`), OpenAI chat-completions messages
  (:mod:`~doomloop.traces.openai_chat`), OpenAI Responses items
  (:mod:`~doomloop.traces.openai_responses`), OpenAI Codex CLI session files and
  ``codex exec --json`` output (:mod:`~doomloop.traces.codex`,
  :mod:`~doomloop.traces.codex_exec`), Anthropic Messages
  (:mod:`~doomloop.traces.anthropic`), Claude Code session transcripts
  (:mod:`~doomloop.traces.claude_code`), Google Gemini contents
  (:mod:`~doomloop.traces.gemini`), Gemini CLI session files
  (:mod:`~doomloop.traces.gemini_cli`) and OpenTelemetry GenAI spans in OTLP JSON
  (:mod:`~doomloop.traces.otlp`). :func:`sniff` names the format ``format="auto"`` picks.
  Malformed records are reported (``on_skip``) and skipped, or raised with ``strict=True``.
- ``openai_chat.steps``, ``openai_responses.steps`` and ``anthropic.steps`` read one request's
  messages in memory (a guardrail's view), never raising.
- :func:`read_runs` reads a run file strictly (the corpus format).
- :func:`scan` replays every session of trace files through a fresh :class:`~doomloop.Monitor`
  and yields a :class:`SessionReport` per session, with a :class:`ScanSummary`;
  :func:`scan_file` scans one file (``doomloop scan``, docs/scan.md).
- :func:`replay` feeds a run to a :class:`~doomloop.Monitor` as a gateway would and yields
  every :class:`~doomloop.Finding` with the step it was raised at (:class:`Replayed`);
  :func:`first_findings` keeps the first of each kind.

The command line and the integrations read traces through this package, so every consumer
parses a trace the same way. The format of each reader is in ``docs/traces.md``. The standard
library suffices; orjson, when installed, decodes faster.
"""

from .errors import TraceFormatError
from .formats import FORMATS, read, read_runs, sniff
from .records import Run, Step
from .replay import CRITICAL, WARNING, FirstFindings, Replayed, first_findings, kind_of, replay
from .runs import parse_result, parse_run
from .scan import FileScan, LoopFinding, ScanSummary, SessionReport, scan, scan_file
from .source import MAX_LINE_BYTES

__all__ = [
    "CRITICAL",
    "FORMATS",
    "MAX_LINE_BYTES",
    "WARNING",
    "FileScan",
    "FirstFindings",
    "LoopFinding",
    "Replayed",
    "Run",
    "ScanSummary",
    "SessionReport",
    "Step",
    "TraceFormatError",
    "first_findings",
    "kind_of",
    "parse_result",
    "parse_run",
    "read",
    "read_runs",
    "replay",
    "scan",
    "scan_file",
    "sniff",
]
