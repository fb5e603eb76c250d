"""Detection quality: false positives on real agent runs, recall and delay on loops planted in them.

Run: ``python benches/quality.py [--corpus PATH] [--seed N] [--markdown]``. The corpus is a
run file (JSON Lines, optionally gzip-compressed, one run per line; see
:mod:`doomloop.traces.jsonl`), by default the public corpus vendored in
``tests/data/corpus/`` (its README gives provenance and licence). Each profile
(:class:`doomloop.Profile`) replays, through a fresh :class:`doomloop.Monitor` per run:

- every run as recorded: a run any detector flags is a false positive, since the runs are
  healthy;
- every run once per planted kind, with one loop inserted at a random point (seeded): the
  run is caught when a detector flags within the planted steps, and the delay is the number
  of planted calls that had run by then.

The method, and what each kind plants, are in docs/quality.md, with the tables this prints.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from doomloop import Monitor, Profile
from doomloop.findings import CRITICAL
from doomloop.traces import Replayed, Run, Step, kind_of, parse_result, read_runs, replay

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpus" / "agent_runs_public.jsonl.gz"
LOOP_STEPS = 30
"""How long a planted loop goes on (the chant is one answer)."""
DETECTORS = ("session", "tool_loop", "chant")
"""What counts as a flag: any session finding, a blocked call (or guard abort), a chant."""
COLUMNS = (*DETECTORS, "tool_warning")
"""What is counted per run: each detector's flags, and the tool warnings apart."""

# --- profiles ---------------------------------------------------------------------------------

PROFILES = (Profile.parity(), Profile.recommended())
"""Upstream's defaults (PraisonAI's session detector, OpenClaw's tools.loopDetection with
detection switched on, the chant detector's defaults) and doomloop's profile tuned on real runs
(docs/session.md#two-profiles)."""

# --- planting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planted:
    """A run with one loop inserted: ``run.steps[start:start + length]`` are the loop."""

    run: Run
    start: int
    length: int


def _step(command: str, output: str, *, returncode: int = 0, call_id: str = "planted") -> Step:
    # Shaped as the reader shapes a recorded call of the corpus's one tool, with no message.
    result = f"<returncode>{returncode}</returncode>\n<output>\n{output}\n</output>"
    code, is_error = parse_result(result)
    return Step("bash", {"command": command}, call_id, None, result, code, is_error)


def _fresh_reads(rng: random.Random, count: int, kind: str) -> List[Step]:
    # Distinct calls with distinct, successful results: steps that are progress to every
    # tool-level rule, for the kinds whose loop is in the answers.
    first = rng.randrange(1, 2000)
    return [
        _step(f"sed -n '{line},{line + 39}p' src/package/core.py", f"{line}: chunk {line} of core.py", call_id=f"{kind}-{n}")
        for n, line in enumerate(range(first, first + 40 * count, 40))
    ]


def _recorded(run: Run) -> List[Step]:
    return [step for step in run.steps if step.result_text is not None]


def _distinct_calls(steps: Sequence[Step]) -> List[Step]:
    seen: Dict[Tuple[str, str], Step] = {}
    for step in steps:
        seen.setdefault((step.tool, repr(step.arguments)), step)
    return list(seen.values())


def plant_identical_repeat(run: Run, rng: random.Random) -> List[Step]:
    """One recorded call of the run (a fallback ``ls -la`` for a run without one), repeated
    with its recorded result."""
    recorded = _recorded(run)
    call = rng.choice(recorded) if recorded else _step("ls -la", "total 0")
    return [replace(call, thought=None, call_id=f"identical-{n}") for n in range(LOOP_STEPS)]


