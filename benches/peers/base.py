"""The one interface every guard is measured through, and what the adapters read off a step.

A :class:`Guard` is built fresh for each run and fed the run's steps in order. For each step it
reports every flag it raised (:meth:`Guard.flags`), each with whether the step's call had run
by then, so the delay is counted as ``benches/quality.py`` counts doomloop's: planted calls that
had run, a flag raised before a call (a blocked call) not counting that call.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from importlib.metadata import version
from typing import Any, ClassVar, List, Mapping, NamedTuple, Optional

from doomloop.traces import Step

WARN = "warn"
"""A nudge: the guard saw a loop and lets the run go on."""
STOP = "stop"
"""The guard would end the run (or refuse the call)."""
LEVELS = (WARN, STOP)


class Flag(NamedTuple):
    """One flag a guard raised on a step."""

    level: str
    """:data:`WARN` or :data:`STOP`."""
    after_call: bool
    """Whether the step's call had run when the flag was raised, as in
    :class:`doomloop.traces.Replayed`: False for a flag raised before the call (which then
    never runs), True for one raised once its result was in."""


class Guard(ABC):
    """A loop guard watching one run, one step at a time."""

    package: ClassVar[str]
    """The distribution measured (its installed version goes in the tables)."""
    checks: ClassVar[str]
    """When the guard decides: ``"before the call"``, ``"after the result"`` or both."""

    @classmethod
    def label(cls) -> str:
        """The package and the version installed, e.g. ``"runfuse 0.1.1"``."""
        return f"{cls.package} {version(cls.package)}"

    @abstractmethod
    def flags(self, step: Step) -> List[Flag]:
        """Feed the next step of the run; every flag raised on it, in the order raised."""

    def observe(self, step: Step) -> Optional[str]:
        """Feed the next step of the run; the strongest level raised on it, or None."""
        levels = {flag.level for flag in self.flags(step)}
        return STOP if STOP in levels else WARN if WARN in levels else None

    def close(self) -> None:  # noqa: B027 (an optional hook, not abstract: most guards hold nothing)
        """Release what the guard holds for the run (nothing, unless a guard says otherwise)."""


# --- what the adapters read off a step ------------------------------------------------------------


def arguments_of(step: Step) -> Mapping[str, Any]:
    """The call's arguments as a mapping: guards take an object, so arguments that are not a
    JSON object keep their identity under one key (as :func:`doomloop.traces.replay` does)."""
    arguments = step.arguments
    if isinstance(arguments, Mapping):
        return arguments
    return {} if arguments is None else {"arguments": arguments}


def could_not_run(step: Step) -> bool:
    """Whether the tool failed to run at all (no result, an error), as opposed to a command that
    ran and failed (a nonzero return code): the line :func:`doomloop.traces.replay` draws."""
    return step.error is not None or (step.is_error and step.returncode is None)


def result_of(step: Step) -> str:
    """What the call gave back: its result, or the error of a call that could not run."""
    if step.error is not None:
        return step.error
    return step.result_text or ""


def call_text(step: Step) -> str:
    """The call as one line of text: the tool and its arguments as JSON."""
    return f"{step.tool or ''} {json.dumps(step.arguments, sort_keys=True, ensure_ascii=False)}"
