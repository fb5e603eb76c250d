"""The ``doomloop`` command through its real entry points, in a subprocess: ``python -m
doomloop`` and the installed console script; the exit codes, the errors, stdin, --json, --jobs
and --strict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import doomloop
from doomloop.demo import trace_files

LOOP_SESSIONS = [
    "fix-nested-quotes",
    "flaky-api-test",
    "deploy-web-1207",
    "docs-question-0412",
    "where-is-my-order",
    "refund-policy",
    "size-exchange",
    "migrate-orders-db",
]
HEALTHY_SESSIONS = ["add-version-flag", "oncall-5xx-spike", "change-address"]


def doomloop_cli(*args: str, stdin: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "doomloop", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def one_error_line(result: subprocess.CompletedProcess, *parts: str) -> None:
    """Exit 2 with one line on stderr naming ``parts``, and no traceback."""
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("doomloop: error: "), result.stderr
    assert all(part in lines[0] for part in parts), lines[0]
    assert "Traceback" not in result.stderr


def event_file(path: Path, lines: List[Any]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps({"v": 1, **line})) + "\n" for line in lines))
    return path


def calls(count: int, tool: str = "read_file", session: str = "s") -> List[Dict[str, Any]]:
    return [{"type": "user", "session": session, "text": "go"}] + [
        {
            "type": "tool_call",
            "session": session,
            "call_id": f"c{n}",
            "tool": tool,
            "arguments": {"path": "a.py"},
            "result": "same",
        }
        for n in range(count)
    ]


def healthy(session: str = "h") -> List[Dict[str, Any]]:
    return [{"type": "user", "session": session, "text": "go"}] + [
        {
            "type": "tool_call",
            "session": session,
            "call_id": f"c{n}",
            "tool": "read_file",
            "arguments": {"path": f"{n}.py"},
            "result": f"file {n}",
        }
        for n in range(4)
    ]


# --- the command ------------------------------------------------------------------------------


def test_version() -> None:
    result = doomloop_cli("--version")
    assert (result.returncode, result.stdout) == (0, f"doomloop {doomloop.__version__}\n")


def test_help_names_the_commands_and_the_options() -> None:
    top = doomloop_cli("--help")
    assert top.returncode == 0 and "scan" in top.stdout and "demo" in top.stdout
    scan = doomloop_cli("scan", "--help")
    assert scan.returncode == 0
    options = ("--format", "--profile", "--config", "--json", "--html", "--fail-on", "--jobs", "--strict", "--demo")
    for option in (*options, "exit codes"):
        assert option in scan.stdout, option


def test_no_command_or_no_path_is_a_usage_error() -> None:
    assert doomloop_cli().returncode == 2
    result = doomloop_cli("scan")
    assert result.returncode == 2 and "PATH" in result.stderr and "Traceback" not in result.stderr


def test_the_console_script_runs_the_same_command() -> None:
    script = Path(sys.executable).with_name("doomloop")
    if not script.exists():
        if os.environ.get("CI"):
            pytest.fail(f"the console script is not installed next to {sys.executable}")
        pytest.skip("doomloop is not installed here (CI installs the wheel)")
    result = subprocess.run([str(script), "scan", "--demo", "--json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and json.loads(result.stdout) == json.loads(doomloop_cli("scan", "--demo", "--json").stdout)


def test_demo_command_runs_the_session_demo() -> None:
    result = doomloop_cli("demo")
    assert result.returncode == 0 and "repeated_action" in result.stdout


# --- scan --demo and exit codes ---------------------------------------------------------------


def test_scan_demo_shows_each_looping_session_and_the_summary() -> None:
    result = doomloop_cli("scan", "--demo")
    assert result.returncode == 1, result.stderr
    for session in LOOP_SESSIONS:
        assert f"session {session} " in result.stdout, session
    for session in HEALTHY_SESSIONS:
        assert session not in result.stdout
    assert "11 sessions in 3 files: 8 looping, 3 healthy" in result.stdout
    assert "\x1b[" not in result.stdout  # a pipe gets no colour


def exit_codes(path: Path) -> List[int]:
    """The exit codes of scanning ``path`` with --fail-on warning, critical and never."""
    return [doomloop_cli("scan", str(path), "--fail-on", level).returncode for level in ("warning", "critical", "never")]


def unknown_tool(count: int, session: str = "u") -> List[Dict[str, Any]]:
    """A tool that does not exist, called ``count`` times with new arguments."""
    return [{"type": "user", "session": session, "text": "search"}] + [
        {
            "type": "tool_call",
            "session": session,
            "call_id": f"c{n}",
            "tool": "search",
            "arguments": {"q": f"query {n}"},
            "error": "Unknown tool: search",
        }
        for n in range(count)
    ]


def test_fail_on_sets_the_exit_code(tmp_path: Path) -> None:
    assert doomloop_cli("scan", "--demo", "--fail-on", "never").returncode == 0
    clean = event_file(tmp_path / "clean.jsonl", healthy())
    assert exit_codes(clean) == [0, 0, 0]
    # A session loop is a warning: reported, nothing stopped.
    warned = event_file(tmp_path / "warned.jsonl", calls(3))
    levels = json.loads(doomloop_cli("scan", str(warned), "--json").stdout)["summary"]["findings_by_level"]
    assert levels == {"warning": 1, "critical": 0}
    assert exit_codes(warned) == [1, 0, 0]
    # The 11th call of a missing tool is blocked: critical.
    blocked = event_file(tmp_path / "blocked.jsonl", unknown_tool(11))
    assert exit_codes(blocked) == [1, 1, 0]


def test_profiles_and_a_config_file(tmp_path: Path) -> None:
    from doomloop import Profile

    config = tmp_path / "profile.json"
    Profile.recommended().dump(config)
    recommended = doomloop_cli("scan", "--demo", "--json")
    from_file = doomloop_cli("scan", "--demo", "--json", "--config", str(config))
    assert from_file.returncode == recommended.returncode == 1
    assert json.loads(from_file.stdout)["sessions"] == json.loads(recommended.stdout)["sessions"]
    parity = doomloop_cli("scan", "--demo", "--json", "--profile", "parity")
    assert parity.returncode in (0, 1) and json.loads(parity.stdout)["profile"] == "parity"
    assert doomloop_cli("scan", "--demo", "--profile", "parity", "--config", str(config)).returncode == 2


# --- input errors: one line, exit 2 -----------------------------------------------------------


def test_a_missing_file(tmp_path: Path) -> None:
    one_error_line(doomloop_cli("scan", str(tmp_path / "nothing.jsonl")), "nothing.jsonl")


def test_an_unreadable_file() -> None:
    # A file that exists and fails to read, even for root: the process's own memory at offset 0.
    one_error_line(doomloop_cli("scan", "/proc/self/mem"), "/proc/self/mem", "cannot read")


def test_an_unknown_format_in_a_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes.json"
    notes.write_text('{"hello": "world"}\n')
    one_error_line(doomloop_cli("scan", str(notes)), "notes.json")


def test_an_unknown_format_name() -> None:
    result = doomloop_cli("scan", "--demo", "--format", "yaml")
    assert result.returncode == 2 and "yaml" in result.stderr and "Traceback" not in result.stderr


def test_an_invalid_config(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[tool_loop]\nwarning_threshold = -3\n")
    one_error_line(doomloop_cli("scan", "--demo", "--config", str(config)), "bad.toml")
    one_error_line(doomloop_cli("scan", "--demo", "--config", str(tmp_path / "none.toml")), "none.toml")


def test_a_malformed_line_is_named_and_skipped_or_with_strict_an_error(tmp_path: Path) -> None:
    lines: List[Any] = healthy()
    lines.insert(2, "{broken")
    path = event_file(tmp_path / "broken.jsonl", lines)
    result = doomloop_cli("scan", str(path))
    assert result.returncode == 0
    (warning,) = result.stderr.splitlines()
    assert warning.startswith(f"doomloop: warning: {path}:3: ") and warning.endswith("(skipped)")
    assert "1 malformed records skipped" in result.stdout
    document = json.loads(doomloop_cli("scan", str(path), "--json").stdout)
    assert document["summary"]["skipped"] == 1 and document["skips"][0]["line"] == 3
    one_error_line(doomloop_cli("scan", str(path), "--strict"), f"{path}:3")


# --- stdin, json, jobs ------------------------------------------------------------------------


def test_stdin_reads_a_trace(tmp_path: Path) -> None:
    (path,) = [name for name in trace_files() if name.endswith(".anthropic.jsonl")]
    piped = doomloop_cli("scan", "-", "--json", stdin=Path(path).read_text())
    named = doomloop_cli("scan", path, "--json")
    assert piped.returncode == named.returncode == 1
    sessions = json.loads(piped.stdout)["sessions"]
    assert {session["source"] for session in sessions} == {"-"}
    assert [{**session, "source": path} for session in sessions] == json.loads(named.stdout)["sessions"]


def test_json_lists_every_session() -> None:
    result = doomloop_cli("scan", "--demo", "--json")
    document = json.loads(result.stdout)
    assert document["schema"] == "doomloop.scan/v1" and document["doomloop"] == doomloop.__version__
    assert [session["session_id"] for session in document["sessions"]].count("flaky-api-test") == 1
    assert {session["session_id"] for session in document["sessions"]} == set(LOOP_SESSIONS) | set(HEALTHY_SESSIONS)
    assert document["summary"]["looping_sessions"] == len(LOOP_SESSIONS)


def test_jobs_print_the_single_process_result(tmp_path: Path) -> None:
    serial = doomloop_cli("scan", "--demo", "--json")
    parallel = doomloop_cli("scan", "--demo", "--json", "--jobs", "2")
    assert parallel.returncode == serial.returncode == 1
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)
    assert doomloop_cli("scan", "--demo", "--jobs", "0").returncode == 2


def test_a_reader_that_stops_reading_ends_the_scan_quietly(tmp_path: Path) -> None:
    # `doomloop scan ... | head`: the pipe closes before the report is written (far more than
    # a pipe holds); the command ends without an error message (a broken pipe is no error of
    # the input).
    path = event_file(tmp_path / "many.jsonl", [line for n in range(2000) for line in calls(4, session=f"s{n}")])
    process = subprocess.Popen(
        [sys.executable, "-m", "doomloop", "scan", "--json", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(1)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=120)
    assert stderr == "", stderr
