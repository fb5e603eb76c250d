"""A picture of a loop: score per iteration, the threshold, convergence and guard events.

Needs matplotlib: ``pip install "matplotlib>=3.7"``, or the ``plot`` extra from a clone
(``pip install ".[plot]"``). Only matplotlib's object-oriented API and its Agg canvas are
used, never ``pyplot``, so plotting changes no global backend and opens no window.
"""

from __future__ import annotations

import math
import numbers
import os
import pathlib
from typing import TYPE_CHECKING, List, Literal, Tuple, Union

from .._extras import install_hint

if TYPE_CHECKING:
    from .health import LoopHealthResult

__all__ = ["INSTALL_HINT", "plot_loop_health"]

INSTALL_HINT = install_hint("plot")
"""How to get the plotting dependency; named in the ImportError when it is missing."""

# Above this many iterations the per-point markers would only blur the line.
_MAX_MARKED_POINTS = 200


def plot_loop_health(result: LoopHealthResult, path: Union[str, os.PathLike[str]]) -> pathlib.Path:
    """Save a PNG of ``result``'s loop to ``path`` (parent folders are created) and return it.

    Shows the score per iteration, the threshold line, the convergence point, the wasted
    iterations after it, and a vertical line where each guard event happened (red where a
    doom-loop guard fired, orange for other interventions); events without an iteration are
    counted in a note under the plot.

    Raises:
        ImportError: matplotlib is not installed (the message says how to install it).
        ValueError: ``result.metadata`` lacks the score history (results from
            :meth:`LoopEvaluator.run` carry it).
    """
    scores = _scores(result)
    placed, unplaced = _guard_positions(result)
    try:
        # Imported here: matplotlib is an optional extra and slow to import.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError as error:
        raise ImportError(f"plotting a loop needs matplotlib: {INSTALL_HINT}") from error

    figure = Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    iterations = list(range(1, len(scores) + 1))
    marker = "o" if len(scores) <= _MAX_MARKED_POINTS else None
    axes.plot(iterations, scores, marker=marker, color="tab:blue", label="score", zorder=3)
    if math.isfinite(result.threshold):
        axes.axhline(result.threshold, linestyle="--", color="tab:gray", label=f"threshold {result.threshold:g}")

    converged_at = result.metadata.get("converged_at")
    if isinstance(converged_at, int) and 1 <= converged_at <= len(scores):
        axes.scatter(
            [converged_at],
            [scores[converged_at - 1]],
            marker="*",
            s=300,
            color="tab:green",
            zorder=4,
            label=f"converged at {converged_at}",
        )
        if result.wasted_iterations > 0:
            axes.axvspan(
                converged_at, len(scores), color="tab:red", alpha=0.08, label=f"{result.wasted_iterations} wasted iteration(s)"
            )

    kinds: Tuple[Tuple[bool, str, Literal["-", ":"], str], ...] = (
        (True, "tab:red", "-", "doom-loop guard fired"),
        (False, "tab:orange", ":", "guard intervention"),
    )
    for fired, color, style, label in kinds:
        xs = [iteration for iteration, did_fire in placed if did_fire is fired]
        if xs:
            # One collection for all events of a kind: fast even with thousands of events.
            axes.vlines(
                xs, 0, 1, transform=axes.get_xaxis_transform(), colors=color, linestyles=style, linewidth=2, label=label, zorder=2
            )

    if not scores:
        axes.text(
            0.5,
            0.5,
            "no iterations",
            transform=axes.transAxes,
            ha="center",
            va="center",
            bbox={"facecolor": "white", "edgecolor": "none"},
        )
    if unplaced:
        fired_count = sum(unplaced)
        figure.text(
            0.01,
            0.01,
            f"{len(unplaced)} guard event(s) without an iteration ({fired_count} fired)",
            fontsize="small",
            color="tab:red" if fired_count else "black",
        )

    status = "HEALTHY" if result.success else "UNHEALTHY"
    name = result.metadata.get("name")
    axes.set_title(f"Loop health: {status}" + (f" ({name})" if isinstance(name, str) else ""))
    axes.set_xlabel("iteration")
    axes.set_ylabel("score")
    last = max([len(scores), 1] + [iteration for iteration, _ in placed])
    axes.set_xlim(0.5, last + 0.5)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    if not scores and not placed:
        axes.set_xticks([])
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")

    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, format="png")
    return target


def _scores(result: LoopHealthResult) -> List[float]:
    scores = result.metadata.get("score_history")
    if not isinstance(scores, list):
        raise ValueError("result.metadata has no score_history list to plot; plot results returned by LoopEvaluator.run")
    for index, score in enumerate(scores):
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
            raise ValueError(f"result.metadata['score_history'][{index}] must be a finite number, got {score!r}")
    return [float(score) for score in scores]


def _guard_positions(result: LoopHealthResult) -> Tuple[List[Tuple[int, bool]], List[bool]]:
    """(iteration, fired) for events with an iteration, and ``fired`` for those without."""
    placed: List[Tuple[int, bool]] = []
    unplaced: List[bool] = []
    events = result.metadata.get("guard_events") or []
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict):
            continue
        fired = bool(event.get("fired"))
        iteration = event.get("iteration")
        if isinstance(iteration, int) and not isinstance(iteration, bool):
            placed.append((iteration, fired))
        else:
            unplaced.append(fired)
    return placed, unplaced
