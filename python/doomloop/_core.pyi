"""Type stubs of the compiled ``doomloop._core`` extension module (the Rust engine)."""

from typing import Any, Callable, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from typing_extensions import Self, disjoint_base, final

from .chant import ChantEvent
from .findings import Finding

__all__ = [
    "CHANT_DETACH_THRESHOLD",
    "COMPACTION_DETECTOR",
    "ChantEngine",
    "EventDecoder",
    "GuardEngine",
    "GuardVerdict",
    "HASH_DETACH_THRESHOLD",
    "LoopVerdict",
    "MAX_CYCLE_PERIOD",
    "MAX_CYCLE_REPEATS",
    "MAX_DEPTH",
    "MAX_GUARD_WINDOW",
    "MAX_HISTORY_SIZE",
    "MAX_REWALKS",
    "MAX_THRESHOLD",
    "MonitorEngine",
    "RegistryEngine",
    "SessionEngine",
    "TextGuard",
    "ToolCallDecision",
    "ToolDecision",
    "ToolPolicies",
    "ToolLoopEngine",
    "ToolOutcome",
    "__version__",
    "_bind_errors",
    "_bind_monitor",
    "_monitor_parts",
    "_pack_monitor",
    "chat_pieces",
    "check_settings",
    "field",
    "fingerprint",
    "settings_of",
    "snapshot_settings",
    "tool_result_hash",
]
__version__: str
MAX_DEPTH: int
"""Containers nested deeper than this hash as a fixed "too deep" marker."""
HASH_DETACH_THRESHOLD: int
"""Strings and bytes at least this long are hashed with the interpreter lock released."""
MAX_REWALKS: int
"""Re-walks of containers on a cycle through a shared object allowed in one fingerprint walk;
further ones hash as the "too deep" marker."""

def fingerprint(value: object, /) -> int:
    """The canonical 64-bit fingerprint of ``value`` (see docs/fingerprint.md). Never raises."""

def field(value: Any, name: str, /) -> Any:
    """``value[name]`` of a dict, else ``value``'s field: its ``__dict__`` entry, else its
    pydantic extra field, else its attribute; None when absent (an error other than a missing
    attribute is raised)."""

def chat_pieces(chunk: Any, /) -> List[Tuple[Hashable, str]]:
    """The ``((choice, part), text)`` pairs of a chat-completion chunk's non-empty
    ``delta.content`` (``part`` ``"text"``) and tool-call ``function.arguments`` (``part`` the
    call's ``index``, else its position), each read with :func:`field`."""

def settings_of(owner: str, /) -> Tuple[Tuple[str, Any, Any, Any], ...]:
    """The engine's settings of a config class (``"DoomLoopConfig"``, ``"LoopDetectionConfig"``,
    ``"PostCompactionGuard"``, ``"ChantDetector"``): ``(name, default, minimum, maximum)``
    each, in constructor order (bounds None for switches)."""

def snapshot_settings(owner: str, data: Union[bytes, bytearray, memoryview], /) -> Tuple[Any, ...]:
    """The settings values (checked) of a snapshot made by a detector whose config class is
    ``owner`` (``"ChantDetector"`` for a chant detector); :class:`doomloop.SnapshotError` if
    ``data`` is not such a snapshot."""

def _bind_errors(*, config_error: type[ValueError], snapshot_error: type[ValueError]) -> None:
    """Hand the extension the exception classes it raises for a refused setting and an
    unreadable snapshot (``doomloop.errors`` calls it when imported)."""

def check_settings(owner: str, values: Tuple[Any, ...], /) -> Tuple[Any, ...]:
    """``values`` (one per setting of ``owner``, in order) checked: TypeError for a value of
    the wrong type, :class:`doomloop.ConfigError` for one out of range (naming the setting and
    its range, and the joint limits of the output settings); the values as the engine holds
    them otherwise."""

