"""doomloop: catch LLM agents stuck in loops, with a Rust engine on the hot path."""

from ._core import __version__, fingerprint
from .config import DoomLoopConfig
from .detector import DoomLoopDetector, DoomLoopEvent
from .enums import DoomLoopType, RecoveryAction
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
    "CompactionLoopPersisted",
    "ConfigError",
    "GuardVerdict",
    "LoopDetectionConfig",
    "LoopVerdict",
    "PostCompactionGuard",
    "ToolCallDecision",
    "ToolLoopDetector",
    "ToolOutcome",
    "normalize_agent_id",
    "resolve_openclaw_block",
    "tool_result_hash",
    "DoomLoopConfig",
    "DoomLoopDetector",
    "DoomLoopEvent",
    "DoomLoopType",
    "RecoveryAction",
    "__version__",
    "fingerprint",
]
