"""OpenClaw's ``tools.loopDetection`` config: finding the block for an agent (agent ids,
per-agent merging), strict and lenient parsing into :class:`~doomloop.LoopDetectionConfig`
field values, and the block a config writes back."""

from __future__ import annotations

import math
import re
from typing import Any, Collection, Dict, List, Mapping, Optional, Tuple

from .. import _log, _validate
from .._core import settings_of
from ..errors import ConfigError

__all__ = [
    "block_values",
    "config_values",
    "normalize_agent_id",
    "resolve_openclaw_block",
    "to_block",
    "warn_if_detection_off",
]

# The engine's settings of LoopDetectionConfig: (default, largest accepted) by field.
_SETTINGS = {name: (default, maximum) for name, default, _, maximum in settings_of("LoopDetectionConfig")}
# OpenClaw key -> snake_case field; the number fields.
_NUMBERS: Dict[str, str] = {
    "historySize": "history_size",
    "warningThreshold": "warning_threshold",
    "criticalThreshold": "critical_threshold",
    "unknownToolThreshold": "unknown_tool_threshold",
    "globalCircuitBreakerThreshold": "global_circuit_breaker_threshold",
}
_DETECTORS: Dict[str, str] = {
    "genericRepeat": "generic_repeat",
    "knownPollNoProgress": "known_poll_no_progress",
    "pingPong": "ping_pong",
}
_GUARD_KEYS = {"windowSize": "post_compaction_window_size"}
# doomloop's own rules and hashing, which OpenClaw does not have: off for every OpenClaw
# config, so it behaves as OpenClaw does.
_DOOMLOOP_ONLY = ("hash_plain_results", "cycle", "argument_churn")
_BLOCK_KEYS = {"enabled", "detectors", "postCompactionGuard", *_NUMBERS}
# Pairs that must be strictly increasing where a block gives both.
_ORDERED = (
    ("warningThreshold", "criticalThreshold"),
    ("criticalThreshold", "globalCircuitBreakerThreshold"),
)
# OpenClaw key -> the engine's cap of its field.
_CAPS: Dict[str, int] = {key: _SETTINGS[name][1] for key, name in {**_NUMBERS, **_GUARD_KEYS}.items()}


def normalize_agent_id(agent_id: Optional[str]) -> str:
    """OpenClaw's agent-id normalisation: lowercase, runs of characters outside
    ``[a-z0-9_-]`` become ``-``, leading/trailing ``-`` trimmed, empty (or None) is ``main``."""
    if agent_id is None:
        return "main"
    if not isinstance(agent_id, str):
        raise TypeError(f"agent_id must be a str or None, got {type(agent_id).__name__}")
    return re.sub(r"[^a-z0-9_-]+", "-", agent_id.lower()).strip("-") or "main"


def _is_whole_config(cfg: Mapping[str, Any]) -> bool:
    # An empty mapping is an OpenClaw config without any block (the same as an empty block).
    return not cfg or "tools" in cfg or "agents" in cfg


def _agent_blocks(cfg: Mapping[str, Any], strict: bool) -> List[Tuple[str, str, Any]]:
    """``(path, normalised id, loopDetection block)`` of every agent entry that has a block."""
    agents = cfg.get("agents")
    if agents is None:
        return []
    if not isinstance(agents, Mapping):
        _bad(strict, "agents", "must be an object", None)
        return []
    entries = agents.get("list")
    if entries is None:
        return []
    if not isinstance(entries, list):
        _bad(strict, "agents.list", "must be an array", None)
        return []
    found = []
    for i, entry in enumerate(entries):
        path = f"agents.list[{i}]"
        if not isinstance(entry, Mapping):
            _bad(strict, path, "must be an object", None)
            continue
        tools = entry.get("tools")
        if tools is None:
            continue
        if not isinstance(tools, Mapping):
            _bad(strict, f"{path}.tools", "must be an object", None)
            continue
        if "loopDetection" not in tools:
            continue
        agent_id = entry.get("id")
        if not isinstance(agent_id, str):
            _bad(strict, f"{path}.id", "must be a string", None)
            continue
        found.append((f"{path}.tools.loopDetection", normalize_agent_id(agent_id), tools["loopDetection"]))
    return found


def _bad(strict: bool, path: str, problem: str, fallback: Any) -> Any:
    if strict:
        raise ConfigError(path, problem)
    _log.warning("loop-detection config: %s %s; ignored", path, problem)
    return fallback


