"""Trace readers and replay: recorded agent runs as plain records, and what the detectors
would have said about them.

- :func:`read_runs` reads a run file (JSON Lines, optionally gzip-compressed, one run per
  line; see :mod:`doomloop.traces.jsonl`) into :class:`Run` records of :class:`Step` s.
- :func:`replay` feeds a run to a :class:`Detectors` bundle as a gateway would and yields
  every :class:`Finding`; :func:`first_findings` keeps each detector's first.

The command line and the integrations read traces through this package, so every consumer
parses a trace the same way. Standard library only.
"""

from .errors import TraceFormatError
from .jsonl import parse_result, parse_run, read_runs
from .records import Run, Step
from .replay import CRITICAL, WARNING, Detectors, Finding, FirstFindings, first_findings, replay

__all__ = [
    "CRITICAL",
    "WARNING",
    "Detectors",
    "Finding",
    "FirstFindings",
    "Run",
    "Step",
    "TraceFormatError",
    "first_findings",
    "parse_result",
    "parse_run",
    "read_runs",
    "replay",
]
