"""doomloop: catch LLM agents stuck in loops, with a Rust engine on the hot path."""

from ._core import __version__ as __version__, fingerprint as fingerprint
from .errors import ConfigError as ConfigError, DoomLoopError as DoomLoopError, SnapshotError as SnapshotError
from .session import DoomLoopDetector as DoomLoopDetector, DoomLoopEvent as DoomLoopEvent
from .session_config import DoomLoopConfig as DoomLoopConfig

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from .chant import ChantDetector as ChantDetector, ChantEvent as ChantEvent, ChantingDetected as ChantingDetected
    from .chant_config import ChantConfig as ChantConfig
    from .enums import DoomLoopType as DoomLoopType, RecoveryAction as RecoveryAction
    from .events import LoopEvent as LoopEvent
    from .findings import Finding as Finding
    from .integrations.openclaw import normalize_agent_id as normalize_agent_id, resolve_openclaw_block as resolve_openclaw_block
    from .monitor import Monitor as Monitor, ToolDecision as ToolDecision
    from .profile import Profile as Profile
    from .stream import (
        guard_chat_stream as guard_chat_stream,
        guard_chat_stream_async as guard_chat_stream_async,
        guard_stream as guard_stream,
        guard_stream_async as guard_stream_async,
    )
    from .tool_loop import (
        CompactionLoopPersisted as CompactionLoopPersisted,
        GuardVerdict as GuardVerdict,
        LoopVerdict as LoopVerdict,
        PostCompactionGuard as PostCompactionGuard,
        ToolCallDecision as ToolCallDecision,
        ToolLoopDetector as ToolLoopDetector,
        ToolOutcome as ToolOutcome,
        tool_result_hash as tool_result_hash,
    )
    from .tool_loop_config import LoopDetectionConfig as LoopDetectionConfig
    from .tool_policy import ToolPolicy as ToolPolicy

# Every public name and the module that defines it: `__all__` and the lazy loader both come
# from this one table (a test checks the imports above agree with it; they re-export each name
# `as` itself because a computed `__all__` is invisible to type checkers).
_EXPORTS = {
    "__version__": "_core",
    "fingerprint": "_core",
    "DoomLoopType": "enums",
    "RecoveryAction": "enums",
    "DoomLoopDetector": "session",
    "DoomLoopEvent": "session",
    "DoomLoopConfig": "session_config",
    "ChantDetector": "chant",
    "ChantEvent": "chant",
    "ChantingDetected": "chant",
    "ChantConfig": "chant_config",
    "DoomLoopError": "errors",
    "ConfigError": "errors",
    "SnapshotError": "errors",
    "LoopEvent": "events",
    "Finding": "findings",
    "Monitor": "monitor",
    "ToolDecision": "monitor",
    "Profile": "profile",
    "normalize_agent_id": "integrations.openclaw",
    "resolve_openclaw_block": "integrations.openclaw",
    "guard_chat_stream": "stream",
    "guard_chat_stream_async": "stream",
    "guard_stream": "stream",
    "guard_stream_async": "stream",
    "CompactionLoopPersisted": "tool_loop",
    "GuardVerdict": "tool_loop",
    "LoopVerdict": "tool_loop",
    "PostCompactionGuard": "tool_loop",
    "ToolCallDecision": "tool_loop",
    "ToolLoopDetector": "tool_loop",
    "ToolOutcome": "tool_loop",
    "tool_result_hash": "tool_loop",
    "LoopDetectionConfig": "tool_loop_config",
    "ToolPolicy": "tool_policy",
}

__all__ = sorted(_EXPORTS)

# Imported above: the session detector needs nothing else, and `errors` hands the engine the
# exceptions it raises (before anything can reach the engine). The rest load on first use (PEP
# 562): those modules pull in dataclasses, logging, re and enum, which would cost several
# times `import doomloop` for a process that only needs the session detector.
_EAGER = frozenset({"_core", "errors", "session", "session_config"})


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None or module in _EAGER:
        raise AttributeError(f"module 'doomloop' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
