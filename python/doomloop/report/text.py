"""The readable scan report: a table per looping session, then the summary.

With rich installed (the ``rich`` extra) the tables are rich tables, coloured on a terminal
unless ``NO_COLOR`` is set, plain characters when the output is a file or a pipe; without
rich, the same content as plain text.
"""

from __future__ import annotations

from typing import IO, Any, List, Sequence

from ..traces.scan import LoopFinding, ScanSummary, SessionReport, duration_text

__all__ = ["COLUMNS", "render", "row"]

COLUMNS = ("code", "level", "steps", "count", "tool", "repeated", "action")
"""The columns of a session's table."""

# A pipe or file gets lines this wide (rich would assume 80, too narrow for the table).
_FILE_WIDTH = 140
_LEVEL_STYLES = {"critical": "bold red", "warning": "yellow"}


def row(finding: LoopFinding) -> List[str]:
    """One finding as the table's cells."""
    steps = str(finding.first_step) if finding.first_step == finding.last_step else f"{finding.first_step}-{finding.last_step}"
    return [finding.code, finding.level, steps, str(finding.count), finding.tool or "", finding.evidence or "", finding.action]


def title(report: SessionReport) -> str:
    return f"{report.source} · session {report.session_id} · {report.format or 'unknown format'}"


def summary_lines(summary: ScanSummary) -> List[str]:
    healthy = summary.sessions - summary.looping_sessions
    lines = [
        f"{summary.sessions} sessions in {summary.files} files: {summary.looping_sessions} looping, {healthy} healthy",
        f"{summary.loop_steps} of {summary.steps} steps inside loops"
        + (f", {summary.loop_tokens:,} tokens" if summary.loop_tokens is not None else "")
        + (f", {duration_text(summary.loop_seconds)}" if summary.loop_seconds is not None else ""),
    ]
    if summary.findings_by_code:
        levels = ", ".join(f"{summary.findings_by_level.get(level, 0)} {level}" for level in ("critical", "warning"))
        codes = ", ".join(f"{code} {count}" for code, count in summary.findings_by_code.items())
        lines.append(f"findings: {levels} ({codes})")
    if summary.skipped:
        lines.append(f"{summary.skipped} malformed records skipped")
    return lines


def render(stream: IO[str], reports: Sequence[SessionReport], summary: ScanSummary, *, plain: bool = False) -> None:
    """Write the report of the looping sessions and the summary to ``stream``; ``plain``
    forces the text form even with rich installed."""
    if not plain:
        try:
            import rich  # noqa: F401
        except ImportError:
            plain = True
    if plain:
        _render_plain(stream, reports, summary)
    else:
        _render_rich(stream, reports, summary)


def _render_plain(stream: IO[str], reports: Sequence[SessionReport], summary: ScanSummary) -> None:
    for report in reports:
        if not report.looping:
            continue
        stream.write(f"{title(report)}\n")
        cells = [list(COLUMNS)] + [row(finding) for finding in report.findings]
        widths = [max(len(line[column]) for line in cells) for column in range(len(COLUMNS))]
        for line in cells:
            stream.write("  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() + "\n")
        stream.write(f"  {report.verdict}\n\n")
    stream.write("\n".join(summary_lines(summary)) + "\n")


def _render_rich(stream: IO[str], reports: Sequence[SessionReport], summary: ScanSummary) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = _console(Console, stream)
    for report in reports:
        if not report.looping:
            continue
        console.print(Text(title(report), style="bold"), soft_wrap=True)
        table = Table(caption=report.verdict, caption_justify="left")
        for column in COLUMNS:
            table.add_column(column, overflow="fold", no_wrap=column in ("code", "level", "steps", "count"))
        for finding in report.findings:
            cells: List[Any] = row(finding)
            cells[1] = Text(finding.level, style=_LEVEL_STYLES.get(finding.level, ""))
            table.add_row(*cells)
        console.print(table)
        console.print()
    for number, line in enumerate(summary_lines(summary)):
        console.print(Text(line, style="bold" if number == 0 else ""), soft_wrap=True)


def _console(console_type: Any, stream: IO[str]) -> Any:
    # rich itself honours NO_COLOR and leaves colour out when the stream is no terminal.
    terminal = bool(getattr(stream, "isatty", lambda: False)())
    return console_type(file=stream, highlight=False, width=None if terminal else _FILE_WIDTH)