_FAILING = (
    (
        "python reproduce_issue.py --case {n}",
        'Traceback (most recent call last):\n  File "/testbed/reproduce_issue.py", line 3, in <module>\n'
        "    from package import helper\nImportError: cannot import name 'helper' from 'package'",
    ),
    (
        "python -m pytest tests/test_core.py -x -q -k case_{n}",
        "ImportError while loading conftest '/testbed/tests/conftest.py'.\nModuleNotFoundError: No module named 'pytest_asyncio'",
    ),
    ("sed -n '{n},{m}p' src/package/missing.py", "sed: can't read src/package/missing.py: No such file or directory"),
)


def plant_failing_retry(run: Run, rng: random.Random) -> List[Step]:
    """One command retried with a number changing each time, failing with the same error."""
    command, error = rng.choice(_FAILING)
    first = rng.randrange(1, 500)
    return [
        _step(command.format(n=n, m=n + 20), error, returncode=1, call_id=f"failing-{n}")
        for n in range(first, first + LOOP_STEPS)
    ]


_QUOTING = (
    (
        "pip install 'package-core=={n}.0.{m}'",
        "ERROR: Could not find a version that satisfies the requirement package-core=={n}.0.{m} "
        "(from versions: 0.9.0, 0.9.1, 0.9.2)\nERROR: No matching distribution found for package-core=={n}.0.{m}",
    ),
    (
        "curl -sf http://localhost:{n}/health",
        "curl: (7) Failed to connect to localhost port {n} after 0 ms: Couldn't connect to server",
    ),
    (
        "python -m pytest -x -q tests/test_core.py::test_parse_case_{n}",
        "ERROR: not found: /testbed/tests/test_core.py::test_parse_case_{n}\n"
        "(no match in any of [<Module test_core.py>])\n\nno tests ran in 0.{m}s",
    ),
    (
        "ls /opt/app/releases/v2.{n}/bin",
        "ls: cannot access '/opt/app/releases/v2.{n}/bin': No such file or directory",
    ),
)


def plant_quoting_retry(run: Run, rng: random.Random) -> List[Step]:
    """One command retried with a number changing each time (a version, a port, a test's
    name, a release), failing with an error that quotes the number: no two results are equal."""
    command, error = rng.choice(_QUOTING)
    first = rng.randrange(1, 9000)
    return [
        _step(command.format(n=n, m=n % 7), error.format(n=n, m=n % 7), returncode=1, call_id=f"quoting-{n}")
        for n in range(first, first + LOOP_STEPS)
    ]


def plant_volatile_poll(run: Run, rng: random.Random) -> List[Step]:
    """One status check repeated while its job is stuck: the output is the same each time but
    for its volatile tokens (a timestamp, the elapsed time, a pid, a temporary path)."""
    job = rng.randrange(100, 999)
    started = rng.randrange(0, 3000)
    steps = []
    for n in range(LOOP_STEPS):
        seconds = started + 7 * n + rng.randrange(0, 5)
        clock = f"2026-12-02T{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}Z"
        output = (
            f"[{clock}] job {job}: running (pid {rng.randrange(1000, 99999)}), {7 * n + 1.5:.1f}s elapsed\n"
            f"log: /tmp/job-{job}-{rng.randrange(10**6):06d}/out.log"
        )
        steps.append(_step(f"./scripts/status.sh {job}", output, call_id=f"volatile-{n}"))
    return steps


def plant_volatile_json_poll(run: Run, rng: random.Random) -> List[Step]:
    """One JSON status check repeated while its job is stuck: the same status each time but
    for its pid, elapsed milliseconds and check time (a tool's JSON handed over as text)."""
    job = rng.randrange(100, 999)
    started = rng.randrange(0, 3000)
    steps = []
    for n in range(LOOP_STEPS):
        seconds = started + 7 * n + rng.randrange(0, 5)
        status = {
            "job": job,
            "state": "running",
            "pid": rng.randrange(1000, 99999),
            "elapsed_ms": (7 * n + 1) * 1000 + rng.randrange(0, 1000),
            "checked_at": f"2026-12-02T{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}Z",
            "steps_done": 3,
        }
        steps.append(_step(f"./scripts/status.sh --json {job}", json.dumps(status), call_id=f"volatile-json-{n}"))
    return steps


