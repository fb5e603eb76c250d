"""doomloop's own session rules and the two profiles: ``DoomLoopConfig()`` (PraisonAI's
behaviour) and ``DoomLoopConfig.recommended()`` (the profile tuned on real runs).

Each scenario is one the issue names: what a healthy coding agent does (and a detector left on
must not flag) and the loops it must catch."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any, Iterator, List, Optional, Tuple

import pytest

from doomloop import ConfigError, DoomLoopConfig, DoomLoopDetector, DoomLoopEvent, DoomLoopType
from doomloop._core import settings_of

PARITY = DoomLoopConfig()
RECOMMENDED = DoomLoopConfig.recommended()
PROFILES = pytest.mark.parametrize("config", [PARITY, RECOMMENDED], ids=["parity", "recommended"])

OK_EMPTY = "<returncode>0</returncode>\n<output>\n</output>"
NO_MATCH = "<returncode>1</returncode>\n<output>\n</output>"

# A step: ("say", text) records a response; ("run", tool, command, result, success) an action.
Step = Tuple[Any, ...]


def events(config: DoomLoopConfig, script: List[Step]) -> Iterator[Tuple[int, Optional[DoomLoopEvent]]]:
    """Plays the script on a fresh detector: each step's index and the loop event after it."""
    detector = DoomLoopDetector(config)
    detector.start_session()
    for index, step in enumerate(script):
        if step[0] == "say":
            detector.record_response(step[1])
        else:
            _, tool, command, result, success = step
            detector.record_action(tool, {"command": command}, result, success)
        yield index, detector.get_loop_event()


def first_finding(config: DoomLoopConfig, script: List[Step]) -> Optional[Tuple[int, DoomLoopEvent]]:
    """The first step after which the detector reports a loop, with its event."""
    return next(((index, event) for index, event in events(config, script) if event is not None), None)


def rules_found(config: DoomLoopConfig, script: List[Step]) -> set[str]:
    """Every rule reported at some step."""
    return {event.metadata["rule"] for _, event in events(config, script) if event is not None}


# --- the two profiles -------------------------------------------------------------------------


def test_recommended_is_a_config_with_doomloops_rules_on() -> None:
    assert isinstance(RECOMMENDED, DoomLoopConfig)
    assert RECOMMENDED.similar_by_arguments and RECOMMENDED.failures_by_arguments
    assert RECOMMENDED.no_progress_by_arguments and RECOMMENDED.detailed_descriptions
    assert (RECOMMENDED.max_consecutive_failures, RECOMMENDED.max_repeated_responses) == (4, 3)
    assert (RECOMMENDED.content_chunk_size, RECOMMENDED.max_repeated_chunks) == (32, 6)
    # Upstream's other thresholds are kept.
    for name in ("max_identical_actions", "max_similar_actions", "max_no_progress_steps", "similarity_threshold"):
        assert getattr(RECOMMENDED, name) == getattr(PARITY, name)
    assert DoomLoopConfig.recommended() == RECOMMENDED


def test_recommended_takes_overrides_and_checks_them() -> None:
    config = DoomLoopConfig.recommended(max_repeated_responses=5, similar_by_arguments=False)
    assert config.max_repeated_responses == 5 and not config.similar_by_arguments
    assert config.failures_by_arguments
    with pytest.raises(TypeError, match="no field 'bogus'"):
        DoomLoopConfig.recommended(bogus=1)
    with pytest.raises(ConfigError, match="max_repeated_responses"):
        DoomLoopConfig.recommended(max_repeated_responses=1)


def test_new_settings_are_the_engines_and_off_by_default() -> None:
    table = {name: (default, low, high) for name, default, low, high in settings_of("DoomLoopConfig")}
    assert table["similar_by_arguments"][0] is False
    assert table["failures_by_arguments"][0] is False
    assert table["no_progress_by_arguments"][0] is False
    assert table["detailed_descriptions"][0] is False
    assert table["max_repeated_responses"][:2] == (8, 2)
    with pytest.raises(TypeError):
        DoomLoopConfig(similar_by_arguments=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="similarity_threshold"):
        DoomLoopConfig(similarity_threshold=1.5)


