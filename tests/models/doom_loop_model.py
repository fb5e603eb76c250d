"""A pure-Python model of the session detector's checks, straight from doom_loop.md.

It keeps every action in a plain list and re-scans it each time: obviously correct and slow,
the opposite of the engine, which keeps running counters over a bounded ring buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from doomloop import DoomLoopConfig


@dataclass
class ModelDetector:
    config: DoomLoopConfig
    actions: list[tuple[object, object, object, bool]] = field(default_factory=list)
    markers_at: list[int] = field(default_factory=list)  # actions recorded when each marker came
    plan_visits: list[tuple[object, int]] = field(default_factory=list)  # (state, markers so far)
    started_at: Optional[float] = None

    def record_action(self, kind: str, args: object, result: object, success: bool, duration: float) -> None:
        failed = not success or duration > self.config.max_time_per_action
        self.actions.append(((kind, repr(args)), kind, repr(result), failed))

    def mark_progress(self) -> None:
        self.markers_at.append(len(self.actions))

    def record_plan(self, state: object) -> None:
        self.plan_visits.append((repr(state), len(self.markers_at)))

    def _marker_since(self, boundary: int) -> bool:
        return any(at >= boundary for at in self.markers_at)

    def finding(self, now: float) -> Optional[str]:
        c, a, n = self.config, self.actions, len(self.actions)

        def last(k: int) -> list[tuple[object, object, object, bool]]:
            return a[n - k :] if n >= k else []

        if n >= 2:
            window = last(c.max_identical_actions)
            if window and len({x[0] for x in window}) == 1:
                return "identical"
            window = last(c.max_similar_actions)
            if window and len({x[1] for x in window}) == 1:
                return "similar"
            window = last(c.max_consecutive_failures)
            if window and all(x[3] for x in window):
                return "repeated_failure"
            k = c.max_no_progress_steps
            window = last(k)
            if window and len({x[2] for x in window}) == 1 and not self._marker_since(n - k):
                return "no_progress"
            if c.detect_cycles and (self._action_cycle() or self._plan_cycle()):
                return "circular_plan"
        if self.started_at is not None and now - self.started_at > c.max_total_time:
            return "resource_exhaustion"
        return None

    def _action_cycle(self) -> bool:
        a, n, r = self.actions, len(self.actions), self.config.min_cycle_repeats
        for p in range(2, self.config.max_cycle_period + 1):
            span = p * r
            if n < span or self._marker_since(n - span):
                continue
            repeats = all(a[i][0] == a[i - p][0] and a[i][2] == a[i - p][2] for i in range(n - span + p, n))
            if repeats and len({x[0] for x in a[n - p :]}) >= 2:
                return True
        return False

    def _plan_cycle(self) -> bool:
        if not self.plan_visits:
            return False
        state = self.plan_visits[-1][0]
        epoch = len(self.markers_at)
        visits = sum(1 for s, e in self.plan_visits if s == state and e == epoch)
        return visits >= self.config.min_cycle_repeats