@disjoint_base
class SessionEngine:
    """Rust state behind :class:`doomloop.DoomLoopDetector` (use that class)."""

    def __new__(
        cls,
        settings: Tuple[Any, ...],
        /,
        *,
        clock: Optional[Callable[[], float]] = None,
        _on_episode: Optional[Callable[[Any, str, str, int], object]] = None,
    ) -> Self: ...
    def start_session(self) -> None:
        """Start the clock and clear history, markers, plan states, attempts, events, backoff."""
    def record_action(
        self,
        action_type: str,
        args: Any,
        result: Any,
        success: bool,
        duration: Optional[float] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> None:
        """Record one action and re-run the checks. ``duration`` is an int or float number
        of seconds >= 0 (None: 0). ``metadata`` is accepted for upstream compatibility and
        not retained (memory stays bounded)."""
    def mark_progress(self, marker: str) -> None:
        """Record real progress; it gates NO_PROGRESS and CIRCULAR_PLAN."""
    def record_plan(self, state: object) -> None:
        """Record a plan state; returning to one already seen is CIRCULAR_PLAN."""
    def record_response(self, text: str) -> None:
        """Record one whole model response for REPEATED_OUTPUT: a chant inside it (windows
        never span two responses; the verdict stands until the next response starts), and
        alike responses turn after turn (``max_repeated_responses``)."""
    def record_output_chunk(self, chunk: str) -> None:
        """Record the next piece of a streamed response (windows span its pieces)."""
    def end_response(self) -> None:
        """The streamed response is complete: it is compared with the response before it,
        and the next piece starts a new response."""
    def is_doom_loop(self) -> bool:
        """True exactly when ``get_loop_type()`` is not None."""
    def increment_recovery(self) -> bool:
        """Count one recovery attempt; True while more attempts are allowed."""
    def reset_backoff(self) -> None:
        """Reset the backoff delay to ``initial_backoff``."""
    def get_stats(self) -> dict[str, Any]:
        """Counts since the session started (O(1)): total, successful and failed actions,
        loop events, recovery attempts, progress markers, elapsed time, current backoff."""
    def _evaluate(self) -> Tuple[Optional[str], str]: ...
    def _loop_event(self) -> Optional[Tuple[str, str, str, int, int, str]]: ...
    def _next_backoff(self) -> float: ...
    def _recent_action_types(self) -> list[str]: ...
    def to_bytes(self) -> bytes:
        """The detector's state and config as a snapshot (docs/snapshots.md); the session
        clock is saved as the time elapsed now. :class:`doomloop.SnapshotError` in the middle
        of a streamed response (call ``end_response()`` first)."""
    def _restore(self, data: Union[bytes, bytearray, memoryview]) -> None: ...
    @property
    def _history_capacity(self) -> int: ...

# --- tool-call loop detection (see doomloop.tool_loop) ---------------------------------------

MAX_HISTORY_SIZE: int
"""Largest ``history_size`` a tool-loop detector accepts."""
MAX_THRESHOLD: int
"""Largest tool-loop threshold accepted (2**31 - 1)."""
COMPACTION_DETECTOR: str
"""The post-compaction guard's detector name, ``"compaction_loop_persisted"``."""
MAX_CYCLE_PERIOD: int
"""Largest ``DoomLoopConfig.max_cycle_period`` (64)."""
MAX_CYCLE_REPEATS: int
"""Largest ``DoomLoopConfig.min_cycle_repeats`` (1024)."""

MAX_GUARD_WINDOW: int
"""Largest post-compaction guard window accepted."""

_ToolParams = Union[Mapping[str, Any], Sequence[Any], str, int, float, None]
"""A tool call's params: any JSON-like value (a mapping, list, tuple, str, number, bool), or
None (the same as ``{}``). Only a mapping's fields are read by the rules (``action``)."""

@final
class LoopVerdict:
    """The loop verdict for one call (immutable)."""

    @property
    def stuck(self) -> bool: ...
    @property
    def level(self) -> Optional[str]:
        """``"warning"``, ``"critical"`` or None when not stuck."""
    @property
    def detector(self) -> Optional[str]:
        """``generic_repeat``, ``known_poll_no_progress``, ``ping_pong``, ``unknown_tool_repeat``,
        ``global_circuit_breaker``, or doomloop's ``cycle`` and ``argument_churn``."""
    @property
    def count(self) -> int: ...
    @property
    def message(self) -> Optional[str]: ...
    @property
    def warning_key(self) -> Optional[str]:
        """The key warning emission is bucketed by (hashes as 16 hex digits)."""
    @property
    def paired_tool_name(self) -> Optional[str]:
        """For ping-pong: the tool of the newest call (the other side of the pair)."""
    def __bool__(self) -> bool: ...
    def to_dict(self) -> dict[str, Any]:
        """The verdict with OpenClaw's camelCase keys."""

@final
class ToolCallDecision:
    """What to do with a call about to run (immutable)."""

    @property
    def verdict(self) -> LoopVerdict: ...
    @property
    def blocked(self) -> bool:
        """True for a critical verdict: do not run the call; give the model ``blocked_result``."""
    @property
    def emit_warning(self) -> bool:
        """True when this warning should be reported (first time for its key, then per bucket)."""
    @property
    def blocked_result(self) -> Optional[dict[str, Any]]:
        """OpenClaw's veto result when blocked."""

@final
class GuardVerdict:
    """The post-compaction guard's answer for one outcome (immutable)."""

    @property
    def should_abort(self) -> bool: ...
    @property
    def detector(self) -> Optional[str]:
        """``"compaction_loop_persisted"`` when aborting."""
    @property
    def count(self) -> int: ...
    @property
    def tool_name(self) -> Optional[str]: ...
    @property
    def message(self) -> Optional[str]: ...
    def __bool__(self) -> bool: ...

@final
class ToolOutcome:
    """One recorded outcome (immutable)."""

    @property
    def tool(self) -> str: ...
    @property
    def args_hash(self) -> int:
        """Digest of (tool, canonical params)."""
    @property
    def result_hash(self) -> Optional[int]:
        """None for no result or a loop veto (nothing recorded)."""
    @property
    def is_error(self) -> bool: ...
    @property
    def unknown_tool_name(self) -> Optional[str]:
        """The missing tool an error text names (lowercased), if any."""
    @property
    def guard(self) -> Optional[GuardVerdict]:
        """The guard's verdict; None when the outcome was not fed to it."""

@disjoint_base
class ToolLoopEngine:
    """Rust state behind :class:`doomloop.ToolLoopDetector` (use that class)."""

    def __new__(
        cls,
        settings: Tuple[Any, ...],
        /,
        *,
        tool_aliases: Optional[dict[str, str]] = None,
        known_poll_tools: Optional[Iterable[str]] = None,
        volatile_keys: Optional[Iterable[str]] = None,
        normalisers: Optional[dict[str, Callable[[Any, _ToolParams], Any]]] = None,
        send_like: Optional[Callable[[str, _ToolParams], bool]] = None,
        _on_loop: Optional[Callable[[Any, ToolCallDecision], object]] = None,
        _on_event: Optional[Callable[[Any, ToolCallDecision, Optional[str]], object]] = None,
        _on_compaction_loop: Optional[Callable[[Any, ToolOutcome, Optional[str]], object]] = None,
    ) -> Self: ...
    def check(self, tool: str, params: _ToolParams, *, run_id: Optional[str] = None) -> LoopVerdict:
        """The verdict for this call now, with no side effects."""
    def record_call(
        self, tool: str, params: _ToolParams, *, run_id: Optional[str] = None, tool_call_id: Optional[str] = None
    ) -> None:
        """Append the call to the history without a result."""
    def record_outcome(
        self,
        tool: str,
        params: _ToolParams,
        *,
        result: Any = None,
        error: Union[BaseException, str, None] = None,
        run_id: Optional[str] = None,
        tool_call_id: Optional[str] = None,
    ) -> ToolOutcome:
        """Record a finished call's outcome (not fed to the guard)."""
    def before_tool_call(
        self, tool: str, params: _ToolParams, *, run_id: Optional[str] = None, tool_call_id: Optional[str] = None
    ) -> ToolCallDecision:
        """Detect, decide and record one call about to run."""
    def after_tool_call(
        self,
        tool: str,
        params: _ToolParams,
        *,
        result: Any = None,
        error: Union[BaseException, str, None] = None,
        run_id: Optional[str] = None,
        tool_call_id: Optional[str] = None,
    ) -> ToolOutcome:
        """Record a finished call's outcome and feed it to the post-compaction guard."""
    def _arm(self) -> int: ...
    def get_stats(self) -> dict[str, int]:
        """Counts since the detector was built (O(1)): ``calls`` decided, ``warnings``
        emitted, ``blocks`` (calls blocked), ``blocked_episodes``, ``outcomes`` (finished calls
        reported, a veto or no result included),
        ``guard_aborts``, and ``history_len``."""
    @property
    def history_len(self) -> int:
        """Records in the history now."""
    @property
    def _warning_keys(self) -> int: ...
    def to_bytes(self) -> bytes:
        """The detector's state and config as a snapshot (docs/snapshots.md): compact,
        versioned and checksummed; the extension points are not part of it."""
    def _restore(self, data: Union[bytes, bytearray, memoryview]) -> None: ...
    @property
    def _setting_fixes(self) -> list[str]:
        """How the thresholds were reordered at construction (empty when they were ordered)."""
    @property
    def guard_remaining(self) -> int:
        """Guard attempts left in the armed window (0: not armed)."""
    def _state_size(self) -> int:
        """Bytes of Rust state held outside the Python object."""

@disjoint_base
class RegistryEngine:
    """Rust session table behind :class:`doomloop.gateway.SessionRegistry` (use that class):
    keys to sessions, idle TTL and least-recently-used eviction, and the tool-call hooks."""

    def __new__(
        cls,
        *,
        ttl: float,
        max_sessions: int,
        clock: Optional[Callable[[], float]],
        new_session: Callable[[Any, str], Any],
        normalise_key: Callable[[Any], str],
        shared: Optional[tuple[Callable[..., Any], Callable[..., Any]]],
    ) -> Self:
        """Built whole from the registry's checked arguments: the idle TTL, the maximum, the
        clock (None: monotonic), ``new_session(registry, key)`` building a session,
        ``normalise_key(key)`` the registry's form of a key that is not a short non-empty
        ``str`` (raising for a bad key), and, with a shared store, the tool-call hooks' path
        through it."""
    @property
    def ttl(self) -> float:
        """Seconds a session may stay idle before it is evicted."""
    @property
    def max_sessions(self) -> int:
        """Sessions kept at most; past it the least recently used is evicted."""
    @property
    def created(self) -> int:
        """Sessions created since the registry was built."""
    @property
    def evicted(self) -> int:
        """Sessions evicted over ``max_sessions``."""
    @property
    def expired(self) -> int:
        """Sessions dropped when idle past the TTL."""
    def _session(self, key: Union[str, bytes]) -> Any: ...
    def _forget(self, name: str) -> None: ...
    def __len__(self) -> int:
        """Live sessions (idle ones past the TTL are dropped first)."""
    def __contains__(self, key: object, /) -> bool: ...
    def stats(self) -> dict[str, int]:
        """Registry-wide counters: ``live`` sessions, sessions ``created``, ``evicted`` (over
        ``max_sessions``) and ``expired`` (idle past the TTL)."""
    def before_tool_call(
        self,
        key: Union[str, bytes],
        tool: str,
        params: _ToolParams,
        *,
        run_id: Optional[str] = None,
        tool_call_id: Optional[str] = None,
    ) -> ToolCallDecision:
        """:meth:`ToolLoopDetector.before_tool_call` of the session's detector."""
    def after_tool_call(
        self,
        key: Union[str, bytes],
        tool: str,
        params: _ToolParams,
        *,
        result: Any = None,
        error: Union[BaseException, str, None] = None,
        run_id: Optional[str] = None,
        tool_call_id: Optional[str] = None,
    ) -> ToolOutcome:
        """:meth:`ToolLoopDetector.after_tool_call` of the session's detector."""

@disjoint_base
class GuardEngine:
    """Rust state behind :class:`doomloop.PostCompactionGuard` (use that class)."""

    def __new__(cls, window_size: Optional[int] = None) -> Self: ...
    def observe(
        self, tool: str, params: _ToolParams, *, result: Any = None, error: Union[BaseException, str, None] = None
    ) -> Optional[GuardVerdict]:
        """Observe a finished call; None when the outcome has no result hash."""
    def observe_hashes(self, tool: str, args_hash: int, result_hash: int) -> GuardVerdict:
        """Observe an outcome given as hashes (as on :class:`ToolOutcome`)."""
    def _arm(self) -> int: ...
    @property
    def window_size(self) -> int: ...
    @property
    def remaining(self) -> int:
        """Attempts left in the armed window (0: not armed)."""

def tool_result_hash(
    tool: str,
    params: _ToolParams,
    *,
    result: Any = None,
    error: Union[BaseException, str, None] = None,
    hash_plain_results: Optional[bool] = None,
) -> Optional[int]:
    """The result hash a tool-loop detector records for this outcome (built-in rules).
    ``hash_plain_results`` as the detector's setting; None: as ``ToolLoopDetector()`` (on)."""

CHANT_DETACH_THRESHOLD: int
"""Text chunks of at least this many bytes (code points, for long non-ASCII text), and token
arrays of at least this many tokens, are scanned with the interpreter lock released."""

@disjoint_base
class ChantEngine:
    """Rust state behind :class:`doomloop.ChantDetector` (use that class)."""

    def __new__(
        cls,
        settings: Tuple[Any, ...],
        /,
        *,
        _hash_key: Optional[Tuple[int, int]] = None,
        _event_type: Optional[Callable[..., Any]] = None,
        _on_chant: Optional[Callable[[Any, Any], object]] = None,
    ) -> ChantEngine: ...
    def feed(self, text: str, /) -> Optional[ChantEvent]:
        """Feed one chunk of text; returns a ``ChantEvent`` when chanting is found in it,
        else None. A non-str raises TypeError."""
    def feed_tokens(self, tokens: Any, /) -> Optional[ChantEvent]:
        """Feed token ids: a list of ints (no numpy needed), or a 1-D numpy array (int32,
        int64 or uint32) read without copying; returns a ``ChantEvent`` when chanting is
        found in them, else None. Anything else is a ``TypeError`` (naming the numpy extra
        when numpy is not imported)."""
    def reset(self) -> None:
        """Forget the stream and any chant found."""
    @property
    def event(self) -> Optional[ChantEvent]:
        """The chant found since creation or ``reset()``, or None."""
    @property
    def position(self) -> int:
        """Characters or tokens consumed since creation or ``reset()``."""
    @property
    def history_size(self) -> int:
        """Symbols of history kept (the memory bound)."""
    def to_bytes(self) -> bytes:
        """The detector's settings and whole state as a snapshot (docs/snapshots.md): the
        stream (text or tokens) with its history, chains and hash key, and any chant found."""
    def _restore(self, data: Union[bytes, bytearray, memoryview]) -> None: ...
    def _state_size(self) -> int:
        """Bytes the Rust state holds outside the Python object (history, chain table, the
        chant found)."""

@final
class TextGuard:
    """The iterator behind :func:`doomloop.guard_stream` (use that function)."""

    def __new__(
        cls, source: Iterable[str], detector: ChantEngine, exception: Optional[Callable[[Any], BaseException]] = None
    ) -> TextGuard: ...
    def __iter__(self) -> TextGuard: ...
    def __next__(self) -> str: ...

@final
class EventDecoder:
    """Reads the ``tool_call`` lines of doomloop's event format for ``doomloop.traces.events``
    (every other line is left to the Python reader, whose rules it applies)."""

    def __new__(cls) -> EventDecoder: ...
    def tool_call(
        self, raw: bytes, line: Any, /
    ) -> Optional[Tuple[Optional[str], Optional[str], dict[str, Any], bool, Optional[Tuple[Any, Any, bool]]]]:
        """``(session, run, fields, pending, times)`` of a ``tool_call`` line the reader's rules
        read without a problem: the session key, the run id, the fields of its ``Step``
        (``line`` among them), whether the call awaits a ``tool_result``, and None, or when a
        time is text, ``(ts, ended, has_outcome)`` as the event gives them for the reader to
        convert; None for any other line."""
        ...

@final
class ToolPolicies:
    """A profile's tool policies as the monitor's hooks read them (built by
    :func:`doomloop.tool_policy.table`; the first rule matching a tool's name is its policy)."""

    def __new__(
        cls, rules: Sequence[Tuple[str, Optional[Tuple[Tuple[int, int, int, int], Tuple[int, int, int]]]]]
    ) -> ToolPolicies: ...
    def policy_of(self, name: str) -> Optional[str]:
        """The policy the rules give the tool named ``name``: None, ``"exempt"`` or ``"limits"``."""

@final
class ToolDecision:
    """What :meth:`doomloop.Monitor.before_tool_call` decided about a call about to run
    (immutable)."""

    def __new__(cls, decision: ToolCallDecision, findings: list[Finding], veto: Optional[str] = None) -> ToolDecision:
        """``veto``: the monitor's own veto of a call the detector let through (the text the
        model sees instead of the result); the decision is then blocked."""
    @property
    def findings(self) -> list[Finding]:
        """What the monitor found (empty when nothing)."""
    @property
    def decision(self) -> ToolCallDecision:
        """The tool-loop detector's own decision."""
    @property
    def blocked(self) -> bool:
        """A critical finding vetoes the call: do not run it; give the model :attr:`veto`."""
    @property
    def blocked_result(self) -> Optional[dict[str, Any]]:
        """OpenClaw's veto result (a dict carrying the veto text) when blocked, else None."""
    @property
    def verdict(self) -> LoopVerdict:
        """The tool-loop detector's verdict."""
    @property
    def veto(self) -> Optional[str]:
        """The text the model sees instead of the call's result when blocked, else None."""

def _bind_monitor(
    on_verdict: Callable[[Any, ToolCallDecision, str, Any, int], ToolDecision],
    on_after: Callable[[Any, ToolOutcome, str, Any, int], list[Finding]],
) -> None:
    """Hand the extension the monitor's finding builders (``doomloop.monitor`` calls it once)."""

def _monitor_parts(data: bytes) -> list[bytes]:
    """The four parts of a ``Monitor`` snapshot: its header's JSON, then the tool-loop,
    session and chant detectors' snapshots. Raises :class:`~doomloop.SnapshotError` naming
    what is wrong with its framing."""

def _pack_monitor(header: bytes, tool: bytes, session: bytes, chant: bytes) -> bytes:
    """The ``Monitor`` snapshot of its four parts (:func:`_monitor_parts` reads it)."""

@disjoint_base
class MonitorEngine:
    """Rust state behind :class:`doomloop.Monitor` (use that class): its tool hooks, step
    counter and run id."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self: ...
    def _set_detectors(self, tool: ToolLoopEngine, session: SessionEngine) -> None: ...
    def _set_ignored_keys(self, keys: list[str]) -> None: ...
    def _set_tool_policies(self, policies: Optional[ToolPolicies]) -> None: ...
    def _hook_update(
        self,
        data: bytes,
        saved: Optional[bytes],
        header: bytes,
        chant: Optional[ChantEngine],
        hook: str,
        args: tuple[Any, ...],
    ) -> Optional[tuple[Any, bytes]]:
        """One update of the session's blob by a registry's detector hook: restore what the
        store holds when another replica changed only the detectors' state since ``saved``
        (whose header part is ``header``), run ``hook`` with ``args`` (the tool-loop
        detector's ``before_tool_call`` (tool, params, run_id, tool_call_id) or
        ``after_tool_call`` (tool, params, result, error, run_id, tool_call_id), or the
        session detector's ``record_action``, ``mark_progress``, ``record_response`` or
        ``is_doom_loop``, their positional arguments), and snapshot with that header. The
        hook's return and the new blob, or None (nothing changed) when the Python path must
        run it. An unknown hook is a ``ValueError``, the wrong number of arguments a
        ``TypeError``."""
    step: int
    """Steps recorded so far."""
    _run_id: Optional[str]
    _stop: Optional[Any]
    """The session loop the monitor stopped, while it holds (its record), or None."""
    def before_tool_call(self, tool: str, params: Any, *, call_id: Optional[str] = None) -> ToolDecision:
        """The agent is about to call ``tool``: the tool-loop detector's decision, with its
        verdict as a finding (a critical one vetoes the call)."""
    def after_tool_call(
        self,
        tool: str,
        params: Any,
        *,
        result: Any = None,
        error: Any = None,
        call_id: Optional[str] = None,
        success: Optional[bool] = None,
    ) -> list[Finding]:
        """The call returned ``result`` or failed with ``error``: recorded by the tool-loop
        detector and, as an action, by the session detector (``success`` defaults to
        ``error is None``)."""
