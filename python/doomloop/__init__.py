"""doomloop: catch LLM agents stuck in loops, with a Rust engine on the hot path."""

from ._core import __version__, fingerprint
from .chant import ChantDetector, ChantEvent, ChantingDetected
from .config import DoomLoopConfig
from .detector import DoomLoopDetector, DoomLoopEvent
from .enums import DoomLoopType, RecoveryAction
from .stream import guard_chat_stream, guard_chat_stream_async, guard_stream, guard_stream_async
from .tool_config import ConfigError, LoopDetectionConfig, normalize_agent_id, resolve_openclaw_block
from .tool_loop import (
    CompactionLoopPersisted,
    GuardVerdict,
    LoopVerdict,
    PostCompactionGuard,
    ToolCallDecision,
    ToolLoopDetector,
    ToolOutcome,
    tool_result_hash,
)

__all__ = [
    "ChantDetector",
    "ChantEvent",
    "ChantingDetected",
    "CompactionLoopPersisted",
    "ConfigError",
    "DoomLoopConfig",
    "DoomLoopDetector",
    "DoomLoopEvent",
    "DoomLoopType",
    "GuardVerdict",
    "LoopDetectionConfig",
    "LoopVerdict",
    "PostCompactionGuard",
    "RecoveryAction",
    "ToolCallDecision",
    "ToolLoopDetector",
    "ToolOutcome",
    "__version__",
    "fingerprint",
    "guard_chat_stream",
    "guard_chat_stream_async",
    "guard_stream",
    "guard_stream_async",
    "normalize_agent_id",
    "resolve_openclaw_block",
    "tool_result_hash",
]
