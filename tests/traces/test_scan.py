"""doomloop.traces.scan: the demo's findings are the planted ones, reports and their sums,
directories, bad input, worker processes and pickling."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest

from doomloop.demo import trace_files
from doomloop.traces import FileScan, Run, ScanSummary, SessionReport, Step, TraceFormatError, scan, scan_file
from doomloop.traces.scan import expand_paths, scan_run

# What each demo session was written to contain (docs/scan.md, "The sample traces"), from the
# detectors' documented rules at the recommended profile, written by hand:
# - fix-nested-quotes: read_file of one path four times in a row -> identical_actions (3).
# - flaky-api-test: exec `npm test` twelve times, the output changing (pid, duration) -> the
#   session's identical_actions (3); the tool detector's generic warning at 10 records (the
#   results change, so the streak never reaches critical).
# - deploy-web-1207: fourteen `process` polls, the same result -> identical_actions (3);
#   known_poll_no_progress warns at 10 (critical needs 20).
# - docs-question-0412: a missing tool called twelve times with new queries -> the tool
#   detector's unknown_tool_repeat blocks the 11th (threshold 10); the queries are not alike,
#   so no session rule.
# - where-is-my-order: two calls alternating twelve times, constant results -> circular_plan
#   (a block of 2, three times); ping_pong warns at 10 (critical at 20).
# - refund-policy: one answer at three turns -> repeated_response (3 alike in a row).
# - size-exchange: an answer repeating a 40-character sentence 14 times -> a chant (window 32,
#   6 repeats); the session detector's own scan of the answer is the same chant, reported once.
# - migrate-orders-db: a status check five times, a compaction, four more -> identical_actions
#   (3), and the post-compaction guard (3 calls) finds the loop persisted.
# - add-version-flag, oncall-5xx-spike, change-address: healthy.
PLANTED: Dict[str, Set[str]] = {
    "fix-nested-quotes": {"session.repeated_action"},
    "flaky-api-test": {"session.repeated_action", "tool_loop.generic_repeat"},
    "add-version-flag": set(),
    # The poll is stopped as a repeated action (warned, then stopped 5 steps on) before the
    # known-poll rule's 10 polls; the vetoed polls that follow record the veto.
    "deploy-web-1207": {"session.repeated_action"},
    "docs-question-0412": {"tool_loop.unknown_tool_repeat"},
    "oncall-5xx-spike": set(),
    "where-is-my-order": {"session.circular_plan", "tool_loop.ping_pong"},
    "refund-policy": {"session.repeated_output"},
    "size-exchange": {"chant"},
    "migrate-orders-db": {"session.repeated_action", "guard.compaction_loop"},
    "change-address": set(),
}
# The levels under the recommended profile's warn-then-stop: a loop still reported 5 steps
# after its first warning is critical; the tool detector's by its thresholds (warning 10,
# critical 20, unknown tool 10) unless it goes on; a chant and the guard's abort are critical.
LEVELS = {
    ("fix-nested-quotes", "session.repeated_action"): "warning",
    ("flaky-api-test", "session.repeated_action"): "critical",
    ("size-exchange", "chant"): "critical",
    ("migrate-orders-db", "session.repeated_action"): "warning",
    ("migrate-orders-db", "guard.compaction_loop"): "critical",
    ("flaky-api-test", "tool_loop.generic_repeat"): "warning",
    ("deploy-web-1207", "session.repeated_action"): "critical",
    ("docs-question-0412", "tool_loop.unknown_tool_repeat"): "critical",
    ("where-is-my-order", "session.circular_plan"): "critical",
    ("where-is-my-order", "tool_loop.ping_pong"): "warning",
    ("refund-policy", "session.repeated_output"): "warning",
}
FORMATS = {
    "coding-agent.openai-chat.jsonl": "openai-chat",
    "support-agent.anthropic.jsonl": "anthropic",
    "ops-agent.doomloop.jsonl": "doomloop",
}


@pytest.fixture(scope="module")
def demo() -> List[SessionReport]:
    return list(scan(trace_files()))


def test_demo_findings_are_the_planted_ones(demo: List[SessionReport]) -> None:
    found = {report.session_id: {finding.code for finding in report.findings} for report in demo}
    assert found == PLANTED
    levels = {(report.session_id, finding.code): finding.level for report in demo for finding in report.findings}
    assert {key: levels[key] for key in LEVELS} == LEVELS


def test_demo_has_three_formats(demo: List[SessionReport]) -> None:
    assert {os.path.basename(report.source): report.format for report in demo} == FORMATS


def test_demo_reports_are_consistent(demo: List[SessionReport]) -> None:
    for report in demo:
        assert report.looping == bool(PLANTED[report.session_id])
        assert report.verdict.startswith("healthy: ") != report.looping
        for finding in report.findings:
            assert 1 <= finding.first_step <= finding.fired_step <= finding.last_step <= report.steps
            assert finding.evidence is None or len(finding.evidence) <= 120
        spans = {step for finding in report.findings for step in range(finding.first_step, finding.last_step + 1)}
        assert report.loop_steps == len(spans)


def test_the_summary_adds_the_sessions_up(demo: List[SessionReport]) -> None:
    running = scan(trace_files())
    summary = running.summary
    assert summary.files == 3 and summary.sessions == 11 and summary.looping_sessions == 8 and summary.skipped == 0
    assert summary.steps == sum(report.steps for report in demo)
    assert summary.loop_steps == sum(report.loop_steps for report in demo)
    assert sum(summary.findings_by_level.values()) == sum(summary.findings_by_code.values()) == sum(len(r.findings) for r in demo)
    assert set(summary.findings_by_code) == set().union(*PLANTED.values())
    assert summary == ScanSummary.of(scan_file(path) for path in trace_files())


def test_fail_on() -> None:
    summary = ScanSummary(findings_by_level={"warning": 2})
    assert summary.failed("warning") and not summary.failed("critical") and not summary.failed("never")
    assert ScanSummary(findings_by_level={"critical": 1}).failed("warning")
    with pytest.raises(ValueError, match="fail_on"):
        summary.failed("error")


# --- a session of known cost ------------------------------------------------------------------


def events(path: Path, lines: List[Any]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps({"v": 1, **line})) + "\n" for line in lines))
    return path


def read_loop(count: int, *, session: str = "s", start: float = 1000.0) -> List[Dict[str, Any]]:
    """A user turn, then ``count`` identical reads: each call 2 s after the last result, its
    result 0.5 s later, 100 input and 20 output tokens."""
    out: List[Dict[str, Any]] = [{"type": "user", "session": session, "text": "read it", "ts": start}]
    for n in range(count):
        called = start + 2.5 * n + 2.0
        out.append(
            {
                "type": "tool_call",
                "session": session,
                "call_id": f"c{n}",
                "tool": "read_file",
                "arguments": {"path": "a.py"},
                "usage": {"input_tokens": 100, "output_tokens": 20},
                "ts": called,
                "ended": called + 0.5,
                "result": "print('a')",
            }
        )
    return out


def test_loop_cost_counts_the_steps_tokens_and_time_inside_loops(tmp_path: Path) -> None:
    (report,) = scan(events(tmp_path / "loop.jsonl", read_loop(6)))
    assert report.steps == 7 and report.format == "doomloop" and report.session_id == "s"
    (finding,) = report.findings
    assert finding.code == "session.repeated_action" and finding.tool == "read_file"
    # Every step of the loop costs 120 tokens and 2.5 s (2 s to the call, 0.5 s to its result).
    assert report.loop_steps == finding.last_step - finding.first_step + 1
    assert report.loop_tokens == 120 * report.loop_steps
    assert report.loop_seconds == pytest.approx(2.5 * report.loop_steps)
    assert finding.last_step == 7 and finding.line == finding.first_step


ANSWER = "I cannot change that order: the warehouse has shipped it. Please ask the carrier for a return label."


def test_a_loop_that_goes_on_across_the_users_turns_is_one_loop(tmp_path: Path) -> None:
    # The same answer to eight user messages: the monitor warns at the third answer and
    # again at every one after it, each turn's warning a stretch of its own; the report's
    # loop runs from the first warning to the last, the user messages between included.
    lines: List[Dict[str, Any]] = []
    for turn in range(8):
        lines += [{"type": "user", "session": "s", "text": f"where is my refund? ({turn})"}]
        lines += [{"type": "assistant", "session": "s", "text": ANSWER}]
    (report,) = scan(events(tmp_path / "turns.jsonl", lines))
    (finding,) = report.findings
    assert finding.code == "session.repeated_output"
    assert (finding.first_step, finding.last_step, finding.fired_step) == (6, 16, 6)
    assert report.loop_steps == 11 and report.verdict.startswith("warning: 1 loop (session.repeated_output)")


def test_findings_of_one_code_with_more_than_user_messages_between_are_two_loops(tmp_path: Path) -> None:
    # The same answers, but the fifth turn is answered otherwise: the warnings before it and
    # the one three alike answers after it are more than user messages apart.
    lines: List[Dict[str, Any]] = []
    for turn in range(8):
        lines += [{"type": "user", "session": "s", "text": f"where is my refund? ({turn})"}]
        answer = "Let me look the order up again." if turn == 4 else ANSWER
        lines += [{"type": "assistant", "session": "s", "text": answer}]
    (report,) = scan(events(tmp_path / "turns.jsonl", lines))
    assert [(finding.code, finding.first_step, finding.last_step) for finding in report.findings] == [
        ("session.repeated_output", 6, 8),
        ("session.repeated_output", 16, 16),
    ]
    assert report.loop_steps == 4


def test_a_trace_without_usage_or_times_prices_no_tokens_or_time(tmp_path: Path) -> None:
    lines = [{key: value for key, value in line.items() if key not in ("usage", "ts", "ended")} for line in read_loop(4)]
    (report,) = scan(events(tmp_path / "bare.jsonl", lines))
    assert report.looping and report.loop_steps > 0
    assert report.loop_tokens is None and report.loop_seconds is None
    assert "tokens" not in report.verdict


def test_sessions_without_ids_are_numbered(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    call = {"id": "c", "name": "bash", "arguments": json.dumps({"command": "ls"}), "thought": None, "result": "ok"}
    runs.write_text("".join(json.dumps({"path": None, "exit_status": None, "calls": [call]}) + "\n" for _ in range(2)))
    assert [report.session_id for report in scan(runs)] == ["#1", "#2"]


def test_steps_may_be_a_generator() -> None:
    def steps() -> Any:
        yield Step(None, None, None, None, None, None, False, kind="user", text="go")
        for _ in range(5):
            yield Step("read_file", {"path": "a.py"}, None, None, "same", None, False)

    report = scan_run(Run(None, None, steps(), session_id="gen"))  # type: ignore[arg-type]
    assert report.steps == 6 and [finding.code for finding in report.findings] == ["session.repeated_action"]


# --- paths ------------------------------------------------------------------------------------


def test_a_directory_is_scanned_recursively_for_trace_files(tmp_path: Path) -> None:
    events(tmp_path / "b.jsonl", read_loop(1))
    (tmp_path / "deep" / "er").mkdir(parents=True)
    events(tmp_path / "deep" / "er" / "a.json", read_loop(1))
    events(tmp_path / "deep" / "c.ndjson", read_loop(1))
    (tmp_path / "notes.md").write_text("# not a trace\n")
    (tmp_path / ".cache").mkdir()
    events(tmp_path / ".cache" / "x.jsonl", read_loop(1))
    expected = [str(tmp_path / "b.jsonl"), str(tmp_path / "deep" / "c.ndjson"), str(tmp_path / "deep" / "er" / "a.json")]
    assert expand_paths(tmp_path) == expected
    assert [report.source for report in scan([tmp_path])] == expected
    # A file named explicitly is read whatever its name.
    assert expand_paths([tmp_path / "notes.md", "-"]) == [str(tmp_path / "notes.md"), "-"]


def test_a_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nothing\.jsonl"):
        scan([tmp_path / "nothing.jsonl"])


def test_an_unknown_format_raises(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text('{"hello": "world"}\n')
    with pytest.raises(TraceFormatError, match=r"notes\.json"):
        list(scan(tmp_path / "notes.json"))


def test_jobs_must_be_positive() -> None:
    for jobs in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="jobs"):
            scan(trace_files(), jobs=jobs)  # type: ignore[arg-type]


# --- malformed records ------------------------------------------------------------------------


def test_a_malformed_line_is_reported_with_its_file_and_line_and_skipped(tmp_path: Path) -> None:
    lines: List[Any] = read_loop(4)
    lines.insert(2, "{not json")
    path = events(tmp_path / "bad.jsonl", lines)
    skipped: List[TraceFormatError] = []
    running = scan(path, on_skip=skipped.append)
    (report,) = running
    assert [(error.path, error.line) for error in skipped] == [(str(path), 3)]
    assert running.summary.skipped == 1 and report.steps == 5
    file_scan = scan_file(path)
    assert file_scan.skipped == 1 and [(skip.path, skip.line) for skip in file_scan.skips] == [(str(path), 3)]


def test_strict_makes_a_malformed_line_an_error(tmp_path: Path) -> None:
    lines: List[Any] = read_loop(2)
    lines.insert(1, "[1, 2]")
    path = events(tmp_path / "bad.jsonl", lines)
    with pytest.raises(TraceFormatError) as raised:
        list(scan(path, strict=True))
    assert (raised.value.path, raised.value.line) == (str(path), 2)


# --- processes and pickling -------------------------------------------------------------------


def test_jobs_give_the_single_process_scan(tmp_path: Path) -> None:
    lines: List[Any] = read_loop(5)
    lines.insert(3, "{oops")
    extra = events(tmp_path / "extra.jsonl", lines)
    paths = [*trace_files(), extra]
    serial, parallel = scan(paths, timeline=True), scan(paths, jobs=2, timeline=True)
    skipped: List[TraceFormatError] = []
    parallel_skips = scan(paths, jobs=2, on_skip=skipped.append)
    assert list(parallel) == list(serial) and parallel.summary == serial.summary
    list(parallel_skips)
    assert [(error.path, error.line) for error in skipped] == [(str(extra), 4)]
    assert parallel_skips.summary.skipped == 1


def test_the_function_and_its_results_pickle(demo: List[SessionReport]) -> None:
    assert pickle.loads(pickle.dumps(scan)) is scan and pickle.loads(pickle.dumps(scan_file)) is scan_file
    assert pickle.loads(pickle.dumps(demo)) == demo
    file_scan = scan_file(trace_files()[0], timeline=True)
    assert isinstance(file_scan, FileScan) and pickle.loads(pickle.dumps(file_scan)) == file_scan
    summary = scan(trace_files()).summary
    assert pickle.loads(pickle.dumps(summary)) == summary


def test_timeline_marks_every_step(tmp_path: Path) -> None:
    (report,) = scan(events(tmp_path / "loop.jsonl", read_loop(3)), timeline=True)
    assert [(mark.step, mark.kind, mark.tool, mark.tokens) for mark in report.timeline] == [(1, "user", None, None)] + [
        (n, "tool", "read_file", 120) for n in (2, 3, 4)
    ]
    (plain,) = scan(tmp_path / "loop.jsonl")
    assert plain.timeline == ()
