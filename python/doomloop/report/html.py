"""The HTML scan report: one self-contained page that works offline (plotly's script is
inlined once, no CDN), with the summary and, for each looping session, its findings and a
timeline: every step as a mark (tool calls by tool, messages and compactions apart), a bar
per loop over the steps it spans with a diamond where its detector fired, and the tokens
each step used, red inside loops.

Needs plotly (the ``html`` extra) and sessions scanned with ``timeline=True``.
"""

from __future__ import annotations

import html
from typing import Any, Dict, List, Sequence, Set

from ..traces.scan import TIMELINE_LIMIT, ScanSummary, SessionReport
from .text import COLUMNS, row, summary_lines, title

__all__ = ["render"]

_LEVEL_COLOURS = {"critical": "#d62728", "warning": "#ff9f1c"}
_KIND_COLOURS = {"user": "#2ca02c", "assistant": "#7f7f7f", "compaction": "#9467bd"}
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.15em; margin-top: 2.2em; border-top: 1px solid #ddd; padding-top: 1em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.critical { color: #d62728; font-weight: bold; } td.warning { color: #c77700; }
.verdict { font-weight: bold; } .healthy { color: #2a7d2a; } code { font-size: .95em; }
"""


def render(reports: Sequence[SessionReport], summary: ScanSummary) -> str:
    """The page as a string."""
    import plotly.io  # type: ignore[import-untyped]

    looping = [report for report in reports if report.looping]
    healthy = [report for report in reports if not report.looping]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>doomloop scan</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>doomloop scan</h1>",
        "".join(f"<p>{html.escape(line)}</p>" for line in summary_lines(summary)),
    ]
    for number, report in enumerate(looping):
        parts.append(f"<h2>{html.escape(title(report))}</h2>")
        parts.append(f'<p class="verdict">{html.escape(report.verdict)}</p>')
        parts.append(_findings_table(report))
        figure = _timeline(report)
        parts.append(
            plotly.io.to_html(
                figure,
                full_html=False,
                include_plotlyjs=number == 0,  # the whole library once, inline: no CDN
                div_id=f"session-{number}",
                config={"displaylogo": False, "responsive": True},
            )
        )
        if report.steps > len(report.timeline):
            parts.append(f"<p>The timeline shows the first {TIMELINE_LIMIT:,} of {report.steps:,} steps.</p>")
    if healthy:
        parts.append("<h2>Healthy sessions</h2><table><tr><th>session</th><th>verdict</th></tr>")
        parts.extend(
            f'<tr><td>{html.escape(title(report))}</td><td class="healthy">{html.escape(report.verdict)}</td></tr>'
            for report in healthy
        )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _findings_table(report: SessionReport) -> str:
    head = "".join(f"<th>{column}</th>" for column in COLUMNS)
    rows = []
    for finding in report.findings:
        cells = [html.escape(cell) for cell in row(finding)]
        cells[1] = f'<td class="{finding.level}">{cells[1]}</td>'
        rows.append("<tr>" + "".join(cell if cell.startswith("<td") else f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _timeline(report: SessionReport) -> Any:
    from plotly.subplots import make_subplots  # type: ignore[import-untyped]

    has_tokens = any(mark.tokens for mark in report.timeline)
    # Fixed pixels per lane and for the token bars, whatever the number of lanes.
    lanes = ["steps"] + [_lane(finding) for finding in report.findings]
    lanes_px, tokens_px = 60 + 45 * len(set(lanes)), 170 if has_tokens else 0
    figure = make_subplots(
        rows=2 if has_tokens else 1,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12 if has_tokens else 0.0,
        row_heights=[lanes_px, tokens_px] if has_tokens else [1.0],
    )
    inside = _inside(report)
    _step_marks(figure, report)
    _loop_spans(figure, report)
    if has_tokens:
        _tokens(figure, report, inside)
    figure.update_yaxes(
        categoryorder="array", categoryarray=list(reversed(list(dict.fromkeys(lanes)))), row=1, col=1, automargin=True
    )
    figure.update_xaxes(title_text="step", row=2 if has_tokens else 1, col=1)
    figure.update_layout(
        height=lanes_px + tokens_px + 150,
        margin={"l": 20, "r": 20, "t": 30, "b": 40},
        legend={"orientation": "h", "yanchor": "top", "y": -0.12 if has_tokens else -0.3},
        hovermode="closest",
        template="plotly_white",
    )
    return figure


def _lane(finding: Any) -> str:
    return finding.code if finding.tool is None else f"{finding.code} ({finding.tool})"


def _inside(report: SessionReport) -> List[bool]:
    inside = [False] * (len(report.timeline) + 1)
    for finding in report.findings:
        for step in range(finding.first_step, min(finding.last_step, len(report.timeline)) + 1):
            inside[step - 1] = True
    return inside


def _step_marks(figure: Any, report: SessionReport) -> None:
    import plotly.graph_objects as go  # type: ignore[import-untyped]

    groups: Dict[str, List[Any]] = {}
    for mark in report.timeline:
        label = mark.tool if mark.kind == "tool" and mark.tool else mark.kind
        groups.setdefault(label, []).append(mark)
    for label, marks in groups.items():
        figure.add_trace(
            go.Scatter(
                x=[mark.step for mark in marks],
                y=["steps"] * len(marks),
                mode="markers",
                name=label,
                marker={"symbol": "line-ns-open", "size": 18, "line": {"width": 2}, "color": _KIND_COLOURS.get(label)},
                hovertemplate=f"step %{{x}}: {html.escape(label)}<extra></extra>",
            ),
            row=1,
            col=1,
        )


def _loop_spans(figure: Any, report: SessionReport) -> None:
    import plotly.graph_objects as go

    shown: Set[str] = set()
    for finding in report.findings:
        lane = _lane(finding)
        colour = _LEVEL_COLOURS.get(finding.level, "#444")
        hover = (
            f"{finding.code} {finding.level}: steps {finding.first_step}-{finding.last_step}, "
            f"first reported at step {finding.fired_step}, count {finding.count}"
        )
        figure.add_trace(
            go.Scatter(
                x=[finding.first_step - 0.4, finding.last_step + 0.4],
                y=[lane, lane],
                mode="lines",
                line={"color": colour, "width": 14},
                opacity=0.45,
                name=f"loop ({finding.level})",
                legendgroup=finding.level,
                showlegend=finding.level not in shown,
                hovertemplate=html.escape(hover) + "<extra></extra>",
            ),
            row=1,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=[finding.fired_step],
                y=[lane],
                mode="markers",
                marker={"symbol": "diamond", "size": 13, "color": colour, "line": {"color": "#222", "width": 1}},
                name="fired",
                legendgroup="fired",
                showlegend=not shown,
                hovertemplate=html.escape(f"{finding.message[:200]} -> {finding.action}") + "<extra></extra>",
            ),
            row=1,
            col=1,
        )
        shown.add(finding.level)


def _tokens(figure: Any, report: SessionReport, inside: List[bool]) -> None:
    import plotly.graph_objects as go

    marks = [mark for mark in report.timeline if mark.tokens]
    for wasted in (False, True):
        chosen = [mark for mark in marks if inside[mark.step - 1] == wasted]
        figure.add_trace(
            go.Bar(
                x=[mark.step for mark in chosen],
                y=[mark.tokens for mark in chosen],
                name="tokens inside loops" if wasted else "tokens",
                marker_color="#d62728" if wasted else "#9ecae1",
                hovertemplate="step %{x}: %{y:,} tokens<extra></extra>",
            ),
            row=2,
            col=1,
        )
    figure.update_yaxes(title_text="tokens", row=2, col=1)
