"""Hostile input at the binding layer: lying subclasses, hostile hooks, shared and deep
structures, huge numbers, lone surrogates and numpy values, fed to every entry point.

The fuzz tests draw *recipes* (see ``hostile.py``) with hypothesis and run each batch in a
worker process, so a segfault or abort fails the test and names the case it died in instead
of ending the run. Every call must either succeed or raise ``TypeError``/``ValueError`` whose
message names the parameter -- never ``OverflowError``, ``SystemError``, ``MemoryError``,
``UnicodeEncodeError`` or pyo3's ``PanicException`` -- and values must hash and scan exactly
like their plain data. Batches are not shrunk (every shrink step would start a process): a
failure reports the exact case instead. The last tests pin specific defects one by one.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import hostile
from doomloop import (
    ChantDetector,
    ConfigError,
    DoomLoopConfig,
    DoomLoopDetector,
    LoopDetectionConfig,
    PostCompactionGuard,
    ToolLoopDetector,
    fingerprint,
    tool_result_hash,
)
from doomloop.eval import LoopEvaluator

WORKER = Path(hostile.__file__)

BATCH = settings(
    max_examples=10,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
"""Each example is one worker process running a batch of cases."""

Case = Dict[str, Any]
Report = Dict[str, Any]


def _describe(case: Case) -> str:
    text = json.dumps(case)
    return text if len(text) <= 600 else text[:600] + "...(truncated)"


def _text(output: Any) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def run_worker(cases: Sequence[Case], timeout: float = 120.0) -> List[Report]:
    """Run ``cases`` in one worker process; fail naming the case that crashed or hung it."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    command = [sys.executable, str(WORKER)]
    returncode: Optional[int]
    try:
        done = subprocess.run(command, input=json.dumps(cases), capture_output=True, text=True, timeout=timeout, env=env)
        stdout, stderr, returncode = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        # The output captured so far comes as bytes, whatever text=True says.
        stdout, stderr, returncode = _text(expired.stdout), _text(expired.stderr), None
    started = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("start ")]
    reports = [json.loads(line[len("result ") :]) for line in stdout.splitlines() if line.startswith("result ")]
    if returncode != 0 or len(reports) != len(cases):
        index = started[-1] if started else 0
        if returncode is None:
            how = f"hung (no result within {timeout:.0f} s)"
        elif returncode < 0:
            how = f"was killed by {signal.Signals(-returncode).name}"
        else:
            how = f"exited with status {returncode}"
        pytest.fail(f"worker {how} in case {index}: {_describe(cases[index])}\nstderr:\n{stderr[-3000:]}")
    return reports


# --- strategies ------------------------------------------------------------------------------

SURROGATES = "\ud800\udbff\udc00\udcfe\udcff\udfff"
ALPHABETS = ("abcdefghij klmnop", "éüöäßñçø", "日本語の文字列です", "ab\udcff\ud800é", "😀🎉x\u200b")
plain_texts = st.text(st.characters(exclude_categories=()), max_size=24)


def _insert(text: str, piece: str, index: int) -> str:
    return text[:index] + piece + text[index:]


surrogate_texts = st.builds(_insert, plain_texts, st.sampled_from(SURROGATES), st.integers(0, 24))
short_texts = plain_texts | surrogate_texts
long_texts = st.tuples(st.integers(0, 2**32 - 1), st.integers(1_000, 5_000), st.sampled_from(ALPHABETS)).map(
    lambda t: ["random", *t]
)
repeated_texts = st.tuples(short_texts.filter(bool), st.integers(2, 400)).map(lambda t: ["repeat", *t])
any_texts = short_texts | long_texts | repeated_texts
"""Text specs (see ``hostile.text``): short texts as themselves, long ones as specs."""

