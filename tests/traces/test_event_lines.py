"""The event format's tool_call lines read in Rust (``EventDecoder``) against the Python reader
they stand in for: the same runs, with values of the same types, and the same reports, on
random lines that mix well-formed calls with every field of every type, and on the JSON values
an argument can hold, against the Python decoder."""

from __future__ import annotations

import io
import json
from typing import Any, List, Optional, Tuple

import orjson
from hypothesis import example, given, settings, strategies as st

from doomloop._core import EventDecoder
from doomloop.traces import Run, events, read
from doomloop.traces.source import Records

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
# Each field of an event: absent, or a value of the type the format gives it, or of another.
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
FIELDS = {
    "v": st.sampled_from([1, 1, 1, 1.0, True, 2, None, "1"]),
    "type": st.sampled_from(["tool_call"] * 6 + ["tool_result", "user", "assistant", "end", "compaction", "other", 3]),
    "session": st.one_of(st.sampled_from(["a", "b", None]), JSON),
    "run": st.one_of(st.sampled_from(["r1", "r2"]), JSON),
    "tool": st.one_of(st.sampled_from(["bash", "read_file", "t\u00e9"]), JSON),
    "call_id": st.one_of(st.sampled_from(["c1", "c2", "c3", None]), JSON),
    "arguments": JSON,
    "thought": st.one_of(TEXT, JSON),
    "ts": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(min_value=-(2**66), max_value=2**66),
        st.sampled_from(["2026-01-01T00:00:00Z", "nope", None, True]),
    ),
    "ended": st.one_of(
        st.floats(min_value=0, max_value=2e9),
        st.integers(min_value=0, max_value=2**40),
        st.sampled_from(["2026-01-01T00:00:01Z", None, False]),
    ),
    "result": st.one_of(TEXT, JSON),
    "error": st.one_of(TEXT, st.none(), JSON),
    "returncode": st.one_of(st.integers(min_value=-(2**65), max_value=2**65), JSON),
    "is_error": st.one_of(st.booleans(), JSON),
    "usage": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                name: st.one_of(
                    st.integers(min_value=-5, max_value=2**65),
                    st.none(),
                    st.booleans(),
                    st.floats(allow_nan=False, allow_infinity=False),
                )
                for name in ("input_tokens", "prompt_tokens", "output_tokens", "completion_tokens")
            },
        ),
        JSON,
    ),
    "text": st.one_of(TEXT, JSON),
    "status": JSON,
}
EVENTS = st.fixed_dictionaries(
    {"v": FIELDS["v"], "type": FIELDS["type"]}, optional={k: v for k, v in FIELDS.items() if k not in ("v", "type")}
)
# A tool_call of the types the format gives (what the Rust reader reads), with the edge values
# of those types.
# Times as text: RFC 3339 with and without an offset, the other forms fromisoformat takes, and
# text that is not a time (reported).
TIMES = st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-01 10:00:00.5+02:00", "2026-01-01", "2026-W01-1", "nope", ""])
COUNT = st.one_of(st.integers(min_value=0, max_value=2**64 - 1), st.sampled_from([-1, None, True, 2.0]))
GOOD_FIELDS = {
    "session": st.sampled_from(["a", "b", None]),
    "run": st.sampled_from(["r1", "r2", None, 5]),
    "tool": st.sampled_from(["bash", "read_file", "t\u00e9", "a\nb"]),
    "call_id": st.sampled_from(["c1", "c2", "c3", None]),
    "arguments": JSON,
    "thought": st.one_of(TEXT, st.sampled_from([None, 3, ["x"]])),
    "ts": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False), st.integers(min_value=-(2**66), max_value=2**66), st.none(), TIMES
    ),
    "ended": st.one_of(st.floats(min_value=0, max_value=2e9), st.integers(min_value=0, max_value=2**40), st.none(), TIMES),
    "result": st.one_of(TEXT, st.none()),
    "error": st.one_of(TEXT, st.none()),
    "returncode": st.one_of(st.integers(min_value=-(2**65), max_value=2**65), st.sampled_from([None, True, 1.5, "1"])),
    "is_error": st.one_of(st.booleans(), st.sampled_from([None, 1, "true"])),
    "usage": st.one_of(
        st.fixed_dictionaries(
            {}, optional={name: COUNT for name in ("input_tokens", "prompt_tokens", "output_tokens", "completion_tokens")}
        ),
        st.sampled_from([None, [1], "usage"]),
    ),
    "status": JSON,
}
GOOD = st.fixed_dictionaries(
    {"v": st.just(1), "type": st.just("tool_call"), "tool": GOOD_FIELDS["tool"]},
    optional={k: v for k, v in GOOD_FIELDS.items() if k != "tool"},
)
# A good call with one field of any type (the Python reader reports some, drops others).
ONE_OFF = st.tuples(GOOD, st.sampled_from(sorted(FIELDS)), st.data()).map(
    lambda case: {**case[0], case[1]: case[2].draw(FIELDS[case[1]])}
)
RESULTS = st.fixed_dictionaries(
    {"v": st.just(1), "type": st.just("tool_result"), "call_id": st.sampled_from(["c1", "c2", "c3"])},
    optional={"session": st.sampled_from(["a", "b"]), "result": TEXT},
)
# Lines as a writer puts them: compact or spaced JSON, escapes or not; now and then a line that
# is not JSON, or holds a key twice.
LINE = st.one_of(
    st.tuples(GOOD, st.sampled_from(["compact", "spaced", "ascii"])).map(lambda pair: _dumps(*pair)),
    st.tuples(st.one_of(GOOD, ONE_OFF, RESULTS, EVENTS), st.sampled_from(["compact", "spaced", "ascii"])).map(
        lambda pair: _dumps(*pair)
    ),
    st.tuples(EVENTS, st.sampled_from(sorted(FIELDS)), JSON).map(
        lambda case: _dumps(case[0], "compact")[:-1] + ", " + json.dumps(case[1]) + ": " + json.dumps(case[2]) + "}"
    ),
    st.sampled_from(
        [
            "{",
            "[1, 2]",
            '"text"',
            '{"v": 1, "type": "tool_call", "tool": "\\ud800"}',
            '{"v": 1, "type": "tool_call", "tool": "t", "ts": 1e400}',
        ]
    ),
)


