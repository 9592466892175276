"""``perftool metrics``: the shared metrics as a table, with their units and meanings."""

from __future__ import annotations

from rich.table import Table

from perftool.common.results import MetricsReport


def render(report: MetricsReport) -> Table:
    table = Table(show_header=True)
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    table.add_column("meaning")
    for metric in report.metrics:
        table.add_row(metric.name, metric.unit, metric.meaning)
    return table