def test_parity_keeps_upstreams_rules_and_wording() -> None:
    found = first_finding(PARITY, [("run", "bash", f"grep -rn word{i} src", f"r{i}", True) for i in range(5)])
    assert found is not None
    index, event = found
    assert index == 4 and event.description == "Same action type repeated 5 times"
    assert event.metadata["rule"] == "same_action_type"
    found = first_finding(PARITY, [("run", t, "x", NO_MATCH, False) for t in ("grep", "sed", "cat")])
    assert found is not None and found[1].description == "Action failed 3 times consecutively"


# --- what a healthy coding agent does -----------------------------------------------------------


def test_exploration_by_one_tool_is_no_loop() -> None:
    searches = [
        ("run", "bash", f'grep -rn "{word}" src', f"src/{word}.py:1:{word}", True)
        for word in ("parse", "header", "load_config", "resolve", "units", "timedelta", "Schema", "dump")
    ]
    assert first_finding(RECOMMENDED, searches) is None


def test_different_files_that_print_the_same_are_different_actions() -> None:
    # Five empty __init__.py files: the digits of a file or path name are another file, not a
    # cosmetic variant of one action.
    for command in ("cat pkg{n}/__init__.py", "cat f{n}.py", "wc -l src/module_{n}/data.csv", "head logs\\run{n}.log"):
        script = [("run", "bash", command.format(n=n), "", True) for n in range(1, 8)]
        assert first_finding(RECOMMENDED, script) is None, command
    # ... while a counter that is not part of a name is still the same action.
    retries = [("run", "bash", f"python reproduce.py --case {n}", "same output", True) for n in range(1, 8)]
    assert first_finding(RECOMMENDED, retries) is not None


def test_searches_that_find_nothing_are_no_retry_storm() -> None:
    patterns = ("class Parser", "def load", "import yaml", "TODO", "resolve(", "__all__")
    script = [("run", "bash", f'grep -n "{p}" src/core.py', NO_MATCH, False) for p in patterns]
    assert first_finding(RECOMMENDED, script) is None


def test_edits_that_print_nothing_are_progress() -> None:
    edits = [
        "sed -i 's/foo/bar/' a.py",
        "cat > b.py << 'EOF'\nprint(1)\nEOF",
        "sed -i '12d' c.py",
        "cp a.py a.py.bak",
        "echo 'x = 1' >> d.py",
        "mv e.py f.py",
    ]
    assert first_finding(RECOMMENDED, [("run", "bash", e, OK_EMPTY, True) for e in edits]) is None


@PROFILES
def test_an_edit_and_test_cycle_repeats_a_short_line_but_no_answer(config: DoomLoopConfig) -> None:
    script: List[Step] = []
    for i in range(5):
        script += [
            ("say", f"The test fails at line {10 + i}; let me fix the comparison in parse_header."),
            ("run", "edit", f"s/a{i}/b{i}/ src/parser.py", OK_EMPTY, True),
            ("say", "Now let me run the test again:"),
            ("run", "test", "pytest tests/test_parser.py -q", f"FAILED test_{i}", False),
        ]
    assert "repeated_response" not in rules_found(config, script)
    if config is RECOMMENDED:
        assert first_finding(config, script) is None


