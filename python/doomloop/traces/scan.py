"""Scan recorded agent runs for loops: every session replayed through a fresh
:class:`~doomloop.Monitor`, exactly as a gateway would have run it live, and summed up as a
:class:`SessionReport` per session and a :class:`ScanSummary` over all of them.

:func:`scan` takes files, directories (scanned recursively for trace files) and ``"-"``
(standard input); :func:`scan_file` scans one file and is what the worker processes of
``jobs > 1`` (or a Dask bag, see docs/scan.md) run. Every result is a frozen dataclass that
pickles, and :meth:`ScanSummary.of` sums reports however they were produced, so a scan split
over processes or machines adds up to the single-process scan.

Memory per session is fixed: a finding's span reaches back at most a detector's window, so
the scan keeps only the last :data:`LOOKBACK` steps' tokens and times to price loops with,
however long the session runs (the optional timeline for the HTML report keeps at most
:data:`TIMELINE_LIMIT` marks).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from .errors import TraceFormatError
from .records import Run, Step

if TYPE_CHECKING:
    from ..findings import Finding
    from ..profile import Profile

__all__ = [
    "LEVELS",
    "LOOKBACK",
    "REPLAY_SEED",
    "SKIPS_KEPT",
    "TIMELINE_LIMIT",
    "TRACE_SUFFIXES",
    "FileScan",
    "LoopFinding",
    "Scan",
    "ScanSummary",
    "SessionReport",
    "StepMark",
    "duration_text",
    "expand_paths",
    "reproducible",
    "scan",
    "scan_file",
    "scan_run",
]

LEVELS = ("warning", "critical")
"""Finding levels, lowest first (``--fail-on`` compares against this order)."""
LOOKBACK = 4096
"""Steps whose tokens and times a session's scan keeps to price a loop: far more than any
detector's window (a finding's span never reaches further back)."""
TURNS_KEPT = 64
"""Runs of consecutive user messages a session's scan remembers, to tell a loop that goes on
across the user's turns (its findings only user messages apart) from two loops."""
TIMELINE_LIMIT = 20_000
"""At most this many step marks per session are kept for the timeline (``timeline=True``)."""
SKIPS_KEPT = 1000
"""At most this many skipped records per file are kept in :attr:`FileScan.skips`."""
TRACE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".gz")
"""The file names a directory scan picks up (an explicitly named file is always read)."""

PathArg = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class LoopFinding:
    """One loop in a session: a detector's findings of one code over consecutive (or
    overlapping) steps, merged; ``tool`` names the tools they named (at most three, joined by
    ``", "``).

    Steps are numbered from 1, the session's first step (any kind: a user turn, an assistant
    message, a tool call, a compaction). ``count`` and ``level`` are the highest the
    detector reported over the span; ``action`` and ``message`` are those of the first
    finding at that level.
    """

    code: str
    level: str
    detector: str
    first_step: int
    last_step: int
    count: int
    tool: Optional[str]
    evidence: Optional[str]
    action: str
    message: str
    fired_step: int
    """The step at which the detector first reported the loop."""
    line: Optional[int] = None
    """The source line of the first step, when the reader knows it."""

    def to_dict(self) -> Dict[str, Any]:
        return {
            "code": self.code,
            "level": self.level,
            "detector": self.detector,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "count": self.count,
            "tool": self.tool,
            "evidence": self.evidence,
            "action": self.action,
            "message": self.message,
            "fired_step": self.fired_step,
            "line": self.line,
        }


@dataclass(frozen=True)
class StepMark:
    """One step on a session's timeline (kept with ``timeline=True``, for the HTML report)."""

    step: int
    kind: str
    tool: Optional[str]
    tokens: Optional[int]
    seconds: Optional[float]