str_recipes = any_texts.map(lambda s: ["str", s]) | st.tuples(st.sampled_from(hostile.STR_LIES), any_texts).map(
    lambda t: ["str_sub", t[0], t[1]]
)
EDGE_INTS = (0, 1, -1, 2, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 2**100)
plain_ints = (st.integers(-(2**70), 2**70) | st.sampled_from(EDGE_INTS)).map(lambda n: ["int", n])
big_ints = st.tuples(st.integers(64, 100_000), st.sampled_from((1, -1))).map(lambda t: ["bigint", t[0], t[1]])
int_recipes = (
    plain_ints
    | big_ints
    | st.tuples(st.sampled_from(hostile.INT_LIES), plain_ints | big_ints).map(lambda t: ["int_sub", t[0], t[1]])
)
float_values = st.floats() | st.sampled_from((0.0, -0.0, math.inf, -math.inf, math.nan, 5.0, 1e300, 2.0**64))
float_recipes = float_values.map(lambda x: ["float", x]) | st.tuples(st.sampled_from(hostile.FLOAT_LIES), float_values).map(
    lambda t: ["float_sub", t[0], t[1]]
)
byte_strings = st.binary(max_size=40).map(bytes.hex)
bytes_recipes = (
    byte_strings.map(lambda h: ["bytes", h])
    | byte_strings.map(lambda h: ["bytearray", h])
    | st.tuples(st.sampled_from(hostile.BYTES_LIES), byte_strings).map(lambda t: ["bytes_sub", t[0], t[1]])
)
numpy_recipes = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(lambda n: ["np", "int64", n]),
    st.integers(-(2**31), 2**31 - 1).map(lambda n: ["np", "int32", n]),
    st.integers(0, 2**64 - 1).map(lambda n: ["np", "uint64", n]),
    st.booleans().map(lambda b: ["np", "bool_", b]),
    float_values.map(lambda x: ["np", "float64", x]),
    st.floats(width=32).map(lambda x: ["np", "float32", x]),
)
object_recipes = st.sampled_from(sorted(hostile.OBJECTS)).map(lambda k: ["obj", k])
exception_recipes = st.sampled_from(sorted(hostile.EXCEPTIONS)).map(lambda k: ["exc", k])
structure_recipes = st.one_of(
    st.integers(0, 18).map(lambda d: ["shared", d]),
    st.sampled_from((600, 100_000)).map(lambda n: ["deep_list", n]),
    st.sampled_from((600, 100_000)).map(lambda n: ["deep_dict", n]),
    st.sampled_from((["cycle_list"], ["cycle_dict"], ["mutating"], ["none"])),
)
leaf_recipes = st.one_of(
    st.booleans().map(lambda b: ["bool", b]),
    str_recipes,
    int_recipes,
    float_recipes,
    bytes_recipes,
    numpy_recipes,
    object_recipes,
    exception_recipes,
    structure_recipes,
)


def _key_recipe(key: Any, lie: Optional[int]) -> Any:
    # Keys are unique as plain data, so a lying key never merges two entries its twin keeps
    # apart (no lie makes two different keys compare equal).
    if isinstance(key, int):
        return ["int", key] if lie is None else ["int_sub", hostile.INT_LIES[lie % len(hostile.INT_LIES)], ["int", key]]
    return ["str", key] if lie is None else ["str_sub", hostile.STR_LIES[lie % len(hostile.STR_LIES)], key]


def _pairs(children: st.SearchStrategy[Any]) -> st.SearchStrategy[List[List[Any]]]:
    entries = st.dictionaries(
        st.integers(-1000, 1000) | short_texts, st.tuples(st.none() | st.integers(0, 100), children), max_size=4
    )
    return entries.map(lambda d: [[_key_recipe(key, lie), value] for key, (lie, value) in d.items()])


def _set_item(item: Any) -> Any:
    return ["int", item] if isinstance(item, int) else ["str", item]


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    items = st.lists(children, max_size=4)
    set_items = st.sets(st.integers() | st.text(max_size=4), max_size=4).map(lambda s: [_set_item(x) for x in s])
    return st.one_of(
        items.map(lambda xs: ["list", xs]),
        items.map(lambda xs: ["tuple", xs]),
        st.tuples(st.sampled_from(hostile.SEQUENCE_LIES), items).map(lambda t: ["list_sub", t[0], t[1]]),
        st.tuples(st.sampled_from(hostile.SEQUENCE_LIES), items).map(lambda t: ["tuple_sub", t[0], t[1]]),
        _pairs(children).map(lambda p: ["dict", p]),
        st.tuples(st.sampled_from(hostile.DICT_LIES), _pairs(children)).map(lambda t: ["dict_sub", t[0], t[1]]),
        set_items.map(lambda xs: ["set", xs]),
        set_items.map(lambda xs: ["frozenset", xs]),
    )


values = st.recursive(leaf_recipes, _containers, max_leaves=8)
mappings = st.one_of(
    _pairs(values).map(lambda p: ["dict", p]),
    st.tuples(st.sampled_from(hostile.DICT_LIES), _pairs(values)).map(lambda t: ["dict_sub", t[0], t[1]]),
    st.just(["none"]),
)
numbers = st.one_of(
    int_recipes,
    float_recipes,
    numpy_recipes,
    st.booleans().map(lambda b: ["bool", b]),
    st.sampled_from((["none"], ["str", "3"], ["str", ""], ["list", []])),
)
TOKEN_DTYPES = ("int32", "int64", "uint32")
token_values = st.lists(st.integers(0, 12), min_size=1, max_size=400)
token_arrays = st.tuples(
    st.sampled_from(TOKEN_DTYPES), st.sampled_from(("contiguous", "strided", "reversed", "readonly", "empty")), token_values
).map(lambda t: ["array", t[0], t[1], t[2]])
bad_token_arrays = st.tuples(
    st.sampled_from(("int16", "uint64", "float64", "bool", "object", ">i8", ">i4")) | st.sampled_from(TOKEN_DTYPES),
    st.sampled_from(("contiguous", "2d", "0d")),
    token_values,
).map(lambda t: ["array", t[0], t[1], t[2]])
chunk_lists = st.lists(str_recipes, max_size=5).map(lambda xs: ["list", xs]) | st.lists(values, max_size=3).map(
    lambda xs: ["list", xs]
)