def _global_block(cfg: Mapping[str, Any], strict: bool) -> Tuple[str, Any]:
    tools = cfg.get("tools")
    if tools is None:
        return "tools.loopDetection", None
    if not isinstance(tools, Mapping):
        return "tools.loopDetection", _bad(strict, "tools", "must be an object", None)
    return "tools.loopDetection", tools.get("loopDetection")


def _select(cfg: Mapping[str, Any], agent_id: Optional[str], strict: bool) -> List[Tuple[str, Any]]:
    """The global block and the requested agent's block (each ``(path, block)``, absent ones
    left out), validated when ``strict``."""
    if not isinstance(cfg, Mapping):
        raise TypeError(f"cfg must be a mapping (an OpenClaw config or its loopDetection block), got {type(cfg).__name__}")
    if not _is_whole_config(cfg):
        blocks = [("tools.loopDetection", cfg)]
    else:
        wanted = normalize_agent_id(agent_id)
        blocks = [_global_block(cfg, strict)]
        agent_blocks = _agent_blocks(cfg, strict)
        if strict:
            for path, _, block in agent_blocks:
                _check_block(path, block)
        blocks += [(path, block) for path, agent, block in agent_blocks if agent == wanted][:1]
    selected = []
    for path, block in blocks:
        if block is None:
            continue
        if not isinstance(block, Mapping):
            _bad(strict, path, "must be an object", None)
            continue
        if strict:
            _check_block(path, block)
        selected.append((path, block))
    return selected


