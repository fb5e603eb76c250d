"""Each trace reader on realistic files (tests/data/traces): parallel tool calls, a call with no
result, arguments that are not JSON, errors, a run split over several records; and the
per-request functions a guardrail calls."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from doomloop.traces import Run, Step, TraceFormatError, anthropic, openai_chat, openai_responses, read, scan
from support import DATA

TRACES = DATA / "traces"


def runs_of(name: str) -> List[Run]:
    skipped: List[TraceFormatError] = []
    runs = list(read(TRACES / name, on_skip=skipped.append))
    assert skipped == [], [str(error) for error in skipped]
    return runs


def kinds(run: Run) -> List[str]:
    return [step.kind if step.kind != "tool" else f"tool:{step.tool}" for step in run.steps]


# --- doomloop events ------------------------------------------------------------------------------


def test_events_interleaved_sessions_become_runs_in_the_order_they_end() -> None:
    fix, poll = runs_of("events.jsonl")
    assert (fix.session_id, fix.run_id, fix.exit_status, fix.format) == ("fix-tests", "run-7", "Submitted", "doomloop")
    assert (poll.session_id, poll.run_id, poll.exit_status) == ("poll-job", None, None)  # no end event: yielded at the end
    assert fix.source == str(TRACES / "events.jsonl")
    assert kinds(fix) == ["user", "tool:bash", "tool:read_file", "tool:read_file", "tool:edit_file", "compaction", "assistant"]
    assert kinds(poll) == ["user"] + ["tool:job_status"] * 3


def test_events_a_call_with_its_result_inline() -> None:
    (fix, _) = runs_of("events.jsonl")
    call = fix.steps[1]
    assert call == Step(
        "bash",
        {"command": "pytest -q tests/test_api.py"},
        "c1",
        "Let me run the failing tests first.",
        "2 failed, 10 passed",
        1,
        True,
        input_tokens=812,
        output_tokens=41,
        started=1764590401.5,
        ended=1764590409.0,
        line=2,
    )


def test_events_parallel_results_match_their_calls_by_id_whatever_their_order() -> None:
    (fix, _) = runs_of("events.jsonl")
    tests_file, source_file = fix.steps[2], fix.steps[3]
    assert (tests_file.call_id, tests_file.arguments, tests_file.line) == ("c2", {"path": "tests/test_api.py"}, 4)
    assert tests_file.result_text is not None and tests_file.result_text.startswith("def test_handler")
    assert (tests_file.ended, tests_file.input_tokens) == (1764590410.6, 1030)
    assert source_file.result_text is not None and source_file.result_text.startswith("def handler")
    assert (source_file.ended, source_file.is_error) == (1764590410.4, False)


def test_events_arguments_that_are_not_json_an_error_and_a_call_with_no_result() -> None:
    fix, poll = runs_of("events.jsonl")
    edit = fix.steps[4]
    assert edit.arguments == '{"path": "src/api.py", "old": "return request.json()"'
    assert (edit.result_text, edit.error, edit.is_error, edit.returncode) == (None, "arguments are not valid JSON", True, None)
    last = poll.steps[-1]
    assert (last.call_id, last.result_text, last.is_error, last.ended) == ("p3", None, False, None)


def test_events_messages_compaction_usage_and_rfc3339_times() -> None:
    fix, poll = runs_of("events.jsonl")
    assert fix.steps[0].text == "The tests in tests/test_api.py fail. Fix them."
    assert fix.steps[5].text is not None and fix.steps[5].text.startswith("Ran the tests")
    answer = fix.steps[6]
    assert (answer.text, answer.input_tokens, answer.output_tokens) == ("I fixed the handler; both tests pass now.", 1400, 12)
    assert poll.steps[0].started == 1764590403.0  # 2025-12-01T12:00:03Z
    assert [step.started for step in poll.steps[1:]] == [1764590404.0, 1764590434.0, 1764590464.0]


# --- OpenAI chat ----------------------------------------------------------------------------------


def test_openai_chat_request_log_lines_join_into_one_run() -> None:
    weather, other = runs_of("openai_chat.jsonl")
    assert weather.format == "openai-chat"
    assert kinds(weather) == ["user", "tool:get_weather", "tool:get_weather", "tool:get_forecast", "tool:get_forecast"]
    assert [step.line for step in weather.steps] == [1, 2, 2, 3, 3]  # where each message first appeared
    assert kinds(other) == ["user", "assistant"] and other.steps[1].text == "Hi."


def test_openai_chat_parallel_calls_results_by_id_and_usage_on_the_first() -> None:
    (weather, _) = runs_of("openai_chat.jsonl")
    paris, tokyo = weather.steps[1:3]
    assert (paris.call_id, paris.arguments, paris.result_text) == ("call_paris", {"city": "Paris"}, "Paris: 11C, rain")
    assert (paris.thought, paris.input_tokens, paris.output_tokens) == ("I'll check both cities at once.", 120, 48)
    assert (tokyo.call_id, tokyo.result_text, tokyo.thought, tokyo.input_tokens) == (
        "call_tokyo",
        "Tokyo: 18C, clear",
        None,
        None,
    )


def test_openai_chat_arguments_that_are_not_json_and_a_call_with_no_result() -> None:
    (weather, _) = runs_of("openai_chat.jsonl")
    broken, retried = weather.steps[3:5]
    assert broken.arguments == '{"city": "Paris", "days": 3'
    assert broken.result_text == "error: arguments are not valid JSON"
    assert (retried.arguments, retried.result_text) == ({"city": "Paris", "days": 3}, None)


def test_openai_chat_a_mini_swe_agent_trajectory_document() -> None:
    (run,) = runs_of("openai_chat_trajectory.json")
    assert (run.exit_status, run.format) == ("Submitted", "openai-chat")
    assert kinds(run) == ["user", "tool:bash", "tool:bash", "tool:bash"]
    cat, failed, submit = run.steps[1:]
    assert (cat.arguments, cat.returncode, cat.is_error, cat.thought) == (
        {"command": "cat setup.py"},
        0,
        False,
        "THOUGHT: Let me look at setup.py.",
    )
    assert (failed.returncode, failed.is_error) == (1, True)
    assert (submit.result_text, submit.line) == (None, None)  # a document has no lines


def test_openai_chat_a_mini_swe_agent_trajectory_whose_model_acts_in_text() -> None:
    (run,) = runs_of("mini_swe_agent_text.traj.json")
    assert (run.format, run.exit_status) == ("openai-chat", "Submitted")
    # The message with two bash blocks ran nothing: it and the format error are plain steps.
    assert kinds(run) == ["user", "tool:bash", "assistant", "user"] + ["tool:bash"] * 8
    grep, two_blocks, format_error, read_step, *tests, timeout, submit = run.steps[1:]
    assert (grep.arguments, grep.call_id, grep.returncode, grep.is_error) == (
        {"command": 'grep -rn "def export_csv" src/'},
        None,
        0,
        False,
    )
    assert grep.thought is not None and grep.thought.startswith("THOUGHT: Let me find where")
    found = "src/report/export.py:41:def export_csv(rows, path):\n"
    assert grep.result_text == f"<returncode>0</returncode>\n<output>\n{found}</output>"
    assert two_blocks.text is not None and two_blocks.text.count("```bash") == 2
    assert format_error.text is not None and format_error.text.startswith("Please always provide EXACTLY ONE action")
    assert read_step.arguments == {"command": "sed -n 35,70p src/report/export.py"}
    assert [(step.arguments, step.returncode, step.is_error) for step in tests] == [
        ({"command": "python -m pytest tests/test_export.py -q"}, 1, True)
    ] * 5
    assert timeout.returncode is None and timeout.result_text is not None and "timed out" in timeout.result_text
    assert submit.result_text is not None and submit.result_text.startswith("diff --git")
    (report,) = scan(TRACES / "mini_swe_agent_text.traj.json")
    assert [(finding.code, finding.tool) for finding in report.findings] == [("session.repeated_action", "bash")]


def test_openai_chat_a_mini_swe_agent_v2_trajectory_with_tool_calls_and_an_exit_message() -> None:
    (run,) = runs_of("mini_swe_agent_tools.traj.json")
    assert (run.format, run.exit_status) == ("openai-chat", "Submitted")
    assert kinds(run) == ["user"] + ["tool:bash"] * 5  # the exit message is not a step, nor reported
    grep = run.steps[1]
    assert (grep.call_id, grep.input_tokens, grep.output_tokens) == ("call_1", 1840, 61)  # extra.response.usage
    (report,) = scan(TRACES / "mini_swe_agent_tools.traj.json", strict=True)
    assert report.findings == ()


def test_openai_chat_text_actions_only_in_a_mini_swe_agent_trajectory() -> None:
    answer = {"role": "assistant", "content": "Run this:\n\n```bash\nls -la\n```"}
    messages = [{"role": "user", "content": "How do I list files?"}, answer, {"role": "user", "content": "Thanks"}]
    plain = json.dumps({"messages": messages}).encode()
    assert [step.kind for run in read(io.BytesIO(plain), format="openai-chat") for step in run.steps] == [
        "user",
        "assistant",
        "user",
    ]
    # A v2 trajectory's exit message gives the run its status when info has none.
    exit_message = {"role": "exit", "content": "", "extra": {"exit_status": "LimitsExceeded"}}
    trajectory = json.dumps({"info": {"mini_version": "2.0.0"}, "messages": [*messages, exit_message]}).encode()
    (run,) = read(io.BytesIO(trajectory), format="openai-chat")
    assert (kinds(run), run.exit_status) == (["user", "tool:bash"], "LimitsExceeded")
    assert (run.steps[1].arguments, run.steps[1].result_text) == ({"command": "ls -la"}, "Thanks")


@pytest.mark.parametrize(
    ("content", "command"),
    [
        ("THOUGHT: list.\n\n```bash\nls -la\n```", "ls -la"),
        ("```mswea_bash_command  \ncd src &&\n  make\n```\n", "cd src &&\n  make"),
        ("```bash\nls\n```\n\nThen a sketch:\n```python\nprint(1)\n```", "ls"),  # only bash blocks count
        ("```bash\nls\n```\n```bash\npwd\n```", None),  # two actions: a format error
        ("```bash\n\n```", None),  # nothing to run
        ("```bashrc\nls\n```", None),
        ("```bash\nls", None),  # never closed
        ("```bash\nx" * 100_000, None),  # many openings, none closed: one pass
    ],
)
def test_openai_chat_a_text_action_is_one_bash_block(content: str, command: Optional[str]) -> None:
    messages = [{"role": "assistant", "content": content}, {"role": "user", "content": "<returncode>0</returncode>"}]
    trajectory = json.dumps({"messages": messages, "trajectory_format": "mini-swe-agent-1"}).encode()
    (run,) = read(io.BytesIO(trajectory), format="openai-chat")
    assert [step.arguments for step in run.steps if step.kind == "tool"] == ([] if command is None else [{"command": command}])
    assert len(run.steps) == (1 if command is not None else 2)


def test_openai_chat_the_deprecated_functions_api_a_poll_that_loops() -> None:
    (run,) = runs_of("openai_chat_functions.json")
    assert (run.format, run.session_id) == ("openai-chat", "release-bot-0917")
    assert kinds(run) == ["user"] + ["tool:get_build_status"] * 6 + ["tool:get_build_log", "tool:cancel_build", "assistant"]
    first, second = run.steps[1:3]
    assert (first.arguments, first.call_id, first.thought) == ({"build_id": 4411}, None, "Let me check the build.")
    assert first.result_text == second.result_text == '{"build_id": 4411, "state": "queued"}'
    log, cancel = run.steps[7:9]
    assert (log.arguments, log.result_text) == ('{"build_id": 4411, "tail": 20', "error: arguments are not valid JSON")
    assert cancel.result_text is None  # the next message is the assistant's: the call had no result
    (report,) = scan(TRACES / "openai_chat_functions.json")
    assert [finding.code for finding in report.findings] == ["session.repeated_action"]


def test_openai_chat_a_function_result_goes_to_the_call_of_its_name_before_the_next_assistant_message() -> None:
    skipped: List[TraceFormatError] = []

    def call(name: object) -> Dict[str, Any]:
        return {"role": "assistant", "content": None, "function_call": {"name": name, "arguments": "{}"}}

    messages = [
        call("ls"),
        {"role": "function", "name": "cat", "content": "not ls's"},
        {"role": "function", "content": "no name: taken"},
        call("pwd"),
        {"role": "user", "content": "still there?"},
        {"role": "function", "name": "pwd", "content": "/w"},
        {"role": "function", "name": "pwd", "content": "a second result"},
        call(None),
        {"role": "assistant", "content": "Done.", "function_call": None, "tool_calls": None},
    ]
    steps = openai_chat.steps(messages, on_skip=skipped.append)
    assert [(step.kind, step.tool, step.result_text) for step in steps] == [
        ("tool", "ls", "no name: taken"),
        ("tool", "pwd", "/w"),
        ("user", None, None),
        ("assistant", None, None),
    ]
    assert [error.problem for error in skipped] == [
        "messages[1]: a function result for 'cat', which no function_call has",
        "messages[6]: a function result for 'pwd', which no function_call has",
        "messages[7].function_call: a call without a function name",
    ]


def test_openai_chat_steps_of_one_request_report_what_they_cannot_read() -> None:
    skipped: List[TraceFormatError] = []
    messages = [
        {"role": "system", "content": "Be brief."},
        "not a message",
        {
            "role": "assistant",
            "tool_calls": [{"type": "function", "function": {"name": "ls", "arguments": "{}"}}, {"id": "c2", "function": {}}],
        },
        {"role": "tool", "tool_call_id": "c9", "content": "orphan"},
        {"role": "tool", "content": "no id"},
        {"role": "critic", "content": "?"},
    ]
    (step,) = openai_chat.steps(messages, on_skip=skipped.append)
    assert (step.tool, step.arguments, step.call_id, step.result_text, step.line) == ("ls", {}, None, None, None)
    assert [error.problem for error in skipped] == [
        "messages[1]: expected an object, got a string",
        "messages[2].tool_calls[0]: a call without an id (kept, with no result)",
        "messages[2].tool_calls[1]: a call without a function name",
        "messages[4]: a tool message without a tool_call_id",
        "messages[5].role: unknown role 'critic'",
        "messages[3]: a result for 'c9', which no call has",
    ]
    assert all(error.path is None and error.line is None for error in skipped)
    assert openai_chat.steps({"messages": []}) == []  # not a list: reported to nobody, never raised


# --- OpenAI Responses -----------------------------------------------------------------------------


def test_openai_responses_request_and_response_lines_chain_into_one_run() -> None:
    weather, joke = runs_of("openai_responses.jsonl")
    assert weather.format == "openai-responses" and weather.exit_status == "completed"
    assert kinds(weather) == ["user", "tool:get_weather", "tool:get_weather", "tool:get_weather"]
    assert [step.line for step in weather.steps] == [1, 2, 2, 4]
    paris, tokyo, retry = weather.steps[1:]
    assert (paris.thought, paris.arguments, paris.result_text) == (
        "Checking both.",
        {"city": "Paris"},
        '{"temp_c": 11, "sky": "rain"}',
    )
    assert (paris.input_tokens, paris.output_tokens, tokyo.input_tokens) == (95, 40, None)
    assert (tokyo.arguments, tokyo.result_text) == ('{"city":"Tokyo"', "error: invalid arguments")
    assert (retry.call_id, retry.result_text, retry.input_tokens, retry.output_tokens) == ("call_tokyo_2", None, 160, 18)
    assert kinds(joke) == ["user", "assistant"]
    assert (joke.steps[1].text, joke.steps[1].input_tokens) == ("Why did the loop never end? It forgot to break.", 12)


def test_openai_responses_steps_of_one_request() -> None:
    skipped: List[TraceFormatError] = []
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "a", "name": "search", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": "a", "output": [{"type": "input_text", "text": "found"}]},
        {"type": "function_call", "name": "search", "arguments": "{"},
        {"type": "teleport"},
        {"type": "compaction", "encrypted_content": "..."},
    ]
    user, found, unanswered, compaction = openai_responses.steps(items, on_skip=skipped.append)
    assert (user.kind, user.text) == ("user", "hi")
    assert (found.arguments, found.result_text) == ({"q": 1}, "found")
    assert (unanswered.call_id, unanswered.arguments, unanswered.result_text) == (None, "{", None)
    assert compaction.kind == "compaction"
    assert [error.problem for error in skipped] == [
        "items[3]: a function_call without a call_id (kept, with no result)",
        "items[4]: unknown item type 'teleport'",
    ]
    (only,) = openai_responses.steps("just text")
    assert (only.kind, only.text) == ("user", "just text")


# --- Codex ----------------------------------------------------------------------------------------


def rollout(lines: List[Dict[str, Any]]) -> bytes:
    """Rollout lines, each ``{"type", "payload"}`` given a timestamp a second after the last."""
    stamped = [{"timestamp": f"2025-11-03T14:20:{second:02d}.000Z", **line} for second, line in enumerate(lines)]
    return "".join(json.dumps(line) + "\n" for line in stamped).encode()


def test_codex_a_rollout_its_context_messages_and_a_loop_after_the_compaction() -> None:
    (run,) = runs_of("codex_rollout.jsonl")
    assert (run.session_id, run.format) == ("019a4b2e-5c7d-7e10-8f3a-6b1d2c9e0a47", "codex")
    # The AGENTS.md and environment messages are context, not turns; the UI's events repeat
    # the items and are no steps.
    assert (
        kinds(run) == ["user"] + ["tool:shell"] * 5 + ["tool:apply_patch", "assistant", "user", "compaction"] + ["tool:shell"] * 7
    )
    ls, log, failing, garbled, cat, patch = run.steps[1:7]
    # Two parallel calls: the usage of the response (the token_count after it) on the first;
    # each call ends when the line with its output was written, whatever their order.
    assert (ls.arguments["command"], ls.input_tokens, ls.output_tokens, log.input_tokens) == (
        ["bash", "-lc", "ls -R src tests"],
        6211,
        274,
        None,
    )
    assert (ls.started, ls.ended, log.started, log.ended) == (1762179608.604, 1762179608.733, 1762179608.611, 1762179608.702)
    # The exit code of the output's metadata; the whole output is the result.
    assert (failing.thought, failing.returncode, failing.is_error) == ("I'll run the order tests to see the failure.", 1, True)
    assert failing.result_text is not None and json.loads(failing.result_text)["metadata"] == {
        "exit_code": 1,
        "duration_seconds": 0.8,
    }
    assert (failing.input_tokens, failing.output_tokens) == (6950, 96)
    assert isinstance(garbled.arguments, str) and garbled.arguments.startswith('{"command":["bash","-lc","sed -n 1,60p')
    assert garbled.result_text is not None and garbled.result_text.startswith("failed to parse function arguments")
    assert (garbled.returncode, garbled.is_error, cat.returncode, cat.is_error) == (None, False, 0, False)
    assert isinstance(patch.arguments, str) and patch.arguments.startswith(
        "*** Begin Patch\n*** Update File: src/inventory/orders.py"
    )
    assert (patch.returncode, patch.is_error, patch.input_tokens) == (0, False, 7902)
    compaction = run.steps[9]
    assert compaction.text is not None and compaction.text.startswith("The user asked to fix test_order_total")
    assert (compaction.started, compaction.line) == (1762179706.774, 38)
    interrupted = run.steps[-1]
    assert (interrupted.tool, interrupted.result_text, interrupted.ended, interrupted.input_tokens) == ("shell", None, None, 4300)
    (report,) = scan(TRACES / "codex_rollout.jsonl", strict=True)
    assert {(finding.code, finding.tool) for finding in report.findings} == {
        ("guard.compaction_loop", "shell"),
        ("session.repeated_action", "shell"),
    }


def test_codex_the_legacy_format_and_a_local_shell_call() -> None:
    (run,) = runs_of("codex_legacy.jsonl")
    assert (run.session_id, run.format) == ("5973b6c0-94b8-487b-a530-2aeb6098ae0e", "codex")
    assert kinds(run) == ["user", "tool:local_shell", "tool:shell", "assistant"]
    check, sed = run.steps[1:3]
    assert (check.arguments["command"], check.call_id, check.returncode, check.is_error) == (
        ["make", "check"],
        "call_u7Yt5Rd3",
        2,
        True,
    )
    assert (sed.arguments, sed.returncode, sed.started) == ({"command": ["sed", "-n", "1,5p", "ledger/io.py"]}, 0, None)


def codex_item(payload: Dict[str, Any]) -> Dict[str, Any]:
    return {"type": "response_item", "payload": payload}


def codex_call(call_id: str, name: str, arguments: Dict[str, Any], output: Optional[str]) -> List[Dict[str, Any]]:
    call = codex_item({"type": "function_call", "name": name, "arguments": json.dumps(arguments), "call_id": call_id})
    if output is None:
        return [call]
    return [call, codex_item({"type": "function_call_output", "call_id": call_id, "output": output})]


def codex_user(text: str) -> Dict[str, Any]:
    return codex_item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})


def test_codex_newer_outputs_a_usage_given_twice_and_a_compaction_written_twice(tmp_path: Path) -> None:
    usage = {
        "input_tokens": 900,
        "cached_input_tokens": 512,
        "output_tokens": 40,
        "reasoning_output_tokens": 16,
        "total_tokens": 940,
    }
    token_count = {"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": usage}}}
    unified = "Chunk ID: 5f2a\nWall time: 0.5012 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\nok"
    lines = [
        codex_user("fix"),
        codex_item({"type": "reasoning", "summary": []}),  # the response's first item: its usage
        *codex_call("a", "shell_command", {"command": "pytest"}, None),
        token_count,
        token_count,  # the same usage again, with nothing produced since: counted once
        codex_item(
            {
                "type": "function_call_output",
                "call_id": "a",
                "output": "Exit code: 1\nWall time: 0.3 seconds\nOutput:\n1 failed\n",
            }
        ),
        *codex_call("b", "exec_command", {"cmd": "make"}, unified),
        *codex_call(
            "c", "shell_command", {"command": "cat log"}, "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nExit code: 9\n"
        ),
        codex_item({"type": "compaction", "encrypted_content": "gAAAA"}),
        {"type": "compacted", "payload": {"message": "Ran the tests; one fails."}},
        codex_user("<turn_aborted>\n</turn_aborted>"),
        {"type": "compacted", "payload": {"message": "", "replacement_history": []}},  # compacted by the server: no text
    ]
    # Without a session_meta line, the session is the uuid in the file's name.
    path = tmp_path / "rollout-2025-11-03T14-20-00-019a4b2e-0000-7000-8000-00000000c0de.jsonl"
    path.write_bytes(rollout(lines))
    (run,) = read(path, strict=True)
    assert (run.session_id, run.format) == ("019a4b2e-0000-7000-8000-00000000c0de", "codex")
    assert kinds(run) == ["user", "tool:shell_command", "tool:exec_command", "tool:shell_command", "compaction", "compaction"]
    failing, make, cat, compaction, remote = run.steps[1:]
    assert (failing.returncode, failing.is_error, failing.input_tokens, failing.output_tokens) == (1, True, 900, 40)
    assert (make.returncode, make.is_error, make.input_tokens) == (0, False, None)
    # The exit code is read in the header lines only, never in the output itself.
    assert (cat.returncode, cat.result_text) == (0, "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nExit code: 9\n")
    assert (compaction.text, compaction.line, remote.text) == ("Ran the tests; one fails.", 11, None)


def test_codex_lines_that_cannot_be_read_are_reported_and_new_kinds_are_not_errors(tmp_path: Path) -> None:
    lines: List[Any] = [
        {"type": "session_meta", "payload": {"id": "s1", "cli_version": "0.53.0"}},
        {
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        },
        {"type": "response_item", "payload": "oops"},
        {"type": "response_item", "payload": {"content": []}},
        {"type": "response_item", "payload": {"type": "ghost_snapshot", "ghost_commit": {"id": "0f3c"}}},
        {"type": "inbox_update", "payload": {}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
        {"type": "response_item", "payload": {"type": "function_call", "arguments": "{}", "call_id": "c1"}},
    ]
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"[1]\n" + rollout(lines) + b"{not json\n")
    skipped: List[TraceFormatError] = []
    (run,) = read(path, format="codex", on_skip=skipped.append)
    assert (run.session_id, kinds(run)) == ("s1", ["user"])
    # Each problem names the file and the line; the items' own are found when the session is
    # read, at the end of the file. Codex's own items (a ghost snapshot) and the kinds of line
    # later versions add are no steps, and not errors.
    assert all(str(error).startswith(f"{path}:{error.line}: ") for error in skipped)
    assert [(error.line, error.problem.split(" (")[0]) for error in skipped] == [
        (1, "a rollout line is an object, got an array"),
        (4, "payload: expected an object, got a string"),
        (5, "a response item without a type"),
        (10, "not JSON"),
        (9, "items[1]: a function_call without a name"),
    ]


def test_codex_exec_json_events_turns_their_usage_and_a_failed_mcp_call() -> None:
    (run,) = runs_of("codex_exec.jsonl")
    assert (run.session_id, run.format, run.exit_status) == ("019a2d7a-41c4-78b1-b7cc-a45d62a89cd5", "codex-exec", "failed")
    # Each turn starts with its prompt; only completed items are steps (the command seen
    # started is one step); the reasoning and the to-do list are none.
    assert kinds(run) == [
        "user",
        "tool:shell",
        "tool:docs.search",
        "tool:apply_patch",
        "tool:shell",
        "assistant",
        "user",
        "tool:github.create_pull_request",
    ]
    failing, search, patch, passing = run.steps[1:5]
    assert (failing.arguments, failing.call_id, failing.returncode, failing.is_error) == (
        {"command": "bash -lc 'npm test'"},
        "item_1",
        1,
        True,
    )
    assert failing.result_text is not None and "AssertionError: expected '2025-1-3'" in failing.result_text
    # The turn's usage on its first step after the prompt.
    assert (failing.input_tokens, failing.output_tokens, search.input_tokens) == (24763, 1211, None)
    assert (search.arguments, search.result_text) == (
        {"query": "padStart month"},
        "String.prototype.padStart pads the start of a string.",
    )
    assert (patch.arguments, patch.result_text, patch.is_error) == (
        {"changes": [{"path": "src/date.ts", "kind": "update"}]},
        None,
        False,
    )
    assert (passing.returncode, passing.is_error) == (0, False)
    refused = run.steps[-1]
    assert (refused.is_error, refused.error, refused.result_text, refused.input_tokens) == (True, "Bad credentials", None, None)


def test_codex_exec_events_that_cannot_be_read_are_reported_and_each_thread_is_a_run() -> None:
    events: List[Any] = [
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": "oops"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "collab_tool_call", "tool": "spawn_agent"}},
        {
            "type": "item.completed",
            "item": {
                "id": "item_1",
                "type": "command_execution",
                "command": "ls",
                "aggregated_output": "",
                "exit_code": None,
                "status": "declined",
            },
        },
        {"type": "thread.started", "thread_id": "t2"},
        [2],
        {"type": "turn.started"},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 2}},
    ]
    data = "".join(json.dumps(event) + "\n" for event in events).encode()
    skipped: List[TraceFormatError] = []
    first, second = read(io.BytesIO(data), on_skip=skipped.append)
    assert (first.session_id, first.exit_status, kinds(first)) == ("t1", None, ["user", "tool:shell"])
    declined = first.steps[1]
    assert (declined.returncode, declined.is_error, declined.result_text) == (None, True, "")
    assert (second.session_id, second.exit_status, kinds(second)) == ("t2", "completed", ["user"])
    assert [(error.line, error.problem) for error in skipped] == [
        (3, "item: expected an object, got a string"),
        (7, "an event is an object, got an array"),
    ]


# --- Anthropic ------------------------------------------------------------------------------------


def test_anthropic_requests_and_responses_join_and_keep_the_responses_usage() -> None:
    conversation, summary = runs_of("anthropic.jsonl")
    assert conversation.format == "anthropic" and conversation.exit_status == "tool_use"
    assert kinds(conversation) == ["user", "tool:read_file", "tool:read_file", "tool:bash"]
    assert [step.line for step in conversation.steps] == [1, 2, 2, 4]
    test_file, missing, listing = conversation.steps[1:]
    assert (test_file.thought, test_file.input_tokens, test_file.output_tokens) == ("Let me read both files.", 410, 96)
    assert test_file.result_text is not None and test_file.result_text.startswith("def test_parse")
    assert (missing.arguments, missing.result_text, missing.is_error) == ({"path": "src/parse.py"}, "ENOENT: src/parse.py", True)
    assert (listing.call_id, listing.result_text, listing.input_tokens) == ("toolu_03", None, 620)
    assert kinds(summary) == ["user", "assistant"]


def test_anthropic_steps_of_one_request() -> None:
    skipped: List[TraceFormatError] = []
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "name": "ls", "input": {}}, {"type": "hologram"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nobody", "content": "x"}]},
        {"role": "system", "content": "no"},
        {"role": "assistant", "content": 7},
    ]
    user, call = anthropic.steps(messages, on_skip=skipped.append)
    assert (user.text, call.tool, call.call_id, call.result_text) == ("go", "ls", None, None)
    assert [error.problem for error in skipped] == [
        "messages[1].content[0]: a tool_use without an id (kept, with no result)",
        "messages[1].content[1]: unknown block 'hologram'",
        "messages[3].role: unknown role 'system'",
        "messages[4].content: expected a string or an array, got a number",
        "a tool_result for 'nobody', which no tool_use has",
    ]


# --- Claude Code ----------------------------------------------------------------------------------


def test_claude_code_a_session_its_subagent_and_a_loop_after_the_compaction() -> None:
    session, subagent = runs_of("claude_code.jsonl")
    assert (session.session_id, session.format) == ("7c1f3a52-9d4e-4b8a-a0c2-5e61f0d2b9e4", "claude-code")
    # The meta entry, the title and the file snapshot are not steps; the summary after the
    # compaction boundary is the compaction's text, not a user turn.
    assert kinds(session) == ["user", "tool:Bash", "tool:Read", "tool:Grep", "compaction"] + ["tool:Read"] * 5 + [
        "tool:Bash",
        "user",
    ]
    build, read_step, grep, compaction = session.steps[1:5]
    # One message over two entries (its text, then its call), each with the usage: counted once,
    # the cached input added in.
    assert (build.thought, build.input_tokens, build.output_tokens) == ("I'll run the build to see the error.", 14204, 96)
    assert build.is_error and build.result_text is not None and "error TS2322" in build.result_text
    assert (build.started, build.ended) == (1759395605.185, 1759395609.333)
    # Two parallel calls over three entries (a thinking block first): the usage on the first.
    assert (read_step.call_id, read_step.input_tokens, grep.call_id, grep.input_tokens) == ("toolu_02", 14506, "toolu_03", None)
    assert compaction.text is not None and compaction.text.startswith("This session is being continued")
    interrupted = session.steps[10]
    assert (interrupted.tool, interrupted.result_text, interrupted.ended) == ("Bash", None, None)
    assert subagent.session_id == "7c1f3a52-9d4e-4b8a-a0c2-5e61f0d2b9e4/5b2e91aa"
    assert kinds(subagent) == ["user", "tool:Grep"]
    looping, healthy = scan(TRACES / "claude_code.jsonl", strict=True)
    assert {(finding.code, finding.tool) for finding in looping.findings} == {
        ("guard.compaction_loop", "Read"),
        ("session.repeated_action", "Read"),
    }
    assert healthy.findings == ()


def test_claude_code_entries_that_cannot_be_read_are_reported() -> None:
    skipped: List[TraceFormatError] = []
    entry = {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "hi"}}
    lines = [entry, [1], {"type": "progress", "sessionId": "s1"}, {"type": "assistant", "sessionId": "s1", "message": "oops"}]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    (run,) = read(io.BytesIO(data), format="claude-code", on_skip=skipped.append)
    assert kinds(run) == ["user"]
    # An entry of a kind the reader does not know (later versions add some) is no step, and
    # not an error.
    assert [(error.line, str(error).split(": ", 1)[-1]) for error in skipped] == [
        (2, "a transcript entry is an object, got an array"),
        (4, "message: expected an object, got a string"),
    ]


# --- Gemini ---------------------------------------------------------------------------------------


def test_gemini_a_saved_chat_with_parallel_calls_errors_code_execution_and_a_read_loop() -> None:
    (run,) = runs_of("gemini_contents.json")
    assert (run.format, run.session_id, run.exit_status) == ("gemini", None, None)
    # The CLI's setup context and its answer are a user turn and an answer; a content of function
    # responses is not a user turn.
    assert kinds(run) == (
        ["user", "assistant", "user", "tool:run_shell_command", "tool:read_file", "tool:read_file", "tool:search_file_content"]
        + ["tool:glob", "tool:read_file", "tool:code_execution", "tool:replace", "tool:run_shell_command"]
        + ["tool:read_file"] * 5
        + ["tool:run_shell_command", "user", "tool:read_file", "tool:read_file", "tool:write_file", "tool:run_shell_command"]
        + ["assistant"]
    )
    tests = run.steps[3]
    # The thinking part is not the thought; the call part's thoughtSignature is no step.
    assert (tests.thought, tests.call_id, tests.is_error) == ("I'll run the failing tests first.", None, False)
    assert tests.result_text is not None and tests.result_text.startswith("Command: python -m pytest")
    assert "Exit Code: 1" in tests.result_text
    # Three parallel calls without ids, answered in another order: each read_file takes the
    # response of its name in order.
    test_file, parser, search = run.steps[4:7]
    assert test_file.thought is not None and test_file.thought.startswith("The date comes back")
    assert test_file.arguments == {"absolute_path": "/home/dev/dateparse/tests/test_parser.py"}
    assert test_file.result_text is not None and test_file.result_text.startswith("from datetime import date")
    assert parser.result_text is not None and parser.result_text.startswith('"""Parse the dates')
    assert search.result_text is not None and search.result_text.startswith('Found 1 match for pattern "strptime"')
    assert parser.thought is None and search.thought is None
    glob, missing, code, replace = run.steps[7:11]
    assert glob.arguments == '{"pattern": "src/**/date*.py"}'  # not an object: kept as it is
    # {"error": ...} is a call that failed, its text the error.
    assert (missing.result_text, missing.error, missing.is_error) == (
        None,
        "File not found: /home/dev/dateparse/src/dateparse/date_utils.py",
        True,
    )
    # Built-in code execution: the code is a call, its result in the same content.
    assert code.arguments == {
        "language": "PYTHON",
        "code": "from datetime import datetime\nprint(datetime.strptime('2024-03-05', '%Y-%d-%m').date())",
    }
    assert (code.result_text, code.is_error) == ("2024-05-03\n", False)
    assert code.thought == (
        "Let me confirm what strptime makes of the test's date with that format.\n"
        "The day and month are swapped in FORMAT. I'll fix it."
    )
    assert replace.thought is None and replace.result_text is not None and replace.result_text.startswith("Failed to edit")
    # The user interrupted a call: it has no result.
    interrupted = run.steps[17]
    assert (interrupted.arguments["command"], interrupted.result_text, interrupted.error) == (
        "git log --oneline -5 -- src/dateparse/parser.py",
        None,
        None,
    )
    # Two parallel calls with ids, answered in reverse order: matched by id, not by name.
    again, dates = run.steps[19:21]
    assert (again.call_id, dates.call_id) == ("call_7f3a", "call_9c21")
    assert again.result_text is not None and again.result_text.startswith('"""Parse the dates')
    assert dates.result_text == 'ISO_FORMAT = "%Y-%m-%d"\n'
    assert run.steps[-1].text is not None and run.steps[-1].text.startswith("Fixed:")
    (report,) = scan(TRACES / "gemini_contents.json", strict=True)
    assert ("session.repeated_action", "read_file") in {(finding.code, finding.tool) for finding in report.findings}


