"""Recognising guard events: which ones mean "a doom-loop guard fired".

Every guard event handed to :meth:`LoopEvaluator.run` counts as one guard intervention. An
event *fires* (sets ``doom_loop_fired``) when any of the rules below holds for it. Events are
duck-typed: a dict (any mapping) is read by key, any other object by attribute, so the same
shape works both ways. Flags are read as words when they are strings ("false", "0", "no" and
"", in any case, are false; upstream read the string "false" as true); marker strings are
compared stripped and case-insensitively, and an enum counts as its value.

1. ``is_loop`` is true (upstream's ``DoomLoopResult``).
2. ``loop_type`` is present: not ``None``, ``False`` or a blank string (``DoomLoopEvent``; a chant
   event ``ChantEvent``, whose ``loop_type`` is ``DoomLoopType.REPEATED_OUTPUT``; or their
   strings).
3. ``doom_loop`` or ``doom_loop_fired`` is true (explicit flags).
4. ``type`` or ``event`` is one of :data:`DOOM_LOOP_MARKERS` (generic markers).
5. ``level`` is "critical" (a tool-loop ``LoopVerdict``). Any other level, such as
   "warning", fires nothing: a warning verdict is an intervention only.
6. ``should_abort`` is true (the post-compaction guard's verdict), or ``detector`` is
   "compaction_loop_persisted" and ``should_abort`` is absent or ``None`` (the
   ``CompactionLoopPersisted`` exception the runner raises); a verdict whose
   ``should_abort`` is false does not fire by its detector.
7. ``blocked`` is true, or the event's ``verdict`` object fires (a tool-call decision,
   ``ToolCallDecision``, is judged by its verdict unless it blocked the call).
8. The event is itself a string or enum in :data:`DOOM_LOOP_MARKERS`, such as
   ``DoomLoopType.NO_PROGRESS``.

A false flag vetoes nothing: ``{"is_loop": False, "type": "doom_loop"}`` fires by its type
(upstream let ``is_loop`` decide alone).

An event may also carry an ``iteration`` (an int >= 1, the loop iteration it happened in);
the evaluator records it so :func:`doomloop.eval.plot_loop_health` can place the event.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

from .._core import COMPACTION_DETECTOR
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

_FLAGS = ("is_loop", "doom_loop", "doom_loop_fired", "should_abort")
# Decisions wrap verdicts one level deep; the bound keeps an object whose verdict is itself
# (or a longer chain) from looping forever.
_MAX_VERDICT_NESTING = 8


def is_doom_loop_event(event: object) -> bool:
    """Whether one guard event means a doom-loop guard fired (the rules in this module's doc)."""
    for _ in range(_MAX_VERDICT_NESTING):
        if isinstance(event, (str, Enum)):
            return word(event) in DOOM_LOOP_MARKERS
        if _fires(event):
            return True
        blocked = read_field(event, "blocked")
        if is_set(blocked) and flag(blocked):
            return True
        verdict = read_field(event, "verdict")
        if not is_set(verdict) or isinstance(verdict, (str, bool, int, float)):
            return False
        event = verdict
    return False


def _fires(event: object) -> bool:
    """Rules 1-6 for one event (its fields only, not a wrapped verdict)."""
    for name in _FLAGS:
        value = read_field(event, name)
        if is_set(value) and flag(value):
            return True
    loop_type = read_field(event, "loop_type")
    if is_set(loop_type) and loop_type is not False and word(loop_type) != "":
        return True
    if any(word(read_field(event, name)) in DOOM_LOOP_MARKERS for name in ("type", "event")):
        return True
    if word(read_field(event, "level")) == "critical":
        return True
    return not is_set(read_field(event, "should_abort")) and word(read_field(event, "detector")) == COMPACTION_DETECTOR


def event_iteration(event: object) -> Optional[int]:
    """The event's ``iteration`` when it is an int >= 1, else ``None`` (position unknown)."""
    if isinstance(event, (str, Enum)):
        return None
    value = read_field(event, "iteration")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None
