"""The loop types and recovery actions (values are upstream's lowercase names)."""

from __future__ import annotations

from enum import Enum


class DoomLoopType(Enum):
    """What kind of loop a detector found."""

    REPEATED_ACTION = "repeated_action"
    REPEATED_FAILURE = "repeated_failure"
    NO_PROGRESS = "no_progress"
    CIRCULAR_PLAN = "circular_plan"
    RESOURCE_EXHAUSTION = "resource_exhaustion"
    REPEATED_OUTPUT = "repeated_output"


class RecoveryAction(Enum):
    """The recovery ladder's rungs, from "keep going" to "stop"."""

    CONTINUE = "continue"
    RETRY_DIFFERENT = "retry_different"
    ESCALATE_MODEL = "escalate_model"
    REQUEST_HELP = "request_help"
    ABORT = "abort"