@PROFILES
def test_answers_that_share_a_greeting_and_a_signature_are_not_repeats(config: DoomLoopConfig) -> None:
    bodies = [
        "The file you asked about is in src/config.py; the setting is read at start-up.",
        "To run the tests, use pytest -q from the project root; they take about a minute.",
        "Yes, the parser accepts tabs as well as spaces, since version 2.1.",
        "I could not find a function named load_all; the closest is load_config in loader.py.",
        "The error means the database is locked; close the other connection and retry.",
        "You can set the timeout with the --timeout flag, in seconds.",
        "The release notes for 3.0 list the breaking changes in the API section.",
        "Both options work, but the second keeps the cache warm between runs.",
        "The CSV reader skips the first line because header=True is the default.",
        "That warning is harmless: it comes from a deprecated import in a dependency.",
    ]
    script: List[Step] = [
        ("say", f"Hello! Thanks for your question, happy to help.\n\n{body}\n\nBest regards,\nThe Acme Assistant")
        for body in bodies
    ]
    assert first_finding(config, script) is None


@PROFILES
def test_the_empty_text_of_tool_call_messages_is_no_answer(config: DoomLoopConfig) -> None:
    script: List[Step] = []
    for i in range(12):
        script += [("say", ""), ("run", ("read", "list", "grep")[i % 3], f"file{i}.py", f"content {i}", True)]
    assert first_finding(config, script) is None


# --- the loops ----------------------------------------------------------------------------------


@PROFILES
def test_ten_identical_responses_are_caught_no_later_than_upstream(config: DoomLoopConfig) -> None:
    # PraisonAI counts the response's 50-character chunks and flags the eighth such response.
    answer = (
        "I have checked the configuration files and the tests. The failure comes from the parser, "
        "which drops the trailing newline before splitting the header lines; I will fix it there "
        "and then run the whole test suite to confirm it."
    )
    assert len(answer) == 225
    found = first_finding(config, [("say", answer)] * 10)
    assert found is not None
    index, event = found
    assert index + 1 == config.max_repeated_responses <= 8
    assert event.loop_type is DoomLoopType.REPEATED_OUTPUT
    assert event.metadata["rule"] == "repeated_response"
    assert event.description.startswith(f'Same response repeated {index + 1} times in a row: "I have checked the')


@PROFILES
def test_nearly_the_same_answer_turn_after_turn_is_caught(config: DoomLoopConfig) -> None:
    answer = "Let me look at the implementation of the parser to find where the header is split."
    variants = [answer, answer + " ", answer[:-1], answer[0].lower() + answer[1:], answer.upper()] * 2
    script: List[Step] = []
    for i, text in enumerate(variants):
        # The actions make progress meanwhile: distinct reads with distinct results.
        tool = ("read", "view", "open")[i % 3]
        script += [("say", text), ("run", tool, f"sed -n '{40 * i},{40 * i + 39}p' core.py", f"chunk {i}", True)]
    found = first_finding(config, script)
    assert found is not None
    assert found[1].metadata["rule"] == "repeated_response"
    assert found[0] == 2 * (config.max_repeated_responses - 1)


@PROFILES
def test_empty_answers_turn_after_turn_are_a_loop(config: DoomLoopConfig) -> None:
    texts = ["", " ", "\n", "  \n\t", "", " . ", "\n\n", " ", "", "\t"]
    found = first_finding(config, [("say", t) for t in texts])
    assert found is not None
    index, event = found
    assert index + 1 == config.max_repeated_responses
    assert event.description == (f"Empty response repeated {config.max_repeated_responses} times in a row with no action between")


def test_cosmetic_variants_with_the_same_result_are_a_loop() -> None:
    spellings = [
        "grep -rn parse_header src",
        'grep -nr "parse_header" src/',
        "grep -r -n 'parse_header' src",
        "grep  -n -r parse_header src/",
        'grep -rn "parse_header" src',
    ]
    result = "src/core.py:10:def parse_header(value):"
    found = first_finding(RECOMMENDED, [("run", "bash", s, result, True) for s in spellings])
    assert found is not None
    index, event = found
    assert index == 4 and event.loop_type is DoomLoopType.REPEATED_ACTION
    assert event.metadata["rule"] == "similar_actions"
    assert event.description == ('Similar actions repeated 5 times with the same result: bash(grep -rn "parse_header" src)')