# Per parameter: the values drawn for it, and when a call must succeed (the value is of a
# kind the parameter accepts); any other value may also raise TypeError/ValueError naming it.


def _is_str(recipe: Any) -> bool:
    return recipe[0] in ("str", "str_sub")


def _is_str_or_none(recipe: Any) -> bool:
    return _is_str(recipe) or recipe[0] == "none"


def _always(_recipe: Any) -> bool:
    return True


def _never(_recipe: Any) -> bool:
    return False


def _accepted_tokens(recipe: Any) -> bool:
    return recipe[0] == "array" and recipe[1] in TOKEN_DTYPES and recipe[2] not in ("2d", "0d")


def _str_chunks(recipe: Any) -> bool:
    return all(_is_str(chunk) for chunk in recipe[1])


Param = Tuple[str, str, st.SearchStrategy[Any], Callable[[Any], bool], Tuple[str, ...]]
"""(target, parameter, values drawn, must-succeed predicate, names the error may use)."""


def _param(target: str, name: str, drawn: st.SearchStrategy[Any], succeeds: Callable[[Any], bool], *names: str) -> Param:
    return (target, name, drawn, succeeds, names or (name,))


SESSION_PARAMS = [
    _param("record_action", "action_type", str_recipes | values, _is_str),
    _param("record_action", "args", values, _always),
    _param("record_action", "result", values, _always),
    _param("record_action", "success", values, lambda r: r[0] == "bool"),
    _param("record_action", "duration", numbers, _never),
    _param("record_action", "metadata", mappings | values, lambda r: r[0] in ("dict", "dict_sub", "none")),
    _param("mark_progress", "marker", str_recipes | values, _is_str),
    _param("record_plan", "state", values, _always),
    _param("record_response", "text", str_recipes | values, _is_str),
    _param("record_output_chunk", "chunk", str_recipes | values, _is_str),
]
STREAM_PARAMS = [
    _param("chant_feed", "text", str_recipes | values, _is_str),
    _param("feed_tokens", "tokens", token_arrays | bad_token_arrays | values, _accepted_tokens),
    _param("guard_stream", "chunks", chunk_lists, _str_chunks, "text", "chunk"),
]
_TOOL_PARAM_NAMES: Dict[str, Tuple[str, ...]] = {
    "before_tool_call": ("tool", "params", "run_id", "tool_call_id"),
    "after_tool_call": ("tool", "params", "result", "error", "run_id", "tool_call_id"),
    "check": ("tool", "params", "run_id"),
    "record_call": ("tool", "params", "run_id", "tool_call_id"),
    "record_outcome": ("tool", "params", "result", "error", "run_id", "tool_call_id"),
    "tool_result_hash": ("tool", "params", "result", "error"),
    "guard_observe": ("tool", "params", "result", "error"),
}
_TOOL_VALUES: Dict[str, Tuple[st.SearchStrategy[Any], Callable[[Any], bool]]] = {
    "tool": (str_recipes | values, _is_str),
    "params": (mappings | values, lambda r: r[0] in ("dict", "dict_sub", "none")),
    "result": (values | mappings, _always),
    "error": (exception_recipes | str_recipes | values, lambda r: _is_str_or_none(r) or r[0] == "exc"),
    "run_id": (str_recipes | values, _is_str_or_none),
    "tool_call_id": (str_recipes | values, _is_str_or_none),
}
TOOL_PARAMS = [_param(target, name, *_TOOL_VALUES[name]) for target, names in _TOOL_PARAM_NAMES.items() for name in names]
_DOOM_INT_FIELDS = (
    "max_identical_actions",
    "max_similar_actions",
    "max_consecutive_failures",
    "max_no_progress_steps",
    "max_recovery_attempts",
    "max_repeated_chunks",
    "content_chunk_size",
    "max_cycle_period",
    "min_cycle_repeats",
)
_DOOM_FLOAT_FIELDS = (
    "similarity_threshold",
    "max_time_per_action",
    "max_total_time",
    "initial_backoff",
    "backoff_multiplier",
    "max_backoff",
)
_TOOL_FIELDS = (
    "history_size",
    "warning_threshold",
    "critical_threshold",
    "unknown_tool_threshold",
    "global_circuit_breaker_threshold",
    "post_compaction_window_size",
)
_OPENCLAW_KEYS = (
    "historySize",
    "warningThreshold",
    "criticalThreshold",
    "unknownToolThreshold",
    "globalCircuitBreakerThreshold",
    "enabled",
    "detectors.genericRepeat",
    "postCompactionGuard.windowSize",
)
CONFIG_PARAMS = [
    *(_param("DoomLoopConfig", name, numbers, _never) for name in _DOOM_INT_FIELDS + _DOOM_FLOAT_FIELDS),
    _param("DoomLoopConfig", "detect_cycles", numbers, lambda r: r[0] == "bool"),
    *(_param(target, name, numbers, _never) for target in ("LoopDetectionConfig", "ToolLoopDetector") for name in _TOOL_FIELDS),
    *(_param("ChantDetector", name, numbers, _never) for name in ("content_chunk_size", "max_repeated_chunks", "max_period")),
    _param("ChantDetector", "ignore_whitespace", numbers, lambda r: r[0] == "bool"),
    _param("PostCompactionGuard", "window_size", numbers, _never),
    _param("LoopEvaluator", "threshold", numbers, _never),
    _param("LoopEvaluator", "max_wasted_iterations", numbers, _never),
    _param("LoopEvaluator", "name", str_recipes | numbers, _is_str_or_none),
    *(_param("from_openclaw_strict", key, numbers | str_recipes, _never, key.split(".")[-1]) for key in _OPENCLAW_KEYS),
    *(_param("from_openclaw_lenient", key, numbers | str_recipes, _always, key.split(".")[-1]) for key in _OPENCLAW_KEYS),
    _param("from_openclaw_flag", "strict", numbers, lambda r: r[0] == "bool"),
]


