"""Property test: the session detector against the pure-Python model of its checks
(``doom_loop_model.py``) on random scripts of actions, responses, progress markers, plan states
and clock steps, under random configs with doomloop's own rules on or off."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from doom_loop_model import ModelDetector, argument_features, similarity, text_features
from doomloop import DoomLoopConfig, DoomLoopDetector
from support import FakeClock

ARGS: list[Any] = [
    {},
    None,
    {"a": 1},
    {"a": 2.5},
    {"b": "x"},
    {"q": "grep -rn 'parse_header' src"},
    {"q": 'grep -nr "parse_header" src/'},
    {"q": "grep -rn load_config src"},
    {"q": "python run.py --case 17"},
    {"q": "python run.py --case 18"},
    {"q": ["a", {"n": 3, "deep": (True, None)}], "flag": False},
    "a bare string argument",
    {"q": "pip install pkg-alpha"},
    {"q": "pip install pkg-beta"},
]
# Failures quoting the argument's number or words, for retry_storm's masking.
RESULTS = [
    "ok",
    "err",
    "same",
    None,
    "Error: case 17 failed",
    "error: CASE 18 failed",
    "no parse_header in src",
    "no x in src",
    "No matching distribution found for pkg-alpha",
    "No matching distribution found for pkg-beta",
]
TEXTS = [
    "",
    " \n",
    "...",
    "Let me check the file.",
    "let me check the FILE",
    "Let me check the tests.",
    "Now let me run the test again:",
    "I fixed the parser; the tests pass now, 12 of 12.",
    "I fixed the parser: the tests pass now, 13 of 13",
]
actions = st.tuples(
    st.just("action"),
    st.sampled_from(["read", "write", "grep"]),
    st.sampled_from(range(len(ARGS))),
    st.sampled_from(range(len(RESULTS))),
    st.booleans(),
    st.sampled_from([0.0, 0.0, 61.0]),
)
# Actions and responses mostly, so that runs long enough for every rule occur.
steps = st.one_of(
    actions,
    actions,
    actions,
    st.tuples(st.just("response"), st.sampled_from(range(len(TEXTS)))),
    st.tuples(st.just("response"), st.sampled_from(range(len(TEXTS)))),
    st.tuples(st.just("marker")),
    st.tuples(st.just("plan"), st.integers(0, 3)),
    st.tuples(st.just("advance"), st.floats(0, 60)),
)
configs = st.builds(
    DoomLoopConfig,
    max_identical_actions=st.integers(1, 5),
    max_similar_actions=st.integers(1, 7),
    max_consecutive_failures=st.integers(1, 5),
    max_no_progress_steps=st.integers(1, 7),
    max_cycle_period=st.integers(2, 4),
    min_cycle_repeats=st.integers(2, 4),
    detect_cycles=st.booleans(),
    similarity_threshold=st.sampled_from([0.0, 0.3, 0.5, 0.85, 1.0]),
    similar_by_arguments=st.booleans(),
    failures_by_arguments=st.booleans(),
    no_progress_by_arguments=st.booleans(),
    max_repeated_responses=st.integers(2, 4),
    detailed_descriptions=st.booleans(),
)


@given(configs, st.lists(steps, max_size=80))
@settings(max_examples=500, deadline=None)
def test_engine_matches_the_model(config: DoomLoopConfig, script: list[tuple[Any, ...]]) -> None:
    clock = FakeClock(0.0)
    detector = DoomLoopDetector(config, clock=clock)
    detector.start_session()
    reference = ModelDetector(config, started_at=0.0)
    for step in script:
        if step[0] == "action":
            _, kind, args, result, success, duration = step
            detector.record_action(kind, ARGS[args], RESULTS[result], success, duration)
            reference.record_action(kind, ARGS[args], RESULTS[result], success, duration)
        elif step[0] == "response":
            detector.record_response(TEXTS[step[1]])
            reference.record_response(TEXTS[step[1]])
        elif step[0] == "marker":
            detector.mark_progress("m")
            reference.mark_progress()
        elif step[0] == "plan":
            detector.record_plan({"state": step[1]})
            reference.record_plan(step[1])
        else:
            clock.now += step[1]
        expected = reference.finding(clock.now)
        event = detector.get_loop_event()
        assert (event.metadata["rule"] if event is not None else None) == expected


def test_the_model_reads_arguments_as_documented() -> None:
    # The cases docs/session.md gives (the model is what the engine is checked against).
    grep = argument_features({"command": "grep -rn 'parse_header' src"})
    assert argument_features({"command": 'GREP -n -r "parse_header" src/'}) == grep
    assert similarity(argument_features({"command": "grep -rn load_config src"}), grep) < 0.85
    assert argument_features({"line": 3}) == argument_features({"line": 40.5})
    assert argument_features({"line": 3}) != argument_features({"line": True})
    assert argument_features({"path": "a.py"}) != argument_features({"file": "a.py"})
    assert text_features(" \n\t... ", 0) == set()


# Failing retries whose error quotes what changed (a version, a name, a port) or not at all:
# the masked failures of retry_storm, which random pairs of arguments and results rarely reach.
CHANGING = st.sampled_from(["1.0.7", "1.0.12", "alpha", "beta", "8081", "parse_header", "x"])
RETRIES = [
    ("pip install 'pkg=={}'", "ERROR: No matching distribution found for pkg=={}"),
    ("curl -s http://localhost:{}/health", "curl: (7) Failed to connect to localhost port {}: Connection refused"),
    ("cat src/{}/core.py", "cat: src/{}/core.py: No such file or directory"),
    ("python run.py --name {}", "Traceback: KeyError: 'unknown'"),
    # Long output, ASCII or not: only its head and tail are read.
    ("make build TARGET={}", "cc -c {}.c\n" + "warning: unused value é\n" * 500 + "Error 1"),
    ("make build TARGET={}", "cc -c x.c\n" + "ld: busy\n" * 500 + "ld: {} busy\n" + "ld: busy\n" * 500 + "Error 1"),
]
retries = st.lists(
    st.tuples(
        st.sampled_from(range(len(RETRIES))),
        CHANGING,
        CHANGING,
        st.sampled_from([True, True, True, False]),
        st.sampled_from([False, False, False, True]),
    ),
    max_size=12,
)


@given(st.integers(1, 4), st.sampled_from([0.0, 0.5, 0.85]), retries)
@settings(max_examples=300, deadline=None)
def test_retry_storms_match_the_model(failures: int, threshold: float, script: list[tuple[Any, ...]]) -> None:
    config = DoomLoopConfig(
        max_consecutive_failures=failures,
        similarity_threshold=threshold,
        similar_by_arguments=True,
        failures_by_arguments=True,
        no_progress_by_arguments=True,
        max_identical_actions=100,
        max_similar_actions=100,
        max_no_progress_steps=100,
    )
    detector = DoomLoopDetector(config, clock=FakeClock(0.0))
    reference = ModelDetector(config)
    for template, used, quoted, echoes, success in script:
        command, error = RETRIES[template]
        # The error quotes the argument's changing part, or another value.
        args = {"command": command.format(used)}
        result = error.format(used if echoes else quoted)
        detector.record_action("bash", args, result, success)
        reference.record_action("bash", args, result, success, 0.0)
        event = detector.get_loop_event()
        assert (event.metadata["rule"] if event is not None else None) == reference.finding(0.0)