def _dumps(event: Any, style: str) -> str:
    if style == "compact":
        return json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(event, ensure_ascii=style == "ascii")


def _typed(value: Any) -> Any:
    # Equality that tells 1 from 1.0 and True, and a dict's order.
    if isinstance(value, dict):
        return ("dict", [(_typed(key), _typed(item)) for key, item in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(item) for item in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def _runs(run_list: List[Run]) -> Any:
    return [
        (run.session_id, run.run_id, run.exit_status, run.format, [_typed(dict(vars(step))) for step in run.steps])
        for run in run_list
    ]


def _both(data: bytes) -> Tuple[Tuple[Any, List[Tuple[str, Optional[int]]]], Tuple[Any, List[Tuple[str, Optional[int]]]]]:
    fast: List[Tuple[str, Optional[int]]] = []
    found = list(read(io.BytesIO(data), format="doomloop", on_skip=lambda error: fast.append((error.problem, error.line))))
    slow: List[Tuple[str, Optional[int]]] = []

    def report(problem: str, line: Optional[int]) -> None:
        slow.append((problem, line))

    reference = list(events.runs(iter(Records(io.BytesIO(data), report)), report, "<stream>"))
    return (_runs(found), fast), (_runs(reference), slow)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=12))
@example(['{"v": 1, "type": "tool_call", "tool": "t", "result": "a\\nb", "usage": {"input_tokens": 2}}'])
@example(
    [
        '{"v":1,"type":"tool_call","tool":"t","call_id":"c","arguments":{"a":1,"a":2,"b":[]}}',
        '{"v":1,"type":"tool_result","call_id":"c","result":"ok"}',
    ]
)
def test_tool_call_lines_read_in_rust_are_what_the_python_reader_reads(lines: List[str]) -> None:
    data = "".join(line + "\n" for line in lines).encode()
    (fast, fast_skips), (slow, slow_skips) = _both(data)
    assert fast == slow
    assert fast_skips == slow_skips