def plant_noisy_arguments(run: Run, rng: random.Random) -> List[Step]:
    """One recorded call of the run (a fallback for a run without one) repeated with its
    recorded result, its arguments carrying a new request id, trace id, timestamp and task
    progress each time (what agent frameworks add to every call)."""
    recorded = _recorded(run)
    call = rng.choice(recorded) if recorded else _step("ls -la", "total 0")
    base = call.arguments if isinstance(call.arguments, dict) else {"arguments": call.arguments}
    clock = 1764590400 + rng.randrange(10**6)
    return [
        replace(
            call,
            arguments={
                **base,
                "request_id": f"req_{rng.getrandbits(48):012x}",
                "trace_id": f"{rng.getrandbits(128):032x}",
                "timestamp": clock + 9 * n,
                "task_progress": f"- [x] step {n}\n- [ ] step {n + 1}",
            },
            thought=None,
            call_id=f"noisy-{n}",
        )
        for n in range(LOOP_STEPS)
    ]


def plant_ping_pong(run: Run, rng: random.Random) -> List[Step]:
    """Two different recorded calls of the run (fallbacks for a run without two), alternating,
    each with its recorded result."""
    calls = _distinct_calls(_recorded(run))
    if len(calls) < 2:
        calls = [
            _step("cat src/package/core.py", "def main(): ..."),
            _step("python reproduce_issue.py", "ok"),
        ]
    pair = rng.sample(calls, 2)
    return [replace(pair[n % 2], thought=None, call_id=f"ping-pong-{n}") for n in range(LOOP_STEPS)]


_WORDS = ("parse_header", "validate_schema", "resolve_path", "normalize_units", "load_config", "to_timedelta")


def plant_cosmetic_variant(run: Run, rng: random.Random) -> List[Step]:
    """One search written a different way each time (flag order, spacing, quoting, a
    trailing slash), with the same result."""
    word = rng.choice(_WORDS)
    output = f"src/package/core.py:{rng.randrange(10, 900)}:def {word}(value):\nsrc/package/api.py:3:from .core import {word}"
    spellings = [
        f"grep{space}{flags} {quote.format(word)} {folder}"
        for space in (" ", "  ")
        for flags in ("-rn", "-nr", "-r -n", "-n -r")
        for quote in ('"{}"', "'{}'", "{}")
        for folder in ("src", "src/")
    ]
    return [_step(command, output, call_id=f"cosmetic-{n}") for n, command in enumerate(rng.sample(spellings, LOOP_STEPS))]


def _nudge(text: str, rng: random.Random) -> str:
    # The tiny variations of an answer given again: none, trailing space, the final full stop,
    # the case of the first letter.
    edit = rng.randrange(4)
    if edit == 1:
        return text + " "
    if edit == 2:
        return text[:-1] if text.endswith(".") else text + "."
    if edit == 3:
        return text[:1].swapcase() + text[1:]
    return text


def plant_same_answer(run: Run, rng: random.Random) -> List[Step]:
    """One answer of the run (or a stock one) given again at every turn, identical or with a
    tiny variation, while the calls make progress (distinct reads, distinct results)."""
    answers = [step.thought for step in run.steps if step.thought and len(step.thought) >= 20]
    answer = rng.choice(answers) if answers else "Let me look at the implementation of the parser to find the bug."
    return [replace(read, thought=_nudge(answer, rng)) for read in _fresh_reads(rng, LOOP_STEPS, "same-answer")]


_CHANTS = (
    "I need to check the test output again. ",
    "Let me re-run the reproduction script to confirm. ",
    "The fix should handle the empty case. ",
    "Wait, I should verify the import first. ",
)


def plant_chant(run: Run, rng: random.Random) -> List[Step]:
    """One answer that opens normally, then chants a sentence 12 to 40 times; its call is a
    fresh read."""
    answers = [step.thought for step in run.steps if step.thought]
    opening = rng.choice(answers) if answers else "Let me check."
    chant = rng.choice(_CHANTS) * rng.randint(12, 40)
    (read,) = _fresh_reads(rng, 1, "chant")
    return [replace(read, thought=f"{opening}\n\n{chant}")]


