"""Fuzzing the readers: random bytes, random JSON and the realistic trace files with one part
replaced, through every format and the per-request functions, only ever yield runs or steps, or
raise TraceFormatError (under strict)."""

from __future__ import annotations

import io
import json
from typing import Any, Iterator, List, Tuple, Union

from hypothesis import given, settings, strategies as st

from doomloop.traces import FORMATS, Run, Step, TraceFormatError, anthropic, openai_chat, openai_responses, read
from support import DATA

KEYS = st.sampled_from(
    [
        "v", "type", "session", "tool", "call_id", "arguments", "result", "error", "ts", "usage", "role", "content",
        "tool_calls", "function", "name", "id", "tool_call_id", "messages", "input", "output", "tool_use_id", "is_error",
        "resourceSpans", "scopeSpans", "spans", "attributes", "key", "value", "stringValue", "intValue", "traceId",
        "calls", "text", "status", "code", "kvlistValue", "values", "startTimeUnixNano", "previous_response_id",
        "payload", "timestamp", "info", "last_token_usage", "item", "thread_id", "exit_code", "aggregated_output",
        "parts", "functionCall", "functionResponse", "args", "response", "contents", "candidates", "usageMetadata",
        "sessionId", "projectHash", "toolCalls", "$set", "$rewindTo",
    ]
)  # fmt: skip
VALUES = st.sampled_from(
    [1, "tool_call", "tool_result", "user", "assistant", "tool", "end", "function_call", "function_call_output",
     "tool_use", "tool_result", "text", "message", "execute_tool", "gen_ai.tool.name", "TOOL", "{\"a\": 1}", "{", None, True,
     "session_meta", "response_item", "event_msg", "token_count", "compacted", "local_shell_call", "thread.started",
     "turn.started", "turn.completed", "item.completed", "command_execution", "mcp_tool_call", "model", "gemini",
     "Exit code: 1\nOutput:\nx", "{\"output\":\"x\",\"metadata\":{\"exit_code\":2}}"]
)  # fmt: skip
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8) | VALUES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS | st.text(max_size=4), children, max_size=5),
    max_leaves=30,
)


def check(data: bytes, format: str, strict: bool) -> None:
    try:
        for run in read(io.BytesIO(data), format=format, strict=strict):
            assert isinstance(run, Run) and all(isinstance(step, Step) for step in run.steps)
    except TraceFormatError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.lists(JSON, min_size=1, max_size=6), st.sampled_from(("auto",) + FORMATS), st.booleans())
def test_random_json_lines(records: List[Any], format: str, strict: bool) -> None:
    check(b"".join(json.dumps(record).encode() + b"\n" for record in records), format, strict)


@settings(max_examples=100, deadline=None)
@given(JSON, st.sampled_from(("auto",) + FORMATS))
def test_random_json_documents(record: Any, format: str) -> None:
    check(json.dumps(record, indent=1).encode(), format, True)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(("auto",) + FORMATS), st.booleans())
def test_random_bytes(data: bytes, format: str, strict: bool) -> None:
    check(data, format, strict)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_the_per_request_functions_never_raise(messages: Any) -> None:
    for steps in (openai_chat.steps, openai_responses.steps, anthropic.steps):
        skipped: List[TraceFormatError] = []
        assert all(isinstance(step, Step) for step in steps(messages, on_skip=skipped.append))
        assert all(isinstance(error, TraceFormatError) for error in skipped)
        steps(messages)


# The realistic files, each record as parsed: a random record is far from every format's shape,
# so most of it is turned away at once; one part of a real record replaced reaches the readers'
# inner parts (a span's attribute values, a message's content blocks, ...).
TRACE_FILES = sorted((DATA / "traces").iterdir())
Place = Tuple[Union[str, int], ...]


def parts(value: Any, path: Place = ()) -> Iterator[Place]:
    yield path
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from parts(child, path + (key,))


def replaced(value: Any, path: Place, new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return copy


# OTLP's AnyValue, with parts of the wrong type and int64s out of range (strings, as OTLP JSON
# writes them).
ANY_VALUE = st.recursive(
    st.one_of(
        st.builds(lambda v: {"intValue": v}, st.integers(min_value=2**63, max_value=2**80).map(str) | JSON),
        st.builds(lambda v: {"stringValue": v}, JSON),
    ),
    lambda children: st.one_of(
        st.builds(lambda v: {"arrayValue": {"values": v}}, st.lists(children, max_size=3) | JSON),
        st.builds(
            lambda v: {"kvlistValue": {"values": v}},
            st.lists(st.fixed_dictionaries({"key": st.text(max_size=3), "value": children}), max_size=3) | JSON,
        ),
        st.builds(lambda v: {"arrayValue": v}, JSON),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TRACE_FILES), st.data(), JSON | ANY_VALUE, st.booleans())
def test_realistic_files_with_one_part_replaced(path: Any, data: Any, new: Any, strict: bool) -> None:
    text = path.read_bytes()
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        index = data.draw(st.integers(0, len(records) - 1))
        records[index] = replaced(records[index], data.draw(st.sampled_from(list(parts(records[index])))), new)
        mutated = b"".join(json.dumps(record).encode() + b"\n" for record in records)
    else:
        document = json.loads(text)
        mutated = json.dumps(replaced(document, data.draw(st.sampled_from(list(parts(document)))), new)).encode()
    check(mutated, "auto", strict)
