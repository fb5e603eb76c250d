"""doomloop.traces.read and sniff: format sniffing (each format, ambiguous, unknown), bad lines
reported with file and line or raised under strict, the bound on a line, stdin, gzip, file
objects, one JSON document; the event format's JSON Schema."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import jsonschema
import pytest

from doomloop.traces import FORMATS, MAX_LINE_BYTES, TraceFormatError, read, sniff
from support import DATA, DOCS, ROOT

TRACES = DATA / "traces"
USER = {"v": 1, "session": "s", "type": "user", "text": "hi"}


def jsonl(*records: Any) -> bytes:
    return b"".join(json.dumps(record).encode() + b"\n" for record in records)


def collect(data: bytes, **options: Any) -> tuple[list, List[TraceFormatError]]:
    skipped: List[TraceFormatError] = []
    runs = list(read(io.BytesIO(data), on_skip=skipped.append, **options))
    return runs, skipped


# --- sniffing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("events.jsonl", "doomloop"),
        ("openai_chat.jsonl", "openai-chat"),
        ("openai_chat_trajectory.json", "openai-chat"),
        ("mini_swe_agent_text.traj.json", "openai-chat"),
        ("mini_swe_agent_tools.traj.json", "openai-chat"),  # ends with a role "exit" message
        ("openai_responses.jsonl", "openai-responses"),
        ("codex_rollout.jsonl", "codex"),
        ("codex_legacy.jsonl", "codex"),  # the format before September 2025
        ("codex_exec.jsonl", "codex-exec"),
        ("anthropic.jsonl", "anthropic"),
        ("claude_code.jsonl", "claude-code"),
        ("gemini_contents.json", "gemini"),
        ("gemini_requests.jsonl", "gemini"),
        ("gemini_cli_session.jsonl", "gemini-cli"),
        ("gemini_cli_session.json", "gemini-cli"),
        ("otlp.jsonl", "otlp"),
        ("otlp_document.json", "otlp"),
    ],
)
def test_each_format_is_sniffed_and_named_on_its_runs(name: str, expected: str) -> None:
    assert sniff(TRACES / name) == expected
    runs = list(read(TRACES / name))
    assert runs and {run.format for run in runs} == {expected}
    assert list(read(TRACES / name, format=expected)) == runs


def test_the_corpus_run_format_is_sniffed() -> None:
    corpus = DATA / "corpus" / "agent_runs_public.jsonl.gz"
    assert sniff(corpus) == "runs"
    first = next(read(corpus))
    assert first.format == "runs" and first.steps[0].line == 1


def test_formats_lists_every_reader() -> None:
    assert FORMATS == (
        "doomloop",
        "runs",
        "openai-chat",
        "openai-responses",
        "codex",
        "codex-exec",
        "anthropic",
        "claude-code",
        "gemini",
        "gemini-cli",
        "otlp",
    )


def test_plain_messages_several_formats_share_are_ambiguous_and_the_error_lists_them() -> None:
    data = jsonl([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    with pytest.raises(TraceFormatError, match=r"ambiguous trace format: it could be openai-chat or anthropic") as raised:
        sniff(io.BytesIO(data))
    assert raised.value.path == "<stream>"
    with pytest.raises(TraceFormatError, match="ambiguous"):
        list(read(io.BytesIO(data)))
    (run,) = read(io.BytesIO(data), format="anthropic")  # naming the format settles it
    assert [step.kind for step in run.steps] == ["user", "assistant"]


def test_a_later_record_with_a_mark_settles_an_ambiguous_start() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    marked = [
        {"role": "user", "content": "ls"},
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "ls", "arguments": "{}"}}]},
    ]
    assert sniff(io.BytesIO(jsonl(plain, marked))) == "openai-chat"


def test_a_gemini_user_content_is_gemini_only_and_a_model_content_marks_it() -> None:
    user = {"role": "user", "parts": [{"text": "List the files."}]}
    assert sniff(io.BytesIO(jsonl(user))) == "gemini"  # 1: plausible, and no other format fits
    model = {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]}
    assert sniff(io.BytesIO(jsonl([user, model]))) == "gemini"


def test_an_unknown_format_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(jsonl({"cpu": 0.4}, {"cpu": 0.5}))
    with pytest.raises(TraceFormatError, match=r"metrics\.jsonl: unknown trace format"):
        sniff(path)
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        list(read(path))


def test_an_empty_file_has_no_runs(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n  \n")
    assert sniff(path) is None and list(read(path)) == []


def test_bad_arguments_are_rejected_when_read_is_called() -> None:
    with pytest.raises(ValueError, match="unknown trace format 'chatml'"):
        read("x.jsonl", format="chatml")
    with pytest.raises(ValueError, match="max_line_bytes"):
        read("x.jsonl", max_line_bytes=0)
    with pytest.raises(TypeError, match="a path, '-' or a binary file object"):
        list(read(42))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="binary mode"):
        list(read(io.StringIO("{}")))  # type: ignore[arg-type]


def test_an_unreadable_file_is_a_trace_format_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"missing\.jsonl: cannot read"):
        list(read(tmp_path / "missing.jsonl"))
    with pytest.raises(TraceFormatError, match="cannot read"):
        list(read(tmp_path))  # a directory


# --- bad records ----------------------------------------------------------------------------------


def test_malformed_lines_are_reported_with_file_and_line_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    call = {"v": 1, "session": "s", "type": "tool_call", "call_id": "c", "tool": "ls", "arguments": {}}
    path.write_bytes(
        jsonl(USER)
        + b"{not json\n"
        + b'{"v": 1, "type": "user", "text": "\xff"}\n'
        + jsonl(
            [1, 2],
            {"v": 2, "type": "user"},
            {"v": 1, "type": "dance"},
            call,
            {"v": 1, "session": "s", "type": "tool_result", "call_id": "zz"},
        )
    )
    skipped: List[TraceFormatError] = []
    (run,) = read(path, on_skip=skipped.append)
    assert [step.kind for step in run.steps] == ["user", "tool"]
    assert [(error.path, error.line) for error in skipped] == [(str(path), line) for line in (2, 3, 4, 5, 6, 8)]
    problems = [error.problem for error in skipped]
    assert problems[0].startswith("not JSON (") and problems[1].startswith("not UTF-8 (")
    assert problems[2:] == [
        "an event must be a JSON object, got an array",
        "v: expected 1, got 2",
        "type: unknown event type 'dance'",
        "a tool_result for call_id 'zz', which no pending tool_call of this session has",
    ]
    assert str(skipped[2]) == f"{path}:4: an event must be a JSON object, got an array"


def test_strict_raises_the_first_malformed_line(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(jsonl([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], [{"role": "wizard"}]))
    runs = read(path, strict=True)
    with pytest.raises(TraceFormatError) as raised:
        list(runs)
    assert (raised.value.line, raised.value.problem) == (2, "messages[0].role: unknown role 'wizard'")
    assert len(list(read(path))) == 2  # without strict: the message is skipped, the run kept


def test_without_on_skip_malformed_lines_are_skipped_quietly() -> None:
    (run,) = read(io.BytesIO(jsonl(USER) + b"{oops\n" + jsonl(USER)))
    assert [step.line for step in run.steps] == [1, 3]


def test_an_over_long_line_is_skipped_without_reading_it_whole() -> None:
    class Recording(io.BytesIO):
        """Records the largest read asked of it."""

        largest = 0

        def read(self, size: Any = -1) -> bytes:
            data = super().read(size)
            Recording.largest = max(Recording.largest, len(data))
            return data

    long_line = b'{"v": 1, "type": "user", "text": "' + b"y" * (5 << 20) + b'"}\n'
    stream = Recording(jsonl(USER) + long_line + jsonl(USER))
    skipped: List[TraceFormatError] = []
    (run,) = read(stream, on_skip=skipped.append, max_line_bytes=1000)
    assert [step.line for step in run.steps] == [1, 3]
    (error,) = skipped
    assert error.line == 2 and error.problem == f"line longer than 1000 bytes ({len(long_line)} bytes; skipped)"
    assert Recording.largest <= 1 << 20  # read in blocks, never the whole line


def test_the_line_bound_defaults_to_64_mib() -> None:
    assert MAX_LINE_BYTES == 64 * 1024 * 1024


def test_a_line_of_exactly_the_bound_is_read() -> None:
    line = json.dumps(USER).encode()
    runs, skipped = collect(line + b"\n" + line, max_line_bytes=len(line))
    assert skipped == [] and len(runs[0].steps) == 2
    runs, skipped = collect(line + b"\n", max_line_bytes=len(line) - 1)
    assert runs == [] and skipped[0].problem.startswith("line longer than")


def test_a_truncated_gzip_file_keeps_what_was_read_and_reports_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl(*([USER] * 2000)))[:-30])
    skipped: List[TraceFormatError] = []
    (run,) = read(path, on_skip=skipped.append)
    assert 0 < len(run.steps) <= 2000
    assert len(skipped) == 1 and skipped[0].problem.startswith("cannot read past this point")


# --- sources --------------------------------------------------------------------------------------


def test_gzip_is_recognised_by_its_bytes_and_file_objects_are_read(tmp_path: Path) -> None:
    plain = (TRACES / "events.jsonl").read_bytes()
    (tmp_path / "trace.log").write_bytes(gzip.compress(plain))
    from_path = list(read(tmp_path / "trace.log"))
    from_gzip_stream = list(read(io.BytesIO(gzip.compress(plain))))
    from_plain = list(read(io.BytesIO(plain)))
    assert [run.steps for run in from_path] == [run.steps for run in from_gzip_stream] == [run.steps for run in from_plain]
    assert from_path[0].source == str(tmp_path / "trace.log") and from_plain[0].source == "<stream>"


def test_stdin_is_read_as_dash() -> None:
    script = "import sys; from doomloop.traces import read\nfor run in read('-'): print(run.source, run.format, len(run.steps))"
    data = gzip.compress((TRACES / "otlp.jsonl").read_bytes())
    done = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True, check=True, cwd=ROOT)
    assert done.stdout.decode().splitlines() == ["- otlp 4", "- otlp 2"]


def test_a_document_larger_than_the_bound_is_reported_not_read() -> None:
    document = json.dumps(
        {"messages": [{"role": "user", "content": "x" * 200}, {"role": "assistant", "content": "y"}]}, indent=2
    ).encode()
    runs, skipped = collect(document, max_line_bytes=100)
    assert runs == [] and skipped[0].line is None and "JSON document longer than 100 bytes" in skipped[0].problem
    runs, skipped = collect(document, format="openai-chat")
    assert skipped == [] and [step.kind for step in runs[0].steps] == ["user", "assistant"]


def test_a_document_that_is_not_json_is_reported_with_its_line() -> None:
    runs, skipped = collect(b'{\n  "resourceSpans": [\n    {"scopeSpans": [}\n  ]\n}\n', format="otlp")
    assert runs == [] and skipped[0].line == 3 and skipped[0].problem.startswith("not JSON")


def test_the_standard_library_decoder_reads_the_same_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from doomloop.traces import decode, source

    names = sorted(path.name for path in TRACES.iterdir())
    fast = {name: list(read(TRACES / name)) for name in names}
    assert decode.loads is not json.loads  # orjson is installed with the test extras
    monkeypatch.setattr(decode, "loads", json.loads)
    monkeypatch.setattr(source, "loads", json.loads)
    assert {name: list(read(TRACES / name)) for name in names} == fast
    runs, skipped = collect(b'{"v": 1, "type": "user"}\n{bad\n[' * 1 + b"[" * 100_000 + b"\n")
    assert len(runs) == 1 and [error.line for error in skipped] == [2, 3]  # deep nesting is "not JSON", not a crash


# --- the event format's schema --------------------------------------------------------------------


def schema() -> jsonschema.Draft202012Validator:
    document = json.loads((DOCS / "schemas" / "events-v1.json").read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document, format_checker=jsonschema.FormatChecker())


def test_the_sample_events_match_the_schema() -> None:
    validator = schema()
    for line in (TRACES / "events.jsonl").read_text().splitlines():
        validator.validate(json.loads(line))


@pytest.mark.parametrize(
    "event",
    [
        {"type": "user"},
        {"v": 2, "type": "user"},
        {"v": 1, "type": "chat"},
        {"v": 1, "type": "tool_call", "call_id": "c"},
        {"v": 1, "type": "tool_result", "result": "x"},
        {"v": 1, "type": "tool_call", "tool": "ls", "returncode": "0"},
        {"v": 1, "type": "user", "ts": [1]},
        {"v": 1, "type": "assistant", "usage": {"input_tokens": -1}},
    ],
)
def test_the_schema_rejects_what_the_reader_reports(event: Any) -> None:
    assert list(schema().iter_errors(event)), event
