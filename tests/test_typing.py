"""The stubs match the compiled module, and the package type-checks under mypy --strict."""

from __future__ import annotations

import subprocess
import sys

def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=600)


def test_stubs_match_the_extension() -> None:
    result = _run("mypy.stubtest", "doomloop._core")
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_is_strictly_typed() -> None:
    # By package name, so the installed wheel (with its py.typed) is what gets checked.
    result = _run("mypy", "--strict", "-p", "doomloop")
    assert result.returncode == 0, result.stdout + result.stderr
