"""tokencircuit as a guard: one ``InterventionEngine()`` per run, at its defaults.

The defaults (``InterventionConfig()``): a window of the last 5 turns; a turn stagnates when its
message is identical to the window's (``STATE_STAGNATION``), when its structure and tool
signature (the tool's name and its arguments' *types*) match 3 turns of the window
(``FUTILE_ACTION``), or when its message is at least 0.92 alike to the window (word 2- and
3-gram Jaccard, ``SEMANTIC_STAGNATION``); transcript checks (orphaned or malformed calls); stages
escalate one a turn while turns stagnate: a nudge at 3 in a row, an override at 5, a hard stop
at 8, back to pass (with 2 turns of cooldown) after a turn without a signal.

Checks after the result: it is a pre-model hook, run on the transcript before each model call,
so the decision on a step is made once the step's result is in the transcript (and stops the
model from making the next call).

Fed as its OpenAI client wrapper (``TokenCircuitClient``) feeds it: the whole transcript as
OpenAI chat messages (``process(messages, state={"_tc_intervention": state})``, then the state
folded with ``tc_state_reducer``), each step adding an assistant message (``step.thought`` and
the call, ``step.arguments`` as JSON) and its tool message (the result). The traces hold no
system prompt or task message; a step without a call id gets one (the API always gives one).

Mapping: the nudge (``NUDGE``) and the override (``OVERRIDE``: it rewrites the model's input,
compacting repeated calls, but lets the run go on) are warnings; ``HARD_STOP`` (its hook raises
``TokenCircuitError``) is a stop.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from tokencircuit import InterventionEngine, InterventionStage, default_intervention_state, tc_state_reducer

from doomloop.traces import Step
from peers.base import STOP, WARN, Flag, Guard, arguments_of, result_of

_LEVELS = {InterventionStage.NUDGE: WARN, InterventionStage.OVERRIDE: WARN, InterventionStage.HARD_STOP: STOP}
THREAD = "run"
"""The engine keys its state by thread; one engine watches one run."""


class TokenCircuitGuard(Guard):
    """tokencircuit's ``InterventionEngine`` with ``InterventionConfig()``."""

    package = "tokencircuit"
    checks = "after the result"

    def __init__(self) -> None:
        self._engine = InterventionEngine()
        self._state = default_intervention_state()
        self._messages: List[Dict[str, Any]] = []

    def flags(self, step: Step) -> List[Flag]:
        if step.kind in ("user", "assistant"):
            # A message is part of the transcript; the hook runs before the model's next call.
            self._messages.append({"role": step.kind, "content": step.text or ""})
            return []
        if step.kind != "tool":
            return []
        self._messages += _call_messages(step, f"call-{len(self._messages)}")
        decision = self._engine.process(
            messages=self._messages, state={"_tc_intervention": self._state}, thread_id=THREAD, node_name="openai"
        )
        self._state = tc_state_reducer(self._state, decision.state_patch)
        level = _LEVELS.get(decision.stage)
        return [Flag(level, after_call=True)] if level is not None else []


def _call_messages(step: Step, fallback_id: str) -> List[Dict[str, Any]]:
    """The assistant message carrying the step's call, and the tool message with its result
    (none for a call whose result was never recorded: the run ended first)."""
    call_id = step.call_id or fallback_id
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": step.tool or "", "arguments": json.dumps(dict(arguments_of(step)))},
    }
    messages: List[Dict[str, Any]] = [{"role": "assistant", "content": step.thought or "", "tool_calls": [call]}]
    if step.result_text is not None or step.error is not None:
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result_of(step)})
    return messages
