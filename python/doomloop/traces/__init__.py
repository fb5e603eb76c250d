"""Trace readers and replay: recorded agent runs as plain records, and what the detectors
would have said about them.

- :func:`read_runs` reads a run file (JSON Lines, optionally gzip-compressed, one run per
  line; see :mod:`doomloop.traces.jsonl`) into :class:`Run` records of :class:`Step` s.
- :func:`replay` feeds a run to a :class:`~doomloop.Monitor` as a gateway would and yields
  every :class:`~doomloop.Finding` with the step it was raised at (:class:`Replayed`);
  :func:`first_findings` keeps the first of each kind.

The command line and the integrations read traces through this package, so every consumer
parses a trace the same way. Standard library only.
"""

from .errors import TraceFormatError
from .jsonl import parse_result, parse_run, read_runs
from .records import Run, Step
from .replay import CRITICAL, WARNING, FirstFindings, Replayed, first_findings, kind_of, replay

__all__ = [
    "CRITICAL",
    "WARNING",
    "FirstFindings",
    "Replayed",
    "Run",
    "Step",
    "TraceFormatError",
    "first_findings",
    "kind_of",
    "parse_result",
    "parse_run",
    "read_runs",
    "replay",
]