@dataclass(frozen=True)
class SessionReport:
    """What the scan found in one session.

    Attributes:
        source: the file the session was read from (``"-"`` for standard input).
        session_id: the trace's session id, else its run id, else ``"#N"`` (the Nth session
            of the file, from 1).
        format: the reader's format name.
        steps: the session's steps.
        findings: its loops, in the order they began.
        loop_steps: the steps inside any loop (the union of the findings' spans).
        loop_tokens: the tokens (input and output) of those steps; None when the trace
            records no token usage.
        loop_seconds: the time those steps took; None when the trace has no timestamps.
        timeline: the step marks for the HTML report (empty unless asked for).
    """

    source: str
    session_id: str
    format: Optional[str]
    steps: int
    findings: Tuple[LoopFinding, ...]
    loop_steps: int
    loop_tokens: Optional[int]
    loop_seconds: Optional[float]
    timeline: Tuple[StepMark, ...] = ()

    @property
    def level(self) -> Optional[str]:
        """The highest level of its findings; None for a session without any."""
        return max((finding.level for finding in self.findings), key=LEVELS.index, default=None)

    @property
    def looping(self) -> bool:
        return bool(self.findings)

    @property
    def verdict(self) -> str:
        """One line: healthy, or which loops, and what they cost."""
        if not self.findings:
            return f"healthy: {self.steps} steps, no loop found"
        codes = list(dict.fromkeys(finding.code for finding in self.findings))
        cost = [f"{self.loop_steps} of {self.steps} steps inside loops"]
        if self.loop_tokens is not None:
            cost.append(f"{self.loop_tokens:,} tokens")
        if self.loop_seconds is not None:
            cost.append(duration_text(self.loop_seconds))
        loops = f"{len(self.findings)} loop" + ("s" if len(self.findings) > 1 else "")
        return f"{self.level}: {loops} ({', '.join(codes)}); {', '.join(cost)}"

    def to_dict(self) -> Dict[str, Any]:
        return {
            "source": self.source,
            "session_id": self.session_id,
            "format": self.format,
            "steps": self.steps,
            "level": self.level,
            "verdict": self.verdict,
            "loop_steps": self.loop_steps,
            "loop_tokens": self.loop_tokens,
            "loop_seconds": self.loop_seconds,
            "findings": [finding.to_dict() for finding in self.findings],
        }


@dataclass(frozen=True)
class Skip:
    """A malformed line or record that a reader skipped."""

    problem: str
    path: Optional[str]
    line: Optional[int]

    def error(self) -> TraceFormatError:
        return TraceFormatError(self.problem, self.path, self.line)


@dataclass(frozen=True)
class FileScan:
    """One file's scan: its sessions' reports and the records its reader skipped
    (``skipped`` counts them all, ``skips`` keeps the first :data:`SKIPS_KEPT`)."""

    source: str
    reports: Tuple[SessionReport, ...]
    skipped: int
    skips: Tuple[Skip, ...] = ()


@dataclass(frozen=True)
class ScanSummary:
    """The sums over every session a scan reported."""

    files: int = 0
    sessions: int = 0
    looping_sessions: int = 0
    steps: int = 0
    loop_steps: int = 0
    loop_tokens: Optional[int] = None
    loop_seconds: Optional[float] = None
    findings_by_code: Dict[str, int] = field(default_factory=dict)
    findings_by_level: Dict[str, int] = field(default_factory=dict)
    skipped: int = 0

    @classmethod
    def of(cls, scans: Iterable[FileScan]) -> ScanSummary:
        """The summary of file scans, however (and wherever) they were run."""
        total = _Totals()
        for file_scan in scans:
            total.add_file(file_scan.skipped)
            for report in file_scan.reports:
                total.add(report)
        return total.summary()

    def failed(self, fail_on: str) -> bool:
        """Whether any finding is at or above ``fail_on`` (a level, or ``"never"``)."""
        if fail_on == "never":
            return False
        if fail_on not in LEVELS:
            raise ValueError(f"fail_on: expected one of {', '.join((*LEVELS, 'never'))}, got {fail_on!r}")
        return any(self.findings_by_level.get(level, 0) for level in LEVELS[LEVELS.index(fail_on) :])

    def to_dict(self) -> Dict[str, Any]:
        return {
            "files": self.files,
            "sessions": self.sessions,
            "looping_sessions": self.looping_sessions,
            "steps": self.steps,
            "loop_steps": self.loop_steps,
            "loop_tokens": self.loop_tokens,
            "loop_seconds": self.loop_seconds,
            "findings_by_code": dict(sorted(self.findings_by_code.items())),
            "findings_by_level": {level: self.findings_by_level.get(level, 0) for level in LEVELS},
            "skipped": self.skipped,
        }


