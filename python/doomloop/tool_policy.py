"""Per-tool policies: a profile's ``tool_policies`` maps a tool's name, or a glob of names, to
thresholds of its own or to ``"exempt"`` (docs/monitor.md#per-tool-policies).

A polling or waiting tool gets room (higher thresholds), a tool that must never repeat gets
none (lower ones), and a tool nobody needs watched is exempt: neither detector sees its calls.
The first pattern that matches a tool's name (``fnmatch.fnmatchcase``: ``*``, ``?``,
``[seq]``, case-sensitive) is its policy.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ._core import MAX_THRESHOLD, ToolPolicies
from .session_config import DoomLoopConfig
from .tool_loop_config import LoopDetectionConfig

__all__ = ["EXEMPT", "ToolPolicy"]

EXEMPT = "exempt"
"""A policy's value for a tool neither detector watches."""

SESSION_FIELDS = ("max_identical_actions", "max_similar_actions", "max_consecutive_failures", "max_no_progress_steps")
"""The session detector's thresholds a policy may set: the checks made after a call of its
tool use them."""
TOOL_FIELDS = ("warning_threshold", "critical_threshold", "global_circuit_breaker_threshold")
"""The tool-loop detector's thresholds a policy may set: a call of its tool is judged by them."""

_MAX_POLICIES = 256
_MAX_PATTERN = 1024


class ToolPolicy:
    """What a profile does with one tool's calls: ``exempt``, or thresholds in place of the
    profile's (each field None keeps the profile's value).

    The tool-loop thresholds must stay ordered once the profile's fill the gaps:
    ``warning_threshold <= critical_threshold < global_circuit_breaker_threshold`` (a warning
    and a block at the same count is a tool that must never repeat). Immutable; compares and
    hashes by value.
    """

    __slots__ = ("exempt", *SESSION_FIELDS, *TOOL_FIELDS)

    exempt: bool
    max_identical_actions: Optional[int]
    max_similar_actions: Optional[int]
    max_consecutive_failures: Optional[int]
    max_no_progress_steps: Optional[int]
    warning_threshold: Optional[int]
    critical_threshold: Optional[int]
    global_circuit_breaker_threshold: Optional[int]

    def __init__(self, *, exempt: bool = False, **thresholds: Optional[int]) -> None:
        if not isinstance(exempt, bool):
            raise TypeError(f"ToolPolicy.exempt must be a bool, got {type(exempt).__name__}")
        unknown = sorted(set(thresholds) - set(SESSION_FIELDS) - set(TOOL_FIELDS))
        if unknown:
            expected = ", ".join((EXEMPT, *SESSION_FIELDS, *TOOL_FIELDS))
            raise TypeError(f"ToolPolicy has no setting {unknown[0]!r} (expected {expected})")
        given = {name: value for name, value in thresholds.items() if value is not None}
        if exempt and given:
            raise ValueError(f"an exempt ToolPolicy sets no thresholds, got {sorted(given)[0]}")
        for name, value in given.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"ToolPolicy.{name} must be an int or None, got {type(value).__name__}")
            if not 1 <= value <= MAX_THRESHOLD:
                raise ValueError(f"ToolPolicy.{name} must be in 1..{MAX_THRESHOLD}, got {value}")
        object.__setattr__(self, "exempt", exempt)
        for name in (*SESSION_FIELDS, *TOOL_FIELDS):
            object.__setattr__(self, name, given.get(name))

    @classmethod
    def of(cls, value: Union[ToolPolicy, str, Mapping[str, Any]]) -> ToolPolicy:
        """A policy from what a profile file or ``Profile(tool_policies=...)`` gives: a
        ``ToolPolicy``, ``"exempt"``, or a mapping of thresholds."""
        if isinstance(value, ToolPolicy):
            return value
        if value == EXEMPT:
            return cls(exempt=True)
        if isinstance(value, Mapping):
            return cls(**{str(key): item for key, item in value.items()})
        raise TypeError(f'a tool policy is "exempt" or a table of thresholds, got {value!r}')

    def to_value(self) -> Union[str, Dict[str, int]]:
        """What :meth:`of` reads back equal: ``"exempt"`` or the thresholds set."""
        if self.exempt:
            return EXEMPT
        return {name: value for name in (*SESSION_FIELDS, *TOOL_FIELDS) if (value := getattr(self, name)) is not None}

    def limits(
        self, session: DoomLoopConfig, tool_loop: LoopDetectionConfig
    ) -> Optional[Tuple[Tuple[int, int, int, int], Tuple[int, int, int]]]:
        """The thresholds in force under this policy with ``session`` and ``tool_loop`` filling
        the gaps (None for an exempt tool); ``ValueError`` when they are out of order."""
        if self.exempt:
            return None
        own = {name: getattr(self, name) for name in (*SESSION_FIELDS, *TOOL_FIELDS)}
        values = {name: getattr(session, name) if own[name] is None else own[name] for name in SESSION_FIELDS}
        values.update({name: getattr(tool_loop, name) if own[name] is None else own[name] for name in TOOL_FIELDS})
        warning, critical, breaker = (values[name] for name in TOOL_FIELDS)
        if not warning <= critical < breaker:
            raise ValueError(
                "a tool policy's thresholds must be ordered warning_threshold <= critical_threshold < "
                f"global_circuit_breaker_threshold, got {warning}, {critical}, {breaker} "
                "(the profile's where the policy sets none)"
            )
        # A streak is counted over the history: a longer one is never seen, so never blocked.
        if critical > tool_loop.history_size:
            raise ValueError(
                f"a tool policy's critical_threshold ({critical}) must be at most the profile's "
                f"history_size ({tool_loop.history_size}), or its calls are never blocked"
            )
        identical, similar, failures, no_progress = (values[name] for name in SESSION_FIELDS)
        return (identical, similar, failures, no_progress), (warning, critical, breaker)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ToolPolicy is immutable")

    def _key(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, ToolPolicy) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_rebuilt, (self.to_value(),))

    def __repr__(self) -> str:
        if self.exempt:
            return "ToolPolicy(exempt=True)"
        return f"ToolPolicy({', '.join(f'{name}={value!r}' for name, value in self.to_value().items())})"  # type: ignore[union-attr]


