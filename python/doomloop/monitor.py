"""``Monitor``: everything one agent session runs through, the session, tool-loop and chant
detectors behind one method per thing an agent does, each returning what it found as
:class:`~doomloop.Finding` s.

Every front door shares it: a gateway's :class:`~doomloop.gateway.SessionRegistry` keeps one
per session, ``doomloop scan`` replays recorded runs through one per session, and the LiteLLM
guardrail feeds one per conversation. See docs/monitor.md.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import tool_policy
from ._core import MonitorEngine, ToolDecision, _bind_monitor, _monitor_parts, _pack_monitor, fingerprint
from .chant import ChantDetector, ChantEvent
from .errors import SnapshotError
from .events import checked_callback
from .findings import CRITICAL, WARNING, Finding, shorten
from .profile import Profile
from .session import DoomLoopDetector
from .tool_loop import GuardVerdict, ToolCallDecision, ToolLoopDetector, ToolOutcome

if TYPE_CHECKING:
    from .events import EventCallback

__all__ = ["STRETCH_GAP", "Monitor", "ToolDecision"]

STRETCH_GAP = 8
"""Steps a loop may go unreported and still be the same stretch: a finding's ``first_step``
is where its stretch began (the same code, and tool where the rule is about one tool)."""

_EPISODES = 16
"""Loop stretches remembered at most (the oldest is forgotten first)."""

# The tool-loop rules about one tool, whose stretches are told apart by the tool.
_PER_TOOL = frozenset({"generic_repeat", "known_poll_no_progress", "unknown_tool_repeat"})


class Monitor(MonitorEngine):
    """One agent session: its session, tool-loop and chant detectors, fed by one method per
    thing the agent does.

    Args:
        profile: the detectors' settings (default :meth:`Profile.recommended`).
        session_key: the session's name, carried by events and log records.
        on_event: ``callable(LoopEvent)`` for every event of the three detectors (the hook
            for metrics and alerting).
        clock: seconds for the session detector's time limits (default a monotonic clock).
        tool_options: extension points of the :class:`~doomloop.ToolLoopDetector`
            (``tool_aliases``, ``known_poll_tools``, ``normalisers``, ...).

    Steps: every method but :meth:`after_tool_call` (which completes its call's step) is one
    step, numbered from 0; :attr:`step` is the number of steps so far. A finding's
    ``first_step`` and ``last_step`` are in this numbering.

    Turns: :meth:`record_user_message` starts a new turn, and the tool-loop detector scopes
    its repeats to the turn (a new run). A monitor that never sees a user message (a headless
    agent) runs one turn throughout.

    The tool hooks, :meth:`before_tool_call` and :meth:`after_tool_call`, are the engine's
    (:class:`doomloop._core.MonitorEngine`): one Rust call each, which runs Python code only
    when there is a finding to build.

    Thread-safe as its detectors are: each detector's update is atomic, but a monitor's
    methods are not atomic as a whole; serve one session from one thread or task at a time
    (a gateway registry does). :meth:`to_bytes` carries the whole monitor (the three
    detectors, the turn, the steps and the answer being streamed); pickle and copy go through
    it.
    """

    __slots__ = (
        "profile",
        "session_key",
        "on_event",
        "tool_loop",
        "doom_loop",
        "chant",
        "turn",
        "_clock",
        "_tool_options",
        "_answered",
        "_answer_step",
        "_stretches",
        "_saved",
        "_saved_header",
        "__weakref__",
    )

    profile: Profile
    session_key: Optional[str]
    on_event: Optional[EventCallback]
    tool_loop: ToolLoopDetector
    doom_loop: DoomLoopDetector
    chant: Optional[ChantDetector]
    turn: int

    def __init__(
        self,
        profile: Optional[Profile] = None,
        *,
        session_key: Optional[str] = None,
        on_event: Optional[EventCallback] = None,
        clock: Optional[Callable[[], float]] = None,
        tool_options: Optional[Mapping[str, Any]] = None,
    ) -> None:
        if profile is None:
            profile = _recommended()
        elif not isinstance(profile, Profile):
            raise TypeError(f"profile must be a Profile or None, got {type(profile).__name__}")
        if session_key is not None and not isinstance(session_key, str):
            raise TypeError(f"session_key must be a str or None, got {type(session_key).__name__}")
        self.profile = profile
        self.session_key = session_key
        self.on_event = checked_callback(on_event)
        self._clock = clock
        self._tool_options = dict(tool_options or {})
        self.tool_loop = ToolLoopDetector(profile.tool_loop, on_event=on_event, session_key=session_key, **self._tool_options)
        self.doom_loop = DoomLoopDetector(profile.session, clock=clock, on_event=on_event, session_key=session_key)
        self.doom_loop.start_session()
        # The tool hooks are the engine's: one Rust call each, into these two detectors.
        self._set_detectors(self.tool_loop, self.doom_loop)
        self._set_ignored_keys(list(profile.ignore_argument_keys))
        self._set_tool_policies(tool_policy.table(profile.tool_policies, profile.session, profile.tool_loop))
        self.chant = None
        self.step = 0
        self.turn = 0
        # The tool-loop detector's run: the turn's number (None, its default run, before the
        # first user message).
        self._run_id = None
        # Whether the current answer's chant was already reported, and the step of the
        # answer being streamed (None when none is).
        self._answered = False
        self._answer_step: Optional[int] = None
        # Loop stretches: (code, tool or None) -> [first step, last step reported].
        self._stretches: Dict[Tuple[str, Optional[str]], List[int]] = {}
        # A gateway registry's, with a shared store: the blob this monitor's state stands for
        # (None once it moved on), so a hook restores it only when another replica wrote.
        self._saved: Optional[bytes] = None
        # The header of the last snapshot `_snapshot_after` took, which the next may reuse.
        self._saved_header: Optional[bytes] = None
        # The session loop stopped (warn first, then stop), while it holds: (the key of its
        # action, its critical finding); the next call of that action is vetoed.
        self._stop = None

    # --- what an agent does ------------------------------------------------------------------

    def record_user_message(self, text: str) -> List[Finding]:
        """A user message: a new turn. The tool-loop detector starts a new run, so repeats
        of an earlier turn do not count against this one (a user's "try again" is not the
        agent looping), and warn-then-stop starts afresh: no loop of an earlier turn stays
        stopped, and a warning must go on in this turn to be escalated. The session
        detector keeps its memory (it compares this turn's answers with earlier ones)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self.step += 1
        self.turn += 1
        self._run_id = str(self.turn)
        self._stop = None
        self._stretches.clear()
        return []

    def record_response(self, text: str) -> List[Finding]:
        """A whole assistant message: scanned for chanting, then recorded in the session
        detector (which compares it with the answers before it)."""
        step = self._next_step()
        chant = self._fresh_chant()
        found = self._chant_findings(chant.feed(text), step)
        self.doom_loop.record_response(text)
        return self._session_findings(found, step, None, None)

    def record_output_chunk(self, chunk: str) -> List[Finding]:
        """The next piece of an assistant message being streamed (the whole message is one
        step, taken at its first piece). Returns a critical ``chant`` finding at the chunk
        where the answer is found repeating itself: cut the stream there. Call
        :meth:`end_response` when the message is complete."""
        step = self._answer_step
        if step is None:
            step = self._answer_step = self._next_step()
            self._fresh_chant()
        chant = self.chant
        assert chant is not None
        event = chant.feed(chunk)
        self.doom_loop.record_output_chunk(chunk)
        return [] if event is None else self._chant_findings(event, step)

    def end_response(self) -> List[Finding]:
        """The streamed message is complete (with no piece streamed, it was empty): the
        session detector compares it with the answers before it."""
        step = self._answer_step
        if step is None:
            step = self._next_step()
            self._fresh_chant()
        self._answer_step = None
        self.doom_loop.end_response()
        return self._session_findings([], step, None, None)

    def mark_progress(self, marker: str) -> List[Finding]:
        """Progress was made (a test passed, a file changed): the session detector's
        no-progress rules start counting afresh."""
        self.step += 1
        self.doom_loop.mark_progress(marker)
        return []

    def record_compaction(self) -> List[Finding]:
        """The context was compacted (summarised or cut): arms the post-compaction guard,
        which stops the run if the agent goes on repeating what filled the context."""
        self.step += 1
        self.tool_loop.arm_post_compaction()
        return []

    # --- findings ----------------------------------------------------------------------------

    def _next_step(self) -> int:
        step = self.step
        self.step = step + 1
        return step

    def _fresh_chant(self) -> ChantDetector:
        chant = ChantDetector(**self.profile.chant.as_dict(), on_event=self.on_event, session_key=self.session_key)
        self.chant = chant
        self._answered = False
        # A registry's stream starts here, outside any hook: the next snapshot's header is new.
        self._saved_header = None
        return chant

    def _chant_findings(self, event: Optional[ChantEvent], step: int) -> List[Finding]:
        if event is None:
            return []
        self._answered = True
        # What repeats: one period of the window (a rotation of the repeated text).
        window = event.window[: event.period or len(event.window)]
        window = window if isinstance(window, str) else " ".join(map(str, window))
        return [
            self._finding(
                "chant", CRITICAL, "chant", "stop_stream", event.message, step, evidence=shorten(window), count=event.count
            )
        ]

    def _guard_finding(self, guard: GuardVerdict, tool: str, params: Any, step: int) -> Finding:
        return self._finding(
            "guard.compaction_loop",
            CRITICAL,
            "guard",
            "abort",
            guard.message or "",
            step,
            tool=tool,
            evidence=_arguments(params),
            count=guard.count,
            stretch=tool,
        )

    def _session_findings(self, found: List[Finding], step: int, tool: Optional[str], params: Any) -> List[Finding]:
        doom_loop = self.doom_loop
        if not doom_loop.is_doom_loop():
            return found
        event = doom_loop.get_loop_event()
        if event is None:
            return found
        if event.metadata.get("rule") == "chant":
            # The session detector's own scan of the answer: the chant detector's finding
            # says it once already, or (a hash key that tracked another window) says it now.
            if self._answered:
                return found
            self._answered = True
            found.append(
                self._finding(
                    "chant", CRITICAL, "chant", "stop_stream", event.description, step, count=event.metadata["action_count"]
                )
            )
            return found
        action = event.recovery_action.value
        finding = self._finding(
            f"session.{event.loop_type.value}",
            WARNING,
            "session",
            action,
            event.description,
            step,
            tool=tool,
            evidence=None if tool is None else _arguments(params),
            count=event.metadata["action_count"],
            # The recovery ladder's last rung: nothing is left to try but stopping.
            ladder_done=action == "abort",
        )
        if finding.level == CRITICAL and tool is not None:
            # Stopped after the call ran: its next call is vetoed while the loop holds.
            self._stop = (_action_key(tool, params), finding)
        found.append(finding)
        return found

    def _finding(
        self,
        code: str,
        level: str,
        detector: str,
        action: str,
        message: str,
        step: int,
        *,
        tool: Optional[str] = None,
        evidence: Optional[str] = None,
        count: int = 0,
        stretch: Optional[str] = None,
        stop: str = "abort",
        ladder_done: bool = False,
    ) -> Finding:
        key = (code, stretch)
        stretches = self._stretches
        span = stretches.get(key)
        if span is None or step - span[1] > STRETCH_GAP:
            if span is None and len(stretches) >= _EPISODES:
                del stretches[next(iter(stretches))]
            span = stretches[key] = [step, step]
        else:
            span[1] = step
        escalate_after = self.profile.escalate_after
        if level == WARNING and escalate_after and (ladder_done or step - span[0] >= escalate_after):
            # Warn first, then stop: the loop went on after its warning (its stretch is the
            # same loop, reported again within STRETCH_GAP steps), or the recovery ladder has
            # nothing left to try. ``stop`` is how: "block" the call, or "abort" the run.
            level, action = CRITICAL, stop
            why = "the recovery ladder is used up" if ladder_done else f"went on {step - span[0]} steps after its first warning"
            message = f"{message} ({why}: stopped)"
        return Finding(
            code, level, detector, action, message, tool=tool, evidence=evidence, count=count, first_step=span[0], last_step=step
        )

    # --- snapshots ---------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The whole monitor as bytes (:meth:`from_bytes` restores it): the profile, the three
        detectors' snapshots, the turn, the steps and the loop stretches. Raises
        :class:`~doomloop.SnapshotError` while an answer is being streamed into the session
        detector (finish it with :meth:`end_response` first)."""
        return _pack(self._parts())

    def _snapshot_after(self, detectors_only: bool) -> bytes:
        """:meth:`to_bytes`, after a hook that changed only detectors' state
        (``detectors_only``: a detector's own hook, none of the monitor's) since this method's
        last snapshot: the header of that snapshot is reused, unencoded again (the header's
        encoding cost most of a snapshot). The detectors are always encoded anew: they are
        cheap to encode, and their snapshots read the clock (the session's elapsed time)."""
        header = self._saved_header
        if not detectors_only or header is None or self._answer_step is not None:
            parts = self._parts()
        else:
            parts = [header, *self._detector_parts()]
        self._saved_header = parts[0]
        return _pack(parts)

    def _parts(self) -> List[bytes]:
        # The snapshot's four parts: the header, the tool-loop, session and chant detectors'.
        if self._answer_step is not None:
            raise SnapshotError("cannot snapshot a Monitor while an answer is being streamed: call end_response() first")
        state = {
            "step": self.step,
            "turn": self.turn,
            "answered": self._answered,
            "stretches": [[code, stretch, first, last] for (code, stretch), (first, last) in self._stretches.items()],
            "stop": None if self._stop is None else [self._stop[0], self._stop[1].to_dict()],
            "extra": self._extra_state(),
        }
        # The header object with the profile's entry first: its JSON is the profile's own,
        # encoded once, then the state's entries.
        header = b'{"profile":' + self.profile._compact_json() + b"," + json.dumps(state, separators=(",", ":"))[1:].encode()
        return [header, *self._detector_parts()]

    def _detector_parts(self) -> Tuple[bytes, bytes, bytes]:
        return self.tool_loop.to_bytes(), self.doom_loop.to_bytes(), b"" if self.chant is None else self.chant.to_bytes()

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        *,
        session_key: Optional[str] = None,
        on_event: Optional[EventCallback] = None,
        clock: Optional[Callable[[], float]] = None,
        tool_options: Optional[Mapping[str, Any]] = None,
    ) -> Monitor:
        """The monitor a :meth:`to_bytes` snapshot saved, answering every continuation as the
        original would. The keyword options are the constructor's (a snapshot does not carry
        callables). Raises :class:`~doomloop.SnapshotError` naming what is wrong."""
        header, tool, session, chant = _unpack(data)
        try:
            # A snapshot of a release before warn-then-stop kept its detectors' own levels and
            # every argument.
            older = {"escalate_after": 0, "ignore_argument_keys": [], "tool_policies": {}}
            profile = Profile.from_dict({**older, **header["profile"]}, source="the snapshot's profile")
        except (KeyError, TypeError, ValueError) as error:
            raise SnapshotError(f"corrupt Monitor snapshot: its profile cannot be read ({error})") from None
        self = cls(profile, session_key=session_key, on_event=on_event, clock=clock, tool_options=tool_options)
        self._restore_parts(header, tool, session, chant)
        return self

    def _extra_state(self) -> Any:
        """A subclass's own state, JSON-ready, carried by the snapshot (None here)."""
        return None

    def _restore_extra(self, extra: Any) -> None:
        """Restore what :meth:`_extra_state` gave; raise ``ValueError``, ``TypeError`` or
        ``KeyError`` for data it cannot read (a :class:`~doomloop.SnapshotError` then)."""

    def _reset(self) -> None:
        """Start afresh, keeping the profile and options (the registries' afresh session); a
        subclass's ``__init__`` takes the same arguments."""
        type(self).__init__(
            self,
            self.profile,
            session_key=self.session_key,
            on_event=self.on_event,
            clock=self._clock,
            tool_options=self._tool_options,
        )

    def _restore(self, data: bytes) -> None:
        """Restore the state of a snapshot taken of a monitor with the same profile and
        options, in place (the registries restore sessions from their store this way)."""
        self._restore_parts(*_unpack(data, self.profile), in_place=True)

    def _restore_parts(self, header: Dict[str, Any], tool: bytes, session: bytes, chant: bytes, in_place: bool = False) -> None:
        try:
            step, turn, answered = int(header["step"]), int(header["turn"]), bool(header["answered"])
            stretches = {(str(code), stretch): [int(first), int(last)] for code, stretch, first, last in header["stretches"]}
            stopped = header.get("stop")
            stop = None if stopped is None else (int(stopped[0]), Finding.from_dict(stopped[1]))
            extra = header.get("extra")
        except (KeyError, TypeError, ValueError) as error:
            raise SnapshotError(f"corrupt Monitor snapshot: bad header ({error})") from None
        options = {"on_event": self.on_event, "session_key": self.session_key}
        if not (in_place and self._restored_in_place(tool, session)):
            # Other settings (or a damaged part, which from_bytes names): detectors built
            # from the snapshot's own settings.
            tool_loop = ToolLoopDetector.from_bytes(tool, **self._tool_options, **options)
            doom_loop = DoomLoopDetector.from_bytes(session, clock=self._clock, **options)
            self.tool_loop, self.doom_loop = tool_loop, doom_loop
            self._set_detectors(tool_loop, doom_loop)
        self.chant = ChantDetector.from_bytes(chant, **options) if chant else None
        self.step, self.turn, self._answered, self._answer_step = step, turn, answered, None
        self._run_id = None if turn == 0 else str(turn)
        self._stretches = stretches
        self._stop = stop
        try:
            self._restore_extra(extra)
        except (KeyError, TypeError, ValueError) as error:
            raise SnapshotError(f"corrupt {type(self).__name__} snapshot: bad state ({error})") from None

    def _restored_in_place(self, tool: bytes, session: bytes) -> bool:
        # The detectors this monitor has, given the snapshot's state: a snapshot of the same
        # profile has their settings (a store's other replicas). False when one refuses it:
        # other settings (a ValueError) or a damaged part (a SnapshotError, which is one).
        try:
            self.tool_loop._restore(tool)
            self.doom_loop._restore(session)
        except ValueError:
            return False
        return True

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_restored, (type(self), self.to_bytes(), self.session_key, self.on_event, self._clock, self._tool_options))

    def __copy__(self) -> Monitor:
        return _restored(type(self), self.to_bytes(), self.session_key, self.on_event, self._clock, self._tool_options)

    def __deepcopy__(self, memo: Dict[int, Any]) -> Monitor:
        return self.__copy__()

    def __repr__(self) -> str:
        key = "" if self.session_key is None else f"{self.session_key!r}, "
        return f"Monitor({key}profile={self.profile.name!r}, step={self.step}, turn={self.turn})"


def _on_verdict(monitor: Monitor, decision: ToolCallDecision, tool: str, params: Any, step: int) -> ToolDecision:
    # The engine's before_tool_call found a loop, or the monitor stopped a session loop: the
    # verdict as a finding, and a veto of the stopped action.
    findings = []
    veto = None
    verdict = decision.verdict
    if verdict.stuck:
        detector = verdict.detector or ""
        finding = monitor._finding(
            f"tool_loop.{detector}",
            verdict.level or WARNING,
            "tool_loop",
            "block" if decision.blocked else "retry_different",
            verdict.message or "",
            step,
            tool=tool,
            evidence=_arguments(params),
            count=verdict.count,
            stretch=tool if detector in _PER_TOOL else None,
            stop="block",
        )
        findings.append(finding)
        if finding.level == CRITICAL and not decision.blocked:
            # A warning the monitor escalated: it vetoes the call the detector let through.
            veto = finding.message
    stop = monitor._stop
    if stop is not None and stop[0] == _action_key(tool, params):
        stopped = stop[1]
        finding = monitor._finding(
            stopped.code,
            CRITICAL,
            stopped.detector,
            "block",
            stopped.message,
            step,
            tool=tool,
            evidence=stopped.evidence,
            count=stopped.count,
        )
        findings.append(finding)
        if veto is None and not decision.blocked:
            veto = finding.message
    return ToolDecision(decision, findings, veto)


def _action_key(tool: str, params: Any) -> int:
    # The identity of an action the monitor stopped: its tool and arguments, canonically.
    return fingerprint((tool, params))


def _on_after(monitor: Monitor, outcome: ToolOutcome, tool: str, params: Any, step: int) -> List[Finding]:
    # The engine's after_tool_call saw the guard abort, or a session loop standing.
    guard = outcome.guard
    found = [] if guard is None or not guard.should_abort else [monitor._guard_finding(guard, tool, params, step)]
    return monitor._session_findings(found, step, tool, params)


_bind_monitor(_on_verdict, _on_after)


def _recommended() -> Profile:
    # Profiles are immutable: every monitor built without one shares the recommended one.
    global _RECOMMENDED
    if _RECOMMENDED is None:
        _RECOMMENDED = Profile.recommended()
    return _RECOMMENDED


_RECOMMENDED: Optional[Profile] = None


def _arguments(params: Any) -> Optional[str]:
    # A finding's evidence: the call's arguments as compact JSON, shortened (built only when
    # there is a finding).
    if params is None:
        return None
    try:
        text = json.dumps(params, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(params)
    return shorten(text)


def _restored(
    cls: type[Monitor],
    data: bytes,
    session_key: Optional[str],
    on_event: Optional[EventCallback],
    clock: Optional[Callable[[], float]],
    tool_options: Mapping[str, Any],
) -> Monitor:
    # Module-level, so pickle can name it.
    return cls.from_bytes(data, session_key=session_key, on_event=on_event, clock=clock, tool_options=tool_options)


# A monitor's snapshot frames four parts (the JSON header, the tool-loop, session and chant
# detectors' snapshots, the last empty before the first answer); the extension packs and
# splits them (the registries' tool hooks snapshot there too).


def _pack(parts: List[bytes]) -> bytes:
    header, tool, session, chant = parts
    return _pack_monitor(header, tool, session, chant)


def _unpack(data: Any, profile: Optional[Profile] = None) -> Tuple[Dict[str, Any], bytes, bytes, bytes]:
    # With `profile`: a header that opens with that profile's own JSON has the rest parsed
    # only (a restore never reads the profile, and parsing it cost most of a restore).
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"a Monitor snapshot is bytes, got {type(data).__name__}")
    parts = _monitor_parts(bytes(data))
    try:
        opening = None if profile is None else b'{"profile":' + profile._compact_json() + b","
        if opening is not None and parts[0].startswith(opening):
            header = json.loads(b"{" + parts[0][len(opening) :])
        else:
            header = json.loads(parts[0])
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SnapshotError(f"corrupt Monitor snapshot: bad header ({error})") from None
    if not isinstance(header, dict):
        raise SnapshotError("corrupt Monitor snapshot: bad header")
    return header, parts[1], parts[2], parts[3]
