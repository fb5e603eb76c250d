"""``LoopEvaluator``: scores how healthy a finished evaluation loop was.

It never re-runs the loop and makes no model calls: convergence, wasted iterations and
doom-loop guards are derived from the loop's score history and the guard events given.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
import pathlib
import sys
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, List, Optional, Union

from .._validate import boolean, number, positive_int
from ..errors import ConfigError
from ._duck import MISSING, flag, is_set, read_field, word
from .guards import event_iteration, is_doom_loop_event
from .health import LoopHealthResult

__all__ = ["DEFAULT_THRESHOLD", "MODES", "LoopEvaluator"]

DEFAULT_THRESHOLD = 8.0
"""The threshold used when neither the evaluator nor the loop result gives one."""
MODES = ("optimize", "review")
"""The loop modes understood (read case-insensitively, surrounding blanks ignored)."""

_OWNER = "LoopEvaluator"
# The keys of a dict loop result: those read, then those of a loop result's to_dict() (this
# package's EvaluationLoopResult and praisonaiagents') that describe the loop but are not read.
_READ_KEYS = ("score_history", "threshold", "total_duration_seconds", "mode", "success")
_KNOWN_KEYS = frozenset(_READ_KEYS) | {
    "iterations",
    "metadata",
    "num_iterations",
    "final_score",
    "final_output",
    "best_score",
    "best_output",
    "accumulated_findings",
}
_MAX_THRESHOLD = sys.float_info.max
"""Thresholds are finite: an infinite one could never be reached, nor missed."""


class LoopEvaluator:
    """Scores loop health: did the loop converge, were iterations wasted, did a guard fire.

    Args:
        threshold: score that counts as converged; ``None`` uses the loop result's
            ``threshold``, else 8.0.
        max_wasted_iterations: wasted iterations tolerated before the loop is unhealthy.
        name: a name for this evaluator's runs; default ``"eval_<eval_id>"``.
        save_results_path: when set, each run writes :meth:`LoopHealthResult.to_json` to this
            path, after replacing ``{name}`` and ``{eval_id}`` (this evaluator's random
            8-hex-digit id, so runs of one evaluator overwrite each other unless ``{name}``
            or the path differs); parent folders are created. Write errors propagate.
        verbose: print the summary table after each run.

    Holds no per-run state, so one evaluator may be used from many threads at once.
    """

    def __init__(
        self,
        threshold: Optional[float] = None,
        max_wasted_iterations: int = 0,
        name: Optional[str] = None,
        save_results_path: Union[str, os.PathLike[str], None] = None,
        verbose: bool = False,
    ) -> None:
        self.threshold = None if threshold is None else number(_OWNER, "threshold", threshold, maximum=_MAX_THRESHOLD)
        self.max_wasted_iterations = positive_int(_OWNER, "max_wasted_iterations", max_wasted_iterations, minimum=0)
        self.eval_id = uuid.uuid4().hex[:8]
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{_OWNER}.name must be a str or None, got {type(name).__name__}")
        self.name = name if name is not None else f"eval_{self.eval_id}"
        self.save_results_path = None if save_results_path is None else self._check_template(save_results_path)
        self.verbose = boolean(_OWNER, "verbose", verbose)

    def _check_template(self, template: object) -> str:
        if not isinstance(template, (str, os.PathLike)):
            raise TypeError(f"{_OWNER}.save_results_path must be a str or path, got {type(template).__name__}")
        text = os.fspath(template)
        if not isinstance(text, str):
            raise TypeError(f"{_OWNER}.save_results_path must be a str path, got bytes")
        try:
            text.format(name=self.name, eval_id=self.eval_id)
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(
                f"{_OWNER}.save_results_path may only use the placeholders {{name}} and {{eval_id}} "
                f"(double braces for literal ones): {error!r} in {text!r}"
            ) from None
        return text

    @property
    def results_path(self) -> Optional[pathlib.Path]:
        """``save_results_path`` with its placeholders filled in, or ``None``."""
        if self.save_results_path is None:
            return None
        return pathlib.Path(self.save_results_path.format(name=self.name, eval_id=self.eval_id))

    def run(self, loop_result: Any, guard_events: Optional[Iterable[Any]] = None) -> LoopHealthResult:
        """Score a finished loop.

        Args:
            loop_result: an :class:`EvaluationLoopResult`, or any object or dict with
                ``score_history`` (required) and optionally ``threshold``,
                ``total_duration_seconds``, ``mode`` and ``success``. A dict may also hold
                the other keys of a loop result's ``to_dict()`` (``iterations``,
                ``metadata``, ``final_score``, ...); any other key is an error.
            guard_events: the guard events seen during the loop (dicts or objects; see
                :mod:`doomloop.eval.guards` for which ones mean a doom loop fired).

        Raises:
            TypeError / ValueError: a malformed loop result or guard-event list, naming the
                field; a NaN or infinite score is an error, not a silent pass or fail; an
                unknown key of a dict loop result is a :class:`~doomloop.ConfigError` naming
                it (and the key it is likely a misspelling of).
            OSError: the result could not be written to ``save_results_path``.
        """
        result = self._evaluate(loop_result, guard_events)
        path = self.results_path
        if path is not None:
            _write(path, result)
        if self.verbose:
            result.print_summary()
        return result

    async def run_async(self, loop_result: Any, guard_events: Optional[Iterable[Any]] = None) -> LoopHealthResult:
        """:meth:`run` for async callers: the result file is written in a worker thread, so
        the event loop is never blocked on disk."""
        import asyncio  # imported here: asyncio is heavy and only async callers need it

        result = self._evaluate(loop_result, guard_events)
        path = self.results_path
        if path is not None:
            await asyncio.to_thread(_write, path, result)
        if self.verbose:
            result.print_summary()
        return result

    def _evaluate(self, loop_result: Any, guard_events: Optional[Iterable[Any]] = None) -> LoopHealthResult:
        # The verdict alone: run and run_async add the file and the printing.
        scores = _scores(loop_result)
        _check_keys(loop_result)
        threshold = self.threshold if self.threshold is not None else _loop_threshold(loop_result)
        mode = _mode(loop_result)
        events = _events(guard_events)
        count = len(scores)

        if not scores:
            converged, iterations_to_success, wasted = False, 0, 0
        elif mode == "review":
            # A review loop runs every iteration and judges the final score, so an earlier
            # high score is not convergence; the loop's own verdict wins when recorded.
            loop_success = read_field(loop_result, "success")
            converged = flag(loop_success) if is_set(loop_success) else scores[-1] >= threshold
            iterations_to_success, wasted = count, 0
        else:
            first = next((index for index, score in enumerate(scores, start=1) if score >= threshold), None)
            converged = first is not None
            iterations_to_success = first if first is not None else count
            wasted = count - iterations_to_success

        fired = [is_doom_loop_event(event) for event in events]
        doom_loop_fired = any(fired)
        success = converged and not doom_loop_fired and wasted <= self.max_wasted_iterations
        converged_at = (iterations_to_success if mode == "optimize" else count) if converged else None
        return LoopHealthResult(
            iterations_to_success=iterations_to_success,
            wasted_iterations=wasted,
            doom_loop_fired=doom_loop_fired,
            guard_interventions=len(events),
            total_duration_s=_duration(loop_result),
            score_delta_per_iteration=[round(later - earlier, 4) for earlier, later in itertools.pairwise(scores)],
            converged=converged,
            success=success,
            threshold=threshold,
            reasoning=_reasoning(converged, iterations_to_success, count, wasted, doom_loop_fired, len(events)),
            metadata={
                "num_iterations": count,
                "mode": mode,
                "score_history": scores,
                "converged_at": converged_at,
                "guard_events": [
                    {"iteration": event_iteration(event), "fired": fire} for event, fire in zip(events, fired, strict=True)
                ],
                "name": self.name,
                "eval_id": self.eval_id,
            },
        )

    def __repr__(self) -> str:
        return f"{_OWNER}(name={self.name!r}, eval_id={self.eval_id!r})"


def _write(path: pathlib.Path, result: LoopHealthResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.to_json(), encoding="utf-8")


def _check_keys(loop_result: Any) -> None:
    """A dict loop result's keys must be known: a misspelt one (``"threshhold"``) would
    otherwise be ignored, and its default used without a word. An object's attributes cannot
    be told apart from its other attributes, so only dicts are checked."""
    if not isinstance(loop_result, Mapping):
        return
    for key in loop_result:
        if key not in _KNOWN_KEYS:
            import difflib  # only on this error path

            close = difflib.get_close_matches(key, _READ_KEYS, n=1) if isinstance(key, str) else []
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"loop_result[{key!r}]", f"unknown key{hint}; a loop result's keys are {', '.join(_READ_KEYS)}")


def _scores(loop_result: Any) -> List[float]:
    raw = read_field(loop_result, "score_history")
    if raw is MISSING:
        raise TypeError(
            "loop_result must have a score_history (an EvaluationLoopResult, a dict or an object "
            f"with that field), got {type(loop_result).__name__}"
        )
    if raw is None:
        return []
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
        raise TypeError(f"loop_result.score_history must be a sequence of numbers, got {type(raw).__name__}")
    scores = []
    for index, score in enumerate(raw):
        field = f"loop_result.score_history[{index}]"
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            raise TypeError(f"{field} must be a number, got {type(score).__name__}")
        value = float(score)
        if not math.isfinite(value):
            raise ValueError(f"{field} must be a finite number, got {value}")
        scores.append(value)
    return scores


def _loop_threshold(loop_result: Any) -> float:
    raw = read_field(loop_result, "threshold")
    if not is_set(raw):
        return DEFAULT_THRESHOLD
    return number("loop_result", "threshold", raw, maximum=_MAX_THRESHOLD)


def _duration(loop_result: Any) -> float:
    raw = read_field(loop_result, "total_duration_seconds")
    if not is_set(raw):
        return 0.0
    return number("loop_result", "total_duration_seconds", raw)


def _mode(loop_result: Any) -> str:
    raw = read_field(loop_result, "mode")
    if not is_set(raw):
        return "optimize"
    mode = word(raw)
    if mode is None:
        raise TypeError(f"loop_result.mode must be a str, got {type(raw).__name__}")
    if mode == "":
        return "optimize"
    if mode not in MODES:
        raise ValueError(f"loop_result.mode must be 'optimize' or 'review' (any case), got {raw!r}")
    return mode


def _events(guard_events: Optional[Iterable[Any]]) -> List[Any]:
    if guard_events is None:
        return []
    # A lone event (a dict, a string) is a common slip; iterating it would count its keys
    # or characters as events.
    if isinstance(guard_events, (str, bytes, Mapping)) or not isinstance(guard_events, Iterable):
        raise TypeError(f"guard_events must be a list of events or None, got {type(guard_events).__name__}")
    events = list(guard_events)
    for index, event in enumerate(events):
        if event is None:
            raise TypeError(f"guard_events[{index}] is None; pass only the events guards produced")
    return events


def _reasoning(
    converged: bool, iterations_to_success: int, count: int, wasted: int, doom_loop_fired: bool, interventions: int
) -> str:
    if converged:
        parts = [f"Converged in {iterations_to_success} iteration(s)."]
    else:
        parts = [f"Did not converge after {count} iteration(s)."]
    if count == 0:
        parts.append("The score history is empty.")
    if wasted:
        parts.append(f"{wasted} wasted iteration(s) after threshold.")
    if doom_loop_fired:
        parts.append("Doom-loop guard fired.")
    if interventions:
        parts.append(f"{interventions} guard intervention(s).")
    return " ".join(parts)
