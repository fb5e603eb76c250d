"""The README section's example runs (so it cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

from doomloop import ChantDetector

ROOT = Path(__file__).resolve().parents[1]
# The section is written in docs/ and merged into README.md: test whichever holds it.
SOURCES = [ROOT / "docs" / "readme-chant.md", ROOT / "README.md"]


def section_text() -> str:
    for source in SOURCES:
        if source.exists() and "## Content chanting" in source.read_text(encoding="utf-8"):
            text = source.read_text(encoding="utf-8")
            start = text.index("## Content chanting")
            end = text.find("\n## ", start + 1)
            return text[start : end if end != -1 else len(text)]
    raise AssertionError("the content chanting README section was not found")


def test_readme_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", section_text(), re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "readme-chant", "exec"), {"__name__": "readme"})


def test_documented_history_size() -> None:
    assert ChantDetector().history_size == 9_491
    assert "9,491" in section_text()
