"""The error a trace reader raises for input it cannot read."""

from __future__ import annotations

from typing import Optional

from ..errors import DoomLoopError

__all__ = ["TraceFormatError"]


class TraceFormatError(DoomLoopError, ValueError):
    """A trace that does not have the expected format.

    The message is ``<file>:<line>: <problem>`` when the reader knows where; ``problem``,
    ``path`` and ``line`` hold the parts (``path`` and ``line`` may be None).
    """

    def __init__(self, problem: str, path: Optional[str] = None, line: Optional[int] = None) -> None:
        location = path if line is None else f"{path}:{line}"
        super().__init__(problem if path is None else f"{location}: {problem}")
        self.problem = problem
        self.path = path
        self.line = line
