"""The "Loop Health Summary" table: rich when it is installed, plain text otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

if TYPE_CHECKING:
    from .health import LoopHealthResult

__all__ = ["TITLE", "print_summary", "summary_rows"]

TITLE = "Loop Health Summary"


def summary_rows(result: LoopHealthResult) -> List[Tuple[str, str]]:
    """The table's (metric, value) rows; both renderings show exactly these."""
    rows = [
        ("Status", "✅ HEALTHY" if result.success else "❌ UNHEALTHY"),
        ("Converged", "✅" if result.converged else "❌"),
        ("Iterations to Success", str(result.iterations_to_success)),
        ("Wasted Iterations", str(result.wasted_iterations)),
        ("Doom-Loop Fired", "⚠️ YES" if result.doom_loop_fired else "no"),
        ("Guard Interventions", str(result.guard_interventions)),
        ("Duration", f"{result.total_duration_s:.2f}s"),
    ]
    if result.score_delta_per_iteration:
        rows.append(("Score Deltas", " → ".join(f"{delta:+.1f}" for delta in result.score_delta_per_iteration)))
    return rows


def print_summary(result: LoopHealthResult) -> None:
    """Print :func:`summary_rows` under :data:`TITLE` to standard output."""
    rows = summary_rows(result)
    try:
        # Imported here: rich is an optional extra and slow to import.
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(TITLE)
        for metric, value in rows:
            print(f"  {metric}: {value}")
        return
    table = Table(title=TITLE)
    table.add_column("Metric", style="cyan")
    table.add_column("Value", style="green" if result.success else "red")
    for metric, value in rows:
        table.add_row(metric, value)
    Console().print(table)
