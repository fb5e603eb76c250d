"""A million-step session scans in fixed memory: the detectors' state is bounded by their
windows, and the scan's own bookkeeping by its lookback (docs/scan.md, "Scale").

The session is a generator, read once, so what grows is only what the scan keeps. RSS is the
measure (the detectors' state lives in Rust, which tracemalloc does not see): after a first
100,000 steps have filled every window, the next 900,000 add next to nothing."""

from __future__ import annotations

import gc
import os
from typing import Iterator, List

from doomloop.traces import Run, Step
from doomloop.traces.scan import scan_run

STEPS = 1_000_000
WARM = 100_000
# Every LOOP_EVERY steps, the agent re-reads one file five times: a loop to report.
LOOP_EVERY = 50_000


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def session(samples: List[int]) -> Iterator[Step]:
    yield Step(None, None, None, None, None, None, False, kind="user", text="fix the build")
    for n in range(1, STEPS):
        if n == WARM:
            gc.collect()
            samples.append(rss())
        if n >= LOOP_EVERY and n % LOOP_EVERY < 5:
            yield Step(
                "read_file", {"path": "Makefile"}, None, None, "all: build", None, False, input_tokens=900, output_tokens=20
            )
        else:
            # Distinct calls with distinct results: exploration, no loop.
            yield Step("read_file", {"path": f"src/mod_{n}.c"}, f"c{n}", None, f"int f{n}(void);", None, False, input_tokens=900)


def test_a_million_steps_scan_in_fixed_memory() -> None:
    samples: List[int] = []
    report = scan_run(Run(None, None, session(samples), session_id="long"))  # type: ignore[arg-type]
    gc.collect()
    grown = rss() - samples[0]
    assert report.steps == STEPS
    loops = STEPS // LOOP_EVERY - 1
    assert [finding.code for finding in report.findings] == ["session.repeated_action"] * loops
    assert report.loop_tokens == report.loop_steps * 920
    # 900,000 more steps, 18 more loops: the reports' few objects and allocator noise.
    assert grown < 4 * 1024 * 1024, f"RSS grew {grown / 1e6:.1f} MB over {STEPS - WARM:,} steps"