class _Totals:
    """A summary being added up."""

    def __init__(self) -> None:
        self.files = self.sessions = self.looping = self.steps = self.loop_steps = self.skipped = 0
        self.tokens: Optional[int] = None
        self.seconds: Optional[float] = None
        self.by_code: Dict[str, int] = {}
        self.by_level: Dict[str, int] = {}

    def add_file(self, skipped: int) -> None:
        self.files += 1
        self.skipped += skipped

    def add(self, report: SessionReport) -> None:
        self.sessions += 1
        self.looping += report.looping
        self.steps += report.steps
        self.loop_steps += report.loop_steps
        if report.loop_tokens is not None:
            self.tokens = (self.tokens or 0) + report.loop_tokens
        if report.loop_seconds is not None:
            self.seconds = (self.seconds or 0.0) + report.loop_seconds
        for finding in report.findings:
            self.by_code[finding.code] = self.by_code.get(finding.code, 0) + 1
            self.by_level[finding.level] = self.by_level.get(finding.level, 0) + 1

    def summary(self) -> ScanSummary:
        return ScanSummary(
            self.files,
            self.sessions,
            self.looping,
            self.steps,
            self.loop_steps,
            self.tokens,
            self.seconds,
            dict(sorted(self.by_code.items())),
            dict(self.by_level),
            self.skipped,
        )


class Scan:
    """The running scan :func:`scan` returns: iterate it for the :class:`SessionReport` s, in
    file order; :attr:`summary` is the :class:`ScanSummary` (reading whatever is left first).

    :attr:`files` lists the files to scan (directories expanded) and :attr:`files_done` how
    many are finished: a progress display reads them between reports.
    """

    def __init__(self, files: List[str], scans: Iterator[Union[FileScan, SessionReport]]) -> None:
        self.files = files
        self.files_done = 0
        self._scans = scans
        self._totals = _Totals()
        self._summary: Optional[ScanSummary] = None

    def __iter__(self) -> Iterator[SessionReport]:
        return self

    def __next__(self) -> SessionReport:
        for item in self._scans:
            if isinstance(item, FileScan):
                self._totals.add_file(item.skipped)
                self.files_done += 1
                continue
            self._totals.add(item)
            return item
        self._summary = self._totals.summary()
        raise StopIteration

    @property
    def summary(self) -> ScanSummary:
        for _ in self:
            pass
        assert self._summary is not None
        return self._summary


