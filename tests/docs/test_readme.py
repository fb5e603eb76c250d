"""The README's examples run (so they cannot rot), and so does its main-job command."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from support import README

BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert BLOCKS, "README.md has no python examples"


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"README.md example {index + 1}", "exec"), {"__name__": "__readme__"})


def test_readme_set_up_commands() -> None:
    commands = re.findall(r"```bash\n(.*?)\n```", README.read_text(encoding="utf-8"), flags=re.S)
    assert commands[:2] == ["pip install . && python -m doomloop", "bash .ci/run"]


def test_demo_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "doomloop"], capture_output=True, text=True, check=True, timeout=60)
    assert "repeated_action: Same action repeated 3 times -> retry_different" in out.stdout
    assert "circular_plan" in out.stdout and "resource_exhaustion" in out.stdout
