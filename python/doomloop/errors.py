"""doomloop's exceptions: every error doomloop raises for a bad value or state of its own is a
:class:`DoomLoopError`, and also the standard exception callers already catch
(``ValueError``, ``ConnectionError``), so ``except ValueError`` keeps working."""

from __future__ import annotations

from ._core import _bind_errors

__all__ = ["ConfigError", "DoomLoopError", "SnapshotError", "StoreCorrupt", "StoreUnavailable"]


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
    config schema, or of a newer format than this doomloop reads; or a snapshot that cannot be
    taken yet (a session detector in the middle of a streamed response). The message says
    which."""


class StoreUnavailable(DoomLoopError, ConnectionError):
    """A shared store (``doomloop.gateway.RedisStore``) could not serve a call: unreachable,
    slower than its timeout, inside the retry backoff of an outage, or the key stayed contended
    through every retry. Raised under ``on_error="closed"`` (and by ``compare_and_set`` under
    either policy); the underlying error, when there is one, is the ``__cause__``.

    A ``ConnectionError`` as well (hence an ``OSError``): code around a gateway already catches
    the standard exception for a failed connection, and should not need to import redis-py to
    catch this one. Not a ``ValueError``: nothing is wrong with the caller's values. After a
    timeout the write may still have landed; the next ``update`` reads the key's real state.
    """


class StoreCorrupt(DoomLoopError, ValueError):
    """A shared store's key holds something that is not a doomloop entry (another type, a
    version that is not a number, missing or extra fields). Raised under ``on_error="closed"``;
    the default fail-open policy logs a warning and overwrites the key instead."""


# The engine raises these two classes themselves: handed to it here, once, so that it never
# imports a doomloop module (``import doomloop`` imports this one first).
_bind_errors(config_error=ConfigError, snapshot_error=SnapshotError)