def call_case(target: str, param: str, value: Any) -> Case:
    """The worker case calling ``target`` with ``value`` as ``param``."""
    return {"op": "call", "target": target, "param": param, "value": value}


def _calls(params: List[Param]) -> st.SearchStrategy[List[Case]]:
    one = st.one_of([st.builds(call_case, st.just(target), st.just(name), drawn) for target, name, drawn, _, _ in params])
    return st.lists(one, min_size=20, max_size=40)


CONTRACTS = {
    (target, name): (succeeds, names)
    for target, name, _, succeeds, names in SESSION_PARAMS + STREAM_PARAMS + TOOL_PARAMS + CONFIG_PARAMS
}


def _call_problems(cases: List[Case]) -> List[str]:
    """Run the calls in one worker; describe every call that broke its parameter's contract."""
    problems = []
    for case, report in zip(cases, run_worker(cases), strict=True):
        if "ok" in report:
            continue
        succeeds, names = CONTRACTS[case["target"], case["param"]]
        if succeeds(case["value"]):
            problems.append(f"raised {report['error']}: {report['message']!r} for an accepted value: {_describe(case)}")
        elif not report["allowed"]:
            problems.append(f"raised {report['error']} (not TypeError/ValueError): {report['message']!r}: {_describe(case)}")
        elif not any(name in report["message"] for name in names):
            problems.append(f"{report['error']} message {report['message']!r} does not name {names[0]!r}: {_describe(case)}")
    return problems


# --- fuzz tests ------------------------------------------------------------------------------


@BATCH
@given(st.lists(values, min_size=10, max_size=25))
def test_fingerprint_never_raises_and_is_deterministic(recipes: List[Any]) -> None:
    """fingerprint() of any value returns a 64-bit int without raising, the same one when the
    value is hashed again and when the same value is built afresh (unless hashing mutates
    it: a model_dump that adds entries to its own host dict)."""
    reports = run_worker([{"op": "fingerprint", "value": recipe} for recipe in recipes])
    problems = []
    for recipe, report in zip(recipes, reports, strict=True):
        if "ok" not in report:
            problems.append(f"raised {report['error']}: {report['message']!r}: {_describe({'value': recipe})}")
            continue
        first, again, rebuilt, _ = report["ok"]
        if not 0 <= first < 2**64:
            problems.append(f"digest {first} is not a u64: {_describe({'value': recipe})}")
        if hostile.is_stable(recipe) and not first == again == rebuilt:
            problems.append(f"digests differ {first} / {again} / {rebuilt}: {_describe({'value': recipe})}")
    assert not problems, "\n".join(problems[:8])


subclassed_values = st.recursive(
    str_recipes | int_recipes | float_recipes | bytes_recipes | numpy_recipes | structure_recipes,
    _containers,
    max_leaves=6,
)


