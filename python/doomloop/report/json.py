"""The JSON document of a scan: one versioned schema, ``docs/schemas/scan-v1.json``.

A consumer reads ``schema`` first; a change that could break one (a field removed or its
meaning changed) comes with a new version and a new schema file, while new optional fields
may appear within a version.
"""

from __future__ import annotations

import json
from typing import IO, Any, Dict, Iterable, Optional

from ..traces.scan import ScanSummary, SessionReport, Skip

__all__ = ["SCHEMA", "document", "write"]

SCHEMA = "doomloop.scan/v1"
"""The value of the document's ``schema`` field."""


def document(
    reports: Iterable[SessionReport], summary: ScanSummary, *, profile: Optional[str] = None, skips: Iterable[Skip] = ()
) -> Dict[str, Any]:
    """The scan as a JSON-ready dict: every session (healthy ones too), the records skipped
    (the first of them; ``summary.skipped`` counts all) and the summary."""
    from .. import __version__

    return {
        "schema": SCHEMA,
        "doomloop": __version__,
        "profile": profile,
        "sessions": [report.to_dict() for report in reports],
        "skips": [{"path": skip.path, "line": skip.line, "problem": skip.problem} for skip in skips],
        "summary": summary.to_dict(),
    }


def write(stream: IO[str], doc: Dict[str, Any]) -> None:
    json.dump(doc, stream, indent=2, ensure_ascii=False)
    stream.write("\n")
