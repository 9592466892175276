"""Charts drawn as inline SVG for the HTML reports: no library, no script, nothing fetched.

Each function returns one ``<figure>`` holding an ``<svg>`` that scales to its container (a ``viewBox`` and
width 100%), with a ``<title>`` on every mark (the browser shows it on hover) and its figures also written
as text, so the chart reads without JavaScript and without colour. Colours are Okabe and Ito's palette,
told apart by people with any common colour-vision deficiency; ordered series never rely on colour alone.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from perftool.report.escape import html_text as _text  # labels come from the input

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999", "#000000")
WIDTH = 720  # the viewBox width every chart is drawn at; the page scales it
SMALL = 0.005  # a waterfall part under this share of the largest is drawn with the other small ones
Label = Callable[[float], str]


def figure(name: str, caption: str, svg: str, legend: str = "") -> str:
    """A chart in its ``<figure>``: ``data-chart`` names it for tests and tools."""
    return (
        f'<figure class="chart" data-chart="{_text(name)}">{svg}{legend}'
        f"<figcaption>{_text(caption)}</figcaption></figure>"
    )


def _svg(height: int, label: str, body: str) -> str:
    return (
        f'<svg viewBox="0 0 {WIDTH} {height}" width="100%" role="img" aria-label="{_text(label)}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{_text(label)}</title>{body}</svg>'
    )


def _scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    span = (high - low) or 1.0
    return lambda value: start + (value - low) / span * (end - start)


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    """Round values between ``low`` and ``high`` for an axis."""
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def series(name: str, caption: str, values: Sequence[float], warmup: int, label: Label) -> str:
    """Step after step: each step's time as a point on a line, the warm-up steps shaded and marked."""
    height, left, right, top, bottom = 240, 70, WIDTH - 10, 20, 200
    low, high = 0.0, max(values) * 1.05 if values else 1.0
    x = _scale(0, max(len(values) - 1, 1), left, right)
    y = _scale(low, high, bottom, top)
    parts = [_axis_y(low, high, y, left, right, label)]
    if warmup:
        edge = (x(warmup - 1) + x(warmup)) / 2
        parts.append(
            f'<rect class="warmup" x="{left}" y="{top}" width="{edge - left:.1f}" height="{bottom - top}" '
            f'fill="#999999" fill-opacity="0.25"><title>warm-up: {warmup} steps</title></rect>'
            f'<text x="{left + 4}" y="{top + 12}" font-size="11">warm-up</text>'
            f'<text x="{edge + 4}" y="{top + 12}" font-size="11">steady</text>'
        )
    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts.append(f'<polyline points="{points}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
    for i, value in enumerate(values):
        kind = "warm-up" if i < warmup else "steady"
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="2.5" fill="{PALETTE[1] if i < warmup else PALETTE[0]}">'
            f"<title>step {i} ({kind}): {_text(label(value))}</title></circle>"
        )
    parts.append(f'<text x="{(left + right) / 2}" y="{height - 12}" font-size="12" text-anchor="middle">step</text>')
    return figure(name, caption, _svg(height, caption, "".join(parts)))


def _axis_y(low: float, high: float, y: Callable[[float], float], left: float, right: float, label: Label) -> str:
    marks = []
    for tick in _ticks(low, high):
        marks.append(
            f'<line x1="{left}" x2="{right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#dddddd"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end">{_text(label(tick))}</text>'
        )
    return "".join(marks)


