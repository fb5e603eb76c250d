"""Adversarial values for the binding-layer fuzz tests, and the worker process that runs them.

A *recipe* is a JSON value describing one adversarial Python value: ``["str_sub", "len_plus",
"abc"]`` is a ``str`` subclass whose ``__len__`` over-reports by five, ``["shared", 40]`` a list
whose two items are the same list at each of 40 levels, and so on (see :func:`build`). Recipes
travel as JSON, so hypothesis draws them in the test process and the values are only made in
the worker: a crash (segfault, abort) kills the worker, not the test run.
:func:`twin` gives the recipe of the same data with every hostile subclass replaced by its
plain built-in base, for the properties "a subclass behaves exactly like its plain data".

The worker (``python tests/hostile.py``) reads a JSON list of cases from stdin and runs them in
order. It writes ``start <index>`` before each case and ``result <json>`` after it, flushing
each line, so when it dies the last ``start`` without a ``result`` names the case that killed
it. Every exception, ``BaseException`` included (pyo3's ``PanicException`` derives from it),
is caught and reported with its type and message; see :func:`run_case` for the operations.

This module needs no hypothesis (the worker starts fast); the strategies live in
``test_hostile_inputs.py``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

Recipe = Any

# --- lying subclasses ----------------------------------------------------------------------

HUGE_LEN = 2**62


def _raise(*_args: object, **_kwargs: object) -> Any:
    raise RuntimeError("hostile method called")


def _str_lies() -> Dict[str, Dict[str, Any]]:
    return {
        "len_huge": {"__len__": lambda self: HUGE_LEN},
        "len_plus": {"__len__": lambda self: str.__len__(self) + 5},
        "len_minus": {"__len__": lambda self: max(0, str.__len__(self) - 5)},
        "len_zero": {"__len__": lambda self: 0},
        "len_raise": {"__len__": _raise},
        "isascii_true": {"isascii": lambda self: True},
        "isascii_false": {"isascii": lambda self: False},
        "isascii_raise": {"isascii": _raise},
        "iter": {"__iter__": lambda self: iter("lie")},
        "getitem": {"__getitem__": lambda self, index: "lie"},
        "encode": {"encode": lambda self, *args, **kwargs: b"lie"},
        "encode_raise": {"encode": _raise},
        "str": {"__str__": lambda self: "lie"},
        "hash": {"__hash__": lambda self: 0},
        # Never equal, not even to itself (dicts still find it by identity).
        "eq": {"__eq__": lambda self, other: False, "__hash__": str.__hash__},
    }


def _int_lies() -> Dict[str, Dict[str, Any]]:
    return {
        "abs": {"__abs__": lambda self: 7},
        "abs_raise": {"__abs__": _raise},
        "abs_self": {"__abs__": lambda self: self},
        "bit_length": {"bit_length": lambda self: 1},
        "bit_length_huge": {"bit_length": lambda self: HUGE_LEN},
        "to_bytes": {"to_bytes": lambda self, *args, **kwargs: b"lie"},
        "to_bytes_raise": {"to_bytes": _raise},
        "index": {"__index__": lambda self: 0},
        "index_raise": {"__index__": _raise},
        "lt": {"__lt__": lambda self, other: True},
        "lt_false": {"__lt__": lambda self, other: False},
        "int": {"__int__": lambda self: 0},
        "float": {"__float__": lambda self: 0.5},
        "hash": {"__hash__": lambda self: 0},
        "eq": {"__eq__": lambda self, other: False, "__hash__": int.__hash__},
    }


def _float_lies() -> Dict[str, Dict[str, Any]]:
    return {
        "float": {"__float__": lambda self: 0.25},
        "is_integer": {"is_integer": lambda self: True},
        "lt": {"__lt__": lambda self, other: True},
        "lt_raise": {"__lt__": _raise},
        "hash": {"__hash__": lambda self: 0},
        "eq": {"__eq__": lambda self, other: False, "__hash__": float.__hash__},
        "index": {"__index__": lambda self: 3},
    }


def _bytes_lies() -> Dict[str, Dict[str, Any]]:
    return {
        "len_huge": {"__len__": lambda self: HUGE_LEN},
        "len_raise": {"__len__": _raise},
        "iter": {"__iter__": lambda self: iter(b"lie")},
        "getitem": {"__getitem__": lambda self, index: 0},
        "decode": {"decode": lambda self, *args, **kwargs: "lie"},
        "hash": {"__hash__": lambda self: 0},
    }


def _sequence_lies(base: Any) -> Dict[str, Dict[str, Any]]:
    return {
        "len_huge": {"__len__": lambda self: HUGE_LEN},
        "len_minus": {"__len__": lambda self: max(0, base.__len__(self) - 1)},
        "len_raise": {"__len__": _raise},
        "iter_raise": {"__iter__": _raise},
        "iter_lie": {"__iter__": lambda self: iter(["lie"])},
        "getitem_raise": {"__getitem__": _raise},
        "getitem_lie": {"__getitem__": lambda self, index: "lie"},
        "hash": {"__hash__": lambda self: 0},
        "eq": {"__eq__": lambda self, other: False},
        "reduce_raise": {"__reduce_ex__": _raise},
    }


def _dict_lies() -> Dict[str, Dict[str, Any]]:
    return {
        "len_huge": {"__len__": lambda self: HUGE_LEN},
        "len_raise": {"__len__": _raise},
        "iter_raise": {"__iter__": _raise},
        "iter_lie": {"__iter__": lambda self: iter(["lie"])},
        "keys": {"keys": lambda self: ["lie"]},
        "keys_raise": {"keys": _raise},
        "items": {"items": lambda self: [("lie", 1)]},
        "items_raise": {"items": _raise},
        "values": {"values": lambda self: [0]},
        "getitem_raise": {"__getitem__": _raise},
        "getitem_lie": {"__getitem__": lambda self, key: "lie"},
        "get": {"get": lambda self, key, default=None: "lie"},
        "contains": {"__contains__": lambda self, key: True},
        "eq": {"__eq__": lambda self, other: False},
    }


def _classes(base: type, lies: Dict[str, Dict[str, Any]]) -> Dict[str, type]:
    return {lie: type(f"Lying{base.__name__.capitalize()}_{lie}", (base,), methods) for lie, methods in lies.items()}


STR_CLASSES = _classes(str, _str_lies())
INT_CLASSES = _classes(int, _int_lies())
FLOAT_CLASSES = _classes(float, _float_lies())
BYTES_CLASSES = _classes(bytes, _bytes_lies())
LIST_CLASSES = _classes(list, _sequence_lies(list))
TUPLE_CLASSES = _classes(tuple, _sequence_lies(tuple))
DICT_CLASSES = _classes(dict, _dict_lies())

STR_LIES = tuple(STR_CLASSES)
INT_LIES = tuple(INT_CLASSES)
FLOAT_LIES = tuple(FLOAT_CLASSES)
BYTES_LIES = tuple(BYTES_CLASSES)
SEQUENCE_LIES = tuple(LIST_CLASSES)
DICT_LIES = tuple(DICT_CLASSES)

# --- objects with hostile hooks --------------------------------------------------------------


class DumpRaises:
    def model_dump(self) -> Any:
        raise RuntimeError("model_dump failed")


class DumpGarbage:
    def model_dump(self) -> Any:
        return object()


class DumpSelf:
    def model_dump(self) -> Any:
        return self


class DumpNotCallable:
    model_dump = 5


class DumpDeep:
    def model_dump(self) -> Any:
        return build(["deep_list", 20_000])


class ReduceRaises:
    def __reduce_ex__(self, protocol: object) -> Any:
        raise RuntimeError("__reduce_ex__ failed")


class ReduceGarbage:
    def __reduce_ex__(self, protocol: object) -> Any:
        return 42


class ReduceShort:
    def __reduce_ex__(self, protocol: object) -> Any:
        return (ReduceShort,)


class ReduceSelf:
    def __reduce_ex__(self, protocol: object) -> Any:
        return self


class ReduceString:
    def __reduce_ex__(self, protocol: object) -> Any:
        return "hostile.global_name"


class DataclassFieldsGarbage:
    __dataclass_fields__ = "garbage"


@dataclasses.dataclass
class DataclassMissingField:
    x: int = 1


class GetattrRaises:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


class StrRaisesError(ValueError):
    def __str__(self) -> str:
        raise RuntimeError("__str__ failed")


class StrNotStrError(ValueError):
    def __str__(self) -> Any:
        return 5


class StrSubclassError(ValueError):
    def __str__(self) -> str:
        return STR_CLASSES["len_plus"]("error \udcff text " + "é" * 1100)


def _missing_field() -> DataclassMissingField:
    value = DataclassMissingField()
    del value.x
    return value


OBJECTS: Dict[str, Callable[[], Any]] = {
    "dump_raise": DumpRaises,
    "dump_garbage": DumpGarbage,
    "dump_self": DumpSelf,
    "dump_not_callable": DumpNotCallable,
    "dump_deep": DumpDeep,
    "reduce_raise": ReduceRaises,
    "reduce_garbage": ReduceGarbage,
    "reduce_short": ReduceShort,
    "reduce_self": ReduceSelf,
    "reduce_str": ReduceString,
    "dataclass_garbage": DataclassFieldsGarbage,
    "dataclass_missing": _missing_field,
    "getattr_raise": GetattrRaises,
    "class": lambda: DumpRaises,
    "function": lambda: _raise,
    "complex": lambda: complex(1.5, -2.0),
    "object": object,
}

EXCEPTIONS: Dict[str, Callable[[], BaseException]] = {
    "plain": lambda: ValueError("boom"),
    "surrogate": lambda: RuntimeError("bad \udcff tool"),
    "str_raise": lambda: StrRaisesError("x"),
    "str_not_str": lambda: StrNotStrError("x"),
    "str_subclass": lambda: StrSubclassError("x"),
    "base": lambda: KeyboardInterrupt(),
    "args_garbage": lambda: RuntimeError(object(), DumpRaises()),
    "huge_message": lambda: RuntimeError("m" * 2_000_000),
}

NUMPY_KINDS = ("int64", "int32", "uint64", "bool_", "float64", "float32")
"""numpy scalar types a recipe may use; int64, bool_ and float64 have a built-in twin."""


class Mutator:
    """A ``model_dump`` that adds entries to the dict holding this object while it is hashed."""

    def __init__(self, host: Dict[str, Any]) -> None:
        self.host = host

    def model_dump(self) -> Dict[str, Any]:
        for i in range(50):
            self.host[f"added{len(self.host)}_{i}"] = i
        return {"mutated": True}


def _numpy(kind: str, value: Any) -> Any:
    import numpy as np

    return getattr(np, kind)(value)


def _array(dtype: str, layout: str, values: List[int]) -> Any:
    import numpy as np

    if layout == "empty":
        return np.zeros(0, dtype=dtype)
    if layout == "0d":
        return np.array(values[0] if values else 0, dtype=dtype)
    if layout == "2d":
        return np.array(values * 2, dtype=dtype).reshape(2, len(values))
    base = np.array(values * 3, dtype=dtype)
    if layout == "strided":
        return base[::3]
    if layout == "reversed":
        return np.array(values[::-1], dtype=dtype)[::-1]
    if layout == "readonly":
        array = np.array(values, dtype=dtype)
        array.setflags(write=False)
        return array
    return np.array(values, dtype=dtype)


# --- recipes ---------------------------------------------------------------------------------


def text(spec: Any) -> str:
    """A recipe's text: the str itself, ``["random", seed, size, alphabet]`` (``size``
    characters drawn from ``alphabet``) or ``["repeat", text, times]``. Long texts travel as
    specs, so a failing case prints short."""
    if isinstance(spec, str):
        return spec
    if spec[0] == "random":
        _, seed, size, alphabet = spec
        rng = random.Random(seed)
        return "".join(rng.choice(alphabet) for _ in range(size))
    return spec[1] * spec[2]


def build(recipe: Recipe) -> Any:
    """The value a recipe describes, made afresh (two builds give equal, distinct objects)."""
    tag = recipe[0]
    if tag == "none":
        return None
    if tag in ("bool", "int", "float"):
        return recipe[1]
    if tag == "str":
        return text(recipe[1])
    if tag == "bigint":
        _, bits, sign = recipe
        return sign * (2**bits + 12345)
    if tag == "bytes":
        return bytes.fromhex(recipe[1])
    if tag == "bytearray":
        return bytearray.fromhex(recipe[1])
    if tag == "np":
        return _numpy(recipe[1], recipe[2])
    if tag == "array":
        return _array(recipe[1], recipe[2], recipe[3])
    if tag == "str_sub":
        return STR_CLASSES[recipe[1]](text(recipe[2]))
    if tag == "int_sub":
        return INT_CLASSES[recipe[1]](build(recipe[2]))
    if tag == "float_sub":
        return FLOAT_CLASSES[recipe[1]](recipe[2])
    if tag == "bytes_sub":
        return BYTES_CLASSES[recipe[1]](bytes.fromhex(recipe[2]))
    if tag == "list":
        return [build(item) for item in recipe[1]]
    if tag == "tuple":
        return tuple(build(item) for item in recipe[1])
    if tag == "set":
        return {build(item) for item in recipe[1]}
    if tag == "frozenset":
        return frozenset(build(item) for item in recipe[1])
    if tag == "dict":
        return {build(key): build(value) for key, value in recipe[1]}
    if tag == "list_sub":
        return LIST_CLASSES[recipe[1]](build(item) for item in recipe[2])
    if tag == "tuple_sub":
        return TUPLE_CLASSES[recipe[1]](build(item) for item in recipe[2])
    if tag == "dict_sub":
        return DICT_CLASSES[recipe[1]]((build(key), build(value)) for key, value in recipe[2])
    if tag == "obj":
        return OBJECTS[recipe[1]]()
    if tag == "exc":
        return EXCEPTIONS[recipe[1]]()
    if tag == "shared":
        shared: List[Any] = []
        for _ in range(recipe[1]):
            shared = [shared, shared]
        return shared
    if tag == "tree":
        return _tree(recipe[1])
    if tag == "deep_list":
        deep: Any = []
        for _ in range(recipe[1]):
            deep = [deep]
        return deep
    if tag == "deep_dict":
        nested: Any = {}
        for _ in range(recipe[1]):
            nested = {"k": nested}
        return nested
    if tag == "cycle_list":
        cycle: List[Any] = [1]
        cycle.append(cycle)
        return cycle
    if tag == "cycle_dict":
        loop: Dict[str, Any] = {}
        loop["self"] = loop
        return loop
    if tag == "mutating":
        host: Dict[str, Any] = {"a": 1}
        host["m"] = Mutator(host)
        return host
    raise ValueError(f"unknown recipe tag {tag!r}")


def _tree(depth: int) -> Any:
    """``x = [x, x]`` ``depth`` times, with every list a distinct object (iterative)."""
    level: List[Any] = [[] for _ in range(2**depth)]
    while len(level) > 1:
        level = [[level[i], level[i + 1]] for i in range(0, len(level), 2)]
    return level[0]


_PLAIN_NUMPY = {"int64": "int", "bool_": "bool", "float64": "float"}


def twin(recipe: Recipe) -> Recipe:
    """The recipe of the same data as plain built-ins: hostile subclasses become their base
    type, numpy int64/bool_/float64 scalars the int/bool/float of their value, a shared
    structure its tree of distinct copies."""
    tag = recipe[0]
    if tag == "str_sub":
        return ["str", recipe[2]]
    if tag == "int_sub":
        return twin(recipe[2])
    if tag == "float_sub":
        return ["float", recipe[2]]
    if tag == "bytes_sub":
        return ["bytes", recipe[2]]
    if tag == "np" and recipe[1] in _PLAIN_NUMPY:
        plain = _PLAIN_NUMPY[recipe[1]]
        value = recipe[2]
        return [plain, int(value) if plain == "int" else bool(value) if plain == "bool" else float(value)]
    if tag in ("list", "tuple", "set", "frozenset"):
        return [tag, [twin(item) for item in recipe[1]]]
    if tag in ("list_sub", "tuple_sub"):
        return [tag[:-4], [twin(item) for item in recipe[2]]]
    if tag == "dict":
        return ["dict", [[twin(key), twin(value)] for key, value in recipe[1]]]
    if tag == "dict_sub":
        return ["dict", [[twin(key), twin(value)] for key, value in recipe[2]]]
    if tag == "shared":
        return ["tree", recipe[1]]
    return recipe


def is_stable(recipe: Recipe) -> bool:
    """False when hashing the value changes it (a mutating ``model_dump`` somewhere inside)."""
    if not isinstance(recipe, list):
        return True
    return recipe != ["mutating"] and all(is_stable(part) for part in recipe)


# --- operations ------------------------------------------------------------------------------


def _summary(value: Any) -> Any:
    """A JSON-ready digest of a call's result (events as dicts, detectors' counters)."""
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return type(value).__name__


def _event(detector: Any) -> Any:
    return None if detector.event is None else detector.event.to_dict()


def _exercise_session(detector: Any) -> Dict[str, Any]:
    """Use a freshly built session detector a little; return what it reports."""
    detector.start_session()
    for i in range(6):
        detector.record_action("step", {"i": i % 2}, "same", i % 3 != 0, duration=0.5)
    detector.record_plan({"state": 1})
    detector.mark_progress("m")
    detector.record_response("la la " * 40)
    event = detector.get_loop_event()
    detector.get_recovery_action()
    detector.increment_recovery()
    return {"loop": None if event is None else event.loop_type.value, "stats": detector.get_stats()["total_actions"]}


def _longest_backoff(detector: Any) -> float:
    """The longest delay ``apply_backoff`` would sleep (the delay grows, then is capped)."""
    longest = 0.0
    previous = None
    for _ in range(2_000):
        delay = detector._next_backoff()
        longest = max(longest, delay)
        if delay == previous:
            break
        previous = delay
    return longest


def _sleep_accepts(delay: float) -> Optional[str]:
    """None when ``time.sleep(delay)`` starts sleeping; the error it raises otherwise. The
    sleep runs in a daemon thread that is abandoned if it is still sleeping."""
    errors: List[str] = []

    def sleep() -> None:
        try:
            time.sleep(delay)
        except BaseException as error:  # noqa: BLE001 - reported to the test
            errors.append(f"{type(error).__name__}: {error}")

    thread = threading.Thread(target=sleep, daemon=True)
    thread.start()
    thread.join(0.05)
    return errors[0] if errors else None


def _use_doom_config(config: Any) -> Dict[str, Any]:
    from doomloop import DoomLoopDetector

    detector = DoomLoopDetector(config)
    used = _exercise_session(detector)
    problem = _sleep_accepts(_longest_backoff(detector))
    if problem is not None:
        raise AssertionError(f"apply_backoff() would fail: {problem}")
    return used


def _use_tool_detector(detector: Any) -> Dict[str, Any]:
    for i in range(4):
        decision = detector.before_tool_call("read", {"path": "a"}, run_id="r", tool_call_id=f"c{i}")
        detector.after_tool_call("read", {"path": "a"}, result={"content": [{"type": "text", "text": "t"}]}, tool_call_id=f"c{i}")
    detector.arm_post_compaction()
    detector.after_tool_call("read", {"path": "a"}, result="same")
    return {"history": detector.history_len, "level": decision.verdict.level}


def _use_chant(detector: Any) -> Dict[str, Any]:
    import numpy as np

    detector.feed("la " * 200)
    text = {"position": detector.position, "event": _event(detector)}
    detector.reset()
    detector.feed_tokens(np.arange(300, dtype=np.int64) % 7)
    return {"text": text, "tokens": {"position": detector.position, "event": _event(detector)}}


def _use_guard(guard: Any) -> Dict[str, Any]:
    guard.arm()
    verdicts = [guard.observe("t", {"a": 1}, result="r") for _ in range(3)]
    return {"abort": [bool(v and v.should_abort) for v in verdicts]}


def _use_evaluator(evaluator: Any) -> Dict[str, Any]:
    health = evaluator.run({"score_history": [1.0, 9.0, 9.5]}, guard_events=[{"level": "warning"}])
    return {"converged": health.converged, "passed": health.passed}


def _tool_call(target: str, values: Dict[str, Any]) -> Any:
    from doomloop import PostCompactionGuard, ToolLoopDetector, tool_result_hash

    tool, params = values["tool"], values["params"]
    result, error = values["result"], values["error"]
    ids = {"run_id": values["run_id"], "tool_call_id": values["tool_call_id"]}
    if target == "tool_result_hash":
        return tool_result_hash(tool, params, result=result, error=error)
    if target == "guard_observe":
        guard = PostCompactionGuard()
        guard.arm()
        return _summary(guard.observe(tool, params, result=result, error=error))
    detector = ToolLoopDetector(warning_threshold=2, critical_threshold=3, global_circuit_breaker_threshold=4)
    detector.arm_post_compaction()
    outputs: List[Any] = []
    for _ in range(4):
        if target == "before_tool_call":
            decision = detector.before_tool_call(tool, params, **ids)
            outputs.append([decision.verdict.level, decision.blocked])
        elif target == "after_tool_call":
            outcome = detector.after_tool_call(tool, params, result=result, error=error, **ids)
            outputs.append([outcome.result_hash, outcome.is_error, bool(outcome.guard)])
        elif target == "check":
            detector.record_call(tool, params, run_id=values["run_id"])
            outputs.append(detector.check(tool, params, run_id=values["run_id"]).to_dict())
        elif target == "record_call":
            detector.record_call(tool, params, **ids)
        elif target == "record_outcome":
            outputs.append(detector.record_outcome(tool, params, result=result, error=error, **ids).result_hash)
    return {"history": detector.history_len, "outputs": outputs}


TOOL_TARGETS = (
    "before_tool_call",
    "after_tool_call",
    "check",
    "record_call",
    "record_outcome",
    "tool_result_hash",
    "guard_observe",
)
_TOOL_BASELINE = {
    "tool": "read",
    "params": {"path": "a.txt"},
    "result": {"content": [{"type": "text", "text": "ok"}], "details": {}},
    "error": None,
    "run_id": "run",
    "tool_call_id": "call",
}


def _session_call(target: str, param: str, value: Any) -> Any:
    from doomloop import DoomLoopDetector

    detector = DoomLoopDetector()
    detector.start_session()
    if target == "record_action":
        call: Dict[str, Any] = {
            "action_type": "read",
            "args": {"p": 1},
            "result": "r",
            "success": True,
            "duration": 0.0,
            "metadata": None,
        }
        call[param] = value
        for _ in range(3):
            detector.record_action(
                call["action_type"],
                call["args"],
                call["result"],
                call["success"],
                duration=call["duration"],
                metadata=call["metadata"],
            )
    elif target == "mark_progress":
        detector.mark_progress(value)
    elif target == "record_plan":
        for _ in range(3):
            detector.record_plan(value)
    elif target == "record_response":
        detector.record_response(value)
        detector.record_response(value)
    elif target == "record_output_chunk":
        detector.record_output_chunk(value)
        detector.record_output_chunk(value)
        detector.end_response()
    loop = detector.get_loop_type()
    return {"loop": None if loop is None else loop.value, "stats": detector.get_stats()["total_actions"]}


class Unusable(AssertionError):
    """A value was accepted when the object was built, then failed when it was used."""


def _then(make: Callable[[], Any], use: Callable[[Any], Any]) -> Any:
    """``use(make())``; an error from ``make`` is the validation's answer, one from ``use``
    means the validation let through a value the object cannot work with."""
    built = make()
    try:
        return use(built)
    except BaseException as error:
        raise Unusable(f"accepted, then {type(error).__name__} when used: {error}") from error


def _openclaw(param: str, value: Any, strict: bool) -> Any:
    from doomloop import LoopDetectionConfig

    block: Dict[str, Any] = {"enabled": True}
    if "." in param:
        outer, inner = param.split(".")
        block[outer] = {inner: value}
    else:
        block[param] = value
    return LoopDetectionConfig.from_openclaw({"tools": {"loopDetection": block}}, strict=strict)


def _config_call(target: str, param: str, value: Any) -> Any:
    from doomloop import ChantDetector, DoomLoopConfig, LoopDetectionConfig, PostCompactionGuard, ToolLoopDetector
    from doomloop.eval import LoopEvaluator

    def tool_config(config: Any) -> Any:
        return _use_tool_detector(ToolLoopDetector(config))

    makers: Dict[str, Tuple[Callable[[], Any], Callable[[Any], Any]]] = {
        "DoomLoopConfig": (lambda: DoomLoopConfig(**{param: value}), _use_doom_config),
        "LoopDetectionConfig": (lambda: LoopDetectionConfig(**{param: value}), tool_config),
        "ToolLoopDetector": (lambda: ToolLoopDetector(**{param: value}), _use_tool_detector),
        "ChantDetector": (lambda: ChantDetector(**{param: value}), _use_chant),
        "PostCompactionGuard": (lambda: PostCompactionGuard(value), _use_guard),
        "LoopEvaluator": (lambda: LoopEvaluator(**{param: value}), _use_evaluator),
        "from_openclaw_flag": (lambda: LoopDetectionConfig.from_openclaw({}, strict=value), tool_config),
        "from_openclaw_strict": (lambda: _openclaw(param, value, True), tool_config),
        "from_openclaw_lenient": (lambda: _openclaw(param, value, False), tool_config),
    }
    make, use = makers[target]
    return _then(make, use)


def _stream_call(target: str, value: Any) -> Any:
    from doomloop import ChantDetector, guard_stream

    if target == "chant_feed":
        detector = ChantDetector()
        detector.feed(value)
        detector.feed(value)
        return {"position": detector.position, "event": _event(detector)}
    if target == "feed_tokens":
        detector = ChantDetector()
        detector.feed_tokens(value)
        detector.feed_tokens(value)
        return {"position": detector.position, "event": _event(detector)}
    detector = ChantDetector()
    passed = list(guard_stream(value, detector, on_chant="stop"))
    return {"chunks": len(passed), "event": _event(detector)}


SESSION_TARGETS = ("record_action", "mark_progress", "record_plan", "record_response", "record_output_chunk")
CONFIG_TARGETS = (
    "DoomLoopConfig",
    "LoopDetectionConfig",
    "ToolLoopDetector",
    "ChantDetector",
    "PostCompactionGuard",
    "LoopEvaluator",
    "from_openclaw_strict",
    "from_openclaw_lenient",
    "from_openclaw_flag",
)
STREAM_TARGETS = ("chant_feed", "feed_tokens", "guard_stream")


def call_target(target: str, param: str, value: Any) -> Any:
    """Call one entry point with ``value`` as ``param`` and benign values elsewhere."""
    if target == "fingerprint":
        from doomloop import fingerprint

        return fingerprint(value)
    if target in SESSION_TARGETS:
        return _session_call(target, param, value)
    if target in CONFIG_TARGETS:
        return _config_call(target, param, value)
    if target in STREAM_TARGETS:
        return _stream_call(target, value)
    if target in TOOL_TARGETS:
        return _tool_call(target, {**_TOOL_BASELINE, param: value})
    raise ValueError(f"unknown target {target!r}")


def _poison_code_point_buffer() -> None:
    """Leave this thread's reusable code-point buffer (if the engine keeps one) full of
    ``é``: a long non-ASCII text fed to another detector."""
    from doomloop import ChantDetector

    ChantDetector().feed("é" * 60_000)


def _chant_run(chunks: List[Any], settings: List[int], key: List[int]) -> Dict[str, Any]:
    from doomloop import ChantDetector

    size, repeats = settings
    detector = ChantDetector(size, repeats, _hash_key=(key[0], key[1]))
    events = [_summary(detector.feed(chunk)) for chunk in chunks]
    return {"events": events, "position": detector.position, "event": _event(detector)}


def _token_run(tokens: Any, key: List[int]) -> Dict[str, Any]:
    from doomloop import ChantDetector

    detector = ChantDetector(4, 3, _hash_key=(key[0], key[1]))
    event = detector.feed_tokens(tokens)
    return {"event": _summary(event), "position": detector.position}


def _tool_hash(where: str, text: str) -> Any:
    from doomloop import ToolLoopDetector, tool_result_hash

    if where == "error":
        return tool_result_hash("t", {}, error=f"x{text}x")
    if where == "error_exception":
        return tool_result_hash("t", {}, error=RuntimeError(f"x{text}x"))
    if where == "content":
        return tool_result_hash("t", {}, result={"content": [{"type": "text", "text": f"x{text}x"}]})
    if where == "content_parts":
        parts = [{"type": "text", "text": f"x{text}x"}, {"type": "text", "text": "second"}]
        return tool_result_hash("t", {}, result={"content": parts})
    if where == "exec_output":
        details = {"status": "completed", "exitCode": 0, "aggregated": f"x{text}x"}
        return tool_result_hash("exec", {"command": "ls"}, result={"details": details})
    if where == "tool":
        return ToolLoopDetector().after_tool_call(f"t{text}", {}, result="r").args_hash
    if where == "param_key":
        return ToolLoopDetector().after_tool_call("t", {f"k{text}": 1}, result="r").args_hash
    if where == "param_value":
        return ToolLoopDetector().after_tool_call("t", {"k": f"v{text}"}, result="r").args_hash
    raise ValueError(f"unknown place {where!r}")


def run_case(case: Dict[str, Any]) -> Any:
    """Run one case; the result is JSON-ready. Operations:

    * ``fingerprint``: the digests of the value hashed twice, of the same recipe built
      again, and of its :func:`twin`;
    * ``call``: one entry point with the value as one parameter (:func:`call_target`);
    * ``chant``: the same chunks fed as built and as their twins, to two detectors with one
      hash key, optionally after poisoning the thread's code-point buffer;
    * ``tokens``: a token array fed as built and as a contiguous int64 copy of its items;
    * ``tool_hash``: the hashes of two texts placed at the same spot of a tool call.
    """
    op = case["op"]
    if op == "fingerprint":
        from doomloop import fingerprint

        value = build(case["value"])
        rebuilt, plain = build(case["value"]), build(twin(case["value"]))
        return [fingerprint(value), fingerprint(value), fingerprint(rebuilt), fingerprint(plain)]
    if op == "call":
        return _summary(call_target(case["target"], case["param"], build(case["value"])))
    if op == "chant":
        if case["poison"]:
            _poison_code_point_buffer()
        hostile = _chant_run([build(chunk) for chunk in case["chunks"]], case["settings"], case["key"])
        plain = _chant_run([build(twin(chunk)) for chunk in case["chunks"]], case["settings"], case["key"])
        return {"hostile": hostile, "plain": plain}
    if op == "tokens":
        import numpy as np

        tokens = build(case["tokens"])
        reference = np.array([int(token) for token in tokens.tolist()], dtype=np.int64)
        return {"hostile": _token_run(tokens, case["key"]), "plain": _token_run(reference, case["key"])}
    if op == "tool_hash":
        return [_tool_hash(case["where"], case["a"]), _tool_hash(case["where"], case["b"])]
    raise ValueError(f"unknown op {op!r}")


def _error_report(error: BaseException) -> Dict[str, Any]:
    kind = type(error)
    allowed = isinstance(error, (TypeError, ValueError)) and not isinstance(error, UnicodeError)
    return {
        "error": f"{kind.__module__}.{kind.__qualname__}",
        "message": str(error)[:400],
        "allowed": allowed,
    }


def main() -> None:
    cases = json.loads(sys.stdin.read())
    out = sys.stdout
    for index, case in enumerate(cases):
        out.write(f"start {index}\n")
        out.flush()
        try:
            report: Dict[str, Any] = {"ok": run_case(case)}
        except BaseException as error:  # noqa: BLE001 - PanicException derives from BaseException
            report = _error_report(error)
        out.write("result " + json.dumps(report) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
