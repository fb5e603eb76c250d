"""``Finding``: what a :class:`~doomloop.Monitor` found, in one vocabulary for every detector,
and :data:`CODES`, every code a finding can carry with its meaning.

A finding's ``code`` is stable: gateways, dashboards and CI gates may match on it. The table
in docs/monitor.md is generated from :data:`CODES` (a test keeps the two equal).
"""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Dict, Optional

__all__ = ["CODES", "CRITICAL", "WARNING", "Finding", "codes_table", "shorten"]

WARNING = "warning"
"""A loop reported: the agent is told what it repeats; nothing is stopped."""
CRITICAL = "critical"
"""A loop acted on: the call is vetoed, the stream is cut, or the run should stop."""

CODES: Dict[str, str] = {
    "tool_loop.generic_repeat": "The same tool call (tool and arguments) repeated; critical once its results stay unchanged.",
    "tool_loop.known_poll_no_progress": "A polling tool (process poll/log, command status) keeps returning the same result.",
    "tool_loop.ping_pong": "Two tool calls alternate (A B A B ...) with unchanged results.",
    "tool_loop.unknown_tool_repeat": "The agent keeps calling a tool that does not exist.",
    "tool_loop.global_circuit_breaker": "One tool call has repeated with no progress past the global circuit breaker.",
    "tool_loop.cycle": "A cycle of 3 to 8 tool calls repeats with unchanged results.",
    "tool_loop.argument_churn": "One tool cycles through a few argument sets whose outcomes never change.",
    "guard.compaction_loop": "After a context compaction, the agent repeats the call that filled the context: stop the run.",
    "session.repeated_action": "The same action, or the same action in other spellings, repeated.",
    "session.repeated_failure": "Actions keep failing in a row (or one action is retried, failing the same way).",
    "session.no_progress": "Results stopped changing and no progress marker was recorded.",
    "session.circular_plan": "The actions go round a cycle, or the plan returns to a state it visited.",
    "session.resource_exhaustion": "The session ran past its time limit.",
    "session.repeated_output": "The agent gives the same answer turn after turn.",
    "chant": "An answer repeats itself while it is written (a window of text recurs with the same text between).",
}

_EVIDENCE_LIMIT = 120


def codes_table() -> str:
    """:data:`CODES` as the markdown table docs/monitor.md shows (``python -c "from
    doomloop.findings import codes_table; print(codes_table())"`` writes it)."""
    rows = [f"| `{code}` | {meaning} |" for code, meaning in CODES.items()]
    return "\n".join(["| code | meaning |", "|---|---|", *rows])


def shorten(text: str, limit: int = _EVIDENCE_LIMIT) -> str:
    """``text`` with whitespace runs folded to one space, cut at ``limit`` characters with ``…``."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


class Finding:
    """One loop the monitor found at one step.

    Attributes:
        code: a key of :data:`CODES` (e.g. ``"tool_loop.generic_repeat"``).
        level: :data:`WARNING` or :data:`CRITICAL`.
        detector: the detector that found it: ``"tool_loop"``, ``"session"``, ``"chant"``
            or ``"guard"`` (the post-compaction guard).
        action: the recommended action: a recovery rung (``"retry_different"``,
            ``"escalate_model"``, ``"request_help"``, ``"abort"``), ``"block"`` for a vetoed
            call or ``"stop_stream"`` for an answer repeating itself.
        message: the detector's own description.
        tool: the tool of the call it concerns (None for a finding on an answer).
        evidence: what repeats: the call's arguments or the repeated text, shortened to 120
            characters (None when there is nothing to show).
        count: the rule's count (repeats seen).
        first_step: the monitor step at which this loop (same code, same evidence) was
            first reported in its current stretch.
        last_step: the step it was reported at (this one).

    Immutable; compares, hashes and pickles by value.
    """

    __slots__ = ("code", "level", "detector", "action", "message", "tool", "evidence", "count", "first_step", "last_step")

    code: str
    level: str
    detector: str
    action: str
    message: str
    tool: Optional[str]
    evidence: Optional[str]
    count: int
    first_step: int
    last_step: int

    def __init__(
        self,
        code: str,
        level: str,
        detector: str,
        action: str,
        message: str,
        *,
        tool: Optional[str] = None,
        evidence: Optional[str] = None,
        count: int = 0,
        first_step: int = 0,
        last_step: int = 0,
    ) -> None:
        for name, value in zip(
            self.__slots__,
            (code, level, detector, action, message, tool, evidence, count, first_step, last_step),
            strict=True,
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Finding is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Finding is immutable")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def to_dict(self) -> Dict[str, Any]:
        """Every attribute by name (JSON-ready)."""
        return dict(zip(self.__slots__, self._values(), strict=True))

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> Finding:
        """The finding :meth:`to_dict` gave."""
        code, level, detector, action, message = (data[name] for name in cls.__slots__[:5])
        return cls(code, level, detector, action, message, **{name: data[name] for name in cls.__slots__[5:]})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Finding):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:
        return (Finding.from_dict, (self.to_dict(),))

    def __repr__(self) -> str:
        where = f", tool={self.tool!r}" if self.tool is not None else ""
        return f"Finding({self.code}, {self.level}, count={self.count}{where}, steps {self.first_step}-{self.last_step})"