@dataclass(frozen=True)
class Kind:
    """A kind of loop the harness plants."""

    name: str
    label: str
    plant: Callable[[Run, random.Random], List[Step]]


KINDS = (
    Kind("identical_repeat", "identical repeats", plant_identical_repeat),
    Kind("failing_retry", "failing retries, varying arguments", plant_failing_retry),
    Kind("quoting_retry", "failing retries whose error quotes the changing argument", plant_quoting_retry),
    Kind("volatile_poll", "a poll whose output changes only in volatile tokens", plant_volatile_poll),
    Kind("volatile_json_poll", "a JSON status whose pid and timings change, nothing else", plant_volatile_json_poll),
    Kind("noisy_arguments", "the same call with noisy arguments (request id, timestamp, ...)", plant_noisy_arguments),
    Kind("ping_pong", "ping-pong", plant_ping_pong),
    Kind("cosmetic_variant", "cosmetic variants, same result", plant_cosmetic_variant),
    Kind("same_answer", "same answer across turns", plant_same_answer),
    Kind("chant", "chanting inside one answer", plant_chant),
)


def plant(run: Run, kind: Kind, rng: random.Random) -> Planted:
    """``run`` with one loop of ``kind`` inserted before a random step (never after the last,
    which ends the run)."""
    start = rng.randint(0, max(0, len(run.steps) - 1))
    loop = kind.plant(run, rng)
    return Planted(Run(run.path, run.exit_status, run.steps[:start] + tuple(loop) + run.steps[start:]), start, len(loop))


def planted_runs(runs: Sequence[Run], kind: Kind, seed: int) -> List[Planted]:
    """Each run with one loop of ``kind``; the same for every profile, and for each run
    whatever the others are (one generator per run, seeded by the seed, kind and index)."""
    return [plant(run, kind, random.Random(f"{seed}/{kind.name}/{index}")) for index, run in enumerate(runs)]


# --- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CleanResult:
    """The runs as recorded: how many each detector flagged, and its first findings."""

    runs: int
    flagged: int
    by_detector: Dict[str, int]
    """Runs with a critical finding per detector, and ``tool_warning`` for tool warnings."""
    findings: Dict[str, Counter[str]]
    """Per detector (and ``tool_warning``): each ``"kind: message"`` and the runs it appeared in."""
    warned: int = 0
    """Runs with any finding (a warning or worse): what a gateway would have nudged."""
    stopped: int = 0
    """Runs with a critical finding: what a gateway would have stopped."""


@dataclass(frozen=True)
class KindResult:
    """One planted kind over every run."""

    kind: Kind
    runs: int
    delays: List[int]
    """Planted calls that had run when the first flag came, one per caught run."""
    by_detector: Dict[str, List[int]]
    """The same per detector (``tool_warning``: the first tool warning), one per run it flagged."""
    first: Counter[str]
    """Which detector and rule flagged first in each caught run (ties joined by ``+``)."""
    flagging_before: int
    """Runs where a detector already flagged the step before the loop began."""
    warned: List[int]
    """Planted calls that had run at the first finding of any level, one per run warned."""
    stopped: List[int]
    """Planted calls that had run at the first critical finding (the stop), one per run stopped."""

    @property
    def caught(self) -> int:
        """Runs a detector flagged within the planted steps."""
        return len(self.delays)


@dataclass(frozen=True)
class ProfileResult:
    """A profile's numbers."""

    name: str
    clean: CleanResult
    kinds: List[KindResult]


def _key(one: Replayed) -> str:
    # The post-compaction guard is part of the tool-loop detector.
    key = kind_of(one.finding)
    return "tool_loop" if key == "guard" else key


