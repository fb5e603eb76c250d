"""The loop result :class:`LoopEvaluator` scores, for callers without an agent framework.

Any object (or dict) with ``score_history``, ``threshold``, ``total_duration_seconds``,
``mode`` and ``success`` works as well, such as another framework's loop result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .._validate import positive_int

__all__ = ["EvaluationLoopResult", "IterationResult"]


@dataclass
class IterationResult:
    """One iteration of an evaluation loop: its judge score and what it produced."""

    iteration: int
    """1-based position in the loop."""
    score: float
    """Judge score (upstream's loops score 1-10)."""
    output: str = ""
    reasoning: str = ""
    findings: List[str] = field(default_factory=list)
    timestamp: float = field(default_factory=time.time)
    """Seconds since the epoch when the iteration finished."""
    metadata: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The score is checked where it is scored (LoopEvaluator.run names its position).
        positive_int("IterationResult", "iteration", self.iteration)

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict of the fields, in declaration order."""
        return {
            "iteration": self.iteration,
            "score": self.score,
            "output": self.output,
            "reasoning": self.reasoning,
            "findings": list(self.findings),
            "timestamp": self.timestamp,
            "metadata": dict(self.metadata),
        }


@dataclass
class EvaluationLoopResult:
    """A finished evaluation loop: its iterations, threshold, mode, duration and verdict.

    ``success`` is the loop's own verdict; ``None`` (the default) means "not recorded", and
    review-mode evaluation then judges by the final score instead.
    """

    iterations: List[IterationResult] = field(default_factory=list)
    success: Optional[bool] = None
    total_duration_seconds: float = 0.0
    threshold: float = 8.0
    mode: str = "optimize"
    """"optimize" (the loop stops at the first score >= threshold) or "review" (it runs
    every iteration and judges the final score)."""
    metadata: Dict[str, Any] = field(default_factory=dict)

    @property
    def score_history(self) -> List[float]:
        """The iterations' scores, in order."""
        return [iteration.score for iteration in self.iterations]

    @property
    def num_iterations(self) -> int:
        """How many iterations ran."""
        return len(self.iterations)

    @property
    def final_score(self) -> Optional[float]:
        """The last iteration's score, or ``None`` when no iteration ran."""
        return self.iterations[-1].score if self.iterations else None

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict; it also works as input to :meth:`LoopEvaluator.run`."""
        return {
            "iterations": [iteration.to_dict() for iteration in self.iterations],
            "score_history": self.score_history,
            "success": self.success,
            "total_duration_seconds": self.total_duration_seconds,
            "threshold": self.threshold,
            "mode": self.mode,
            "metadata": dict(self.metadata),
        }
