"""The examples of the README and of every docs/ page run (so they cannot rot), the README's
set-up commands are the documented ones, the demo runs, and the pages link to each other.

Each ```python block runs on its own in a fresh namespace, in the order of its page: a block
never relies on an earlier one. The tests check what the examples do (their own asserts, what
they print or leave behind, their exit status), never the wording around them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from support import DOCS, README, ROOT, code_blocks

PAGES = sorted(DOCS.glob("*.md"))


def _examples(paths: List[Path]) -> List[Tuple[Path, int, str]]:
    return [(path, line, code) for path in paths for line, code in code_blocks(path, "python")]


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


README_EXAMPLES = _examples([README])
DOCS_EXAMPLES = _examples(PAGES)


def run_example(path: Path, line: int, code: str) -> Dict[str, Any]:
    """Run one block in a fresh namespace; a traceback names the page and its line."""
    namespace: Dict[str, Any] = {"__name__": "__docs__"}
    exec(compile("\n" * (line - 1) + code, _name(path), "exec"), namespace)
    return namespace


def example_containing(path: Path, text: str) -> Tuple[Path, int, str]:
    """The one python block of ``path`` that contains ``text``."""
    (found,) = [example for example in _examples([path]) if text in example[2]]
    return found


def test_readme_has_examples() -> None:
    assert README_EXAMPLES, "README.md has no python examples"


@pytest.mark.parametrize(("path", "line", "code"), README_EXAMPLES, ids=[f"README.md:{e[1]}" for e in README_EXAMPLES])
def test_readme_example_runs(path: Path, line: int, code: str) -> None:
    run_example(path, line, code)


@pytest.mark.parametrize(("path", "line", "code"), DOCS_EXAMPLES, ids=[f"{_name(e[0])}:{e[1]}" for e in DOCS_EXAMPLES])
def test_docs_example_runs(path: Path, line: int, code: str) -> None:
    run_example(path, line, code)


def test_readme_set_up_commands() -> None:
    commands = re.findall(r"```bash\n(.*?)\n```", README.read_text(encoding="utf-8"), flags=re.S)
    assert commands[:2] == ["pip install . && doomloop scan --demo", "bash .ci/run"]


def test_demo_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "doomloop", "demo"], capture_output=True, text=True, check=True, timeout=60)
    assert "repeated_action: Same action repeated 3 times -> retry_different" in out.stdout
    assert "circular_plan" in out.stdout and "resource_exhaustion" in out.stdout


# --- what the examples print or leave behind -------------------------------------------------


def test_session_quick_start_reports_the_repeated_action(capsys: pytest.CaptureFixture[str]) -> None:
    from doomloop import DoomLoopType

    namespace = run_example(*example_containing(README, "RecoveryAction.RETRY_DIFFERENT"))
    event = namespace["event"]
    assert event.loop_type is DoomLoopType.REPEATED_ACTION
    assert event.description == "Same action repeated 3 times"
    assert capsys.readouterr().out == f"{event.loop_type!s} {event.description}\n"


def test_chant_guard_example_stops_the_stream(capsys: pytest.CaptureFixture[str]) -> None:
    namespace = run_example(*example_containing(DOCS / "chanting.md", "guard_stream(tokens)"))
    assert len(namespace["received"]) < len(namespace["tokens"])
    out = capsys.readouterr().out
    assert re.search(r"^stopped after \d+ chunks: 10$", out, flags=re.M), out
    assert re.search(r"^async guard passed \d+ chunks$", out, flags=re.M), out


def test_quick_start_runs(capsys: pytest.CaptureFixture[str]) -> None:
    run_example(*example_containing(DOCS / "evaluation.md", "health.print_summary()"))
    assert "Loop Health Summary" in capsys.readouterr().out


def test_ci_gate_passes_a_healthy_loop() -> None:
    run_example(*example_containing(DOCS / "evaluation.md", "sys.exit(1)"))


def test_ci_gate_fails_an_unhealthy_loop(capsys: pytest.CaptureFixture[str]) -> None:
    path, line, code = example_containing(DOCS / "evaluation.md", "sys.exit(1)")
    unhealthy = code.replace("[7.0, 8.2]", "[8.2, 9.0]")
    assert unhealthy != code
    with pytest.raises(SystemExit) as exit_info:
        run_example(path, line, unhealthy)
    assert exit_info.value.code == 1
    assert capsys.readouterr().out.startswith("Loop unhealthy: Converged in 1 iteration(s).")


# --- links ------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _local_links(path: Path) -> List[str]:
    return [target for target in LINK.findall(path.read_text(encoding="utf-8")) if "://" not in target]


@pytest.mark.parametrize("path", [README, *PAGES], ids=_name)
def test_local_links_resolve(path: Path) -> None:
    for target in _local_links(path):
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        assert resolved.exists(), f"{_name(path)} links to missing {target}"
        if anchor and resolved.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", resolved.read_text(encoding="utf-8"), flags=re.M)
            slugs = {re.sub(r"[^\w\- ]", "", heading).strip().lower().replace(" ", "-") for heading in headings}
            assert anchor in slugs, f"{_name(path)} links to a missing heading: {target}"


def test_readme_and_index_link_every_page() -> None:
    for index in (README, DOCS / "index.md"):
        linked = {(index.parent / target.partition("#")[0]).resolve() for target in _local_links(index)}
        missing = [_name(page) for page in PAGES if page != index and page.resolve() not in linked]
        assert not missing, f"{_name(index)} does not link {missing}"


@pytest.mark.parametrize("path", [page for page in PAGES if page.name != "index.md"], ids=_name)
def test_every_page_links_back_to_the_index(path: Path) -> None:
    assert "index.md" in _local_links(path)