def _kind(one: Replayed) -> str:
    # The rule: what follows the detector in the finding's code ("chant" for a chant).
    return one.finding.code.rpartition(".")[2] if one.finding.code != "chant" else "repeated_output"


def measure_clean(profile: Profile, runs: Sequence[Run]) -> CleanResult:
    """Replay every run as recorded."""
    by_detector: Counter[str] = Counter()
    findings: Dict[str, Counter[str]] = {key: Counter() for key in COLUMNS}
    flagged = warned = stopped = 0
    for run in runs:
        seen: Dict[str, Set[str]] = {}
        critical = False
        for one in replay(run, Monitor(profile)):
            seen.setdefault(_key(one), set()).add(f"{_kind(one)}: {one.finding.message}")
            critical = critical or one.finding.level == CRITICAL
        flagged += any(key in seen for key in DETECTORS)
        warned += bool(seen)
        stopped += critical
        by_detector.update(seen.keys())
        for key, messages in seen.items():
            findings[key].update(messages)
    return CleanResult(len(runs), flagged, dict(by_detector), findings, warned, stopped)


def _label(one: Replayed) -> str:
    # A chant is always repeated_output; the other detectors have several rules.
    key = _key(one)
    return key if key == "chant" else f"{key}/{_kind(one)}"


def _delay(one: Replayed, start: int) -> int:
    # Planted calls that had run: a blocked call, or one whose answer was flagged, has not.
    return one.step - start + one.after_call


def measure_kind(profile: Profile, kind: Kind, planted: Sequence[Planted]) -> KindResult:
    """Replay every run with its planted loop; only findings on planted steps count."""
    by_detector: Dict[str, List[int]] = {key: [] for key in COLUMNS}
    first_flags: Counter[str] = Counter()
    delays: List[int] = []
    warned: List[int] = []
    stopped: List[int] = []
    flagging_before = 0
    for one in planted:
        within: Dict[str, Replayed] = {}
        before = False
        first_warning: Optional[Replayed] = None
        first_stop: Optional[Replayed] = None
        for found in replay(one.run, Monitor(profile)):
            if found.step >= one.start + one.length:
                break
            if found.step < one.start:
                before = before or (found.step == one.start - 1 and _key(found) in DETECTORS)
                continue
            within.setdefault(_key(found), found)
            first_warning = first_warning or found
            if first_stop is None and found.finding.level == CRITICAL:
                first_stop = found
        flagging_before += before
        if first_warning is not None:
            warned.append(_delay(first_warning, one.start))
        if first_stop is not None:
            stopped.append(_delay(first_stop, one.start))
        for key, found in within.items():
            by_detector[key].append(_delay(found, one.start))
        flags = [within[name] for name in DETECTORS if name in within]
        if flags:
            delays.append(min(_delay(flag, one.start) for flag in flags))
            first_flags["+".join(_label(flag) for flag in flags if _delay(flag, one.start) == delays[-1])] += 1
    return KindResult(kind, len(planted), delays, by_detector, first_flags, flagging_before, warned, stopped)


def measure(profile: Profile, runs: Sequence[Run], planted: Dict[str, List[Planted]]) -> ProfileResult:
    """A profile's numbers on the clean runs and on every planted kind."""
    kinds = [measure_kind(profile, kind, planted[kind.name]) for kind in KINDS]
    return ProfileResult(profile.name, measure_clean(profile, runs), kinds)


# --- tables -----------------------------------------------------------------------------------

_DETECTOR_LABELS = {
    "session": "session (`DoomLoopDetector`)",
    "tool_loop": "tool loop, critical (blocked call)",
    "tool_warning": "tool loop, warning",
    "chant": "chant (`ChantDetector`)",
}


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = [headers, ["---"] * len(headers), *rows]
        return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)
    widths = [max(len(cells[i]) for cells in [headers, *rows]) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip() for cells in [headers, *rows]
    )


def _share(count: int, total: int) -> str:
    return f"{count}/{total}"


