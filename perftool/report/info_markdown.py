"""``perftool info --format markdown``: the trace summary as Markdown, for a PR comment or a job summary."""

from __future__ import annotations

from collections.abc import Sequence

from perftool.common.names import as_device, readable
from perftool.report import info_rows, roofline_rows
from perftool.report.escape import markdown
from perftool.report.views import InfoView


def render(view: InfoView) -> str:
    trace, metrics, roof = view.trace, view.metrics, view.roofline
    unit = trace.display_time_unit
    timeline = [(markdown(what), markdown(value)) for what, value in info_rows.timeline_rows(metrics, unit)]
    notes = info_rows.notes(view)
    lines = [
        f"# perftool info {markdown(trace.source)}",
        "",
        markdown(info_rows.headline(trace, metrics) + as_device(metrics.device) + info_rows.job_part(trace)) + ".",
        "",
        *(f"> note: {markdown(note)}" for note in notes),
        *([""] if notes else []),
        "## Timeline (steady state)",
        "",
        *_table(("what", "figures"), timeline),
        f"## {info_rows.top_ops_title(metrics)}",
        "",
    ]
    ops = [(markdown(readable(name)), *figures) for name, *figures in info_rows.top_op_rows(metrics, unit)]
    if ops:
        lines += _table(info_rows.OP_HEADERS, ops, right=(1, 2, 3))
    collectives = [(f"*{markdown(r.cells[0])}*" if r.group else markdown(r.cells[0]), *r.cells[1:])
                   for r in info_rows.collective_rows(metrics, unit)]  # fmt: skip
    if collectives:
        lines += ["## Collectives (steady state)", ""]
        lines += _table(info_rows.COLLECTIVE_HEADERS, collectives, right=(1, 2, 3, 4, 5))
    lines += [f"## {roofline_rows.TITLE}", ""]
    lines += _table(
        ("what", "figures"),
        [(markdown(what), markdown(value)) for what, value in roofline_rows.summary_rows(roof, unit)],
    )
    below = [[markdown(cell) for cell in row] for row in roofline_rows.op_rows(roof, unit)]
    if below:
        lines += ["### Ops furthest below the roofline", ""]
        lines += _table(roofline_rows.OP_HEADERS, below, right=roofline_rows.OP_NUMBERS)
    regions = [[markdown(cell) for cell in row] for row in roofline_rows.region_rows(roof, unit)]
    if regions:
        title, headers = roofline_rows.regions_heading(roof)
        lines += [f"### {title}", ""]
        lines += _table(headers, regions, right=roofline_rows.REGION_NUMBERS)
    measured = [[markdown(cell) for cell in row] for row in roofline_rows.measured_rows(roof, unit)]
    if measured:
        lines += [f"### {roofline_rows.MEASURED_TITLE}", ""]
        lines += _table(roofline_rows.MEASURED_HEADERS, measured, right=roofline_rows.MEASURED_NUMBERS)
    lines += [f"> note: {markdown(note)}" for note in roof.notes] + ([""] if roof.notes else [])
    listed, more = info_rows.listed_tracks(trace, metrics)
    tracks = [[markdown(value) for value in info_rows.track_cells(track, metrics)] for track in listed]
    lines += ["## Tracks", "", *_table(info_rows.TRACK_HEADERS, tracks, right=(2, 4))]
    if more:
        lines += [markdown(more), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """A Markdown table, ``right`` columns aligned right, and the blank line after it (cells already escaped)."""
    rule = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(rule) + " |"]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]
