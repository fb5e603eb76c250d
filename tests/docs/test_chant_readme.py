"""The README's content-chanting section states the current numbers (test_readme.py runs its example)."""

from __future__ import annotations

from doomloop import ChantDetector
from support import readme_section


def section_text() -> str:
    return readme_section("Content chanting")


def test_documented_history_size() -> None:
    assert ChantDetector().history_size == 9_491
    assert "9,491" in section_text()