def scan(
    paths: Union[PathArg, Iterable[PathArg]],
    *,
    profile: Optional[Profile] = None,
    format: str = "auto",
    strict: bool = False,
    jobs: int = 1,
    on_skip: Optional[Callable[[TraceFormatError], None]] = None,
    timeline: bool = False,
) -> Scan:
    """Scan trace files for loops.

    Args:
        paths: files, directories (every file below them whose name ends in one of
            :data:`TRACE_SUFFIXES`, in sorted order) and ``"-"`` for standard input; one path
            or an iterable of them.
        profile: the :class:`~doomloop.Profile` every session's fresh
            :class:`~doomloop.Monitor` is built with (None: the recommended profile), with
            the chant detector's key fixed (:func:`reproducible`).
        format: a name of :data:`doomloop.traces.FORMATS`, or ``"auto"`` to sniff each file.
        strict: a malformed line or record raises :class:`~doomloop.traces.TraceFormatError`
            instead of being skipped.
        jobs: scan the files in this many worker processes (spawned, so safe with threads);
            the reports are the same, in the same order. Standard input is read in this
            process.
        on_skip: called with the :class:`~doomloop.traces.TraceFormatError` (file and line)
            of each record skipped; with ``jobs > 1`` it is called here as each file's results
            arrive, for the first :data:`SKIPS_KEPT` of the file.
        timeline: keep each session's step marks (:attr:`SessionReport.timeline`) for the
            HTML report.

    Directories are expanded at once; files are read as the scan is iterated. An unreadable
    file raises ``OSError``, an unknown or ambiguous format ``TraceFormatError``.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: expected an integer of at least 1, got {jobs!r}")
    files = expand_paths(paths)
    options: Dict[str, Any] = {"profile": profile, "format": format, "strict": strict, "timeline": timeline}
    if jobs == 1 or len([name for name in files if name != "-"]) < 2:
        return Scan(files, _serial(files, options, on_skip))
    return Scan(files, _parallel(files, options, on_skip, jobs))


def _serial(files: List[str], options: Dict[str, Any], on_skip: Optional[Callable[[TraceFormatError], None]]) -> Iterator[Any]:
    for name in files:
        counter = _SkipCounter(on_skip, keep=False)
        yield from _scan_source(name, options, counter)
        yield FileScan(name, (), counter.skipped)


def _parallel(
    files: List[str], options: Dict[str, Any], on_skip: Optional[Callable[[TraceFormatError], None]], jobs: int
) -> Iterator[Any]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: a forked child would inherit the locks of the caller's threads.
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {name: pool.submit(scan_file, name, **options) for name in dict.fromkeys(files) if name != "-"}
        for name in files:
            if name == "-":
                yield from _serial([name], options, on_skip)
                continue
            file_scan = futures[name].result()
            if on_skip is not None:
                for skip in file_scan.skips:
                    on_skip(skip.error())
            yield from file_scan.reports
            yield FileScan(name, (), file_scan.skipped)


def scan_file(
    source: PathArg,
    *,
    profile: Optional[Profile] = None,
    format: str = "auto",
    strict: bool = False,
    on_skip: Optional[Callable[[TraceFormatError], None]] = None,
    timeline: bool = False,
) -> FileScan:
    """Scan one file (or ``"-"``) to a :class:`FileScan`; the options are :func:`scan`'s. This
    is the function to map over files in a process pool or a Dask bag."""
    name = os.fspath(source)
    counter = _SkipCounter(on_skip, keep=True)
    options = {"profile": profile, "format": format, "strict": strict, "timeline": timeline}
    reports = tuple(_scan_source(name, options, counter))
    return FileScan(name, reports, counter.skipped, tuple(counter.kept))


def _scan_source(name: str, options: Dict[str, Any], counter: _SkipCounter) -> Iterator[SessionReport]:
    from .formats import read

    runs = read(name, format=options["format"], on_skip=counter, strict=options["strict"])
    for number, run in enumerate(runs, start=1):
        yield scan_run(run, profile=options["profile"], source=name, number=number, timeline=options["timeline"])


class _SkipCounter:
    """The ``on_skip`` a scan gives the reader: counts, keeps the first few, passes them on."""

    def __init__(self, on_skip: Optional[Callable[[TraceFormatError], None]], keep: bool) -> None:
        self.on_skip = on_skip
        self.keep = keep
        self.skipped = 0
        self.kept: List[Skip] = []

    def __call__(self, error: TraceFormatError) -> None:
        self.skipped += 1
        if self.keep and len(self.kept) < SKIPS_KEPT:
            self.kept.append(Skip(error.problem, error.path, error.line))
        if self.on_skip is not None:
            self.on_skip(error)


def scan_run(
    run: Run, *, profile: Optional[Profile] = None, source: Optional[str] = None, number: int = 1, timeline: bool = False
) -> SessionReport:
    """Replay one run through a fresh :class:`~doomloop.Monitor` and report its loops.

    ``run.steps`` may be any iterable (a generator of a long session is read once, in fixed
    memory). ``source`` defaults to ``run.source``; ``number`` names a session without ids.
    """
    from ..monitor import Monitor
    from .replay import replay

    monitor = Monitor(reproducible(profile))
    ledger = _Ledger(timeline)
    tracked = Run(run.path, run.exit_status, ledger.track(run.steps, monitor))  # type: ignore[arg-type]
    for replayed in replay(tracked, monitor):
        ledger.add(replayed.step, replayed.finding)
    return SessionReport(
        source=source if source is not None else (run.source or "-"),
        session_id=run.session_id or run.run_id or f"#{number}",
        format=run.format,
        steps=ledger.steps,
        findings=tuple(ledger.findings),
        loop_steps=ledger.loop_steps,
        loop_tokens=ledger.loop_tokens,
        loop_seconds=ledger.loop_seconds,
        timeline=tuple(ledger.timeline),
    )


REPLAY_SEED = 0
"""The chant detector's hash key in a scan whose profile leaves it random."""