@BATCH
@given(st.lists(subclassed_values, min_size=10, max_size=25))
def test_fingerprint_reads_subclass_data_not_its_methods(recipes: List[Any]) -> None:
    """A value built with lying subclasses (str, int, float, bytes, list, tuple, dict) hashes
    exactly like the same data as plain built-ins: lengths, characters, digits and items are
    read from the object, never through its overridable methods. numpy int64/bool_/float64
    scalars hash like the int/bool/float of their value; a structure sharing sub-lists like
    the tree of distinct copies."""
    reports = run_worker([{"op": "fingerprint", "value": recipe} for recipe in recipes])
    problems = []
    for recipe, report in zip(recipes, reports, strict=True):
        if "ok" not in report:
            problems.append(f"raised {report['error']}: {report['message']!r}: {_describe({'value': recipe})}")
        elif hostile.is_stable(recipe) and report["ok"][0] != report["ok"][3]:
            problems.append(f"digest {report['ok'][0]} != plain twin's {report['ok'][3]}: {_describe({'value': recipe})}")
    assert not problems, "\n".join(problems[:8])


@BATCH
@given(_calls(SESSION_PARAMS))
def test_session_detector_accepts_or_rejects_cleanly(calls: List[Case]) -> None:
    """DoomLoopDetector.record_action / mark_progress / record_plan / record_response /
    record_output_chunk with one hostile argument: success for every value the parameter
    accepts (any args, result and plan state; any str, subclass or not), otherwise a
    TypeError/ValueError naming the parameter."""
    problems = _call_problems(calls)
    assert not problems, "\n".join(problems[:8])


@BATCH
@given(_calls(STREAM_PARAMS))
def test_chant_entry_points_accept_or_reject_cleanly(calls: List[Case]) -> None:
    """ChantDetector.feed, feed_tokens (int32/int64/uint32 arrays, strided, reversed,
    read-only or empty, versus 2-D, 0-D and other dtypes) and guard_stream with hostile
    input: success or a TypeError/ValueError naming the input."""
    problems = _call_problems(calls)
    assert not problems, "\n".join(problems[:8])


@BATCH
@given(_calls(TOOL_PARAMS))
def test_tool_loop_entry_points_accept_or_reject_cleanly(calls: List[Case]) -> None:
    """before_tool_call / after_tool_call / check / record_call / record_outcome,
    tool_result_hash and PostCompactionGuard.observe with one hostile argument: any tool
    name, run id or call id that is a str (lone surrogates included), any params mapping,
    any result and any exception or str error succeed; other values raise a
    TypeError/ValueError naming the parameter."""
    problems = _call_problems(calls)
    assert not problems, "\n".join(problems[:8])


@BATCH
@given(_calls(CONFIG_PARAMS))
def test_config_values_are_validated_or_usable(calls: List[Case]) -> None:
    """DoomLoopConfig, LoopDetectionConfig, ToolLoopDetector, ChantDetector,
    PostCompactionGuard, LoopEvaluator and LoopDetectionConfig.from_openclaw with one
    arbitrary value (huge, negative, zero, bool, float, NaN, str, None, numpy, lying int):
    either a TypeError/ValueError (ConfigError for strict OpenClaw parsing) naming the field,
    or a config the detector accepts and runs with -- including apply_backoff's sleep. Lenient
    OpenClaw parsing never raises."""
    problems = _call_problems(calls)
    assert not problems, "\n".join(problems[:8])


CHANT_SETTINGS = ((1, 3), (4, 3), (50, 8))


@BATCH
@given(
    st.lists(
        st.tuples(
            st.lists(str_recipes, min_size=1, max_size=4),
            st.sampled_from(CHANT_SETTINGS),
            st.tuples(st.integers(1, 2**61), st.integers(0, 2**64 - 1)),
        ),
        min_size=8,
        max_size=16,
    )
)
def test_str_subclasses_chant_like_their_plain_text(runs: List[Tuple[List[Any], Tuple[int, int], Tuple[int, int]]]) -> None:
    """Chunks that are lying str subclasses (length over- or under-reported, raising,
    lying isascii/iter/getitem/encode/str) give exactly the events and position of the same
    text as plain str, for one hash key -- read right after a long non-ASCII text went through
    another detector on the same thread, so a stale reused buffer would show. Every reported
    window is a piece of the text fed."""
    cases = [
        {"op": "chant", "chunks": chunks, "settings": list(config), "key": list(key), "poison": True}
        for chunks, config, key in runs
    ]
    problems = []
    for case, report in zip(cases, run_worker(cases), strict=True):
        if "ok" not in report:
            problems.append(f"raised {report['error']}: {report['message']!r}: {_describe(case)}")
            continue
        hostile_run, plain_run = report["ok"]["hostile"], report["ok"]["plain"]
        if hostile_run != plain_run:
            problems.append(f"{hostile_run} != plain {plain_run}: {_describe(case)}")
        # The text as the worker saw it (JSON joins an escaped high and low surrogate into one
        # character), with lone surrogates shown as U+FFFD, as events show them.
        chunks = json.loads(json.dumps(case["chunks"]))
        fed = re.sub("[\ud800-\udfff]", "\ufffd", "".join(hostile.build(hostile.twin(c)) for c in chunks))
        event = hostile_run["event"]
        if event is not None and event["window"] not in fed:
            problems.append(f"window {event['window']!r} is not in the text fed: {_describe(case)}")
    assert not problems, "\n".join(problems[:8])


