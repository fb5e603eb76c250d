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

from redis_helpers import server_url
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
    assert commands[:2] == ["pip install . && python -m doomloop", "bash .ci/run"]


def test_readme_sets_up_in_a_virtual_environment() -> None:
    text = README.read_text(encoding="utf-8")
    set_up = text.split("## Set up\n", 1)[1].split("\n## ", 1)[0]
    assert "`python3 -m venv .venv`" in set_up and "`. .venv/bin/activate`" in set_up
    # The wheel builds are the developers' business: docs/development.md has them.
    assert "## Wheels" not in text and "## Wheels\n" in (DOCS / "development.md").read_text(encoding="utf-8")


def test_development_page_gives_the_quick_loop() -> None:
    blocks = re.findall(r"```bash\n(.*?)\n```", (DOCS / "development.md").read_text(encoding="utf-8"), flags=re.S)
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    quick_loop = ["python3 -m venv .venv && . .venv/bin/activate", 'pip install -e ".[test]"', 'python -m pytest -m "not stress"']
    assert commands[:3] == quick_loop


def test_ci_runs_in_a_venv_of_its_own_and_tests_a_clone() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    code = [line.strip() for line in script.splitlines() if not line.strip().startswith("#")]
    venv = 'python3 -m venv "$work/ci-venv"'
    assert venv in code and 'py="$work/ci-venv/bin/python"' in code
    after_venv = code[code.index(venv) :]
    # Nothing after it installs or runs Python tools with the caller's interpreter.
    assert not [line for line in after_venv if re.search(r"\bpython3 -m (pip|pytest|maturin|ruff|auditwheel)\b", line)]
    clone = 'git clone --quiet "$root" "$work/alone/doomloop"'
    assert code.index(clone) < code.index('cd "$work/alone/doomloop"') < code.index('"$py" -m pytest')


def test_demo_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "doomloop"], capture_output=True, text=True, check=True, timeout=60)
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


def test_redis_example_without_a_server_shares_through_a_memory_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DOOMLOOP_REDIS_URL", raising=False)
    run_example(*example_containing(DOCS / "gateway.md", "store_b = RedisStore(url"))
    assert capsys.readouterr().out == "replica B warned on the 11th call, its session shared through MemoryStore\n"


def test_redis_example_with_a_server_shares_through_redis(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with server_url() as url:
        monkeypatch.setenv("DOOMLOOP_REDIS_URL", url)
        run_example(*example_containing(DOCS / "gateway.md", "store_b = RedisStore(url"))
    assert capsys.readouterr().out == "replica B warned on the 11th call, its session shared through RedisStore\n"


@pytest.mark.parametrize(
    ("with_redis", "closed_at_shutdown"),
    [(False, True), (True, True), (True, False)],
    ids=["memory store", "redis", "redis, never closed"],
)
def test_the_fastapi_example_serves_one_session_from_two_event_loops(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], with_redis: bool, closed_at_shutdown: bool
) -> None:
    # Its store is made when the example's module runs, before any loop: then two
    # asyncio.run loops serve requests through the app's lifespan. Without the lifespan's
    # aclose too: an AsyncRedisStore used to hand the second loop the first one's connections
    # ("attached to a different loop", then "Event loop is closed").
    path, line, code = example_containing(DOCS / "gateway.md", "FastAPI(lifespan=lifespan)")
    if not closed_at_shutdown:
        unclosed = code.replace("await store.aclose()", "pass")
        assert unclosed != code
        code = unclosed
    example = (path, line, code)
    if with_redis:
        with server_url() as url:
            monkeypatch.setenv("DOOMLOOP_REDIS_URL", url)
            run_example(*example)
    else:
        monkeypatch.delenv("DOOMLOOP_REDIS_URL", raising=False)
        run_example(*example)
    store = "AsyncRedisStore" if with_redis else "MemoryStore"
    assert capsys.readouterr().out == f"two event loops served one session through {store}: blocked at call 21\n"


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
