"""``DoomLoopGuardrail``: doomloop inside the LiteLLM proxy, as a custom guardrail.

Register it in the proxy's ``config.yaml`` (docs/litellm.md has the options)::

    guardrails:
      - guardrail_name: doomloop
        litellm_params:
          guardrail: doomloop.integrations.litellm.DoomLoopGuardrail
          mode: [pre_call, post_call]
          default_on: true

Needs the ``litellm`` extra (``pip install ".[litellm]"`` from a clone). Importing this module
imports litellm; ``import doomloop`` never does.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from typing import Any, AsyncGenerator, Callable, Dict, List, Optional

from fastapi import HTTPException
from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.types.guardrails import GuardrailEventHooks

from ... import _log
from ...chant import ChantDetector, ChantEvent
from ...errors import ConfigError, StoreUnavailable
from ...events import log_extra
from ...findings import CRITICAL, Finding, shorten
from ...gateway import AsyncRedisStore, AsyncSessionRegistry
from ...monitor import Monitor
from ...profile import Profile
from ...traces import TraceFormatError
from .._sse import MAX_FRAME, Frame, SseFrames
from .._streams import Pieces, Streams, field
from ..anthropic import message_pieces
from ..openai import chat_pieces, responses_pieces
from .conversation import Conversation, Observed
from .keys import SessionKeyFunction, session_key
from .requests import add_note, answer_text, history, reader, shape_of

__all__ = ["MODES", "DoomLoopGuardrail", "LoopInStream"]

MODES = ("block", "warn", "observe")
"""``block``: a critical finding refuses the request (HTTP 400), warnings add a note;
``warn``: never refuse, only the note; ``observe``: metrics and logs only."""

_DEFAULT_TTL = 30 * 60.0
_DEFAULT_MAX_SESSIONS = 100_000
# The note's lines at most (one per finding code).
_NOTE_LINES = 3


class LoopInStream(Exception):
    """Raised into LiteLLM's stream when the streamed answer repeats itself. The proxy turns
    it into a last SSE frame ``data: {"error": {"message", "type", "param", "code"}}``, which
    the ``openai`` client raises as ``openai.APIError`` (its ``body`` the error object)."""

    type = "doomloop_loop"
    param = None
    status_code = 400

    def __init__(self, finding: Finding) -> None:
        self.finding = finding
        self.message = f"doomloop: {finding.code} ({finding.detector}): {finding.message}"
        super().__init__(self.message)


def _module_attribute(path: str, option: str) -> Any:
    module, _, name = path.rpartition(".")
    if not module:
        raise ConfigError(option, f"must be a dotted path module.name, got {path!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise ConfigError(option, f"cannot import {path!r}: {error}") from error


def _profile(value: Any) -> Profile:
    if value is None or value == "recommended":
        return Profile.recommended()
    if value == "parity":
        return Profile.parity()
    if isinstance(value, Profile):
        return value
    if isinstance(value, str):
        return Profile.load(value)
    raise TypeError(f"profile must be a file path, 'recommended' or 'parity', got {type(value).__name__}")


_EXPORTERS: Dict[Any, Any] = {}


def _conversation(monitor: Monitor) -> Conversation:
    # The registry was built with monitor_class=Conversation: every session is one.
    assert isinstance(monitor, Conversation)
    return monitor


def _exporter(port: Optional[int], addr: str) -> Any:
    """One Prometheus exporter per process, in prometheus-client's default registry (the one
    the proxy's own ``/metrics`` serves); with ``port``, also served on that port."""
    from ..prometheus import PrometheusExporter

    exporter = _EXPORTERS.get("default")
    if exporter is None:
        exporter = _EXPORTERS["default"] = PrometheusExporter()
    if port is not None and ("port", port) not in _EXPORTERS:
        from prometheus_client import start_http_server

        start_http_server(port, addr=addr)
        _EXPORTERS["port", port] = True
    return exporter


