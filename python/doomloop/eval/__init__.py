"""Loop-health evaluation: score a finished evaluation loop without re-running it.

``LoopEvaluator().run(loop_result, guard_events)`` returns a :class:`LoopHealthResult`: did
the loop converge, how many iterations were wasted after it did, and did a doom-loop guard
fire (see :mod:`doomloop.eval.guards` for the guard events recognised). No model calls, no
network. ``import doomloop`` does not import this package; rich (for the summary table) and
matplotlib (for :func:`plot_loop_health`) are optional extras imported only when used.
"""

from .evaluator import DEFAULT_THRESHOLD, MODES, LoopEvaluator
from .guards import DOOM_LOOP_MARKERS, is_doom_loop_event
from .health import LoopHealthResult
from .plot import plot_loop_health
from .results import EvaluationLoopResult, IterationResult

__all__ = [
    "DEFAULT_THRESHOLD",
    "DOOM_LOOP_MARKERS",
    "MODES",
    "EvaluationLoopResult",
    "IterationResult",
    "LoopEvaluator",
    "LoopHealthResult",
    "is_doom_loop_event",
    "plot_loop_health",
]
