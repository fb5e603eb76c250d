"""Reader of OpenTelemetry GenAI spans in OTLP JSON (format ``"otlp"``): the file exporter's
JSON Lines of ``TracesData`` (``{"resourceSpans": [...]}`` per line), or one such document.

- A tool span (``gen_ai.operation.name`` ``execute_tool``, or OpenInference's
  ``openinference.span.kind`` ``TOOL``; in a span that names neither, ``gen_ai.tool.name`` or
  a span name ``execute_tool {tool}``, as instrumentations older than the operation name
  write them) is a ``"tool"`` step: ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``
  (objects, or JSON strings kept raw when they are not JSON); where those are absent,
  OpenInference's ``tool.name``, ``tool_call.id``, ``input.value`` and ``output.value``. The
  call failed when the span has ``error.type`` or an error status (its message, or the error
  type, is the step's ``error``).
- An inference span (``chat``, ``text_completion``, ``generate_content``; OpenInference
  ``LLM``) carries the token usage (``gen_ai.usage.input_tokens``/``output_tokens``; before
  semantic conventions 1.27, ``gen_ai.usage.prompt_tokens``/``completion_tokens``; or
  ``llm.token_count.prompt``/``completion``; in a span that names neither an operation nor a
  kind, those attributes alone): it goes on the session's next step. A count is an integer
  (``intValue``, or a whole ``doubleValue``). An
  inference span whose ``gen_ai.output.messages`` hold text is an ``"assistant"`` step.
- The session is ``gen_ai.conversation.id`` (OpenInference ``session.id``) of any span of the
  trace, else the trace id. Steps are ordered by start time, since the exporter writes spans
  as they end.

The exporter never says a session has ended, so the reader holds every session's steps
until the end of the file, then yields the sessions in the order they first appeared. A span
that cannot be read is reported and skipped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .conversation import content_text
from .decode import dumps, kind, maybe_json
from .records import Run, Step, new_step
from .source import Report

__all__ = ["NAME", "looks_like", "runs"]

NAME = "otlp"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_INFERENCE = ("chat", "text_completion", "generate_content")
_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
_TOOL_SPAN = "execute_tool "
# Token counts: today's GenAI names, those before semantic conventions 1.27, OpenInference's.
_INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")


def looks_like(value: Any) -> int:
    """2 for a ``TracesData`` object (``resourceSpans``), 0 otherwise."""
    return 2 if isinstance(value, dict) and isinstance(value.get("resourceSpans"), list) else 0


class _Trace:
    __slots__ = ("conversation", "spans")

    def __init__(self) -> None:
        self.conversation: Optional[str] = None
        # (start, order read, step or None, tokens): a step, or the usage of an inference span
        self.spans: List[Tuple[float, int, Optional[Step], Tuple[Optional[int], Optional[int]]]] = []


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's ``TracesData`` records (see the module's documentation)."""
    traces: Dict[str, _Trace] = {}
    order = 0
    for line, data in records:
        if not looks_like(data):
            report(f"expected a TracesData object with resourceSpans, got {kind(data)}", line)
            continue
        for where, span in _spans(data, report, line):
            read = _span(span, where, report, line)
            if read is None:
                continue
            trace_id, conversation, start, step, usage = read
            trace = traces.get(trace_id)
            if trace is None:
                trace = traces[trace_id] = _Trace()
            if conversation is not None and trace.conversation is None:
                trace.conversation = conversation
            if step is not None or usage != (None, None):
                trace.spans.append((start, order, step, usage))
                order += 1
    sessions: Dict[str, List[Tuple[float, int, Optional[Step], Tuple[Optional[int], Optional[int]]]]] = {}
    for trace_id, trace in traces.items():
        sessions.setdefault(trace.conversation or trace_id, []).extend(trace.spans)
    for session, spans in sessions.items():
        spans.sort(key=lambda span: (span[0], span[1]))
        yield Run(None, None, _steps(spans), session, None, source, NAME)