class DoomLoopGuardrail(CustomGuardrail):  # type: ignore[misc]  # litellm is untyped to mypy here
    """A LiteLLM proxy guardrail that watches each conversation for loops (see docs/litellm.md).

    Options (``litellm_params`` keys of its config entry; LiteLLM passes them as keyword
    arguments):

    - ``doomloop_mode``: ``"block"`` (default), ``"warn"`` or ``"observe"`` (see :data:`MODES`);
      LiteLLM's own ``mode`` is the guardrail's event hooks;
    - ``profile``: a profile file (``.toml`` or ``.json``), ``"recommended"`` (default) or
      ``"parity"``;
    - ``redis_url``: share sessions between proxy replicas through Redis; ``redis_prefix``
      (default ``"doomloop:litellm:"``), ``redis_on_error`` (``"open"``, the default, or
      ``"closed"``: refuse requests with HTTP 400 while Redis cannot be reached),
      ``redis_timeout`` (seconds, default 0.5), ``redis_cluster`` (default false: the URL
      names a node of a Redis Cluster);
    - ``session_key``: a dotted path to ``function(request_data, user_api_key_dict) -> str |
      None`` naming a request's session (None falls back to the default order);
    - ``session_ttl`` (seconds idle, default 1800) and ``max_sessions`` (default 100000);
    - ``metrics``: count loop events and sessions in prometheus-client's default registry
      (default true when prometheus-client is installed); ``metrics_port``: also serve them on
      this port (``metrics_addr``, default ``"0.0.0.0"``).
    """

    def __init__(
        self,
        *,
        doomloop_mode: str = "block",
        profile: Any = None,
        redis_url: Optional[str] = None,
        redis_prefix: str = "doomloop:litellm:",
        redis_on_error: str = "open",
        redis_timeout: float = 0.5,
        redis_cluster: bool = False,
        session_key: Any = None,
        session_ttl: float = _DEFAULT_TTL,
        max_sessions: int = _DEFAULT_MAX_SESSIONS,
        metrics: Optional[bool] = None,
        metrics_port: Optional[int] = None,
        metrics_addr: str = "0.0.0.0",
        **kwargs: Any,
    ) -> None:
        if doomloop_mode not in MODES:
            raise ConfigError("doomloop_mode", f"must be one of {', '.join(MODES)}, got {doomloop_mode!r}")
        super().__init__(**kwargs)
        self.doomloop_mode = doomloop_mode
        self.profile = _profile(profile)
        if isinstance(session_key, str):
            session_key = _module_attribute(session_key, "session_key")
        if session_key is not None and not callable(session_key):
            raise TypeError(f"session_key must be a callable or a dotted path to one, got {type(session_key).__name__}")
        self.session_key_function: Optional[SessionKeyFunction] = session_key
        self.exporter = None
        if metrics or (metrics is None and importlib.util.find_spec("prometheus_client") is not None) or metrics_port is not None:
            self.exporter = _exporter(None if metrics_port is None else int(metrics_port), metrics_addr)
        store = None
        if redis_url:
            store = AsyncRedisStore(
                redis_url,
                prefix=redis_prefix,
                on_error=redis_on_error,  # type: ignore[arg-type]
                timeout=float(redis_timeout),
                cluster=redis_cluster,
            )
        # The conversations: a gateway registry of Conversation monitors, in this process or,
        # with a Redis URL, shared by every proxy replica (one update of a conversation's blob
        # per request; an outage follows the store's on_error policy).
        self.sessions = AsyncSessionRegistry(
            self.profile,
            store=store,
            ttl=float(session_ttl),
            max_sessions=int(max_sessions),
            on_event=None if self.exporter is None else self.exporter.on_event,
            monitor_class=Conversation,
        )
        if self.exporter is not None and store is None:
            self.exporter.watch(self.sessions)
        self._chant_options = dict(self.profile.chant.as_dict())
        if self.exporter is not None:
            self._chant_options["on_event"] = self.exporter.on_event

    # --- pre-call ------------------------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: Dict[str, Any], call_type: Any
    ) -> Optional[Dict[str, Any]]:
        """Feed the conversation's new history to its monitor, then block, note or pass."""
        if not self.should_run_guardrail(data=data, event_type=GuardrailEventHooks.pre_call):
            return data
        key = None
        try:
            shape = shape_of(data, call_type)
            if shape is None:
                return data
            items = history(data, shape)
            key = self._key(data, user_api_key_dict, items)
            if items is None:
                _log.warning("session %r: the request has no readable history; forwarded unchanged", key, extra=log_extra(key))
                return data
            problems: List[TraceFormatError] = []
            read = reader(shape, problems)
            observed: Observed = await self.sessions.apply(
                key, lambda conversation: _conversation(conversation).observe(items, read)
            )
        except StoreUnavailable as error:
            return self._store_down(data, key, error)
        except Exception as error:  # noqa: BLE001 - a guardrail bug must not fail the request
            _log.warning("session %r: the request could not be read (%r); forwarded unchanged", key, error, extra=log_extra(key))
            return data
        if problems:
            _log.warning(
                "session %r: %d part(s) of the history could not be read (%s); forwarded as sent",
                key,
                len(problems),
                problems[0],
                extra=log_extra(key),
            )
        if not observed.findings:
            return data
        self._log_findings(key, observed.findings)
        mode = self.doomloop_mode
        if mode == "observe":
            return data
        blocked = observed.blocked
        if blocked is not None and mode == "block":
            raise HTTPException(status_code=400, detail={"error": _error_body(blocked)})
        note = _note(observed.findings)
        if note:
            add_note(data, shape, note)
        return data

    def _key(self, data: Dict[str, Any], user_api_key_dict: Any, items: Optional[List[Any]]) -> str:
        return session_key(data, user_api_key_dict, items, self.session_key_function)

    def _store_down(self, data: Dict[str, Any], key: Optional[str], error: StoreUnavailable) -> Dict[str, Any]:
        # Only under the store's "closed" policy: the session cannot be checked.
        _log.warning("session %r: the session store is unavailable (%s)", key, error, extra=log_extra(key))
        if self.doomloop_mode != "block":
            return data
        detail = {
            "code": "doomloop.store_unavailable",
            "message": f"the loop guard's session store is unavailable: {error}",
            "detector": "store",
        }
        raise HTTPException(status_code=400, detail={"error": detail})

    def _log_findings(self, key: str, findings: List[Finding]) -> None:
        for finding in findings:
            _log.info("session %r: %s %s: %s", key, finding.level, finding.code, finding.message, extra=log_extra(key))

    # --- responses ------------------------------------------------------------------------------

    async def async_post_call_success_hook(self, data: Dict[str, Any], user_api_key_dict: Any, response: Any) -> Any:
        """Record a non-streamed answer in its conversation."""
        if not self.should_run_guardrail(data=data, event_type=GuardrailEventHooks.post_call):
            return response
        await self._record(data, user_api_key_dict, answer_text(response))
        return response

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: Dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """Pass the stream through, watching every stream of text in it; cut it where the
        answer repeats itself (see :class:`LoopInStream`), and record the answer. Chunk objects
        and raw SSE bytes (Anthropic's ``/v1/messages``, which LiteLLM relays as it arrives)
        are both read."""
        if not self.should_run_guardrail(data=request_data, event_type=GuardrailEventHooks.post_call):
            async for chunk in response:
                yield chunk
            return
        watch = _Watch(self._stream_detector(request_data, user_api_key_dict))
        blocking = self.doomloop_mode == "block"
        frames: Optional[SseFrames] = None
        try:
            async for chunk in response:
                if type(chunk) is bytes:
                    if frames is None:
                        frames = SseFrames(b"delta")
                    passed = watch.frames(frames.feed(chunk), blocking)
                    if passed:
                        yield passed
                    if watch.cut is not None and blocking:
                        # The client has whole frames only: an error event ends the stream.
                        yield _error_frame(watch.cut)
                        break
                    continue
                if watch.saw(chunk) and blocking:
                    break
                yield chunk
            else:
                if frames is not None:
                    rest = frames.flush()
                    if rest:
                        yield rest
        finally:
            if watch.cut is not None and blocking:
                aclose = getattr(response, "aclose", None)
                if callable(aclose):
                    await aclose()
            if frames is not None and frames.unread:
                _log.warning("%d SSE frame(s) over %d bytes passed unread", frames.unread, MAX_FRAME)
            await self._record(request_data, user_api_key_dict, "".join(watch.answer) or None)
        if watch.cut is not None and blocking and frames is None:
            raise watch.cut

    def _stream_detector(self, data: Dict[str, Any], user_api_key_dict: Any) -> Callable[[], ChantDetector]:
        options = self._chant_options
        key = None
        try:
            key = self._key(data, user_api_key_dict, _history_of(data))
        except Exception as error:  # noqa: BLE001 - a stream is watched without a session key rather than not at all
            _log.warning("the stream's session could not be named (%r)", error)
        return lambda: ChantDetector(**options, session_key=key)

    async def _record(self, data: Dict[str, Any], user_api_key_dict: Any, text: Optional[str]) -> None:
        if not text:
            return
        key = None
        try:
            key = self._key(data, user_api_key_dict, _history_of(data))
            findings = await self.sessions.apply(key, lambda conversation: _conversation(conversation).record_answer(text))
        except Exception as error:  # noqa: BLE001 - recording never fails a response already made
            _log.warning("session %r: the answer could not be recorded (%r)", key, error, extra=log_extra(key))
            return
        if findings:
            self._log_findings(key, findings)


