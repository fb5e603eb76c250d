"""The stubs match the compiled module, and the package type-checks under mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


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
    # Only what doomloop itself imports counts (site may have imported typing already).
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import doomloop\n"
        "heavy = {'dataclasses', 'enum', 'logging', 'asyncio', 'typing', 'numpy', 'doomloop.tool_loop', 'doomloop.chant'}\n"
        "print(sorted(heavy & (set(sys.modules) - before)))\n"
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


def test_every_public_name_comes_from_the_module_the_table_names() -> None:
    import ast
    import importlib

    import doomloop

    for name, module in doomloop._EXPORTS.items():
        assert getattr(importlib.import_module(f"doomloop.{module}"), name) is getattr(doomloop, name), name
    # The imports type checkers read (eager and TYPE_CHECKING) are exactly the table's.
    tree = ast.parse(Path(doomloop.__file__).read_text(encoding="utf-8"))
    imported = {
        (alias.asname or alias.name, node.module)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
    }
    assert imported == set(doomloop._EXPORTS.items())
