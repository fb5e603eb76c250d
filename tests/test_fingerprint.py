"""The canonical fingerprint: agreement with the pure-Python model, published vectors,
equalities the spec promises, and adversarial input that must never raise or crash."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import doomloop
from canonical_model import model
from doomloop import _core, fingerprint

VECTORS = Path(__file__).with_name("fingerprint_vectors.json")

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary()
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children)
    | st.tuples(children, children)
    | st.dictionaries(st.text() | st.integers(), children)
    | st.frozensets(st.integers() | st.text()),
    max_leaves=40,
)


@given(values)
@settings(max_examples=400)
def test_engine_agrees_with_the_python_model(value: Any) -> None:
    assert fingerprint(value) == model(value)


def test_published_vectors() -> None:
    # The digests in the vector file were computed by the pure-Python model (written from
    # the README's encoding, sharing no code with the engine). They pin the encoding: a
    # change of seed, tag or layout in either implementation fails here.
    vectors = json.loads(VECTORS.read_text())
    assert len(vectors) >= 20
    for value, digest in vectors:
        assert model(value) == int(digest, 16), value
        assert fingerprint(value) == int(digest, 16), value


def test_promised_equalities_and_distinctions() -> None:
    assert fingerprint({"a": 1, "b": {"x": [1, 2]}}) == fingerprint({"b": {"x": [1, 2.0]}, "a": 1.0})
    assert fingerprint(-0.0) == fingerprint(0)
    assert fingerprint(float("nan")) == fingerprint(-float("nan"))
    assert fingerprint(1e300) == fingerprint(int(1e300))
    assert fingerprint(2**100) == fingerprint(float(2**100))
    assert fingerprint(True) != fingerprint(1)
    assert fingerprint("1") != fingerprint(1)
    assert fingerprint(b"a") != fingerprint("a")
    assert fingerprint(b"a") == fingerprint(bytearray(b"a"))
    assert fingerprint([1, 2]) == fingerprint((1, 2))
    assert fingerprint([1, 2]) != fingerprint([2, 1])
    assert fingerprint({1, 2, 3}) == fingerprint(frozenset({3, 2, 1}))
    assert fingerprint(OrderedDict(b=1, a=2)) == fingerprint({"a": 2, "b": 1})
    assert fingerprint(MappingProxyType({"a": 1})) == fingerprint({"a": 1})
    assert fingerprint(2**64) != fingerprint(-(2**64))


def test_stable_across_processes() -> None:
    value = {"q": ["x", 1.5, None, {"k": (True, b"\x00")}], "n": 2**70}
    code = f"import doomloop; print(doomloop.fingerprint({value!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == fingerprint(value)


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Other:
    x: int
    y: int


class Model:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def model_dump(self) -> dict[str, Any]:
        return dict(self.data)


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def test_objects_hash_by_type_and_state() -> None:
    assert fingerprint(Point(1, 2)) == fingerprint(Point(1, 2))
    assert fingerprint(Point(1, 2)) != fingerprint(Point(1, 3))
    assert fingerprint(Point(1, 2)) != fingerprint(Other(1, 2))
    assert fingerprint(Model({"a": 1})) == fingerprint(Model({"a": 1.0}))
    assert fingerprint(Model({"a": 1})) != fingerprint(Model({"a": 2}))
    assert fingerprint(Color.RED) != fingerprint(Color.BLUE)
    day = datetime.datetime(2026, 1, 2, 3, 4, 5)
    assert fingerprint(day) == fingerprint(datetime.datetime(2026, 1, 2, 3, 4, 5))
    assert fingerprint(day) != fingerprint(day + datetime.timedelta(seconds=1))


class Unpicklable:
    __slots__ = ()

    def __reduce_ex__(self, protocol: object) -> Any:
        raise RuntimeError("no")


class BadDump:
    def model_dump(self) -> Any:
        raise ValueError("broken")


def test_odd_objects_fall_back_without_raising() -> None:
    assert fingerprint(Unpicklable()) == fingerprint(Unpicklable())
    assert isinstance(fingerprint(BadDump()), int)
    assert isinstance(fingerprint(object()), int)
    assert isinstance(fingerprint(lambda: 0), int)
    assert fingerprint(int) != fingerprint(str)
    assert isinstance(fingerprint(complex(1, 2)), int)


def test_cycles_are_marked() -> None:
    a: list[Any] = [1]
    a.append(a)
    b: list[Any] = [1]
    b.append(b)
    assert fingerprint(a) == fingerprint(b)
    d: dict[str, Any] = {}
    d["self"] = d
    assert isinstance(fingerprint(d), int)


def test_deep_nesting_does_not_recurse() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert isinstance(fingerprint(deep), int)
    deep_dict: Any = {}
    for _ in range(100_000):
        deep_dict = {"k": deep_dict}
    assert isinstance(fingerprint(deep_dict), int)
    # Beyond the depth limit, structures differing only deeper than it hash alike.
    x: Any = 1
    y: Any = 2
    for _ in range(_core.MAX_DEPTH + 5):
        x, y = [x], [y]
    assert fingerprint(x) == fingerprint(y)


def test_huge_and_odd_scalars() -> None:
    big = "a" * (100 * 1024 * 1024)
    assert fingerprint(big) == model(big)
    assert fingerprint("\ud800") == model("\ud800")
    assert fingerprint(float("inf")) != fingerprint(float("-inf"))
    assert fingerprint(10**400) == model(10**400)
    assert fingerprint(-(10**400)) == model(-(10**400))
    assert math.isnan(float("nan"))


class Mutating:
    """A model_dump that mutates the dict being walked around it."""

    def __init__(self, host: dict[str, Any]) -> None:
        self.host = host

    def model_dump(self) -> dict[str, Any]:
        for i in range(100):
            self.host[f"new{i}"] = i
        return {}


def test_mutation_during_walk_is_safe() -> None:
    host: dict[str, Any] = {}
    host["m"] = Mutating(host)
    assert isinstance(fingerprint(host), int)
    items: list[Any] = []
    items.append(Mutating({}))
    assert isinstance(fingerprint(items), int)


def test_reentrant_fingerprint_inside_model_dump() -> None:
    class Reentrant:
        def model_dump(self) -> dict[str, Any]:
            return {"inner": doomloop.fingerprint({"x": [1, 2]})}

    assert fingerprint([Reentrant()]) == fingerprint([Reentrant()])