def stacked(name: str, caption: str, rows: Sequence[tuple[str, Sequence[tuple[str, float]]]], label: Label) -> str:
    """Bars split into their parts, one bar per row on a common scale; a part has the same colour in every row.
    The legend gives each part's figure when there is one row, else its name."""
    names = list(dict.fromkeys(part for _, parts in rows for part, _ in parts))
    colour = {part: PALETTE[i % len(PALETTE)] for i, part in enumerate(names)}
    left = 70 if len(rows) > 1 else 10
    x = _scale(0, max((sum(v for _, v in parts) for _, parts in rows), default=1.0) or 1.0, left, WIDTH - 10)
    height, row_height = 40 if len(rows) == 1 else 20, 48 if len(rows) == 1 else 24
    body = []
    for r, (row, parts) in enumerate(rows):
        y, at, total = 8 + r * row_height, 0.0, sum(v for _, v in parts) or 1.0
        if len(rows) > 1:
            body.append(f'<text x="{left - 6}" y="{y + 15}" font-size="11" text-anchor="end">{_text(row)}</text>')
        for part, value in parts:
            body.append(
                f'<rect x="{x(at):.1f}" y="{y}" width="{max(x(at + value) - x(at), 0):.1f}" height="{height}" '
                f'fill="{colour[part]}" stroke="#ffffff"><title>{_text(row + ": " if row else "")}{_text(part)}: '
                f"{_text(label(value))} ({value / total:.1%})</title></rect>"
            )
            at += value
    if len(rows) == 1:
        parts = rows[0][1]
        total = sum(v for _, v in parts) or 1.0
        items = [f"{_text(part)}: <b>{_text(label(value))}</b> ({value / total:.1%})" for part, value in parts]
    else:
        items = [_text(part) for part in names]
    legend = "".join(
        f'<li><span class="swatch" style="background:{colour[part]}"></span>{item}</li>'
        for part, item in zip([p for p, _ in rows[0][1]] if len(rows) == 1 else names, items)
    )
    return figure(
        name, caption, _svg(16 + row_height * len(rows), caption, "".join(body)), f'<ul class="legend">{legend}</ul>'
    )


def bars(name: str, caption: str, items: Sequence[tuple[str, float, bool]], label: Label) -> str:
    """One bar per item (label, value, shaded); shaded bars (infeasible, say) are hatched and named so."""
    height, left, top, row = 0, 150, 10, 22
    height = top * 2 + row * len(items)
    high = max((value for _, value, _ in items), default=1.0) or 1.0
    x = _scale(0, high, left, WIDTH - 170)
    body = [
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#eeeeee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999999" '
        'stroke-width="3"/></pattern></defs>'
    ]
    for i, (item, value, shaded) in enumerate(items):
        y = top + i * row
        fill = 'url(#hatch)" class="shaded' if shaded else PALETTE[0]
        shown = "infeasible" if shaded else label(value)
        body.append(
            f'<text x="{left - 6}" y="{y + 15}" font-size="12" text-anchor="end">{_text(item)}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{max(x(value if not shaded else high) - left, 1):.1f}" height="16" '
            f'fill="{fill}"><title>{_text(item)}: {_text(shown)}</title></rect>'
            f'<text x="{x(value if not shaded else high) + 4:.1f}" y="{y + 15}" font-size="11">{_text(shown)}</text>'
        )
    return figure(name, caption, _svg(height, caption, "".join(body)))


def heat_map(name: str, caption: str, rows: Sequence[tuple[str, Sequence[float]]], label: Label) -> str:
    """A grid of cells (row by column), darker for larger values, each cell's figure in its title."""
    values = [v for _, row in rows for v in row]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    columns = max((len(row) for _, row in rows), default=1)
    left, top, cell_h = 70, 10, 18
    cell_w = (WIDTH - left - 10) / max(columns, 1)
    body = []
    for r, (row_label, row) in enumerate(rows):
        y = top + r * cell_h
        body.append(f'<text x="{left - 6}" y="{y + 13}" font-size="11" text-anchor="end">{_text(row_label)}</text>')
        for c, value in enumerate(row):
            body.append(
                f'<rect x="{left + c * cell_w:.1f}" y="{y}" width="{cell_w:.2f}" height="{cell_h - 1}" '
                f'fill="{_cividis((value - low) / ((high - low) or 1.0))}"><title>{_text(row_label)}, step {c}: '
                f"{_text(label(value))}</title></rect>"
            )
    height = top * 2 + cell_h * len(rows)
    legend = (
        f'<p class="scale"><span class="swatch" style="background:{_cividis(0)}"></span>{_text(label(low))} '
        f'… <span class="swatch" style="background:{_cividis(1)}"></span>{_text(label(high))}</p>'
    )
    return figure(name, caption, _svg(height, caption, "".join(body)), legend)


