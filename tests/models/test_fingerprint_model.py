"""Property tests: the canonical fingerprint against the pure-Python model
(``canonical_model.py``) on random values, shared and cyclic values and graphs of lists; and
the published vectors, which pin the encoding."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings, strategies as st

from canonical_model import model
from doomloop import fingerprint
from support import DATA

VECTORS = DATA / "fingerprint_vectors.json"

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text() | st.binary()
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children)
        | st.tuples(children, children)
        | st.dictionaries(st.text() | st.integers(), children)
        | st.frozensets(st.integers() | st.text())
    ),
    max_leaves=40,
)


@given(values)
@settings(max_examples=400)
def test_engine_agrees_with_the_python_model(value: Any) -> None:
    assert fingerprint(value) == model(value)


def _with_cycle(items: list[Any]) -> list[Any]:
    items.append(items)
    return items


# Values whose sub-objects are shared (the same list, dict or tuple under several parents),
# and some that contain themselves: the walk's digest reuse must not change the encoding.
shared_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3).map(lambda xs: xs + xs)
        | st.tuples(children).map(lambda t: [t, {"again": t}, (t,)])
        | st.dictionaries(st.text(max_size=3), children, max_size=3).map(lambda d: [d, [d], d])
        | st.lists(children, max_size=3).map(_with_cycle)
    ),
    max_leaves=30,
)


@given(shared_values)
@settings(max_examples=300)
def test_shared_and_cyclic_values_agree_with_the_model(value: Any) -> None:
    assert fingerprint(value) == model(value)


def test_published_vectors() -> None:
    # The digests in the vector file were computed by the pure-Python model (written from
    # the encoding in docs/fingerprint.md, sharing no code with the engine). They pin the encoding: a
    # change of seed, tag or layout in either implementation fails here.
    vectors = json.loads(VECTORS.read_text())
    assert len(vectors) >= 20
    for value, digest in vectors:
        assert model(value) == int(digest, 16), value
        assert fingerprint(value) == int(digest, 16), value


@given(st.lists(st.lists(st.integers(0, 6), max_size=3), min_size=1, max_size=7), st.integers())
@settings(max_examples=300)
def test_random_graphs_of_lists_agree_with_the_model(edges: list[list[int]], leaf: int) -> None:
    # Any graph of lists (shared children, cycles through them, self-loops): the digest
    # reuse must give exactly the path-by-path encoding.
    nodes: list[list[Any]] = [[leaf] for _ in edges]
    for node, targets in zip(nodes, edges, strict=True):
        node.extend(nodes[t % len(nodes)] for t in targets)
    assert fingerprint(nodes[0]) == model(nodes[0])
