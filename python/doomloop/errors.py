"""doomloop's exceptions: every error doomloop raises for a bad value or state of its own is a
:class:`DoomLoopError`, and also the standard exception callers already catch
(``ValueError``), so ``except ValueError`` keeps working."""

from __future__ import annotations

__all__ = ["ConfigError", "DoomLoopError", "SnapshotError"]


class DoomLoopError(Exception):
    """Base class of doomloop's own errors."""


class ConfigError(DoomLoopError, ValueError):
    """An invalid loop-detection config; ``path`` names the offending key
    (e.g. ``tools.loopDetection.warningThreshold``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


class SnapshotError(DoomLoopError, ValueError):
    """Snapshot data that cannot be restored: corrupt, truncated, of another detector kind or
    config schema, or of a newer format than this doomloop reads. The message says which."""