def test_gemini_requests_and_responses_join_and_keep_the_usage() -> None:
    fix, summary = runs_of("gemini_requests.jsonl")
    assert (fix.exit_status, summary.exit_status) == ("STOP", "MAX_TOKENS")  # the last response's finishReason
    assert kinds(fix) == ["user", "tool:list_files", "tool:read_file", "tool:read_file", "tool:run_tests", "assistant"]
    assert [step.line for step in fix.steps] == [1, 2, 4, 4, 6, 8]
    listing, module, test, tests, answer = fix.steps[1:]
    # Output tokens are the candidates' and the thinking's; the thinking part is no thought.
    assert (listing.input_tokens, listing.output_tokens, listing.thought) == (812, 14 + 96, None)
    assert listing.result_text == "README.md\npyproject.toml\nsrc/textkit/__init__.py\nsrc/textkit/slug.py\ntests/test_slug.py"
    assert (module.input_tokens, module.output_tokens) == (941, 38)
    assert module.thought == "Reading the module and its test side by side."
    assert (test.thought, test.input_tokens) == (None, None)
    assert module.result_text is not None and module.result_text.startswith("import re")  # {"content": text}
    assert test.result_text is not None and test.result_text.startswith("from textkit.slug import slugify")
    # A response of another shape is its compact JSON.
    assert tests.result_text is not None and json.loads(tests.result_text)["exit_code"] == 1
    assert tests.output_tokens == 17 + 152
    assert (answer.input_tokens, answer.output_tokens) == (1187, 71 + 230)
    assert answer.text is not None and answer.text.startswith("`slugify` drops the capital letters")
    assert kinds(summary) == ["user", "assistant"]