def _history_of(data: Dict[str, Any]) -> Optional[List[Any]]:
    items = data.get("messages")
    if isinstance(items, list):
        return items
    items = data.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return items if isinstance(items, list) else None


def _reader(chunk: Any) -> Optional[Pieces]:
    # One hook serves every endpoint: chat chunks have choices; Responses and Anthropic events
    # a type.
    if field(chunk, "choices") is not None:
        return chat_pieces
    kind = field(chunk, "type")
    if type(kind) is str:
        return responses_pieces if kind.startswith("response.") else message_pieces
    return None


class _Watch:
    """One response's streams of text as the stream hook reads them: their chant detectors,
    the answer's text (the first text stream's), and the cut, once one chants."""

    __slots__ = ("_streams", "_read", "answer", "_answer_stream", "_answer_feed", "cut")

    def __init__(self, new: Callable[[], ChantDetector]) -> None:
        self._streams = Streams(new)
        self._read: Optional[Pieces] = None
        self.answer: List[str] = []
        self._answer_stream: Any = None
        # The answer's detector's feed, at hand: most chunks are the answer's text.
        self._answer_feed: Optional[Callable[[str], Optional[ChantEvent]]] = None
        self.cut: Optional[LoopInStream] = None

    def saw(self, chunk: Any) -> bool:
        """Read one chunk (an SDK object or its JSON); whether it completed a chant."""
        read = self._read
        if read is None:
            # One reader per response: its first chunk that has a shape names the endpoint.
            read = self._read = _reader(chunk)
            if read is None:
                return False
        if self.cut is not None:
            return False
        streams = self._streams
        for stream, text in read(chunk):
            answer = stream == self._answer_stream
            if not answer and self._answer_stream is None and isinstance(stream, tuple) and stream[1:] == ("text",):
                self._answer_stream = stream
                self._answer_feed = streams.detector(stream).feed
                answer = True
            if answer:
                event = streams.found(self._answer_feed(text))  # type: ignore[misc]
            else:
                event = streams.feed(stream, text)
            if event is not None:
                self.cut = _cut(streams)
                return True
            if answer:
                self.answer.append(text)
        return False

    def frames(self, frames: List[Frame], blocking: bool) -> bytes:
        """Read whole SSE frames; the bytes to pass on: all of them, or, when one completes a
        chant and ``blocking``, those before it."""
        passed = []
        for raw, event in frames:
            if event is not None and self.saw(event) and blocking:
                break
            passed.append(raw)
        return b"".join(passed)