def _caught(delays: Sequence[int], total: int) -> str:
    return _share(len(delays), total) + (f", delay {_delays(delays)}" if delays else "")


def _delays(delays: Sequence[int]) -> str:
    return "-" if not delays else f"{statistics.median(delays):g} / {max(delays)}"


def summary_tables(results: Sequence[ProfileResult], markdown: bool) -> str:
    """The clean-run and planted-kind tables, one column per profile."""
    names = [result.name for result in results]
    clean_rows = [["any (session, blocked call or chant)"] + [_clean_cell(result, None) for result in results]]
    clean_rows += [[_DETECTOR_LABELS[key]] + [_clean_cell(result, key) for result in results] for key in _DETECTOR_LABELS]
    clean_rows.append(["warned (any finding)"] + [_share(result.clean.warned, result.clean.runs) for result in results])
    clean_rows.append(["stopped (a critical finding)"] + [_share(result.clean.stopped, result.clean.runs) for result in results])
    kind_rows = []
    ladder_rows = []
    for index, kind in enumerate(KINDS):
        cells = [kind.label]
        ladder = [kind.label]
        for result in results:
            one = result.kinds[index]
            cells.append(_caught(one.delays, one.runs))
            ladder += [_caught(one.warned, one.runs), _caught(one.stopped, one.runs)]
        kind_rows.append(cells)
        ladder_rows.append(ladder)
    ladder_headers = ["planted kind"] + [f"{name}: {what}" for name in names for what in ("warned", "stopped")]
    return "\n\n".join(
        [
            "Clean runs flagged:",
            _table(["detector", *names], clean_rows, markdown),
            f"Planted loops caught within the planted steps ({LOOP_STEPS}; the chant is one answer), delay median / max:",
            _table(["planted kind", *names], kind_rows, markdown),
            "Warn first, then stop: the first finding (any level) and the first critical one within the planted steps,"
            " delay median / max:",
            _table(ladder_headers, ladder_rows, markdown),
        ]
    )


def _clean_cell(result: ProfileResult, key: Optional[str]) -> str:
    count = result.clean.flagged if key is None else result.clean.by_detector.get(key, 0)
    return _share(count, result.clean.runs)


def detail_tables(result: ProfileResult, markdown: bool, top: int = 5) -> str:
    """A profile's planted kinds by detector, and its most common findings on clean runs."""
    headers = ["planted kind", "caught", "session", "tool loop", "chant", "tool warning", "first to flag", "flagging before"]
    rows = [
        [
            one.kind.label,
            _caught(one.delays, one.runs),
            *(_caught(one.by_detector[key], one.runs) for key in COLUMNS),
            ", ".join(f"{name} {count}" for name, count in one.first.most_common()) or "-",
            _share(one.flagging_before, one.runs),
        ]
        for one in result.kinds
    ]
    finding_rows = [
        [_DETECTOR_LABELS[key], str(count), finding]
        for key, counter in result.clean.findings.items()
        for finding, count in counter.most_common(top)
    ]
    parts = [f"{result.name}: planted loops by detector", _table(headers, rows, markdown)]
    parts.append(f"{result.name}: the most common findings on the clean runs")
    parts.append(_table(["detector", "runs with it", "finding"], finding_rows, markdown) if finding_rows else "none")
    return "\n\n".join(parts)


# --- command line -----------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="a run file (.jsonl, .jsonl.gz); default: the public corpus")
    parser.add_argument("--seed", type=int, default=0, help="seed of the planting (default 0)")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    runs = list(read_runs(args.corpus))
    planted = {kind.name: planted_runs(runs, kind, args.seed) for kind in KINDS}
    results = [measure(profile, runs, planted) for profile in PROFILES]
    seconds = time.perf_counter() - began

    print(f"{len(runs)} runs from {args.corpus.name}, seed {args.seed}, {seconds:.1f} s\n")
    print(summary_tables(results, args.markdown))
    for result in results:
        print()
        print(detail_tables(result, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
