"""Every install command the package's errors and the docs give works from a clone: doomloop
is on no package index yet, so none may install doomloop itself from one, and each error's
hint names the requirement pyproject.toml pins for its extra."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

import pytest

from doomloop._extras import REQUIREMENTS, install_hint
from support import DOCS, README, ROOT

SOURCES = [README, *sorted(DOCS.glob("*.md")), *sorted((ROOT / "python" / "doomloop").rglob("*.py"))]
# `pip install` and what follows on its line, up to a closing backtick or parenthesis.
PIP_INSTALL = re.compile(r"pip install ([^`)\n]*)")


def _from_an_index(command: str) -> bool:
    """Whether the arguments of one `pip install` (up to a comment, `&&`, `;` or a
    parenthesis) name doomloop itself, which only a package index could serve."""
    arguments = re.split(r"#|&&|;|\(", command)[0].split()
    return any(re.fullmatch(r"doomloop(\[.*\])?([<>=!~].*)?", argument.strip("'\"")) for argument in arguments)


def _extras_in_pyproject() -> Dict[str, List[str]]:
    """The single-line lists of [project.optional-dependencies] (the extras a hint names)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    return {name: re.findall(r'"([^"]+)"', items) for name, items in re.findall(r"^(\w+) = \[(.*)\]$", section, flags=re.M)}


@pytest.mark.parametrize("extra", sorted(REQUIREMENTS))
def test_each_hint_names_its_extras_requirement(extra: str) -> None:
    assert _extras_in_pyproject()[extra] == [REQUIREMENTS[extra]]
    assert f'pip install ".[{extra}]"' in install_hint(extra)


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_install_command_fetches_doomloop_from_a_package_index(path: Path) -> None:
    commands = PIP_INSTALL.findall(path.read_text(encoding="utf-8"))
    from_an_index = [command for command in commands if _from_an_index(command)]
    assert not from_an_index, f"{path.name}: {from_an_index} would fetch doomloop from a package index"


def test_the_scan_finds_an_install_from_an_index() -> None:
    # The rule above can fail: these are what a hint must not say.
    for text in ("pip install 'doomloop[redis]'", 'pip install "doomloop[plot]"', "pip install -U doomloop==1.0"):
        assert _from_an_index(PIP_INSTALL.findall(text)[0]), text
    for text in ('pip install ".[redis]"  # in a clone of doomloop', "pip install . && python -m doomloop"):
        assert not _from_an_index(PIP_INSTALL.findall(text)[0]), text
