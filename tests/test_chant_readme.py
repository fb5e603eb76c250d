"""The README section's example runs (so it cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

from doomloop import ChantDetector

SECTION = Path(__file__).resolve().parents[1] / "docs" / "readme-chant.md"


def test_readme_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", SECTION.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(SECTION), "exec"), {"__name__": "readme"})


def test_documented_history_size() -> None:
    assert ChantDetector().history_size == 9_491
    assert "9,491" in SECTION.read_text(encoding="utf-8")
