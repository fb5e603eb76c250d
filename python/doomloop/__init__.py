"""doomloop: catch LLM agents stuck in loops, with a Rust engine on the hot path."""

from ._core import __version__, fingerprint
from .config import DoomLoopConfig
from .detector import DoomLoopDetector, DoomLoopEvent
from .enums import DoomLoopType, RecoveryAction

__all__ = [
    "DoomLoopConfig",
    "DoomLoopDetector",
    "DoomLoopEvent",
    "DoomLoopType",
    "RecoveryAction",
    "__version__",
    "fingerprint",
]
