"""The scan's reports: the JSON document against its schema, the text tables (rich and plain,
colour only on a terminal without NO_COLOR), and the HTML page, self-contained and drawn by a
real browser (Chromium, headless)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import jsonschema
import pytest

from doomloop.demo import trace_files
from doomloop.report import html, json as json_report, text
from doomloop.traces import ScanSummary, SessionReport, scan
from support import DOCS

Demo = Tuple[List[SessionReport], ScanSummary]
SCHEMA = json.loads((DOCS / "schemas" / "scan-v1.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def demo() -> Demo:
    running = scan(trace_files(), timeline=True)
    return list(running), running.summary


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_commands_json_validates_against_the_schema(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"v": 1, "type": "user", "text": "hi"}\n{nope\n')
    result = subprocess.run(
        [sys.executable, "-m", "doomloop", "scan", "--demo", str(broken), "--json"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert document["skips"] and document["summary"]["skipped"] == 1
    assert any(session["findings"] for session in document["sessions"])


def test_the_schema_rejects_what_it_should(demo: Demo) -> None:
    reports, summary = demo
    document = json_report.document(reports, summary, profile="recommended")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    validator.validate(document)
    for broken in (
        {**document, "schema": "doomloop.scan/v2"},
        {**document, "summary": {**document["summary"], "findings_by_level": {"warning": 1}}},
        {**document, "sessions": [{**document["sessions"][0], "level": "error"}]},
    ):
        assert not validator.is_valid(broken)


# --- text -------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def rendered(reports: List[SessionReport], summary: ScanSummary, stream: io.StringIO, *, plain: bool = False) -> str:
    text.render(stream, reports, summary, plain=plain)
    return stream.getvalue()


@pytest.mark.parametrize("plain", [False, True], ids=["rich", "plain"])
def test_text_has_a_table_per_looping_session_then_the_summary(demo: Demo, plain: bool) -> None:
    reports, summary = demo
    out = rendered(reports, summary, io.StringIO(), plain=plain)
    for report in reports:
        assert (f"session {report.session_id} " in out) == report.looping
        if report.looping:
            assert report.verdict in " ".join(out.split())
    assert out.rstrip().splitlines()[-1].startswith("findings: ")
    assert "11 sessions in 3 files: 8 looping, 3 healthy" in out
    assert "\x1b[" not in out


# An SGR sequence that sets a foreground colour (30-38, 90-97); NO_COLOR leaves bold alone.
COLOUR = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-8]|9[0-7])(?:;[0-9]+)*m")


def test_colour_only_on_a_terminal_without_no_color(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> None:
    reports, summary = demo
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert COLOUR.search(rendered(reports, summary, Terminal()))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not COLOUR.search(rendered(reports, summary, Terminal()))


# --- html -------------------------------------------------------------------------------------


def test_html_is_one_self_contained_page(demo: Demo) -> None:
    reports, summary = demo
    page = html.render(reports, summary)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # Nothing to fetch: no script or stylesheet from elsewhere (the browser test below draws it
    # with every host unreachable).
    assert not re.search(r"<script[^>]+src=", page) and not re.search(r"<link[^>]+href=", page)
    assert page.count("Plotly.newPlot") == sum(report.looping for report in reports)
    # plotly.js itself, inline, once.
    assert page.count("plotly.js v") >= 1 and len(page) > 1_000_000


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed (CI installs Debian's chromium)")
        pytest.skip("Chromium is not installed")
    return found


def test_html_draws_in_a_browser(tmp_path: Path, demo: Demo) -> None:
    browser = chromium()
    reports, summary = demo
    page = tmp_path / "report.html"
    page.write_text(html.render(reports, summary), encoding="utf-8")
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            # Offline: every host name fails to resolve.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    looping = sum(report.looping for report in reports)
    # Each timeline drew: plotly builds an <svg class="main-svg"> per plot, with its marks.
    assert len(re.findall(r'<div id="session-\d+" class="plotly-graph-div', dom)) == looping
    assert dom.count('class="main-svg"') >= looping
    assert dom.count('class="scatterlayer') >= looping
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