def test_a_retry_storm_is_caught_and_named() -> None:
    error = "Traceback (most recent call last):\nImportError: cannot import name 'helper' from 'package'"
    script = [("run", "bash", f"python reproduce_issue.py --case {n}", error, False) for n in range(17, 22)]
    found = first_finding(RECOMMENDED, script)
    assert found is not None
    index, event = found
    assert index == 3 and event.loop_type is DoomLoopType.REPEATED_FAILURE
    assert event.metadata["rule"] == "retry_storm"
    assert event.description == (
        "Alike actions failed 4 times in a row with the same result: bash(python reproduce_issue.py --case 20)"
    )


RETRIES_QUOTING = {
    "a version": (
        "pip install 'package-core==1.0.{n}'",
        "ERROR: Could not find a version that satisfies the requirement package-core==1.0.{n}\n"
        "ERROR: No matching distribution found for package-core==1.0.{n}",
    ),
    "a port": ("curl -sf http://localhost:{n}/health", "curl: (7) Failed to connect to localhost port {n}: Connection refused"),
    "a line": ("python -m pdb -c 'break src/core.py:{n}' app.py", "*** Blank or comment line {n} of src/core.py"),
    "a path": ("ls /opt/app/releases/v2.{n}/bin", "ls: cannot access '/opt/app/releases/v2.{n}/bin': No such file or directory"),
}


@pytest.mark.parametrize("what", sorted(RETRIES_QUOTING))
def test_a_retry_storm_whose_error_quotes_what_changed_is_caught(what: str) -> None:
    command, error = RETRIES_QUOTING[what]
    script = [("run", "bash", command.format(n=n), error.format(n=n), False) for n in range(7, 22)]
    found = first_finding(RECOMMENDED, script)
    assert found is not None
    index, event = found
    assert (index, event.metadata["rule"]) == (3, "retry_storm")


def test_a_retry_storm_masks_the_words_the_error_echoes_from_the_argument() -> None:
    # The changing word has no digit: only masking the argument's words makes the errors alike.
    base = "cd /testbed && python -m pytest tests/test_api.py --tb=short -p no:cacheprovider -x -q -k {}"
    names = ("parse_header", "header_parse", "parse_headers", "headers_parse", "parse_head")
    script = [
        ("run", "bash", base.format(name), f"ERROR: not found: tests/test_api.py::{name}\n(no match in any of [<Module>])", False)
        for name in names
    ]
    found = first_finding(RECOMMENDED, script)
    assert found is not None and found[1].metadata["rule"] == "retry_storm"
    # The same errors with a different cause each time are different failures.
    causes = ("no match", "collection error", "syntax error", "import error", "fixture missing")
    script = [
        ("run", "bash", base.format(name), f"ERROR: tests/test_api.py::{name}: {cause}", False)
        for name, cause in zip(names, causes, strict=True)
    ]
    assert first_finding(RECOMMENDED, script) is None


def test_searches_whose_message_quotes_the_pattern_are_no_retry_storm() -> None:
    # A search tool that says what it did not find: different searches, not one retried.
    patterns = ("class Parser", "def load_config", "import yaml", "TODO(parser)", "resolve_path(", "__all__ =")
    detector = DoomLoopDetector(RECOMMENDED)
    for pattern in patterns:
        detector.record_action("search", {"pattern": pattern, "path": "src"}, f"No matches found for '{pattern}' in src", False)
        assert detector.get_loop_event() is None, pattern


def test_the_edit_and_test_cycle_is_no_retry_storm() -> None:
    # Each run fails with another line and value, and an edit comes between two runs.
    script: List[Step] = []
    for n in range(1, 9):
        script.append(("run", "bash", f"sed -i 's/limit = {n}/limit = {n + 1}/' src/core.py", OK_EMPTY, True))
        error = f"tests/test_core.py:{40 + n}: AssertionError: assert {n + 1} == 10"
        script.append(("run", "bash", "python -m pytest tests/test_core.py -x -q", error, False))
    assert first_finding(RECOMMENDED, script) is None


