"""The canonical fingerprint: equalities the spec promises, objects, cycles, depth, and
adversarial input that must never raise or crash (agreement with the pure-Python model and
the published vectors: tests/models/test_fingerprint_model.py)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import subprocess
import sys
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import doomloop
from canonical_model import model
from doomloop import _core, fingerprint


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


def _run_isolated(code: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    # A hang or a crash must fail the test, not the test run.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


def test_shared_sub_objects_cost_their_distinct_objects() -> None:
    # 41 lists, each holding the next one twice: 2**40 paths. Before, this never finished.
    result = _run_isolated(
        "import doomloop\nx = []\nfor _ in range(40):\n    x = [x, x]\nprint(doomloop.fingerprint(x))\n",
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    # The digest is the tree's: compare at a depth where the tree can be built.
    shared: list[Any] = []
    for _ in range(12):
        shared = [shared, shared]

    def tree(depth: int) -> list[Any]:
        return [] if depth == 0 else [tree(depth - 1), tree(depth - 1)]

    assert fingerprint(shared) == fingerprint(tree(12)) == model(tree(12))
    # Shared dicts, tuples, sets and objects too, and reuse never crosses the depth cap.
    inner = {"k": (1, frozenset({2}))}
    assert fingerprint([inner, inner, {"again": inner}]) == model(
        [{"k": (1, frozenset({2}))}] * 2 + [{"again": {"k": (1, frozenset({2}))}}]
    )
    deep: list[Any] = [7]
    for _ in range(_core.MAX_DEPTH - 3):
        deep = [deep]
    capped = [deep, [[deep]], [[[[[[deep]]]]]], [[deep]]]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # the model recurses (two frames a level)
    try:
        assert fingerprint(capped) == model(capped)
    finally:
        sys.setrecursionlimit(limit)


def test_cycles_through_shared_objects_are_bounded() -> None:
    # Every list lies on a cycle back to the root, so no digest can be reused: the re-walks
    # are capped (MAX_REWALKS) instead of taking 2**40 steps.
    result = _run_isolated(
        "import doomloop\n"
        "root = []\n"
        "x = root\n"
        "for _ in range(40):\n"
        "    x = [x, x]\n"
        "root.append(x)\n"
        "a, b = doomloop.fingerprint(x), doomloop.fingerprint(x)\n"
        "assert a == b, (a, b)\n",
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # Small cycles through shared objects still hash exactly as the model says.
    root: list[Any] = []
    shared = [root, root]
    root.append(shared)
    assert fingerprint([shared, shared]) == model([shared, shared])


def test_numpy_scalars_hash_as_the_python_values_they_equal() -> None:
    import numpy as np

    assert fingerprint(np.int64(5)) == fingerprint(5) == fingerprint(np.uint8(5)) == fingerprint(np.float64(5.0))
    assert fingerprint(np.uint64(2**64 - 1)) == fingerprint(2**64 - 1)
    assert fingerprint(np.int32(-3)) == fingerprint(-3)
    assert fingerprint(np.bool_(True)) == fingerprint(True) != fingerprint(1)
    assert fingerprint(np.float32(0.5)) == fingerprint(0.5)
    assert fingerprint({"n": np.int64(2)}) == fingerprint({"n": 2})


def test_subclass_overrides_are_not_asked() -> None:
    class LyingStr(str):
        def __len__(self) -> int:
            return 10**9

        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            return b"lie"

    class LyingInt(int):
        def __abs__(self) -> int:
            return 1

        def bit_length(self) -> int:
            return 10**9

        def to_bytes(self, *args: Any, **kwargs: Any) -> bytes:
            return b"lie"

        def __lt__(self, other: object) -> bool:
            return True

    class LyingSet(set):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            while True:
                yield 1

    for text in ["plain", "lone \udcff surrogate", "ü" * 70_000]:
        assert fingerprint(LyingStr(text)) == fingerprint(text) == model(text)
    for number in [2**100, -(2**100), 5]:
        assert fingerprint(LyingInt(number)) == fingerprint(number) == model(number)
    assert fingerprint(LyingSet({1, 2})) == fingerprint({1, 2})


def test_long_non_ascii_text_leaves_no_copy_on_the_str() -> None:
    text = "".join(chr(0x4E00 + i % 20_000) for i in range(200_000)) + "\udcff"
    size = sys.getsizeof(text)
    assert fingerprint(text) == model(text)
    assert sys.getsizeof(text) == size
    clean = "é" * 100_000
    size = sys.getsizeof(clean)
    assert fingerprint(clean) == model(clean)
    assert sys.getsizeof(clean) == size
