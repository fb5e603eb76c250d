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


def test_import_stays_light() -> None:
    # `import doomloop` loads the session detector only; heavier features load on first use.
    code = (
        "import sys, doomloop\n"
        "heavy = {'dataclasses', 'logging', 'asyncio', 'numpy', 'doomloop.tool_loop', 'doomloop.chant'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
        "doomloop.ToolLoopDetector, doomloop.ChantDetector, doomloop.guard_stream\n"
        "print('doomloop.tool_loop' in sys.modules, 'doomloop.chant' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True True"], out.stdout


def test_every_public_name_resolves() -> None:
    import doomloop

    for name in doomloop.__all__:
        assert getattr(doomloop, name) is not None, name
    assert set(doomloop.__all__) <= set(dir(doomloop))
