"""doomloop: catch LLM agents stuck in loops, with a Rust engine on the hot path."""

from typing import TYPE_CHECKING

from ._core import __version__, fingerprint
from .config import DoomLoopConfig
from .detector import DoomLoopDetector, DoomLoopEvent
from .enums import DoomLoopType, RecoveryAction

if TYPE_CHECKING:
    from .chant import ChantDetector, ChantEvent, ChantingDetected
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

# Loaded on first use (PEP 562): these modules pull in dataclasses, logging and re, which
# would several times over the cost of `import doomloop` for a process that only needs the
# session detector.
_LAZY = {
    "ChantDetector": "chant",
    "ChantEvent": "chant",
    "ChantingDetected": "chant",
    "guard_chat_stream": "stream",
    "guard_chat_stream_async": "stream",
    "guard_stream": "stream",
    "guard_stream_async": "stream",
    "ConfigError": "tool_config",
    "LoopDetectionConfig": "tool_config",
    "normalize_agent_id": "tool_config",
    "resolve_openclaw_block": "tool_config",
    "CompactionLoopPersisted": "tool_loop",
    "GuardVerdict": "tool_loop",
    "LoopVerdict": "tool_loop",
    "PostCompactionGuard": "tool_loop",
    "ToolCallDecision": "tool_loop",
    "ToolLoopDetector": "tool_loop",
    "ToolOutcome": "tool_loop",
    "tool_result_hash": "tool_loop",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'doomloop' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
