"""Fuzzing the readers: random bytes and random JSON, through every format and the per-request
functions, only ever yield runs or steps, or raise TraceFormatError (under strict)."""

from __future__ import annotations

import io
import json
from typing import Any, List

from hypothesis import given, settings, strategies as st

from doomloop.traces import FORMATS, Run, Step, TraceFormatError, anthropic, openai_chat, openai_responses, read

KEYS = st.sampled_from(
    [
        "v", "type", "session", "tool", "call_id", "arguments", "result", "error", "ts", "usage", "role", "content",
        "tool_calls", "function", "name", "id", "tool_call_id", "messages", "input", "output", "tool_use_id", "is_error",
        "resourceSpans", "scopeSpans", "spans", "attributes", "key", "value", "stringValue", "intValue", "traceId",
        "calls", "text", "status", "code", "kvlistValue", "values", "startTimeUnixNano", "previous_response_id",
    ]
)  # fmt: skip
VALUES = st.sampled_from(
    [1, "tool_call", "tool_result", "user", "assistant", "tool", "end", "function_call", "function_call_output",
     "tool_use", "tool_result", "text", "message", "execute_tool", "gen_ai.tool.name", "TOOL", "{\"a\": 1}", "{", None, True]
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