def test_identical_actions_are_named_in_the_recommended_profile() -> None:
    found = first_finding(RECOMMENDED, [("run", "read_file", "foo.py", "content", True)] * 3)
    assert found is not None
    assert found[1].description == "Same action repeated 3 times: read_file(foo.py)"
    assert found[1].metadata["rule"] == "identical_actions"


def test_an_action_without_a_string_argument_is_named_by_its_type() -> None:
    detector = DoomLoopDetector(RECOMMENDED)
    for _ in range(3):
        detector.record_action("scroll", {"lines": 40}, "ok", True)
    event = detector.get_loop_event()
    assert event is not None and event.description == "Same action repeated 3 times: scroll"


def test_similar_actions_read_numbers_and_nested_arguments() -> None:
    detector = DoomLoopDetector(RECOMMENDED)
    for line in range(5):
        detector.record_action("read", {"path": "core.py", "range": [line * 40, line * 40 + 39]}, "same text", True)
    event = detector.get_loop_event()
    assert event is not None and event.metadata["rule"] == "similar_actions"
    detector = DoomLoopDetector(RECOMMENDED)
    for path in ("a.py", "b.txt", "docs/c.md", "tests/test_d.py", "setup.cfg"):
        detector.record_action("read", {"path": path}, "same text", True)
    assert detector.get_loop_event() is None


def test_a_streamed_response_counts_once_it_ends() -> None:
    detector = DoomLoopDetector(RECOMMENDED)
    answer = "The fix is in parse_header; the tests pass now."
    for _ in range(RECOMMENDED.max_repeated_responses - 1):
        detector.record_response(answer)
    for i in range(0, len(answer), 4):
        detector.record_output_chunk(answer[i : i + 4])
    assert detector.get_loop_type() is None
    detector.end_response()
    assert detector.get_loop_type() is DoomLoopType.REPEATED_OUTPUT


def test_memory_stays_bounded_whatever_the_session_length() -> None:
    detector = DoomLoopDetector(RECOMMENDED)
    commands = [f"grep -rn word{i} src/module{i % 7}.py" for i in range(300)]
    for i, command in enumerate(commands[:50]):
        detector.record_action("bash", {"command": command}, f"r{i}", i % 3 == 0)
        detector.record_response(f"Step {i}: let me look at module {i % 7} for the next usage of word{i}.")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(5_000):
            command = commands[i % len(commands)] + " " * (i % 5)
            detector.record_action("bash", {"command": command}, f"r{i}", i % 3 == 0)
            detector.record_response(f"Step {i}: let me look at module {i % 7} for the next usage of word{i}.")
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 16_384
    assert detector.get_stats()["total_actions"] == 5_050


# --- hostile arguments and texts ----------------------------------------------------------------


class _Mutating:
    """A dict key whose fingerprint (via ``__reduce_ex__``) changes the dict being walked: it
    adds entries the first time (the fingerprint's walk), empties it the second (the sketch's)."""

    def __init__(self, victim: Optional[dict[Any, Any]]) -> None:
        self.victim = victim
        self.calls = 0

    def __reduce_ex__(self, protocol: Any) -> Any:
        self.calls += 1
        if self.victim is not None:
            if self.calls == 1:
                self.victim.update({f"new{i}": i for i in range(50)})
            else:
                self.victim.clear()
        return (_Mutating, (None,))

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return self is other


class _Raising:
    def __reduce_ex__(self, protocol: Any) -> Any:
        raise RuntimeError("no state")


class _LyingStr(str):
    def __len__(self) -> int:
        return 2**62

    def isascii(self) -> bool:
        raise RuntimeError("lies")


