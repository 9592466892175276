"""``perftool info --format html``: the trace summary as one self-contained page, its figures the json
format's (embedded): the key figures, the steady steps one by one, the timeline, the top ops, the
collectives and the tracks."""

from __future__ import annotations

from perftool.analysis.family import job_said
from perftool.analysis.metrics import Metrics
from perftool.common.names import readable
from perftool.common.units import duration, plural
from perftool.report import info_json, info_rows, roofline_rows, svg
from perftool.report.html_page import Cell, facts, page, paragraph, section, table
from perftool.report.views import InfoView
from perftool.roofline.figures import Roofline


def render(view: InfoView) -> str:
    trace, metrics, roof = view.trace, view.metrics, view.roofline
    unit = trace.display_time_unit
    m = metrics.values
    figures = facts([
        ("device", metrics.device),
        ("job", job_said(trace) or "—"),
        ("dialect", trace.dialect),
        ("events", f"{len(trace):,}"),
        ("tracks", f"{len(trace.tracks):,}"),
        ("span", duration(m["trace.span_us"], unit)),
        ("steady steps", f"{m['steps.steady']:,.0f} ({m['steps.warmup']:,.0f} warm-up before)"),
        ("step time (median)", duration(m["step_time_us.median"], unit) if m["steps.count"] else "—"),
    ])  # fmt: skip
    summary = [figures, *(paragraph(note, "warn") for note in info_rows.notes(view))]
    if metrics.step_times_us:
        caption = f"Steady step time, step by step ({plural(len(metrics.step_times_us), 'step')})"
        summary.append(svg.series("steps", caption, metrics.step_times_us, 0, metrics.step_numbers))
    timeline = table("timeline", ["what", "figures"], info_rows.timeline_rows(metrics, unit))
    body = [section("Trace", *summary), section("Timeline (steady state)", timeline), _top_ops(metrics, unit)]
    collectives = info_rows.collective_rows(metrics, unit)
    if collectives:
        rows: list[list[Cell]] = [[(r.cells[0], "info") if r.group else r.cells[0], *r.cells[1:]] for r in collectives]
        listed = table("collectives", info_rows.COLLECTIVE_HEADERS, rows, (1, 2, 3, 4, 5), (0,))
        body.append(section("Collectives (steady state)", listed))
    body.append(_roofline(roof, unit))
    tracks, more = info_rows.listed_tracks(trace, metrics)
    track_rows = [info_rows.track_cells(track, metrics) for track in tracks]
    listed_tracks = table("tracks", info_rows.TRACK_HEADERS, track_rows, (2, 4), (0, 1))
    body.append(section("Tracks", listed_tracks, *([paragraph(more, "info")] if more else [])))
    return page(f"perftool info: {trace.dialect} trace", trace.source, body, info_json.render(view))


def _top_ops(metrics: Metrics, unit: str) -> str:
    title = info_rows.top_ops_title(metrics)
    ops = info_rows.top_op_rows(metrics, unit)
    if not ops:
        return section(title)
    rows = [[readable(name), *figures] for name, *figures in ops]
    return section(title, table("top-ops", info_rows.OP_HEADERS, rows, (1, 2, 3), (0,)))


def _roofline(roof: Roofline, unit: str) -> str:
    """The device's peaks and MFU, the roofline chart of the ops, the ops furthest below it, what limits them."""
    parts = [table("roofline", ["what", "figures"], roofline_rows.summary_rows(roof, unit))]
    parts += [paragraph(note, "warn") for note in roof.notes]
    below = roofline_rows.op_rows(roof, unit)
    if below:
        points = [
            (f"{op.name} {op.shapes} {op.dtype}", op.intensity, op.achieved_tflops or 0.0, op.device_us, op.family)
            for op in roof.ops[: svg.ROOFLINE_POINTS]
        ]
        peaks = sorted(roof.spec.peak_tflops.items()) if roof.spec else []
        bandwidth = roof.spec.memory_bandwidth if roof.spec else None
        caption = f"Ops against the roofline of {roof.spec.model if roof.spec else roof.device}"
        parts.append(svg.roofline("roofline", caption, points, peaks, bandwidth))
        parts.append(table("roofline-ops", roofline_rows.OP_HEADERS, below, roofline_rows.OP_NUMBERS, (0, 1)))
    regions = roofline_rows.region_rows(roof, unit)
    if regions:
        title, headers = roofline_rows.regions_heading(roof)
        parts.append(paragraph(title))
        parts.append(table("roofline-regions", headers, regions, roofline_rows.REGION_NUMBERS, (0,)))
    measured = roofline_rows.measured_rows(roof, unit)
    if measured:
        parts.append(paragraph(roofline_rows.MEASURED_TITLE))
        parts.append(
            table("roofline-pipes", roofline_rows.MEASURED_HEADERS, measured, roofline_rows.MEASURED_NUMBERS, (0,))
        )
    return section(roofline_rows.TITLE, *parts)