@BATCH
@given(st.lists(st.tuples(token_arrays, st.tuples(st.integers(1, 2**61), st.integers(0, 2**64 - 1))), min_size=10, max_size=25))
def test_token_arrays_scan_like_their_items(runs: List[Tuple[Any, Tuple[int, int]]]) -> None:
    """feed_tokens of an int32/int64/uint32 array -- contiguous, strided, reversed, read-only
    or empty -- reports the same event and position as a contiguous int64 array of the same
    token ids."""
    cases = [{"op": "tokens", "tokens": tokens, "key": list(key)} for tokens, key in runs]
    problems = []
    for case, report in zip(cases, run_worker(cases), strict=True):
        if "ok" not in report:
            problems.append(f"raised {report['error']}: {report['message']!r}: {_describe(case)}")
        elif report["ok"]["hostile"] != report["ok"]["plain"]:
            problems.append(f"{report['ok']['hostile']} != contiguous int64 {report['ok']['plain']}: {_describe(case)}")
    assert not problems, "\n".join(problems[:8])


TEXT_PLACES = ("error", "error_exception", "content", "content_parts", "exec_output", "tool", "param_key", "param_value")


def text_pair(place: str, text: str, index: int, first: str, second: str) -> Case:
    """Two texts for one place of a tool call that differ only in one lone surrogate (or,
    when ``first == second``, are the same)."""
    return {"op": "tool_hash", "where": place, "a": _insert(text, first, index), "b": _insert(text, second, index)}


@BATCH
@given(
    st.lists(
        st.builds(
            text_pair,
            st.sampled_from(TEXT_PLACES),
            short_texts,
            st.integers(0, 24),
            st.sampled_from(SURROGATES),
            st.sampled_from(SURROGATES),
        ),
        min_size=15,
        max_size=30,
    )
)
def test_tool_texts_hash_apart_exactly_when_they_differ(cases: List[Case]) -> None:
    """A tool name, param key or value, error text (str or exception), content text or exec
    output hashes apart from the same text with one lone surrogate changed -- surrogates are
    never replaced by U+FFFD -- and alike for the very same text."""
    problems = []
    for case, report in zip(cases, run_worker(cases), strict=True):
        if "ok" not in report:
            problems.append(f"raised {report['error']}: {report['message']!r}: {_describe(case)}")
            continue
        first, second = report["ok"]
        if (first == second) != (case["a"] == case["b"]):
            problems.append(f"hashes {first} / {second}: {_describe(case)}")
    assert not problems, "\n".join(problems[:8])


# --- pinned defects ----------------------------------------------------------------------------


def test_shared_sublists_hash_in_linear_time() -> None:
    """A list whose two items are the same list, 40 levels deep (2**40 paths, 41 objects),
    hashes quickly wherever a value is hashed, and like the same structure with distinct
    copies (checked at depth 12). A 20 s worker timeout is the failure signal."""
    code = """
from doomloop import DoomLoopDetector, ToolLoopDetector, fingerprint, tool_result_hash
import hostile

shared = hostile.build(["shared", 40])
fingerprint(shared)
detector = DoomLoopDetector()
detector.record_action("a", {"x": shared}, shared, True)
detector.record_plan(shared)
tools = ToolLoopDetector()
tools.before_tool_call("t", {"x": shared})
tools.after_tool_call("t", {"x": shared}, result={"details": {"x": shared}})
tool_result_hash("t", {}, result=shared)
assert fingerprint(hostile.build(["shared", 12])) == fingerprint(hostile.build(["tree", 12]))
"""
    _run_snippet(code, timeout=20)


