"""Sample agent traces shipped with doomloop, for ``doomloop scan --demo``: realistic sessions
in several trace formats, some caught in loops (a file re-read, a poll that never finishes, a
ping-pong, an unknown tool retried, a command re-run while its output only changes its pid and
duration, an answer repeating itself, one answer given at every turn, a loop that survives a
context compaction) and some healthy.

Each session's header comment in docs/scan.md says what was planted in it.
"""

from __future__ import annotations

import os
from typing import List

__all__ = ["trace_files"]


def trace_files() -> List[str]:
    """The paths of the sample trace files, sorted."""
    from ..traces.scan import TRACE_SUFFIXES

    here = os.path.dirname(os.path.abspath(__file__))
    return sorted(os.path.join(here, name) for name in os.listdir(here) if name.endswith(TRACE_SUFFIXES))