def reproducible(profile: Optional[Profile]) -> Profile:
    """``profile`` (default: the recommended one) with the chant detector's key fixed to
    :data:`REPLAY_SEED` unless it fixes one itself. A live detector's key is secret and random,
    so which window of a chant it reports can differ from one detector to the next; a scan
    replays recorded text, and fixes the key so the same trace gives the same report in every
    process, on every machine and every time."""
    from ..profile import Profile

    profile = Profile.recommended() if profile is None else profile
    return profile if profile.chant.seed is not None else profile.replace(chant={"seed": REPLAY_SEED})


class _Ledger:
    """One session's bookkeeping during replay, in fixed memory: the last :data:`LOOKBACK`
    steps (where each began in the monitor's step numbering, its tokens, time and line), the
    loops found so far, and which steps are already counted as inside a loop."""

    def __init__(self, timeline: bool) -> None:
        self.steps = 0
        self.recent: Deque[Tuple[int, int, Optional[int], Optional[float], Optional[int]]] = deque(maxlen=LOOKBACK)
        self.findings: List[LoopFinding] = []
        self.open: Dict[str, int] = {}  # code -> index in findings of its latest loop
        self.loop_steps = 0
        self.loop_tokens: Optional[int] = None
        self.loop_seconds: Optional[float] = None
        self.counted: List[Tuple[int, int]] = []  # merged spans already counted, within LOOKBACK
        self.keep_timeline = timeline
        self.timeline: List[StepMark] = []
        # The latest runs of consecutive user messages, [first, last] step: what may come
        # between two findings of one loop.
        self.turns: Deque[List[int]] = deque(maxlen=TURNS_KEPT)

    def track(self, steps: Iterable[Step], monitor: Any) -> Iterator[Step]:
        """``steps``, noting each one as replay takes it (the monitor's step count then is
        where the step begins). Inlined: this runs once per step of every scanned session."""
        append = self.recent.append
        last = None  # the previous step's last timestamp
        for step in steps:
            number = self.steps = self.steps + 1
            given, produced = step.input_tokens, step.output_tokens
            tokens = None if given is None and produced is None else (given or 0) + (produced or 0)
            # A step's time runs from the previous step's last timestamp to its own: the
            # model's turn that produced a call is part of what the call cost.
            started, ended = step.started, step.ended
            mark = ended if ended is not None else started
            seconds = None
            if mark is not None:
                since = last if last is not None else (started if started is not None else mark)
                seconds = mark - since if mark > since else 0.0
                last = mark
            append((monitor.step, number, tokens, seconds, step.line))
            if step.kind == "user":
                turns = self.turns
                if turns and turns[-1][1] == number - 1:
                    turns[-1][1] = number
                else:
                    turns.append([number, number])
            if self.keep_timeline and len(self.timeline) < TIMELINE_LIMIT:
                self.timeline.append(StepMark(number, step.kind, step.tool, tokens, seconds))
            yield step

    def session_step(self, monitor_step: int) -> int:
        """The session step (from 1) holding a monitor step."""
        found = self.recent[0][1] if self.recent else 1
        for begins, step, *_ in reversed(self.recent):
            if begins <= monitor_step:
                return step
            found = step
        return found

    def add(self, index: int, finding: Finding) -> None:
        last = min(max(self.session_step(finding.last_step), 1), index + 1)
        first = min(self.session_step(finding.first_step), last)
        self._count(first, last)
        # One loop can name several tools (a ping-pong names each side in turn): its
        # findings are one loop while their spans touch, or while only user messages come
        # between them (the monitor starts each turn's stretches afresh, but an agent that
        # answers every turn alike is in one loop).
        at = self.open.get(finding.code)
        if at is not None:
            after = self.findings[at].last_step + 1
            if first <= after:
                self.findings[at] = _merge(self.findings[at], finding, first, last)
                return
            if self._only_user_messages(after, first - 1):
                self._count(after, first - 1)
                self.findings[at] = _merge(self.findings[at], finding, first, last)
                return
        self.open[finding.code] = len(self.findings)
        self.findings.append(
            LoopFinding(
                code=finding.code,
                level=finding.level,
                detector=finding.detector,
                first_step=first,
                last_step=last,
                count=finding.count,
                tool=finding.tool,
                evidence=finding.evidence,
                action=finding.action,
                message=finding.message,
                fired_step=index + 1,
                line=self._line(first),
            )
        )

    def _only_user_messages(self, first: int, last: int) -> bool:
        """Whether the steps ``first..last`` (at least one) are all user messages."""
        return any(begins <= first and last <= ends for begins, ends in self.turns)

    def _line(self, step: int) -> Optional[int]:
        # The recent steps are consecutive: the one wanted is at its distance from the oldest.
        at = step - self.recent[0][1] if self.recent else -1
        return self.recent[at][4] if 0 <= at < len(self.recent) else None

    def _count(self, first: int, last: int) -> None:
        """Count the steps of ``first..last`` not yet counted as inside a loop."""
        fresh = [(first, last)]
        for low, high in self.counted:
            fresh = [part for a, b in fresh for part in ((a, min(b, low - 1)), (max(a, high + 1), b)) if part[0] <= part[1]]
        for a, b in fresh:
            self.loop_steps += b - a + 1
            for _, number, tokens, seconds, _ in reversed(self.recent):
                if number < a:
                    break
                if number <= b:
                    if tokens is not None:
                        self.loop_tokens = (self.loop_tokens or 0) + tokens
                    if seconds is not None:
                        self.loop_seconds = (self.loop_seconds or 0.0) + seconds
        self.counted = _union([*self.counted, (first, last)], oldest=self.steps - LOOKBACK)


