"""doomloop.traces: the run-file reader (fields, plain and gzip files, bad input) and the
replay of a run through a Monitor."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from doomloop import DoomLoopError, Monitor, Profile
from doomloop.traces import (
    CRITICAL,
    WARNING,
    Run,
    Step,
    TraceFormatError,
    first_findings,
    parse_result,
    parse_run,
    read_runs,
    replay,
)
from support import CORPUS

OK = "<returncode>0</returncode>\n<output>\nok\n</output>"


def call(command: str, result: Optional[str] = OK, **fields: Any) -> Dict[str, Any]:
    """One call in the run-file format; ``fields`` override its keys."""
    record = {"id": f"call_{command}", "name": "bash", "arguments": json.dumps({"command": command}), "thought": None}
    return {**record, "result": result, **fields}


def run_line(*calls: Dict[str, Any], path: str = "output/x.traj.json", exit_status: Optional[str] = "Submitted") -> str:
    return json.dumps({"path": path, "exit_status": exit_status, "calls": list(calls)})


def write(path: Path, lines: List[str], *, compress: bool = False) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def parity() -> Monitor:
    return Monitor(Profile.parity())


def commands(*commands: str, result: str = OK) -> Run:
    """A run of these commands, each with ``result``."""
    calls = [call(command, result, id=f"call_{n}") for n, command in enumerate(commands)]
    return parse_run(json.loads(run_line(*calls)))


# --- the reader ---------------------------------------------------------------------------------


def test_a_call_becomes_a_step_with_parsed_arguments_and_return_code(tmp_path: Path) -> None:
    line = run_line(
        call("pwd", "<returncode>0</returncode>\n<output>\n/testbed\n</output>", thought="Let me look around."),
        call("python t.py", "<returncode>1</returncode>\n<output>\nTraceback\n</output>"),
        call("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", None),
    )
    (run,) = read_runs(write(tmp_path / "runs.jsonl", [line]))
    assert run.path == "output/x.traj.json" and run.exit_status == "Submitted"
    first, failed, last = run.steps
    assert first == Step(
        tool="bash",
        arguments={"command": "pwd"},
        call_id="call_pwd",
        thought="Let me look around.",
        result_text="<returncode>0</returncode>\n<output>\n/testbed\n</output>",
        returncode=0,
        is_error=False,
        line=1,
    )
    assert (failed.returncode, failed.is_error, failed.thought) == (1, True, None)
    assert (last.result_text, last.returncode, last.is_error) == (None, None, False)


def test_gzip_and_plain_files_give_the_same_runs_whatever_the_name(tmp_path: Path) -> None:
    lines = [run_line(call("ls")), "", run_line(call("pwd"), exit_status=None)]
    plain = list(read_runs(write(tmp_path / "runs.jsonl", lines)))
    compressed = list(read_runs(write(tmp_path / "runs.jsonl.gz", lines, compress=True)))
    misnamed = list(read_runs(str(write(tmp_path / "runs.txt", lines, compress=True))))
    assert [run.steps for run in plain] == [run.steps for run in compressed] == [run.steps for run in misnamed]
    assert [run.source for run in misnamed] == [str(tmp_path / "runs.txt")] * 2
    assert [run.steps[0].arguments for run in plain] == [{"command": "ls"}, {"command": "pwd"}]  # the blank line is skipped
    assert plain[1].exit_status is None


def test_arguments_that_are_not_json_stay_the_raw_text() -> None:
    run = parse_run({"calls": [{"name": "bash", "arguments": "{not json", "result": None}]})
    assert run.steps[0].arguments == "{not json"
    assert (run.path, run.exit_status, run.steps[0].call_id, run.steps[0].thought) == (None, None, None, None)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ("<returncode>0</returncode>\n<output>\n</output>", (0, False)),
        ("<returncode>123</returncode>\n<output>\n</output>", (123, True)),
        ("<returncode>-9</returncode>", (-9, True)),
        ("<exception>An error occurred while executing the command: timed out", (None, True)),
        ("plain text from another tool", (None, False)),
        ("\n<returncode>2</returncode>", (2, True)),
        (None, (None, False)),
    ],
)
def test_parse_result(result: Optional[str], expected: tuple[Optional[int], bool]) -> None:
    assert parse_result(result) == expected


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a run must be a JSON object, got an array"),
        ('{"path": "p"}', "calls: expected an array, got null"),
        ('{"calls": [3]}', "calls[0]: expected an object, got a number"),
        ('{"calls": [{"arguments": "{}"}]}', "calls[0].name: expected a string, got null"),
        ('{"calls": [{"name": "bash", "arguments": {}}]}', "calls[0].arguments: expected a JSON string, got an object"),
        (
            '{"calls": [{"name": "bash", "arguments": "{}", "result": 0}]}',
            "calls[0].result: expected a string or null, got a number",
        ),
        ('{"path": true, "calls": []}', "path: expected a string or null, got a boolean"),
    ],
)
def test_a_malformed_line_names_the_file_the_line_and_the_problem(tmp_path: Path, line: str, problem: str) -> None:
    path = write(tmp_path / "runs.jsonl", [run_line(call("ls")), "", line])
    runs = read_runs(path)
    assert next(runs).steps[0].arguments == {"command": "ls"}  # lazily: the good line first
    with pytest.raises(TraceFormatError) as raised:
        next(runs)
    error = raised.value
    assert isinstance(error, ValueError) and isinstance(error, DoomLoopError)
    assert (error.path, error.line) == (str(path), 3)
    assert str(error).startswith(f"{path}:3: ") and problem in error.problem


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b'{"calls": []}\n{"path": "\xff", "calls": []}\n')
    with pytest.raises(TraceFormatError, match=r"runs\.jsonl:2: not UTF-8"):
        list(read_runs(path))


def test_the_public_corpus_reads() -> None:
    runs = list(read_runs(CORPUS))
    assert len(runs) == 47 and sum(len(run.steps) for run in runs) == 3667
    every = [step for run in runs for step in run.steps]
    assert all(isinstance(step.arguments, dict) and set(step.arguments) == {"command"} for step in every)
    assert sum(step.result_text is None for step in every) == 43  # the submitting calls
    assert sum(step.is_error and step.returncode is None for step in every) == 3  # commands that could not run


# --- the replay ---------------------------------------------------------------------------------


def test_an_identical_repeat_is_blocked_at_the_critical_threshold() -> None:
    run = commands(*(["cat setup.py"] * 25))
    blocked = [one for one in replay(run, parity()) if one.finding.detector == "tool_loop" and one.finding.level == CRITICAL]
    # OpenClaw's defaults: 20 identical results recorded, so the 21st call is vetoed before it runs.
    assert blocked[0].step == 20 and blocked[0].finding.code == "tool_loop.generic_repeat" and not blocked[0].after_call
    assert blocked[0].finding.action == "block" and blocked[0].finding.evidence == '{"command": "cat setup.py"}'
    assert [one.step for one in blocked] == list(range(20, 25))  # the veto is sticky
    # One stretch of one loop: its first step stays, its last moves on.
    assert {one.finding.first_step for one in blocked} == {blocked[0].finding.first_step}


def test_first_findings_keeps_each_detectors_first() -> None:
    run = commands(*(["cat setup.py"] * 25))
    first = first_findings(run, parity())
    assert first.session is not None and first.session.step == 2 and first.session.after_call
    session = first.session.finding
    assert session.code == "session.repeated_action" and session.message == "Same action repeated 3 times"
    assert session.level == WARNING and session.action == "retry_different" and session.tool == "bash"
    assert first.tool_warning is not None and first.tool_warning.finding.level == WARNING and first.tool_warning.step == 10
    assert first.tool_loop is not None and first.tool_loop.step == 20
    assert first.chant is None
    assert first.flagged and first.flags == [first.session, first.tool_loop]


def test_a_chanting_message_is_one_chant_finding() -> None:
    # The chant detector and the session detector's own scan of the answer see one chant:
    # the monitor reports it once, critical.
    line = run_line(call("ls", thought="Let me check."), call("pwd", thought="I will read the file again. " * 40))
    findings = list(replay(parse_run(json.loads(line)), parity()))
    assert [(one.finding.code, one.finding.level, one.step, one.after_call) for one in findings] == [
        ("chant", CRITICAL, 1, False)
    ]
    evidence = findings[0].finding.evidence
    assert findings[0].finding.action == "stop_stream" and len(evidence) >= 27 and evidence in "I will read the file again. " * 3


def test_failed_commands_are_failed_actions() -> None:
    run = commands("python a.py", "python b.py", "python c.py", result="<returncode>1</returncode>\n<output>\nboom\n</output>")
    first = first_findings(run, parity())
    assert first.session is not None and (first.session.finding.code, first.session.step) == ("session.repeated_failure", 2)


def test_a_call_that_could_not_run_reaches_the_tool_detector_as_an_error() -> None:
    # An error naming an unknown tool counts towards unknown_tool_repeat; a result never does.
    run = commands(*(f"frobnicate {n}" for n in range(12)), result="<exception>unknown tool: frobnicate")
    first = first_findings(run, parity())
    assert first.tool_loop is not None and (first.tool_loop.finding.code, first.tool_loop.step) == (
        "tool_loop.unknown_tool_repeat",
        10,
    )


def test_arguments_that_are_not_an_object_are_replayed() -> None:
    run = parse_run({"calls": [{"name": "bash", "arguments": "{not json", "result": "x"} for _ in range(3)]})
    first = first_findings(run, parity())
    assert first.session is not None and first.session.finding.message == "Same action repeated 3 times"


def test_a_run_without_calls_has_no_findings() -> None:
    assert list(replay(Run(None, None, ()), parity())) == []
    assert not first_findings(Run(None, None, ()), parity()).flagged


def test_steps_that_are_not_tool_calls_are_replayed_as_what_they_are() -> None:
    # A user message is a new turn, not an action: the session detector sees three calls.
    user = Step(None, None, None, None, None, None, False, kind="user", text="cat setup.py")
    run = commands(*(["cat setup.py"] * 3))
    mixed = Run(None, None, tuple(step for call in run.steps for step in (user, call)))
    monitor = parity()
    assert [one.step for one in replay(mixed, monitor)] == [5]  # the third call, at index 5
    assert monitor.turn == 3 and monitor.doom_loop.get_stats()["total_actions"] == 3
    assert [one.step for one in replay(run, parity())] == [2]
    answer = Step(None, None, None, None, None, None, False, kind="assistant", text="Done.")
    compaction = Step(None, None, None, None, None, None, False, kind="compaction")
    monitor = parity()
    assert list(replay(Run(None, None, (answer, compaction)), monitor)) == [] and monitor.step == 2
