"""agent-vitals as a guard: one ``AgentVitals()`` per run, at its defaults.

The defaults are its bundled thresholds (``get_vitals_config()``, which ``AgentVitals()`` loads
when given no config; loaded once here, as it reads a YAML file each time) and workflow type
``"unknown"``: a loop is a findings plateau or, with ``output_text``, an output at least 0.8
alike (word Jaccard) to one of the last 20; being stuck is coverage that stays flat or stagnates
(on for every workflow type but ``"build"``: ``workflow_stuck_enabled = "research-only"``). Its
adaptive thresholds are recomputed over the whole history at every step, so a step costs more
the longer the run.

Checks after the result: ``step()`` takes the step's cumulative signals, known only once the
call has returned.

Fed, per step, its four required signals and the text (there are no natural counterparts in a
coding agent's trace for some; each choice is the plainest one):

- ``findings_count``: the distinct results seen so far (new information found);
- ``coverage_score``: 0.0, what its framework adapters report when the framework has no
  progress score; a trace has none. Flat coverage is what its stuck rules look for
  (``coverage_flat``, ``coverage_stagnation``), so they fire a few steps into most runs: this
  measures the guard without the progress signal it is built around;
- ``total_tokens``: the run's text so far (messages, calls, results) at 4 characters a token:
  the traces carry no token counts;
- ``error_count``: the calls so far that could not run at all, the line doomloop's replay
  draws between an error and a command that ran and failed. A nonzero return code is not
  counted: the guard drops every loop signal once ``error_count > 0`` (it reads them as
  thrash), and 44 of the 47 corpus runs have a failing command;
- ``query_count``: the calls so far;
- ``output_text``: what the agent produced for the step, its message and the call
  (``tool {json arguments}``).

Mapping: ``snapshot.any_failure`` (loop, stuck or confabulation detected; its README stops the
run on it) is a stop. It has no warning tier for loops: ``health_state`` is a hysteresis band on
``coverage_score`` alone, which a trace does not have, so it is not read.
"""

from __future__ import annotations

from typing import List, Set

from agent_vitals import AgentVitals, get_vitals_config

from doomloop.traces import Step
from peers.base import STOP, Flag, Guard, call_text, could_not_run, result_of

CHARS_PER_TOKEN = 4
"""The usual rough estimate for English text and code."""


class AgentVitalsGuard(Guard):
    """agent-vitals' ``AgentVitals`` with its bundled configuration."""

    package = "agent-vitals"
    checks = "after the result"
    config = get_vitals_config()

    def __init__(self) -> None:
        self._vitals = AgentVitals(config=self.config)
        self._results: Set[str] = set()
        self._characters = self._errors = self._calls = 0

    def flags(self, step: Step) -> List[Flag]:
        if step.kind != "tool":
            return []  # one vitals step per agent step, and each of these carries a call
        output = "\n".join(text for text in (step.thought, call_text(step)) if text)
        result = result_of(step)
        self._results.add(result)
        self._characters += len(output) + len(result)
        self._errors += could_not_run(step)
        self._calls += 1
        snapshot = self._vitals.step(
            findings_count=len(self._results),
            coverage_score=0.0,
            total_tokens=self._characters // CHARS_PER_TOKEN,
            error_count=self._errors,
            query_count=self._calls,
            output_text=output,
        )
        return [Flag(STOP, after_call=True)] if snapshot.any_failure else []