def test_gemini_the_python_sdks_model_dump_and_a_batch_prediction_line() -> None:
    # model_dump() writes snake_case names and every field, null when unset.
    part = {"text": None, "thought": None, "inline_data": None, "function_response": None, "executable_code": None}
    call = {**part, "function_call": {"id": None, "name": "get_weather", "args": {"city": "Oslo"}}}
    dumped = {
        "candidates": [{"content": {"role": "model", "parts": [call]}, "finish_reason": "STOP", "citation_metadata": None}],
        "usage_metadata": {"prompt_token_count": 40, "candidates_token_count": 6, "thoughts_token_count": None},
        "automatic_function_calling_history": [{"role": "user", "parts": [{**part, "text": "Weather in Oslo?"}]}],
        "prompt_feedback": None,
    }
    (run,) = read(io.BytesIO(json.dumps(dumped).encode()), format="gemini")
    user, weather = run.steps
    assert (user.text, run.exit_status) == ("Weather in Oslo?", "STOP")
    assert (weather.tool, weather.arguments, weather.call_id, weather.input_tokens, weather.output_tokens) == (
        "get_weather",
        {"city": "Oslo"},
        None,
        40,
        6,
    )
    # A Vertex AI batch prediction line: a request and its response.
    batch = {
        "status": "",
        "request": {"contents": [{"role": "user", "parts": [{"text": "Say hi."}]}]},
        "response": {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi!"}]}, "finishReason": "STOP"}]},
    }
    (run,) = read(io.BytesIO(json.dumps(batch).encode()), format="gemini")
    assert [(step.kind, step.text) for step in run.steps] == [("user", "Say hi."), ("assistant", "Hi!")]


def test_gemini_a_response_answers_a_call_of_the_model_content_before_it() -> None:
    def call(name: str, call_id: Optional[str] = None) -> Dict[str, Any]:
        return {"functionCall": {"name": name, "args": {}, **({"id": call_id} if call_id else {})}}

    def response(name: str, output: str, call_id: Optional[str] = None) -> Dict[str, Any]:
        return {"functionResponse": {"name": name, "response": {"output": output}, **({"id": call_id} if call_id else {})}}

    contents = [
        {"role": "user", "parts": [{"text": "Check the job."}]},
        {"role": "model", "parts": [call("job_status")]},
        {"role": "user", "parts": [{"text": "Never mind that one."}]},
        # A new model content: the call before it waits no more, so this response is its own call's.
        {"role": "model", "parts": [call("job_status")]},
        {"role": "function", "parts": [response("job_status", "running")]},
        # Ids on both sides: the response goes to its id, whatever the order.
        {"role": "model", "parts": [call("read", "a"), call("read", "b")]},
        {"role": "tool", "parts": [response("read", "B", "b"), response("read", "A", "a")]},
        # An id on the response only (Gemini CLI answers calls the API gave no id): by name.
        {"role": "model", "parts": [call("read")]},
        {"role": "user", "parts": [response("read", "C", "read-1759395605185-0a1b2c"), response("write", "?")]},
    ]
    skipped: List[TraceFormatError] = []
    (run,) = read(io.BytesIO(json.dumps(contents).encode()), format="gemini", on_skip=skipped.append)
    assert [(step.kind, step.result_text) for step in run.steps] == [
        ("user", None),
        ("tool", None),
        ("user", None),
        ("tool", "running"),
        ("tool", "A"),
        ("tool", "B"),
        ("tool", "C"),
    ]
    assert [str(error).split(": ", 1)[-1] for error in skipped] == [
        "contents[8].parts[1]: a functionResponse for 'write', which no call waits for"
    ]


def test_gemini_records_that_cannot_be_read_are_reported_and_skipped() -> None:
    lines = [
        {"role": "user", "parts": [{"text": "List the files."}]},
        3,
        {"role": "model", "parts": "ls"},
        {"role": "robot", "parts": []},
        {"role": "model", "parts": [7, {"functionCall": {"args": {}}}, {"functionCall": {"name": "ls"}}, {"audio": "..."}]},
        {"contents": "List the files."},
        {"usage": {"promptTokenCount": 3}},
        {"candidates": [{"content": "ls"}]},
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    skipped: List[TraceFormatError] = []
    runs = list(read(io.BytesIO(data), format="gemini", on_skip=skipped.append))
    # Each line of one content continues the run; the response with no content is a run of its own.
    assert [kinds(run) for run in runs] == [["user", "tool:ls"], []]
    # A record is reported as it is read, a content's parts when its run is complete.
    assert sorted((error.line, str(error).split(": ", 1)[-1]) for error in skipped) == [
        (2, "a conversation is a list of contents, a request, a response or one content, got a number"),
        (3, "contents[1].parts: expected an array, got a string"),
        (4, "contents[2].role: unknown role 'robot'"),
        (5, "contents[3].parts[0]: expected an object, got a number"),
        (5, "contents[3].parts[1]: a functionCall without a name"),
        (5, "contents[3].parts[3]: unknown part 'audio'"),
        (6, "contents: expected an array, got a string"),
        (7, "a conversation is a list of contents, a request, a response or one content: no contents or candidates"),
        (8, "candidates[0].content: expected an object, got a string"),
    ]


# --- Gemini CLI -----------------------------------------------------------------------------------


def test_gemini_cli_a_session_written_line_by_line() -> None:
    (run,) = runs_of("gemini_cli_session.jsonl")
    assert (run.format, run.session_id) == ("gemini-cli", "3f0c9a7e-5b2d-4e61-9a8f-1c2d3e4f5a6b")
    # The notice is no step; the rewind removes none (the agent took the turns before it).
    assert kinds(run) == (
        ["user", "tool:run_shell_command", "tool:read_file", "tool:read_file"]
        + ["tool:read_file"] * 5
        + ["tool:replace", "user", "user", "tool:replace", "tool:run_shell_command"]
    )
    build = run.steps[1]
    # One message written three times (its text, its tokens, its call): one step, on the last line.
    assert (build.input_tokens, build.output_tokens, build.line) == (9120, 41 + 188, 7)
    assert build.thought == "I'll run the build to see the error."
    assert build.result_text is not None and "error TS2322" in build.result_text and not build.is_error
    assert (build.started, build.ended) == (1770732124.148, 1770732129.333)
    config, missing = run.steps[2:4]
    assert (config.thought, config.input_tokens, missing.input_tokens) == (None, 9704, None)
    assert (missing.result_text, missing.error, missing.is_error) == (None, "File not found: /home/dev/webapp/src/env.d.ts", True)
    cancelled = run.steps[9]
    assert (cancelled.is_error, cancelled.error) == (True, "[Operation Cancelled] Reason: User did not allow tool call")
    running = run.steps[-1]
    assert (running.result_text, running.is_error, running.ended) == (None, False, None)  # still running when saved
    (report,) = scan(TRACES / "gemini_cli_session.jsonl", strict=True)
    assert ("session.repeated_action", "read_file") in {(finding.code, finding.tool) for finding in report.findings}


def test_gemini_cli_a_session_document() -> None:
    (run,) = runs_of("gemini_cli_session.json")
    assert (run.format, run.session_id) == ("gemini-cli", "8e1d2c3b-4a5f-4e6d-9c8b-7a6f5e4d3c2b")
    user, listing, answer = run.steps
    assert (user.text, user.line) == ("Which files under src/ are TypeScript?", None)
    assert (listing.tool, listing.call_id, listing.input_tokens, listing.output_tokens) == (
        "list_directory",
        "list_directory-1764497855102-0a2c4e6b8d1f",
        7311,
        12 + 64,
    )
    assert listing.result_text is not None and listing.result_text.endswith("config.ts\nindex.ts\nstyles.css")
    assert (answer.kind, answer.text, answer.input_tokens) == ("assistant", "Two: `src/config.ts` and `src/index.ts`.", 7420)


def test_gemini_cli_records_that_cannot_be_read_are_reported() -> None:
    lines = [
        {"sessionId": "s1", "projectHash": "p", "startTime": "2026-02-10T14:02:00.000Z"},
        {"id": "m1", "timestamp": "2026-02-10T14:02:01.000Z", "type": "user", "content": "hi"},
        "oops",
        {"lastUpdated": "2026-02-10T14:02:02.000Z"},
        {"id": "m2", "type": "gemini", "content": "", "toolCalls": [{"args": {}}, {"name": "ls", "args": {}}]},
        {"id": "m3", "type": "gemini", "content": "done", "toolCalls": "ls"},
        {"id": "m4", "type": "compression", "content": "..."},
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    skipped: List[TraceFormatError] = []
    (run,) = read(io.BytesIO(data), format="gemini-cli", on_skip=skipped.append)
    # A message of a kind the reader does not know (later versions add some) is no step, and not an error.
    assert kinds(run) == ["user", "tool:ls", "assistant"]
    assert [(error.line, str(error).split(": ", 1)[-1]) for error in skipped] == [
        (3, "a session record is an object, got a string"),
        (4, "a session record is a session, a message, $set or $rewindTo: no type"),
        (5, "message.toolCalls[0]: a tool call without a name"),
        (6, "message.toolCalls: expected an array, got a string"),
    ]


# --- OTLP -----------------------------------------------------------------------------------------


def test_otlp_spans_out_of_order_become_steps_by_start_time_per_conversation() -> None:
    weather, _ = runs_of("otlp.jsonl")
    assert (weather.session_id, weather.format) == ("conv_weather", "otlp")  # from the invoke_agent span, on the last line
    assert [step.call_id for step in weather.steps] == ["call_paris", "call_tokyo", "call_forecast", "call_forecast_2"]
    assert [step.line for step in weather.steps] == [2, 1, 2, 3]
    paris, tokyo, forecast, pending = weather.steps
    assert (paris.tool, paris.arguments, paris.result_text) == ("get_weather", {"city": "Paris"}, '{"temp_c":11,"sky":"rain"}')
    assert (paris.input_tokens, paris.output_tokens) == (120, 48)  # the chat span before it
    assert (paris.started, paris.ended) == (1764590401.1, 1764590401.9)
    assert (tokyo.arguments, tokyo.result_text, tokyo.input_tokens) == ({"city": "Tokyo"}, "Tokyo: 18C, clear", None)
    assert (forecast.arguments, forecast.is_error, forecast.error) == (
        '{"city": "Paris", "days"',
        True,
        "arguments are not valid JSON",
    )
    assert (forecast.input_tokens, forecast.output_tokens) == (210, 22)
    assert (pending.result_text, pending.is_error) == (None, False)


def test_otlp_openinference_tool_spans_and_the_trace_id_as_the_session() -> None:
    (_, docs) = runs_of("otlp.jsonl")
    assert docs.session_id == "0af7651916cd43dd8448eb211c80319c"
    first, second = docs.steps
    assert (first.tool, first.call_id, first.arguments, first.result_text) == (
        "search_docs",
        "call_s1",
        {"query": "retry budget"},
        "3 results",
    )
    assert (first.input_tokens, first.output_tokens) == (300, 25)  # llm.token_count.* of the LLM span
    assert (second.call_id, second.started) == (None, 1764590412.0)


def test_otlp_one_traces_data_document() -> None:
    (docs,) = runs_of("otlp_document.json")
    assert [step.call_id for step in docs.steps] == ["call_s1", None]
    assert docs.steps[0].line is None


def otlp_spans(*spans: Dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


def otlp_tool_span(*attributes: Dict[str, Any]) -> bytes:
    return otlp_spans(
        {
            "traceId": "t1",
            "name": "execute_tool read",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "read"}},
                *attributes,
            ],
        }
    )


def test_otlp_spans_without_an_operation_name_are_read_by_what_they_carry() -> None:
    def span(start: int, name: str, attributes: Dict[str, Any]) -> Dict[str, Any]:
        pairs = [{"key": key, "value": value} for key, value in attributes.items()]
        return {"traceId": "t1", "name": name, "startTimeUnixNano": str(start * 10**9), "attributes": pairs}

    data = otlp_spans(
        # An agent's span with its total usage: not an inference span, its tokens not counted.
        span(
            1,
            "invoke_agent",
            {"gen_ai.operation.name": {"stringValue": "invoke_agent"}, "gen_ai.usage.input_tokens": {"intValue": "999"}},
        ),
        # Token counts under the names before semantic conventions 1.27, one a whole double.
        span(
            2,
            "chat gpt-4o",
            {"gen_ai.usage.prompt_tokens": {"intValue": "120"}, "gen_ai.usage.completion_tokens": {"doubleValue": 48.0}},
        ),
        span(3, "read", {"gen_ai.tool.name": {"stringValue": "read"}}),
        span(4, "execute_tool grep", {}),
        span(5, "chat gpt-4o", {"gen_ai.usage.input_tokens": {"doubleValue": 7.5}}),  # not a count
        span(6, "execute_tool ", {}),  # names no tool
        span(7, "execute_tool ls", {"gen_ai.system": {"stringValue": "openai"}}),
    )
    ((read_step, grep, ls),) = [run.steps for run in read(io.BytesIO(data), format="otlp")]
    assert [step.tool for step in (read_step, grep, ls)] == ["read", "grep", "ls"]
    assert (read_step.input_tokens, read_step.output_tokens) == (120, 48)
    assert (grep.input_tokens, grep.output_tokens, ls.input_tokens) == (None, None, None)


def test_otlp_an_array_value_whose_values_are_not_an_array_is_absent() -> None:
    data = otlp_tool_span({"key": "gen_ai.tool.call.result", "value": {"arrayValue": {"values": 5}}})
    ((step,),) = [run.steps for run in read(io.BytesIO(data), format="otlp")]
    assert (step.tool, step.result_text) == ("read", None)


def test_otlp_an_int_value_past_64_bits_is_kept_in_the_result_text() -> None:
    big = {"key": "n", "value": {"intValue": str(2**70)}}
    data = otlp_tool_span({"key": "gen_ai.tool.call.result", "value": {"kvlistValue": {"values": [big]}}})
    ((step,),) = [run.steps for run in read(io.BytesIO(data), format="otlp")]
    assert step.result_text == f'{{"n":{2**70}}}'


def test_the_same_run_whatever_the_source(tmp_path: Path) -> None:
    from_path = runs_of("otlp.jsonl")
    with open(TRACES / "otlp.jsonl", "rb") as stream:
        from_stream = list(read(stream))
    assert [run.steps for run in from_stream] == [run.steps for run in from_path]