def _run_snippet(code: str, timeout: float) -> None:
    path = os.pathsep.join(filter(None, [str(WORKER.parent), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": path}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish within {timeout:.0f} s")
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("place", TEXT_PLACES)
def test_texts_differing_only_in_lone_surrogates_hash_apart(place: str) -> None:
    """'a\\udcff' and 'a\\udcfe' in the same place of a tool call (tool name, param key or
    value, error text or exception, content text, exec output) are accepted and hash apart."""
    (report,) = run_worker([{"op": "tool_hash", "where": place, "a": "a\udcff", "b": "a\udcfe"}])
    assert "ok" in report, report
    first, second = report["ok"]
    assert first != second


def test_lone_surrogate_tool_names_are_accepted_everywhere() -> None:
    """Every tool-call entry point accepts a tool name (and run id, call id) with a lone
    surrogate, and two such names give different call identities."""
    name = "read\udcff"
    detector = ToolLoopDetector()
    decision = detector.before_tool_call(name, {"p": 1}, run_id="r\udcff", tool_call_id="c\udcff")
    assert not decision.blocked
    outcome = detector.after_tool_call(name, {"p": 1}, result="x", run_id="r\udcff", tool_call_id="c\udcff")
    other = detector.after_tool_call("read\udcfe", {"p": 1}, result="x")
    assert outcome.tool == name and outcome.args_hash != other.args_hash
    assert not detector.check(name, {"p": 1}, run_id="r\udcff").stuck
    detector.record_call(name, {"p": 1}, run_id="r\udcff", tool_call_id="c\udcff")
    detector.record_outcome(name, {"p": 1}, result="x", error="e\udcff")
    assert tool_result_hash(name, {}, result=1) is not None
    guard = PostCompactionGuard()
    guard.arm()
    assert guard.observe(name, {}, result=1) is not None
    guard.observe_hashes(name, 1, 2)


def test_int_subclass_digits_are_read_from_the_int() -> None:
    """An int subclass lying through __abs__, bit_length, to_bytes, __index__, __lt__,
    __int__ or __float__ (or raising from them) fingerprints like the int it holds, for
    values beyond 64 bits, negative ones and small ones alike."""
    numbers = [["int", 5], ["int", -(2**63) - 1], ["bigint", 100, 1], ["bigint", 100, -1], ["bigint", 100_000, -1]]
    cases = [{"op": "fingerprint", "value": ["int_sub", lie, number]} for lie in hostile.INT_LIES for number in numbers]
    reports = run_worker(cases)
    wrong = [
        case["value"]
        for case, report in zip(cases, reports, strict=True)
        if "ok" not in report or report["ok"][0] != report["ok"][3]
    ]
    assert not wrong, f"{len(wrong)} lying ints hash unlike their value, e.g. {wrong[:4]}"


@pytest.mark.parametrize(
    ("scalar", "plain"),
    [(np.int64(5), 5), (np.int64(-(2**63)), -(2**63)), (np.bool_(True), True), (np.bool_(False), False), (np.float64(5.0), 5)],
    ids=["int64", "int64-min", "bool_-true", "bool_-false", "float64"],
)
def test_numpy_scalars_fingerprint_like_builtins(scalar: Any, plain: Any) -> None:
    """numpy int64, bool_ and float64 scalars are the int/bool/float they hold: the same
    fingerprint, inside containers too."""
    assert fingerprint(scalar) == fingerprint(plain)
    assert fingerprint({"k": [scalar]}) == fingerprint({"k": [plain]})


def _raises_naming(call: Callable[[], object], name: str, kinds: Tuple[type, ...] = (TypeError, ValueError)) -> None:
    try:
        call()
    except BaseException as error:  # noqa: BLE001 - PanicException derives from BaseException
        assert isinstance(error, kinds) and not isinstance(error, UnicodeError), f"{type(error).__name__}: {error}"
        assert name in str(error), f"{type(error).__name__} message {str(error)!r} does not name {name!r}"
    else:
        pytest.fail(f"no error for a bad {name}")


BAD_VALUES: List[Tuple[str, Callable[[], object], str]] = [
    ("DoomLoopConfig-2**64", lambda: DoomLoopConfig(max_identical_actions=2**64), "max_identical_actions"),
    ("DoomLoopConfig-cycle-100", lambda: DoomLoopConfig(max_cycle_period=100), "max_cycle_period"),
    ("DoomLoopConfig-backoff-1e300", lambda: DoomLoopConfig(initial_backoff=1e300, max_backoff=1e300), "backoff"),
    ("ChantDetector-2**64", lambda: ChantDetector(content_chunk_size=2**64), "content_chunk_size"),
    ("ChantDetector-repeats-2**64", lambda: ChantDetector(max_repeated_chunks=2**64), "max_repeated_chunks"),
    ("PostCompactionGuard-True", lambda: PostCompactionGuard(True), "window_size"),
    ("PostCompactionGuard-str", lambda: PostCompactionGuard("3"), "window_size"),  # type: ignore[arg-type]
    ("PostCompactionGuard-2**64", lambda: PostCompactionGuard(2**64), "window_size"),
    ("ToolLoopDetector-2**64", lambda: ToolLoopDetector(warning_threshold=2**64), "warning_threshold"),
    # Over 4,300 digits: an error message that formats the number itself raises instead.
    ("DoomLoopConfig-2**20000", lambda: DoomLoopConfig(max_identical_actions=2**20000), "max_identical_actions"),
    ("ChantDetector--2**20000", lambda: ChantDetector(content_chunk_size=-(2**20000)), "content_chunk_size"),
    ("PostCompactionGuard-2**20000", lambda: PostCompactionGuard(2**20000), "window_size"),
    ("ToolLoopDetector-2**20000", lambda: ToolLoopDetector(history_size=2**20000), "history_size"),
    ("LoopDetectionConfig-2**40", lambda: LoopDetectionConfig(warning_threshold=2**40), "warning_threshold"),
    ("duration-str", lambda: DoomLoopDetector().record_action("a", {}, 1, True, duration="x"), "duration"),  # type: ignore[arg-type]
    ("duration-bool", lambda: DoomLoopDetector().record_action("a", {}, 1, True, duration=True), "duration"),
    ("LoopEvaluator-inf", lambda: LoopEvaluator(threshold=math.inf), "threshold"),
    ("LoopEvaluator--inf", lambda: LoopEvaluator(threshold=-math.inf), "threshold"),
    ("LoopEvaluator-negative", lambda: LoopEvaluator(threshold=-1.0), "threshold"),
    ("LoopEvaluator-wasted-negative", lambda: LoopEvaluator(max_wasted_iterations=-1), "max_wasted_iterations"),
    ("LoopEvaluator-wasted-float", lambda: LoopEvaluator(max_wasted_iterations=1.5), "max_wasted_iterations"),  # type: ignore[arg-type]
    ("LoopEvaluator-wasted-str", lambda: LoopEvaluator(max_wasted_iterations="2"), "max_wasted_iterations"),  # type: ignore[arg-type]
    ("from_openclaw-strict-flag", lambda: LoopDetectionConfig.from_openclaw({}, strict="no"), "strict"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "name"), [(call, name) for _, call, name in BAD_VALUES], ids=[i for i, _, _ in BAD_VALUES])
def test_bad_values_raise_naming_the_parameter(call: Callable[[], object], name: str) -> None:
    """Each out-of-range or wrongly typed setting raises TypeError/ValueError naming the
    parameter when it is given -- never OverflowError, never accepted then rejected (or
    silently clamped) by the engine later."""
    _raises_naming(call, name)


def test_a_huge_int_duration_is_no_overflow() -> None:
    """``duration=2**2000`` (more seconds than a float holds) is either recorded, as a slow
    and so failed action, or rejected with a ValueError naming ``duration``; never an
    OverflowError."""
    detector = DoomLoopDetector()
    try:
        detector.record_action("a", {}, 1, True, duration=2**2000)
    except ValueError as error:
        assert "duration" in str(error)
    else:
        assert detector.get_stats()["failed_actions"] == 1


def test_openclaw_numbers_beyond_the_engine_are_config_errors() -> None:
    """A threshold the engine cannot hold (2**40) is a ConfigError naming the key in strict
    parsing; lenient parsing does not raise and gives a threshold the detector takes (the
    default, or the largest one accepted, as lenient parsing caps historySize)."""
    block = {"enabled": True, "warningThreshold": 2**40}
    _raises_naming(lambda: LoopDetectionConfig.from_openclaw(block, strict=True), "warningThreshold", (ConfigError,))
    lenient = LoopDetectionConfig.from_openclaw(block, strict=False)
    assert lenient.warning_threshold < 2**40
    ToolLoopDetector(lenient).before_tool_call("t", {})


@pytest.mark.parametrize("lie", ["len_plus", "len_huge", "len_minus", "len_zero", "len_raise", "isascii_raise", "encode"])
def test_str_subclass_length_is_read_from_the_str(lie: str) -> None:
    """A non-ASCII str subclass lying about its length (or raising from its methods) is fed
    to ChantDetector and DoomLoopDetector and fingerprinted exactly like the plain text: a
    detector with the window of one character, fed 3,000 distinct characters right after
    another detector on the same thread scanned a long run of 'é', reports nothing and ends
    at position 3,000 (the five extra characters an over-reported length would read are the
    stale 'é's)."""
    text = "".join(chr(0x4E00 + i) for i in range(2_999)) + "\udcff"
    case = {"op": "chant", "chunks": [["str_sub", lie, text]], "settings": [1, 3], "key": [12345, 678], "poison": True}
    fingerprints = {"op": "fingerprint", "value": ["str_sub", lie, text]}
    session = {"op": "call", "target": "record_response", "param": "text", "value": ["str_sub", lie, text]}
    chant, digest, recorded = run_worker([case, fingerprints, session])
    assert "ok" in chant, chant
    assert chant["ok"]["hostile"] == chant["ok"]["plain"] == {"events": [None], "position": 3_000, "event": None}
    assert "ok" in digest and digest["ok"][0] == digest["ok"][3], digest
    assert recorded == {"ok": {"loop": None, "stats": 0}}


def test_the_stale_buffer_leak_check_can_see_a_leak() -> None:
    """The leak check above is sound: the same detector fed the 3,000 characters followed by
    five 'é's does report a chant of 'é' (what a leak of the poisoned buffer would show)."""
    detector = ChantDetector(1, 3, _hash_key=(12345, 678))
    assert detector.feed("".join(chr(0x4E00 + i) for i in range(3_000)) + "é" * 5) is not None
    assert detector.event is not None and detector.event.window == "é"