def _steps(spans: List[Tuple[float, int, Optional[Step], Tuple[Optional[int], Optional[int]]]]) -> Tuple[Step, ...]:
    # An inference span's usage goes on the next step; usage after the last step is an
    # assistant step of its own.
    out: List[Step] = []
    given: Optional[int] = None
    produced: Optional[int] = None
    for _, _, step, (span_given, span_produced) in spans:
        given = _add(given, span_given)
        produced = _add(produced, span_produced)
        if step is None:
            continue
        if given is not None or produced is not None:
            step = replace(step, input_tokens=_add(step.input_tokens, given), output_tokens=_add(step.output_tokens, produced))
            given = produced = None
        out.append(step)
    if given is not None or produced is not None:
        out.append(new_step(None, None, None, None, None, None, False, "assistant", None, None, given, produced))
    return tuple(out)


def _add(total: Optional[int], more: Optional[int]) -> Optional[int]:
    return more if total is None else total if more is None else total + more


def _spans(data: Dict[str, Any], report: Report, line: Optional[int]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    for r, resource in enumerate(data["resourceSpans"]):
        scopes = resource.get("scopeSpans", resource.get("instrumentationLibrarySpans")) if isinstance(resource, dict) else None
        if not isinstance(scopes, list):
            report(f"resourceSpans[{r}].scopeSpans: expected an array, got {kind(scopes)}", line)
            continue
        for s, scope in enumerate(scopes):
            spans = scope.get("spans") if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                report(f"resourceSpans[{r}].scopeSpans[{s}].spans: expected an array, got {kind(spans)}", line)
                continue
            for n, span in enumerate(spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                if isinstance(span, dict):
                    yield where, span
                else:
                    report(f"{where}: expected an object, got {kind(span)}", line)


def _span(
    span: Dict[str, Any], where: str, report: Report, line: Optional[int]
) -> Optional[Tuple[str, Optional[str], float, Optional[Step], Tuple[Optional[int], Optional[int]]]]:
    # (trace id, conversation id, start, step, usage) of a span; None for one not read.
    trace_id = span.get("traceId")
    if not isinstance(trace_id, str):
        report(f"{where}.traceId: expected a string, got {kind(trace_id)}", line)
        return None
    attributes = _attributes(span.get("attributes"))
    conversation = attributes.get("gen_ai.conversation.id", attributes.get("session.id"))
    conversation = conversation if isinstance(conversation, str) else None
    started = _seconds(span.get("startTimeUnixNano"))
    ended = _seconds(span.get("endTimeUnixNano"))
    operation = attributes.get("gen_ai.operation.name")
    span_kind = attributes.get("openinference.span.kind")
    no_usage = (None, None)
    # A span that names neither is read by the attributes it carries.
    unnamed = operation is None and span_kind is None
    if (
        operation == "execute_tool"
        or span_kind == "TOOL"
        or (unnamed and ("gen_ai.tool.name" in attributes or _tool_of_span_name(span.get("name")) is not None))
    ):
        step = _tool(span, attributes, where, report, line, started, ended)
        return trace_id, conversation, started if started is not None else 0.0, step, no_usage
    usage = (_count(_first(attributes, _INPUT_TOKENS)), _count(_first(attributes, _OUTPUT_TOKENS)))
    if operation in _INFERENCE or span_kind == "LLM" or (unnamed and usage != no_usage):
        text = _output_text(attributes.get("gen_ai.output.messages"))
        step = None
        if text is not None:
            step = new_step(
                None, None, None, None, None, None, False, "assistant", text, None, usage[0], usage[1], started, ended, line
            )
            usage = no_usage
        return trace_id, conversation, started if started is not None else 0.0, step, usage
    return trace_id, conversation, 0.0, None, no_usage


def _tool(
    span: Dict[str, Any],
    attributes: Dict[str, Any],
    where: str,
    report: Report,
    line: Optional[int],
    started: Optional[float],
    ended: Optional[float],
) -> Optional[Step]:
    name = attributes.get("gen_ai.tool.name", attributes.get("tool.name"))
    if not isinstance(name, str):
        name = _tool_of_span_name(span.get("name"))
        if name is None:
            report(f"{where}: a tool span without gen_ai.tool.name", line)
            return None
    call_id = attributes.get("gen_ai.tool.call.id", attributes.get("tool_call.id"))
    arguments = (
        attributes["gen_ai.tool.call.arguments"] if "gen_ai.tool.call.arguments" in attributes else attributes.get("input.value")
    )
    result = attributes["gen_ai.tool.call.result"] if "gen_ai.tool.call.result" in attributes else attributes.get("output.value")
    status: Dict[str, Any] = span["status"] if isinstance(span.get("status"), dict) else {}
    error_type = attributes.get("error.type")
    failed = error_type is not None or status.get("code") in _STATUS_ERROR
    message = status.get("message")
    error = (
        (message if isinstance(message, str) and message else str(error_type) if error_type is not None else "error")
        if failed
        else None
    )
    return new_step(
        name,
        maybe_json(arguments),
        call_id if isinstance(call_id, str) else None,
        None,
        result if result is None or isinstance(result, str) else dumps(result),
        None,
        failed,
        "tool",
        None,
        error,
        None,
        None,
        started,
        ended,
        line,
    )


def _first(attributes: Dict[str, Any], keys: Tuple[str, ...]) -> Any:
    return next((attributes[key] for key in keys if key in attributes), None)


def _tool_of_span_name(name: Any) -> Optional[str]:
    # The semantic conventions name a tool span "execute_tool {gen_ai.tool.name}".
    if isinstance(name, str) and name.startswith(_TOOL_SPAN) and len(name) > len(_TOOL_SPAN):
        return name[len(_TOOL_SPAN) :]
    return None


def _attributes(values: Any) -> Dict[str, Any]:
    # OTLP JSON's [{"key": k, "value": AnyValue}] as a dict of plain values.
    out: Dict[str, Any] = {}
    if isinstance(values, list):
        for pair in values:
            if isinstance(pair, dict) and isinstance(pair.get("key"), str):
                out[pair["key"]] = _value(pair.get("value"))
    return out


def _value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        # int64 is a JSON string in OTLP JSON (a number from some exporters).
        try:
            return int(value["intValue"])
        except (TypeError, ValueError, OverflowError):
            return None
    if "doubleValue" in value:
        return value["doubleValue"]
    if "boolValue" in value:
        return value["boolValue"]
    if "arrayValue" in value:
        items = value["arrayValue"].get("values", []) if isinstance(value["arrayValue"], dict) else None
        return [_value(item) for item in items] if isinstance(items, list) else None
    if "kvlistValue" in value:
        kvlist = value["kvlistValue"]
        return _attributes(kvlist.get("values")) if isinstance(kvlist, dict) else None
    return value.get("bytesValue")


def _seconds(nanos: Any) -> Optional[float]:
    try:
        return int(nanos) / 1e9
    except (TypeError, ValueError, OverflowError):
        return None


def _count(value: Any) -> Optional[int]:
    # Some exporters write counts as doubleValue: a whole one is the count it holds.
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _output_text(messages: Any) -> Optional[str]:
    # gen_ai.output.messages: [{"role": "assistant", "parts": [{"type": "text", "content": ...}]}]
    messages = maybe_json(messages)
    if not isinstance(messages, list):
        return None
    texts: List[Any] = []
    for message in messages:
        parts = message.get("parts") if isinstance(message, dict) else None
        if isinstance(parts, list):
            texts.extend(part.get("content") for part in parts if isinstance(part, dict) and part.get("type") == "text")
    return content_text([text for text in texts if isinstance(text, str)])
