"""doomloop: catch LLM agents stuck in loops, with a Rust engine on the hot path."""

from ._core import __version__, fingerprint
from .chant import ChantDetector, ChantEvent, ChantingDetected
from .config import DoomLoopConfig
from .detector import DoomLoopDetector, DoomLoopEvent
from .enums import DoomLoopType, RecoveryAction
from .stream import guard_chat_stream, guard_chat_stream_async, guard_stream, guard_stream_async

__all__ = [
    "ChantDetector",
    "ChantEvent",
    "ChantingDetected",
    "DoomLoopConfig",
    "DoomLoopDetector",
    "DoomLoopEvent",
    "DoomLoopType",
    "RecoveryAction",
    "__version__",
    "fingerprint",
    "guard_chat_stream",
    "guard_chat_stream_async",
    "guard_stream",
    "guard_stream_async",
]
