"""``LoopHealthResult``: the verdict :class:`LoopEvaluator` returns, and its serialisations."""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Union

from . import _json

__all__ = ["LoopHealthResult"]


@dataclass
class LoopHealthResult:
    """How healthy a finished loop was: convergence, waste and doom-loop guards.

    ``metadata`` always has ``num_iterations``. Results made by :class:`LoopEvaluator` also
    carry what the picture needs: ``mode``, ``score_history``, ``converged_at`` (the 1-based
    iteration where the loop converged, or ``None``), ``guard_events`` (one
    ``{"iteration": int | None, "fired": bool}`` per event, in order), ``name`` and ``eval_id``.
    """

    iterations_to_success: int
    """1-based iteration where the threshold was first met (optimize mode); otherwise the
    number of iterations."""
    wasted_iterations: int
    """Iterations run after the threshold was first met (always 0 in review mode)."""
    doom_loop_fired: bool
    """Whether any guard event meant a doom loop (see :mod:`doomloop.eval.guards`)."""
    guard_interventions: int
    """How many guard events were observed."""
    total_duration_s: float
    score_delta_per_iteration: List[float] = field(default_factory=list)
    """Consecutive score differences, rounded to 4 decimals (one fewer than the scores)."""
    converged: bool = False
    success: bool = False
    """converged, no doom loop fired, and wasted iterations within the allowance."""
    threshold: float = 8.0
    reasoning: str = ""
    metadata: Dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Alias of :attr:`success`."""
        return self.success

    def to_dict(self) -> Dict[str, Any]:
        """The fields (and ``passed``) in the documented order; lists and metadata are copies."""
        return {
            "iterations_to_success": self.iterations_to_success,
            "wasted_iterations": self.wasted_iterations,
            "doom_loop_fired": self.doom_loop_fired,
            "guard_interventions": self.guard_interventions,
            "total_duration_s": self.total_duration_s,
            "score_delta_per_iteration": list(self.score_delta_per_iteration),
            "converged": self.converged,
            "success": self.success,
            "passed": self.passed,
            "threshold": self.threshold,
            "reasoning": self.reasoning,
            "metadata": dict(self.metadata),
        }

    def to_json(self, *, indent: int = 2) -> str:
        """:meth:`to_dict` as JSON that is always valid: NaN and infinities (anywhere, metadata
        included) are written as ``null``, values JSON has no type for as their ``str()``."""
        return _json.dumps(self.to_dict(), indent=indent)

    def print_summary(self) -> None:
        """Print the "Loop Health Summary" table (rich when installed, plain text otherwise)."""
        from .summary import print_summary

        print_summary(self)

    def plot(self, path: Union[str, os.PathLike[str]]) -> pathlib.Path:
        """Save a PNG of the loop (see :func:`doomloop.eval.plot_loop_health`); needs
        matplotlib (``pip install "matplotlib>=3.7"``, or ``pip install ".[plot]"`` from a
        clone)."""
        from .plot import plot_loop_health

        return plot_loop_health(self, path)