@settings(max_examples=400, deadline=None)
@given(JSON)
@example({"x": 1, "y": -0.0, "z": [True, None, 2**64 - 1, -(2**63), 2**64, 1e300]})
def test_arguments_become_the_values_the_python_decoder_gives(value: Any) -> None:
    for raw in (json.dumps(value), json.dumps(value, ensure_ascii=False, separators=(",", ":"))):
        line = '{"v": 1, "type": "tool_call", "tool": "t", "arguments": ' + raw + "}"
        read = EventDecoder().tool_call(line.encode(), 1)
        assert read is not None
        assert _typed(read[2]["arguments"]) == _typed(orjson.loads(raw))


def test_a_key_given_twice_keeps_its_first_place_and_its_last_value() -> None:
    raw = b'{"v": 1, "type": "tool_call", "tool": "t", "arguments": {"a": 1, "b": 2, "a": 3}}'
    read = EventDecoder().tool_call(raw, 1)
    assert read is not None and list(read[2]["arguments"].items()) == [("a", 3), ("b", 2)]


def test_arguments_nested_past_the_parsers_limit_are_left_to_the_python_reader() -> None:
    deep = "[" * 200 + "]" * 200
    line = '{"v": 1, "type": "tool_call", "tool": "t", "arguments": ' + deep + "}"
    assert EventDecoder().tool_call(line.encode(), 1) is None
    (run,) = read(io.BytesIO(line.encode() + b"\n"))
    assert run.steps[0].arguments == json.loads(deep)


def test_the_lines_the_format_sniffing_read_ahead_are_read_once_and_in_order() -> None:
    lines = [
        {"v": 1, "type": "user", "session": "s", "text": "go"},
        {"v": 1, "type": "tool_call", "session": "s", "tool": "t", "call_id": "c1"},
        {"v": 1, "type": "tool_result", "session": "s", "call_id": "c1", "result": "done"},
        {"v": 1, "type": "tool_call", "session": "s", "tool": "u", "result": "x"},
    ]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    for format in ("auto", "doomloop"):
        (run,) = read(io.BytesIO(data), format=format)
        assert [(step.kind, step.tool, step.result_text, step.line) for step in run.steps] == [
            ("user", None, None, 1),
            ("tool", "t", "done", 2),
            ("tool", "u", "x", 4),
        ]


def test_keys_read_again_are_the_same_strings() -> None:
    decoder = EventDecoder()
    first = decoder.tool_call(b'{"v": 1, "type": "tool_call", "tool": "t", "arguments": {"path": "a"}}', 1)
    second = decoder.tool_call(b'{"v": 1, "type": "tool_call", "tool": "t", "arguments": {"path": "b"}}', 2)
    assert first is not None and second is not None
    (key_one,), (key_two,) = first[2]["arguments"], second[2]["arguments"]
    assert key_one is key_two


def test_a_document_has_no_raw_lines_to_hand_over() -> None:
    records = Records(io.BytesIO(b'[\n {"role": "user",\n  "content": "x"}\n]\n'), lambda problem, line: None)
    assert records.raw_lines() is None
    assert list(records) == [(None, [{"role": "user", "content": "x"}])]


def test_lines_after_a_record_no_format_is_sure_of_are_all_read() -> None:
    # The sniffing reads past the lines read ahead: handing the rest over loses none of them.
    first = {"v": 1, "type": "bogus"}
    calls = [{"v": 1, "type": "tool_call", "tool": "t", "call_id": f"c{n}", "result": "ok"} for n in range(5)]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in [first, *calls])
    skipped: List[Optional[int]] = []
    (run,) = read(io.BytesIO(data), on_skip=lambda error: skipped.append(error.line))
    assert [step.call_id for step in run.steps] == [f"c{n}" for n in range(5)]
    assert skipped == [1]
