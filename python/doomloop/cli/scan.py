"""``doomloop scan PATH...``: replay recorded agent runs through the detectors and report the
loops (docs/scan.md)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, List, Optional

from . import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE

__all__ = ["add_parser", "run"]

# How many skipped records are named on stderr (the summary counts them all).
_SKIPS_SHOWN = 20
# A progress bar appears once a scan has run this long (a quick scan shows none).
_PROGRESS_AFTER = 1.0


def add_parser(commands: Any) -> None:
    from ..traces import FORMATS

    command = commands.add_parser(
        "scan",
        help="find the loops in recorded agent runs",
        description="Replay each session of the traces through a fresh Monitor and report its loops.",
        epilog="exit codes: 0 no finding at or above --fail-on, 1 findings, 2 usage or input error",
    )
    command.add_argument("paths", nargs="*", metavar="PATH", help="trace files, directories (recursive) or - for stdin")
    command.add_argument("--format", default="auto", choices=("auto", *FORMATS), help="the traces' format (default: auto)")
    profiles = command.add_mutually_exclusive_group()
    profiles.add_argument("--profile", choices=("recommended", "parity"), default="recommended", help="detector settings")
    profiles.add_argument("--config", metavar="FILE", help="a Profile file (.toml or .json)")
    command.add_argument("--json", action="store_true", help="print the scan-v1 JSON document instead of tables")
    command.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report with timelines")
    levels = ("warning", "critical", "never")
    command.add_argument("--fail-on", choices=levels, default="critical", help="the level that exits 1 (default: critical)")
    command.add_argument("--jobs", type=_jobs, default=1, metavar="N", help="scan files in N processes")
    command.add_argument("--strict", action="store_true", help="a malformed line or record is an error (exit 2)")
    command.add_argument("--demo", action="store_true", help="scan the sample traces shipped with doomloop")
    command.set_defaults(run=run, command_parser=command)


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return jobs


def run(arguments: argparse.Namespace) -> int:
    from ..errors import DoomLoopError

    paths: List[str] = list(arguments.paths)
    if arguments.demo:
        from ..demo import trace_files

        paths += trace_files()
    if not paths:
        arguments.command_parser.error("give a PATH to scan (or --demo)")
    try:
        return _scan(arguments, paths)
    except BrokenPipeError:
        raise  # the reader of stdout went away: `main` ends quietly
    except (DoomLoopError, OSError) as error:
        sys.stderr.write(f"doomloop: error: {_one_line(error)}\n")
        return EXIT_USAGE


def _scan(arguments: argparse.Namespace, paths: List[str]) -> int:
    from ..traces.scan import SKIPS_KEPT, scan

    profile = _profile(arguments)
    skips: List[Any] = []

    def on_skip(error: Any) -> None:
        from ..traces.scan import Skip

        if len(skips) < _SKIPS_SHOWN:
            sys.stderr.write(f"doomloop: warning: {_one_line(error)} (skipped)\n")
        if len(skips) < SKIPS_KEPT:
            skips.append(Skip(error.problem, error.path, error.line))

    # Checked before the scan: a missing plotly should not cost a long scan.
    if arguments.html:
        _require_plotly()
    running = scan(
        paths,
        profile=profile,
        format=arguments.format,
        strict=arguments.strict,
        jobs=arguments.jobs,
        on_skip=on_skip,
        timeline=bool(arguments.html),
    )
    reports = list(_with_progress(running))
    summary = running.summary
    if arguments.json:
        from ..report import json as json_report

        json_report.write(sys.stdout, json_report.document(reports, summary, profile=profile.name, skips=skips))
    else:
        from ..report import text

        text.render(sys.stdout, reports, summary)
    if arguments.html:
        from ..report import html

        with open(arguments.html, "w", encoding="utf-8") as page:
            page.write(html.render(reports, summary))
        if not arguments.json:
            sys.stdout.write(f"HTML report: {arguments.html}\n")
    return EXIT_FINDINGS if summary.failed(arguments.fail_on) else EXIT_OK


def _profile(arguments: argparse.Namespace) -> Any:
    from ..profile import Profile

    if arguments.config:
        return Profile.load(arguments.config)
    return Profile.parity() if arguments.profile == "parity" else Profile.recommended()


def _require_plotly() -> None:
    try:
        import plotly  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        from .._extras import install_hint
        from ..errors import DoomLoopError

        raise DoomLoopError(f"--html needs plotly: {install_hint('html')}") from None


def _with_progress(running: Any) -> Any:
    """The scan's reports, with a progress bar on stderr once it has taken more than a
    second (only on a terminal, and only with rich)."""
    started = time.monotonic()
    progress = task = None
    try:
        for sessions, report in enumerate(running, start=1):
            if progress is None and time.monotonic() - started > _PROGRESS_AFTER:
                progress = _start_progress()
                if progress is not None:
                    task = progress.add_task("scanning", total=len(running.files))
            if progress is not None:
                progress.update(task, completed=running.files_done, description=f"{sessions:,} sessions")
            yield report
    finally:
        if progress is not None:
            progress.stop()


def _start_progress() -> Optional[Any]:
    if not sys.stderr.isatty():
        return None
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    except ImportError:
        return None
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    progress.start()
    return progress


def _one_line(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = f"{error.filename}: {error.strerror}"
    return " ".join(text.split())