def _merge(loop: LoopFinding, finding: Finding, first: int, last: int) -> LoopFinding:
    higher = LEVELS.index(finding.level) > LEVELS.index(loop.level)
    return LoopFinding(
        code=loop.code,
        level=finding.level if higher else loop.level,
        detector=loop.detector,
        first_step=min(loop.first_step, first),
        last_step=max(loop.last_step, last),
        count=max(loop.count, finding.count),
        tool=_tools(loop.tool, finding.tool),
        evidence=loop.evidence or finding.evidence,
        action=finding.action if higher else loop.action,
        message=finding.message if higher else loop.message,
        fired_step=loop.fired_step,
        line=loop.line,
    )


_MAX_TOOLS = 3


def _tools(named: Optional[str], tool: Optional[str]) -> Optional[str]:
    # The tools a loop named, in order, joined: at most a few (a loop of many tools is named
    # by its first ones).
    if tool is None or named is None:
        return named or tool
    tools = named.split(", ")
    if tool in tools or len(tools) >= _MAX_TOOLS:
        return named
    return f"{named}, {tool}"


def _union(spans: List[Tuple[int, int]], oldest: int) -> List[Tuple[int, int]]:
    # Spans wholly older than the lookback can never be reached again: dropped, so the list
    # stays short however long the session.
    merged: List[Tuple[int, int]] = []
    for low, high in sorted(spans):
        if high < oldest:
            continue
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def duration_text(seconds: float) -> str:
    """A duration for a person: "12.3 s", "4m 05s", "2h 10m"."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def expand_paths(paths: Union[PathArg, Iterable[PathArg]]) -> List[str]:
    """The files a scan of ``paths`` reads, in order: a directory becomes the trace files
    below it (sorted, hidden ones left out), anything else stays as given (``"-"`` is
    standard input). A path that does not exist raises ``FileNotFoundError``."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: List[str] = []
    for path in paths:
        name = os.fspath(path)
        if name == "-" or not os.path.isdir(name):
            if name != "-" and not os.path.exists(name):
                raise FileNotFoundError(f"{name}: no such file or directory")
            files.append(name)
            continue
        found: List[str] = []
        for root, dirs, names in os.walk(name):
            dirs[:] = [entry for entry in dirs if not entry.startswith(".")]
            found.extend(
                os.path.join(root, entry) for entry in names if not entry.startswith(".") and entry.endswith(TRACE_SUFFIXES)
            )
        files.extend(sorted(found))
    return files
