"""doomloop.findings: the Finding value, and CODES against the table in docs/monitor.md."""

from __future__ import annotations

import copy
import pickle
import re

import pytest

from doomloop import Finding
from doomloop.findings import CODES, codes_table, shorten
from support import DOCS


def test_the_docs_table_is_generated_from_codes() -> None:
    text = (DOCS / "monitor.md").read_text(encoding="utf-8")
    table = re.search(r"<!-- codes:.*?-->\n(.*?)\n<!-- /codes -->", text, flags=re.S)
    assert table is not None, "docs/monitor.md lost its codes table"
    assert table[1] == codes_table()
    rows = re.findall(r"^\| `([^`]+)` \| (.*) \|$", table[1], flags=re.M)
    assert rows == list(CODES.items())


def test_codes_name_their_detector() -> None:
    for code in CODES:
        assert code == "chant" or code.split(".")[0] in {"tool_loop", "session", "guard"}, code


def test_a_finding_is_an_immutable_value() -> None:
    finding = Finding("chant", "critical", "chant", "stop_stream", "m", evidence="x", count=6, first_step=3, last_step=4)
    assert Finding.from_dict(finding.to_dict()) == finding and hash(finding) == hash(copy.copy(finding))
    assert pickle.loads(pickle.dumps(finding)) == finding
    assert finding != Finding("chant", "critical", "chant", "stop_stream", "m", evidence="x", count=6, first_step=3, last_step=5)
    with pytest.raises(AttributeError, match="immutable"):
        finding.level = "warning"  # type: ignore[misc]
    assert "chant" in repr(finding) and "steps 3-4" in repr(finding)


def test_shorten_folds_whitespace_and_cuts() -> None:
    assert shorten("a \n\t b") == "a b"
    assert shorten("x" * 200) == "x" * 119 + "…" and len(shorten("y" * 121)) == 120
    assert shorten("z" * 120) == "z" * 120