def resolve_openclaw_block(cfg: Mapping[str, Any], agent_id: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The ``loopDetection`` block OpenClaw resolves for ``agent_id`` (``None``: no block).

    ``cfg`` is a whole OpenClaw config (``tools.loopDetection`` + ``agents.list``) or just a
    ``loopDetection`` block. When both the global and the agent's block exist the result is
    ``{**global, **agent}`` with ``detectors`` and ``postCompactionGuard`` merged one level
    deeper (both keys then always present); a single block is returned as is. Lenient: shapes
    that are not objects are ignored with a logged warning.
    """
    blocks = _select(cfg, agent_id, strict=False)
    if not blocks:
        return None
    if len(blocks) == 1:
        return dict(blocks[0][1])
    (_, glob), (_, agent) = blocks
    merged = {**glob, **agent}
    for key in ("detectors", "postCompactionGuard"):
        inner: Dict[str, Any] = {}
        for side in (glob, agent):
            value = side.get(key)
            if isinstance(value, Mapping):
                inner.update(value)
        merged[key] = inner
    return merged


def _count(value: Any) -> Optional[int]:
    """The whole number a JSON number stands for (JSON has one number type: 5.0 is 5), read
    with int's and float's own methods (a subclass's could lie); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float) and math.isfinite(value) and float.is_integer(value):
        return int(float.__float__(value))
    return None


def _check_block(path: str, block: Any) -> None:
    """Strict validation of one ``loopDetection`` block; raises :class:`ConfigError`."""
    if not isinstance(block, Mapping):
        raise ConfigError(path, "must be an object")
    for key in block:
        if key not in _BLOCK_KEYS:
            raise ConfigError(f"{path}.{key}", "unknown key")
    if "enabled" in block and not isinstance(block["enabled"], bool):
        raise ConfigError(f"{path}.enabled", "must be true or false")
    for key in _NUMBERS:
        if key in block:
            _check_number(f"{path}.{key}", key, block[key])
    for first, second in _ORDERED:
        low, high = _count(block.get(first)), _count(block.get(second))
        if low is not None and high is not None and not low < high:
            raise ConfigError(
                f"{path}.{second}",
                f"must be greater than {first} ({_validate.shown(block[first])}), got {_validate.shown(block[second])}",
            )
    detectors = block.get("detectors")
    if detectors is not None:
        if not isinstance(detectors, Mapping):
            raise ConfigError(f"{path}.detectors", "must be an object")
        for key, value in detectors.items():
            if key not in _DETECTORS:
                raise ConfigError(f"{path}.detectors.{key}", "unknown key")
            if not isinstance(value, bool):
                raise ConfigError(f"{path}.detectors.{key}", "must be true or false")
    guard = block.get("postCompactionGuard")
    if guard is not None:
        if not isinstance(guard, Mapping):
            raise ConfigError(f"{path}.postCompactionGuard", "must be an object")
        for key, value in guard.items():
            if key not in _GUARD_KEYS:
                raise ConfigError(f"{path}.postCompactionGuard.{key}", "unknown key")
            _check_number(f"{path}.postCompactionGuard.{key}", key, value)


def _check_number(path: str, key: str, value: Any) -> None:
    count = _count(value)
    if count is None or count < 1:
        raise ConfigError(path, f"must be a positive integer, got {_validate.shown(value)}")
    cap = _CAPS.get(key)
    if cap is not None and count > cap:
        raise ConfigError(path, f"must be at most {cap}, got {_validate.shown(value)}")


def _lenient_number(path: str, key: str, value: Any, default: int) -> int:
    if value is None:
        return default
    count = _count(value)
    if count is None or count < 1:
        _log.warning(
            "loop-detection config: %s must be a positive integer, got %s; using %d", path, _validate.shown(value), default
        )
        return default
    cap = _CAPS.get(key)
    if cap is not None and count > cap:
        _log.warning("loop-detection config: %s is capped at %d (got %s)", path, cap, _validate.shown(value))
        return cap
    return count


def _lenient_bool(path: str, value: Any, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        _log.warning("loop-detection config: %s must be true or false, got %r; using %s", path, value, default)
        return default
    return value


def config_values(cfg: Mapping[str, Any], agent_id: Optional[str], strict: bool) -> Dict[str, Any]:
    """The :class:`~doomloop.LoopDetectionConfig` field values a whole OpenClaw config (or just
    its ``loopDetection`` block) gives ``agent_id``; see ``LoopDetectionConfig.from_openclaw``."""
    _validate.boolean("LoopDetectionConfig.from_openclaw", "strict", strict)
    blocks = _select(cfg, agent_id, strict)
    block = resolve_openclaw_block(cfg, agent_id) if blocks else None
    return block_values(block)


def block_values(block: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The :class:`~doomloop.LoopDetectionConfig` field values of one resolved ``loopDetection``
    block, read leniently (``None``: no block, OpenClaw's defaults with ``enabled`` unset).
    doomloop's own switches are off."""
    block = block or {}
    path = "tools.loopDetection"
    _warn_unknown(path, block, _BLOCK_KEYS)
    enabled = block.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        # OpenClaw detects only on `enabled === true` and disables the guard only on
        # `=== false`: anything else means unset.
        _log.warning("loop-detection config: %s.enabled must be true or false, got %r; treated as unset", path, enabled)
        enabled = None
    values: Dict[str, Any] = {"enabled": enabled}
    for key, name in _NUMBERS.items():
        values[name] = _lenient_number(f"{path}.{key}", key, block.get(key), _SETTINGS[name][0])
    detectors = block.get("detectors")
    detectors = detectors if isinstance(detectors, Mapping) else {}
    _warn_unknown(f"{path}.detectors", detectors, _DETECTORS)
    for key, name in _DETECTORS.items():
        values[name] = _lenient_bool(f"{path}.detectors.{key}", detectors.get(key), _SETTINGS[name][0])
    guard = block.get("postCompactionGuard")
    guard = guard if isinstance(guard, Mapping) else {}
    _warn_unknown(f"{path}.postCompactionGuard", guard, _GUARD_KEYS)
    for key, name in _GUARD_KEYS.items():
        values[name] = _lenient_number(f"{path}.postCompactionGuard.{key}", key, guard.get(key), _SETTINGS[name][0])
    values.update(dict.fromkeys(_DOOMLOOP_ONLY, False))
    return values


def _warn_unknown(path: str, mapping: Mapping[str, Any], known: Collection[str]) -> None:
    for key in mapping:
        if key not in known:
            _log.warning("loop-detection config: %s.%s is not a known key; ignored", path, key)


def warn_if_detection_off(enabled: Optional[bool]) -> None:
    """Log that a config read from OpenClaw detects nothing when it leaves ``enabled`` unset:
    OpenClaw's default, and otherwise a silent trap (calls are recorded, no loop is ever found)."""
    if enabled is None:
        _log.warning(
            "loop-detection config: tools.loopDetection.enabled is not true, so no loop is detected"
            ' (OpenClaw\'s default); set "enabled": true in the block to turn detection on'
        )


def to_block(values: Mapping[str, Any]) -> Dict[str, Any]:
    """The OpenClaw ``loopDetection`` block for these config field values (``enabled`` left
    out when unset; doomloop's own switches, which have no OpenClaw keys, too)."""
    enabled = values["enabled"]
    block: Dict[str, Any] = {} if enabled is None else {"enabled": enabled}
    for key, name in _NUMBERS.items():
        block[key] = values[name]
    block["detectors"] = {key: values[name] for key, name in _DETECTORS.items()}
    block["postCompactionGuard"] = {key: values[name] for key, name in _GUARD_KEYS.items()}
    return block
