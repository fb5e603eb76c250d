"""Loop guards measured side by side by ``benches/peer_quality.py``: doomloop's recommended
profile and four open-source peers, each behind one interface (:class:`peers.base.Guard`).

Each module's docstring says how its guard is driven: which calls, which fields of a step it is
fed, when it decides (before a call or after its result), and which of its outputs count as a
warning and which as a stop. Every guard runs at its own defaults.
"""

from __future__ import annotations

from typing import Tuple, Type

from peers.agent_vitals import AgentVitalsGuard
from peers.base import LEVELS, STOP, WARN, Flag, Guard
from peers.doomloop_monitor import DoomloopGuard
from peers.runfuse import RunfuseGuard
from peers.tokencircuit import TokenCircuitGuard
from peers.trajectory_fuse import TrajectoryFuseGuard

GUARDS: Tuple[Type[Guard], ...] = (DoomloopGuard, TrajectoryFuseGuard, AgentVitalsGuard, RunfuseGuard, TokenCircuitGuard)
"""doomloop first, then the peers."""

__all__ = [
    "GUARDS",
    "LEVELS",
    "STOP",
    "WARN",
    "AgentVitalsGuard",
    "DoomloopGuard",
    "Flag",
    "Guard",
    "RunfuseGuard",
    "TokenCircuitGuard",
    "TrajectoryFuseGuard",
]