def _cividis(fraction: float) -> str:
    """A colour on a dark-blue to yellow scale that reads the same to colour-blind eyes and in grey."""
    stops = ((0.0, (0, 32, 77)), (0.5, (124, 123, 120)), (1.0, (255, 234, 70)))
    fraction = min(max(fraction, 0.0), 1.0)
    (a, ca), (b, cb) = next((s, t) for s, t in zip(stops, stops[1:]) if fraction <= t[0])
    mix = (fraction - a) / (b - a)
    return "#" + "".join(f"{round(x + (y - x) * mix):02x}" for x, y in zip(ca, cb))


def waterfall(name: str, caption: str, start: float, parts: Sequence[tuple[str, float]], label: Label) -> str:
    """From one total to another: a bar per part, each starting where the last ended; the parts add up. Parts
    too small to see (under :data:`SMALL` of the largest) are drawn as one bar, "the rest"."""
    end = start + sum(delta for _, delta in parts)
    largest = max((abs(delta) for _, delta in parts), default=0.0)
    rest = sum(delta for _, delta in parts if abs(delta) < SMALL * largest)
    parts = [(part, delta) for part, delta in parts if abs(delta) >= SMALL * largest]
    if rest:
        parts.append(("the rest", rest))
    levels = [start]
    for _, delta in parts:
        levels.append(levels[-1] + delta)
    low, high = min(0.0, *levels), max(levels) or 1.0
    left, top, row = 210, 10, 22
    height = top * 2 + row * (len(parts) + 2)
    x = _scale(low, high, left, WIDTH - 110)
    body = []

    def bar(i: int, text: str, a: float, b: float, fill: str, figure_text: str) -> None:
        y = top + i * row
        body.append(
            f'<text x="{left - 6}" y="{y + 15}" font-size="12" text-anchor="end">{_text(text)}</text>'
            f'<rect x="{min(x(a), x(b)):.1f}" y="{y + 3}" width="{max(abs(x(b) - x(a)), 1):.1f}" height="16" '
            f'fill="{fill}"><title>{_text(text)}: {_text(figure_text)}</title></rect>'
            f'<text x="{max(x(a), x(b)) + 4:.1f}" y="{y + 15}" font-size="11">{_text(figure_text)}</text>'
        )

    bar(0, "baseline", low, start, PALETTE[7], label(start))
    for i, (part, delta) in enumerate(parts, start=1):
        sign = "+" if delta >= 0 else ""
        bar(i, part, levels[i - 1], levels[i], PALETTE[5] if delta > 0 else PALETTE[2], sign + label(delta))
    bar(len(parts) + 1, "candidate", low, end, PALETTE[0], label(end))
    return figure(name, caption, _svg(height, caption, "".join(body)))


def strips(name: str, caption: str, samples: Sequence[tuple[str, Sequence[float]]], label: Label) -> str:
    """Distributions side by side: every sample as a tick on its row, and each row's median as a bar."""
    values = [v for _, row in samples for v in row]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.05 or 1.0
    left, top, row = 110, 10, 40
    x = _scale(low - pad, high + pad, left, WIDTH - 20)
    height = top * 2 + row * len(samples) + 20
    body = []
    for i, (side, row_values) in enumerate(samples):
        y = top + i * row
        colour = PALETTE[i % len(PALETTE)]
        body.append(f'<text x="{left - 6}" y="{y + 20}" font-size="12" text-anchor="end">{_text(side)}</text>')
        for value in row_values:
            body.append(
                f'<line x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{y + 6}" y2="{y + 28}" stroke="{colour}" '
                f'stroke-opacity="0.5"><title>{_text(side)}: {_text(label(value))}</title></line>'
            )
        if row_values:
            median = statistics.median(row_values)
            body.append(
                f'<rect x="{x(median) - 2:.1f}" y="{y + 2}" width="4" height="30" fill="#000000">'
                f"<title>{_text(side)} median: {_text(label(median))}</title></rect>"
            )
    for tick in _ticks(low - pad, high + pad):
        body.append(
            f'<text x="{x(tick):.1f}" y="{height - 6}" font-size="11" text-anchor="middle">{_text(label(tick))}</text>'
        )
    return figure(name, caption, _svg(height, caption, "".join(body)))