def _rebuilt(value: Union[str, Dict[str, int]]) -> ToolPolicy:
    # Module-level, so pickle can name it.
    return ToolPolicy.of(value)


def policies(value: Any) -> Tuple[Tuple[str, ToolPolicy], ...]:
    """``Profile.tool_policies`` from a mapping of patterns to policies (in order), or the
    pairs themselves; a clear ``TypeError`` or ``ValueError`` for anything else."""
    items = value.items() if isinstance(value, Mapping) else value
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise TypeError(f"Profile.tool_policies must map tool names or globs to policies, got {type(value).__name__}")
    found: Dict[str, ToolPolicy] = {}
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(f"Profile.tool_policies must map tool names or globs to policies, got {item!r}")
        pattern, policy = item
        if not isinstance(pattern, str) or not pattern or len(pattern) > _MAX_PATTERN:
            raise TypeError(
                f"a tool policy's pattern must be a non-empty str of at most {_MAX_PATTERN} characters, got {pattern!r}"
            )
        try:
            pattern.encode("utf-8")
        except UnicodeEncodeError:
            raise TypeError(f"a tool policy's pattern must encode as UTF-8, got {pattern!r}") from None
        try:
            found.setdefault(pattern, ToolPolicy.of(policy))
        except (TypeError, ValueError) as error:
            raise type(error)(f"Profile.tool_policies[{pattern!r}]: {error}") from None
        if len(found) > _MAX_POLICIES:
            raise ValueError(f"Profile.tool_policies holds at most {_MAX_POLICIES} patterns")
    return tuple(found.items())


@functools.lru_cache(maxsize=32)
def table(
    rules: Tuple[Tuple[str, ToolPolicy], ...], session: DoomLoopConfig, tool_loop: LoopDetectionConfig
) -> Optional[ToolPolicies]:
    """The engine's table of ``rules`` under a profile's configs, shared by the monitors of one
    profile (None: no rules). ``ValueError`` names a policy whose thresholds are out of order."""
    if not rules:
        return None
    limits = []
    for pattern, policy in rules:
        try:
            limits.append((pattern, policy.limits(session, tool_loop)))
        except ValueError as error:
            raise ValueError(f"Profile.tool_policies[{pattern!r}]: {error}") from None
    return ToolPolicies(limits)
