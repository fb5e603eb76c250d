"""Shared test helpers: where the conformance vectors live, and a controllable clock.

A plain module rather than conftest.py, so tests can import it by a name no other folder uses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# `../shared/conformance` beside the project root, as laid out for development and CI.
CONFORMANCE = Path(__file__).resolve().parents[1].parent / "shared" / "conformance"


def conformance_file(name: str) -> Path:
    """The path of a conformance file; fails (never skips) when it is missing."""
    path = CONFORMANCE / name
    if not path.is_file():
        pytest.fail(f"conformance file missing: {path} (shared/ must sit beside the project)")
    return path


class FakeClock:
    """A clock the test sets by hand (seconds)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


README = Path(__file__).resolve().parents[1] / "README.md"


def readme_section(heading: str) -> str:
    """The README section whose ``## `` heading starts with ``heading`` (up to the next one)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}") + 1
    end = text.find("\n## ", start)
    return text[start : end if end != -1 else len(text)]


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a markdown text."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)
