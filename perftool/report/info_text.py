"""``perftool info``: the trace summary for people, rendered with rich."""

from __future__ import annotations

from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from perftool.analysis.metrics import Metrics
from perftool.common.names import as_device, readable
from perftool.report import info_rows, roofline_rows
from perftool.report.console import NamesAndFigures, add_columns, cut
from perftool.report.escape import shown
from perftool.report.views import InfoView
from perftool.roofline.figures import Roofline
from perftool.trace.model import Role, Trace

_ROLE_STYLE = {Role.DEVICE: "green", Role.HOST: "cyan", Role.INPUT: "cyan", Role.UNKNOWN: "dim"}


def render(view: InfoView) -> Group:
    """Header, tracks, timeline figures, top ops and the roofline, as one rich renderable."""
    trace, metrics, roof = view.trace, view.metrics, view.roofline
    unit = trace.display_time_unit
    header = Text.assemble(
        ("perftool info ", "bold"),
        shown(trace.source, "bold magenta"),
        "\n" + info_rows.headline(trace, metrics),
        shown(as_device(metrics.device)),
        info_rows.job_part(trace),
    )
    for note in info_rows.notes(view):
        header.append("\n")
        header.append(shown(f"note: {note}", "yellow"))
    parts: list[RenderableType] = [header, _tracks(trace, metrics), _timeline(metrics, unit), _top_ops(metrics, unit)]
    if metrics.collectives:
        parts.append(_collectives(metrics, unit))
    parts.append(_roofline(roof, unit))
    return Group(*parts)


def _tracks(trace: Trace, metrics: Metrics) -> Table:
    table = Table(title="Tracks", title_justify="left", expand=False)
    justify: tuple[JustifyMethod, ...] = ("left", "left", "right", "left", "right")
    add_columns(table, list(zip(info_rows.TRACK_HEADERS, justify)))
    listed, more = info_rows.listed_tracks(trace, metrics)
    for track in listed:
        process, thread, ids, role, count = info_rows.track_cells(track, metrics)
        role_shown = Text(role, style=_ROLE_STYLE.get(track.role, ""))
        table.add_row(shown(process), shown(thread), shown(ids), role_shown, count)
    if more:
        table.add_row(more)
    return table


def _timeline(metrics: Metrics, unit: str) -> Table:
    table = Table(title="Timeline (steady state)", title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in info_rows.timeline_rows(metrics, unit):
        table.add_row(what, value)
    return table


def _top_ops(metrics: Metrics, unit: str) -> NamesAndFigures | Text:
    title = info_rows.top_ops_title(metrics)
    if not metrics.top_ops:
        return Text(title, style="dim")
    rows = [(cut(shown(readable(name))), *figures) for name, *figures in info_rows.top_op_rows(metrics, unit)]
    table = Table(title=title, title_justify="left")
    return NamesAndFigures(table, "op", [("count", "right"), ("total", "right"), ("share", "right")], rows)


def _collectives(metrics: Metrics, unit: str) -> Table:
    """Per collective type: calls, time, exposed time, size and bandwidths; then the process groups."""
    table = Table(title="Collectives (steady state)", title_justify="left")
    justify: tuple[JustifyMethod, ...] = ("left", "right", "right", "right", "right", "right")
    add_columns(table, list(zip(info_rows.COLLECTIVE_HEADERS, justify)), overflow="fold")
    for row in info_rows.collective_rows(metrics, unit):
        name, *figures = row.cells
        table.add_row(Text(name, style="dim") if row.group else name, *figures)
    return table


def _roofline(roof: Roofline, unit: str) -> Group:
    """The device's peaks, MFU and the modelled share; the ops furthest below the roofline; what limits them."""
    table = Table(title=roofline_rows.TITLE, title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in roofline_rows.summary_rows(roof, unit):
        table.add_row(what, shown(value))
    parts: list[RenderableType] = [table]
    rows = roofline_rows.op_rows(roof, unit)
    if rows:
        ops = Table(title="Ops furthest below the roofline", title_justify="left")
        columns: list[tuple[str, JustifyMethod]] = [
            (header, "right" if i in roofline_rows.OP_NUMBERS else "left")
            for i, header in enumerate(roofline_rows.OP_HEADERS[2:], 2)
        ]  # the shapes follow the op's name, so a narrow terminal cuts them before it drops a figure
        named = [(cut(shown(f"{name} {shapes}")), *cells) for name, shapes, *cells in rows]
        parts.append(NamesAndFigures(ops, "op (shapes)", columns, named, spare=("bound", "calls", "GB/s")))
    regions = roofline_rows.region_rows(roof, unit)
    if regions:
        title, headers = roofline_rows.regions_heading(roof)
        by_region = Table(title=title, title_justify="left")
        figures: list[tuple[str, JustifyMethod]] = [(header, "right") for header in headers[1:]]
        named_regions = [(cut(shown(name)), *cells) for name, *cells in regions]
        parts.append(NamesAndFigures(by_region, headers[0], figures, named_regions, spare=("calls", "TFLOP/s")))
    measured = roofline_rows.measured_rows(roof, unit)
    if measured:
        pipes = Table(title=roofline_rows.MEASURED_TITLE, title_justify="left")
        cells: list[tuple[str, JustifyMethod]] = [
            (header, "right" if i in roofline_rows.MEASURED_NUMBERS else "left")
            for i, header in enumerate(roofline_rows.MEASURED_HEADERS[1:], 1)
        ]
        named_types = [(cut(shown(name)), *figures) for name, *figures in measured]
        spare = ("core", "kernels", "busiest pipe")
        parts.append(NamesAndFigures(pipes, "kernel type", cells, named_types, spare=spare))
    parts += [shown(f"note: {note}", "yellow") for note in roof.notes]
    return Group(*parts)
