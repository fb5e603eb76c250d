"""Recognising guard events: which ones mean "a doom-loop guard fired".

Every guard event handed to :meth:`LoopEvaluator.run` counts as one guard intervention. An
event *fires* (sets ``doom_loop_fired``) by the rules below. Events are duck-typed: a dict
(any mapping) is read by key, any other object by attribute, so the same shape works both
ways. Strings in flags are read as words ("false", "0", "no" and "" are false, any case);
marker strings are compared stripped and case-insensitively, and an enum counts as its value.
The rules are tried in order; the first that decides gives the answer, and an event no rule
fires for does not fire.

1. A bare string or enum is itself a marker (see rule 7), e.g. ``DoomLoopType.NO_PROGRESS``.
2. Tool-call decision (``ToolCallDecision``: ``verdict``, ``blocked``, ``emit_warning``):
   ``blocked`` true fires; otherwise the event is judged by its ``verdict`` object.
3. Explicit verdict flags decide alone; the first one present (and not ``None``) of
   ``is_loop`` (``DoomLoopResult``), ``should_abort`` (post-compaction guard verdict),
   ``doom_loop`` and ``doom_loop_fired`` gives the answer, so ``{"doom_loop": "false"}``
   does not fire.
4. Tool-loop verdict (``LoopVerdict``): ``level`` "critical" fires. Any other level, such as
   "warning", fires nothing by itself: a warning is an intervention only.
5. ``loop_type`` present (not ``None``, not a blank string) fires: ``DoomLoopEvent`` and
   ``ChantEvent`` (whose ``loop_type`` is ``DoomLoopType.REPEATED_OUTPUT``), or their strings.
6. ``detector`` "compaction_loop_persisted" fires: the ``CompactionLoopPersisted`` exception
   the runner raises when the post-compaction guard aborts.
7. A ``type`` or ``event`` field equal to one of :data:`DOOM_LOOP_MARKERS` fires.

An event may also carry an ``iteration`` (an int >= 1, the loop iteration it happened in);
the evaluator records it so :func:`doomloop.eval.plot_loop_health` can place the event.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

from ._duck import flag, is_set, read_field, word

__all__ = ["DOOM_LOOP_MARKERS", "event_iteration", "is_doom_loop_event"]

DOOM_LOOP_MARKERS = frozenset(
    {
        "doom_loop",
        "doom-loop",
        "doomloop",
        "repetition",
        "loop_detected",
        # The DoomLoopType values.
        "repeated_action",
        "repeated_failure",
        "no_progress",
        "circular_plan",
        "resource_exhaustion",
        "repeated_output",
    }
)
"""The ``type`` / ``event`` values that mean a doom loop was detected."""

_EXPLICIT_FLAGS = ("is_loop", "should_abort", "doom_loop", "doom_loop_fired")
_COMPACTION_DETECTOR = "compaction_loop_persisted"
# Decisions wrap verdicts one level deep; the bound keeps an object whose verdict is itself
# (or a longer chain) from looping forever.
_MAX_VERDICT_NESTING = 8


def is_doom_loop_event(event: object) -> bool:
    """Whether one guard event means a doom-loop guard fired (the rules in this module's doc)."""
    for _ in range(_MAX_VERDICT_NESTING):
        if isinstance(event, (str, Enum)):
            return word(event) in DOOM_LOOP_MARKERS
        blocked = read_field(event, "blocked")
        if is_set(blocked) and flag(blocked):
            return True
        verdict = read_field(event, "verdict")
        if not is_set(verdict) or isinstance(verdict, (str, bool, int, float)):
            break
        event = verdict
    return _judge(event)


def _judge(event: object) -> bool:
    for name in _EXPLICIT_FLAGS:
        value = read_field(event, name)
        if is_set(value):
            return flag(value)
    if word(read_field(event, "level")) == "critical":
        return True
    loop_type = read_field(event, "loop_type")
    if is_set(loop_type) and word(loop_type) != "":
        return True
    if word(read_field(event, "detector")) == _COMPACTION_DETECTOR:
        return True
    return any(word(read_field(event, name)) in DOOM_LOOP_MARKERS for name in ("type", "event"))


def event_iteration(event: object) -> Optional[int]:
    """The event's ``iteration`` when it is an int >= 1, else ``None`` (position unknown)."""
    if isinstance(event, (str, Enum)):
        return None
    value = read_field(event, "iteration")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None