def _cut(streams: Streams) -> LoopInStream:
    event = streams.event
    assert event is not None
    window = event.window if isinstance(event.window, str) else " ".join(map(str, event.window))
    message = f"the answer repeats itself: period {event.period}, {event.count} repeats from offset {event.start}"
    finding = Finding("chant", CRITICAL, "chant", "stop_stream", message, evidence=shorten(window), count=event.count)
    return LoopInStream(finding)


def _error_frame(cut: LoopInStream) -> bytes:
    # An SSE error event, as Anthropic's API ends a failed stream: the anthropic client raises
    # it as an APIStatusError (its body this event's data), and the openai client as an APIError.
    error = {**_error_body(cut.finding), "type": cut.type, "message": cut.message}
    return b"event: error\ndata: " + json.dumps({"type": "error", "error": error}).encode() + b"\n\n"


def _error_body(finding: Finding) -> Dict[str, Any]:
    return {
        "code": f"doomloop.{finding.code}",
        "message": finding.message,
        "detector": finding.detector,
        "tool": finding.tool,
        "evidence": finding.evidence,
        "count": finding.count,
    }


def _note(findings: List[Finding]) -> Optional[str]:
    lines: List[str] = []
    seen = set()
    for finding in findings:
        if finding.code in seen or len(lines) >= _NOTE_LINES:
            continue
        seen.add(finding.code)
        what = f" Repeated: {finding.evidence}." if finding.evidence else ""
        lines.append(f"- {finding.message}{what}")
    if not lines:
        return None
    return (
        "[doomloop] You appear to be repeating yourself:\n"
        + "\n".join(lines)
        + "\nDo not repeat that call or answer. Change the arguments, try a different tool or approach, "
        "or tell the user what is blocking you."
    )
