"""benches/quality.py: each planting function plants what it says, planting is reproducible,
and the harness measures a small slice of the corpus."""

from __future__ import annotations

import gzip
import importlib.util
import random
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, List

import pytest

from doomloop import tool_result_hash
from doomloop.traces import Run, Step, read_runs
from support import ROOT


def _load_harness() -> ModuleType:
    # benches/ is not a package on the test path; load the script as the module it is.
    spec = importlib.util.spec_from_file_location("quality", ROOT / "benches" / "quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


quality = _load_harness()
KINDS = {kind.name: kind for kind in quality.KINDS}
SLICE_LINES = 3


@pytest.fixture(scope="module")
def corpus_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first three runs of the public corpus, as a run file of their own."""
    if not quality.CORPUS.is_file():
        pytest.fail(f"corpus missing: {quality.CORPUS}")
    with gzip.open(quality.CORPUS, "rt", encoding="utf-8") as corpus:
        lines = [corpus.readline() for _ in range(SLICE_LINES)]
    path = tmp_path_factory.mktemp("corpus") / "slice.jsonl.gz"
    path.write_bytes(gzip.compress("".join(lines).encode()))
    return path


@pytest.fixture(scope="module")
def runs(corpus_slice: Path) -> List[Run]:
    return list(read_runs(corpus_slice))


def planted(run: Run, kind: str, seed: int = 0) -> Any:
    return quality.plant(run, KINDS[kind], random.Random(seed))


def loop(one: Any) -> List[Step]:
    """The planted steps of a planted run."""
    return list(one.run.steps[one.start : one.start + one.length])


def identity(step: Step) -> tuple[str, str]:
    return step.tool, repr(step.arguments)


def _without_cosmetics(command: str) -> tuple[str, ...]:
    # The command without quotes, extra spaces, a trailing slash, and with its one-letter
    # flags merged and sorted.
    words = command.replace('"', "").replace("'", "").rstrip("/").split()
    flags = sorted("".join(word[1:] for word in words if word.startswith("-")))
    return (words[0], *flags, *(word for word in words[1:] if not word.startswith("-")))


# --- what each kind plants ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_loop_is_inserted_whole_and_the_run_is_otherwise_unchanged(runs: List[Run], kind: str) -> None:
    for run in runs:
        one = planted(run, kind)
        assert one.length == (1 if kind == "chant" else quality.LOOP_STEPS)
        assert 0 <= one.start <= max(0, len(run.steps) - 1)
        assert one.run.steps[: one.start] + one.run.steps[one.start + one.length :] == run.steps
        assert len({step.call_id for step in loop(one)}) == one.length  # every planted call has its own id


def test_identical_repeats_are_one_recorded_call_with_its_result(runs: List[Run]) -> None:
    for run in runs:
        steps = loop(planted(run, "identical_repeat"))
        assert len({(identity(step), step.result_text) for step in steps}) == 1
        assert any((identity(step), step.result_text) == (identity(steps[0]), steps[0].result_text) for step in run.steps)


def test_failing_retries_vary_the_arguments_and_fail_the_same_way(runs: List[Run]) -> None:
    for seed in range(5):
        steps = loop(planted(runs[0], "failing_retry", seed))
        assert len({identity(step) for step in steps}) == len(steps)
        assert {step.tool for step in steps} == {"bash"} and len({step.result_text for step in steps}) == 1
        assert all(step.is_error and step.returncode == 1 for step in steps)
        # Only a number changes between retries.
        assert len({re.sub(r"\d+", "N", step.arguments["command"]) for step in steps}) == 1


def test_a_json_status_poll_differs_only_in_what_the_masks_mask(runs: List[Run]) -> None:
    for seed in range(5):
        steps = loop(planted(runs[0], "volatile_json_poll", seed))
        assert len({identity(step) for step in steps}) == 1
        assert len({step.result_text for step in steps}) == len(steps)
        # The keyword configuration compares them masked: one result; unmasked, all differ.
        hashes = {
            keyword: {
                tool_result_hash("bash", step.arguments, result=step.result_text, hash_plain_results=keyword) for step in steps
            }
            for keyword in (True, False)
        }
        assert len(hashes[True]) == 1 and len(hashes[False]) == len(steps)


def test_ping_pong_alternates_two_calls_with_stable_results(runs: List[Run]) -> None:
    for run in runs:
        steps = loop(planted(run, "ping_pong"))
        evens, odds = steps[0::2], steps[1::2]
        assert len({(identity(step), step.result_text) for step in evens}) == 1
        assert len({(identity(step), step.result_text) for step in odds}) == 1
        assert identity(evens[0]) != identity(odds[0])


def test_cosmetic_variants_are_one_search_spelled_differently_with_one_result(runs: List[Run]) -> None:
    for seed in range(5):
        steps = loop(planted(runs[0], "cosmetic_variant", seed))
        commands = [step.arguments["command"] for step in steps]
        assert len(set(commands)) == len(commands)
        assert len({step.result_text for step in steps}) == 1 and not any(step.is_error for step in steps)
        assert len({_without_cosmetics(command) for command in commands}) == 1


def test_the_same_answer_comes_back_while_the_calls_make_progress(runs: List[Run]) -> None:
    for run in runs:
        steps = loop(planted(run, "same_answer"))
        answers = [step.thought or "" for step in steps]
        assert len({answer.strip().rstrip(".").lower() for answer in answers}) == 1
        assert answers.count(answers[0]) > 1 and len(answers[0]) >= 20  # identical more than once
        assert len({identity(step) for step in steps}) == len(steps)
        assert len({step.result_text for step in steps}) == len(steps) and not any(step.is_error for step in steps)


def test_a_chant_is_a_sentence_repeated_inside_one_answer(runs: List[Run]) -> None:
    for seed in range(5):
        (step,) = loop(planted(runs[0], "chant", seed))
        assert step.thought is not None
        chant = step.thought.rsplit("\n\n", 1)[1]
        sentence = next(sentence for sentence in quality._CHANTS if chant.startswith(sentence))
        assert chant == sentence * (len(chant) // len(sentence)) and len(chant) // len(sentence) >= 12


def test_a_run_without_calls_still_gets_its_loop() -> None:
    empty = Run(None, None, ())
    for kind in KINDS:
        one = planted(empty, kind)
        assert one.start == 0 and len(one.run.steps) == one.length >= 1


def test_planting_is_reproducible_and_each_run_has_its_own_draw(runs: List[Run]) -> None:
    kind = KINDS["identical_repeat"]
    assert quality.planted_runs(runs, kind, 7) == quality.planted_runs(runs, kind, 7)
    assert quality.planted_runs(runs, kind, 7) != quality.planted_runs(runs, kind, 8)
    # A run's loop depends on its place in the file, not on what the other runs hold.
    other_first = [Run(None, None, ()), *runs[1:]]
    assert quality.planted_runs(runs, kind, 7)[1:] == quality.planted_runs(other_first, kind, 7)[1:]


# --- measuring ------------------------------------------------------------------------------------


def test_the_harness_measures_a_slice_of_the_corpus(runs: List[Run]) -> None:
    parity = quality.PROFILES[0]
    assert parity.name == "parity"
    planted_kinds = {kind.name: quality.planted_runs(runs, kind, 0) for kind in quality.KINDS}
    result = quality.measure(parity, runs, planted_kinds)
    assert result.clean is not None and result.kinds is not None
    assert result.clean.runs == SLICE_LINES and 0 <= result.clean.flagged <= SLICE_LINES
    by_kind = {one.kind.name: one for one in result.kinds}
    assert list(by_kind) == list(KINDS) and all(one.runs == SLICE_LINES for one in result.kinds)
    # OpenClaw's defaults let at most 20 identical outcomes through before the veto.
    identical = by_kind["identical_repeat"].by_detector["tool_loop"]
    assert len(identical) == SLICE_LINES and all(delay <= 20 for delay in identical)
    for one in result.kinds:
        assert one.caught == sum(one.first.values())
        assert all(0 <= delay < quality.LOOP_STEPS for delay in one.delays)


def test_the_command_prints_the_tables(corpus_slice: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert quality.main(["--corpus", str(corpus_slice), "--seed", "3", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{SLICE_LINES} runs from slice.jsonl.gz, seed 3, ")
    assert "| detector | parity | recommended |" in out
    for kind in quality.KINDS:
        assert f"| {kind.label} | " in out