def _hostile_arguments() -> List[Any]:
    cyclic_list: List[Any] = [1, "a"]
    cyclic_list.append(cyclic_list)
    cyclic_dict: dict[str, Any] = {"x": "y"}
    cyclic_dict["self"] = cyclic_dict
    deep: Any = "bottom"
    for _ in range(100_000):
        deep = {"k": [deep]}
    wide = [cyclic_list] * 10_000
    mutated: dict[Any, Any] = {"a": "text", "b": 2}
    mutated[_Mutating(mutated)] = "value"
    return [
        cyclic_list,
        cyclic_dict,
        deep,
        wide,
        mutated,
        {"obj": _Raising(), "more": [_Raising()]},
        {"s": _LyingStr("grep -rn foo src")},
        {"lone": "grep \ud800 src", "key\udfff": "x"},
        {"long": "é" * 70_000 + " tail"},
        {(1, 2): "tuple key", 3: "int key", None: "none key", True: "bool key"},
        {"n": float("nan"), "inf": float("inf"), "big": 2**200, "b": b"\x00\xff"},
        "a bare string",
        [None, 1.5, "x", ("y", ["z"])],
        12345,
    ]


@pytest.mark.parametrize("index", range(len(_hostile_arguments())))
def test_hostile_arguments_are_sketched_without_raising(index: int) -> None:
    args = _hostile_arguments()[index]
    detector = DoomLoopDetector(RECOMMENDED)
    for _ in range(2):
        detector.record_action("tool", args, "r", success=False)
    detector.record_action("tool", {"other": "arguments"}, "r", success=True)
    assert detector.get_stats()["total_actions"] == 3
    event = detector.get_loop_event()
    assert event is None or event.metadata["rule"] in {"identical_actions", "retry_storm"}


def test_hostile_texts_are_compared_without_raising() -> None:
    detector = DoomLoopDetector(RECOMMENDED)
    texts = ["\ud800 lone surrogate \udfff", "é" * 70_000, _LyingStr("a lying string"), "\x00\x01\x02", "🙂" * 40]
    for text in texts:
        detector.record_response(text)
        detector.record_output_chunk(text)
        detector.end_response()
    assert detector.get_stats()["total_actions"] == 0
    for _ in range(3):
        detector.record_response("\ud800 and the same \udfff answer")
    event = detector.get_loop_event()
    assert event is not None and event.metadata["rule"] == "repeated_response"
    assert event.description == 'Same response repeated 3 times in a row: "\ufffd and the same \ufffd answer"'


# --- snapshots ----------------------------------------------------------------------------------


@PROFILES
def test_a_restored_detector_continues_the_rules_state(config: DoomLoopConfig) -> None:
    # Halfway through each loop, the detector is saved and restored: the restored one finds
    # each loop at the same step as one that ran through.
    error = "ImportError: cannot import name 'helper'"
    retries: List[Step] = [("run", "bash", f"python reproduce.py --case {n}", error, False) for n in range(2)]
    retries += [("say", "Let me look at the parser once more to see where the header is split.")] * 2
    retries += [("run", "bash", f"python reproduce.py --case {n}", error, False) for n in range(2, 6)]
    answers: List[Step] = []
    for n in range(10):
        answers += [("say", "Let me look at the parser once more."), ("run", f"tool{n}", f"read {n}", f"text {n}", True)]
    for script, cuts in ((retries, (2, 4, 5)), (answers, (1, 3, 4, 9))):
        _continues_after_restoring(config, script, cuts)


def _continues_after_restoring(config: DoomLoopConfig, script: List[Step], cuts: Tuple[int, ...]) -> None:
    whole = first_finding(config, script)
    assert whole is not None

    for cut in cuts:
        detector = DoomLoopDetector(config)
        detector.start_session()
        found = None
        for index, step in enumerate(script):
            if index == cut:
                detector = DoomLoopDetector.from_bytes(detector.to_bytes())
            if step[0] == "say":
                detector.record_response(step[1])
            else:
                _, tool, command, result, success = step
                detector.record_action(tool, {"command": command}, result, success)
            event = detector.get_loop_event()
            if event is not None:
                found = (index, event.metadata["rule"], event.description)
                break
        assert found == (whole[0], whole[1].metadata["rule"], whole[1].description), f"restored at step {cut}"
