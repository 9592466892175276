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

from perftool.common.names import readable
from perftool.common.units import axis_durations, duration, plural
from perftool.report.escape import html_text as _text  # labels come from the input

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999", "#000000")
WIDTH = 720  # the viewBox width every chart is drawn at; the page scales it
ROOFLINE_POINTS = 300  # ops drawn on a roofline chart, the most time lost first
SMALL = 0.005  # a waterfall part under this share of the largest is drawn with the other small ones
CHAR = 0.6  # a character's width in ems, about, in the sans-serif fonts pages are shown in
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
    """Round values for an axis, the first at or below ``low`` and the last at or above ``high``: a tick is
    always above the data."""
    if high <= low:
        return [min(low, 0.0), max(abs(low), 1.0)]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first, last = math.floor(low / step), math.ceil(high / step)
    return [i * step for i in range(first, last + 1)]


def _fit(text: str, width: float, size: int = 11) -> str:
    """``text`` cut once with "…" to what ``width`` px hold at font ``size`` (the mark's title keeps it whole)."""
    return readable(text, max(int(width / (CHAR * size)), 4))


def _row_label(text: str, left: float, y: float, size: int = 11, bold: bool = False) -> str:
    """A row's name, right-aligned just left of ``left`` and cut to the room there."""
    weight = ' font-weight="bold"' if bold else ""
    return (
        f'<text x="{left - 6}" y="{y:.1f}" font-size="{size}" text-anchor="end"{weight}>'
        f"{_text(_fit(text, left - 8, size))}</text>"
    )


def _width(text: str, size: int = 11) -> float:
    """About how wide ``text`` is drawn at font ``size``, px (for placing labels clear of each other)."""
    return len(text) * CHAR * size


def series(name: str, caption: str, values: Sequence[float], warmup: int, numbers: Sequence[int]) -> str:
    """Step after step: each step's time as a point on a line, numbered as the trace numbers them. The scale is
    the steady steps': the warm-up steps are shaded apart, and one above the scale is drawn at its top as a ▲
    (its figure in its title and in the caption)."""
    height, left, right, top, bottom = 250, 70, WIDTH - 24, 30, 200
    steady = values[warmup:] or values
    ticks = _ticks(0.0, max(steady, default=0.0))
    high = ticks[-1]
    x = _scale(0, max(len(values) - 1, 1), left, right)
    y = _scale(0.0, high, bottom, top)
    parts = [_axis_y(ticks, y, left, right)]
    if warmup:
        edge = (x(warmup - 1) + x(warmup)) / 2 if warmup < len(values) else right
        steady_at = min(edge + 4, WIDTH - 2 - _width("steady"))
        parts.append(
            f'<rect class="warmup" x="{left}" y="{top}" width="{edge - left:.1f}" height="{bottom - top}" '
            f'fill="#999999" fill-opacity="0.25"><title>warm-up: {plural(warmup, "step")}</title></rect>'
            f'<text x="{min(edge, steady_at) - 4:.1f}" y="{top - 14}" font-size="11" text-anchor="end">warm-up</text>'
            + (f'<text x="{steady_at:.1f}" y="{top - 14}" font-size="11">steady</text>' if warmup < len(values) else "")
        )
    shown = [min(value, high) for value in values]
    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(shown))
    parts.append(f'<polyline points="{points}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
    for i, (value, number) in enumerate(zip(values, numbers)):
        kind = "warm-up" if i < warmup else "steady"
        title = f"<title>step {number} ({kind}): {_text(duration(value))}</title>"
        colour = PALETTE[1] if i < warmup else PALETTE[0]
        if value > high:
            parts.append(
                f'<path class="off-scale" d="M{x(i) - 5:.1f},{top + 7} L{x(i) + 5:.1f},{top + 7} L{x(i):.1f},{top - 1} '
                f'Z" fill="{colour}">{title}</path>'
            )
        else:
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="2.5" fill="{colour}">{title}</circle>')
    parts.append(_axis_steps(numbers, x, bottom))
    parts.append(f'<text x="{(left + right) / 2}" y="{height - 8}" font-size="12" text-anchor="middle">step</text>')
    return figure(name, caption, _svg(height, caption, "".join(parts)))


def _axis_y(ticks: Sequence[float], y: Callable[[float], float], left: float, right: float) -> str:
    marks = []
    for tick, text in zip(ticks, axis_durations(ticks)):
        marks.append(
            f'<line x1="{left}" x2="{right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#dddddd"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end">{_text(text)}</text>'
        )
    return "".join(marks)


def _axis_steps(numbers: Sequence[int], x: Callable[[float], float], at: float) -> str:
    """Step numbers under the columns or points at positions 0, 1, …: about ten, each clear of the next."""
    if not numbers:
        return ""
    widest = max(_width(str(n)) for n in (numbers[0], numbers[-1])) + 8
    room = abs(x(1) - x(0)) if len(numbers) > 1 else widest
    every = next(m for m in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 10**9) if m * room >= widest)
    marks = []
    for i in range(0, len(numbers), every):
        fits = x(i) + _width(str(numbers[i])) / 2 <= WIDTH - 2  # else it ends at its tick, inside the chart
        marks.append(
            f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{at}" y2="{at + 4}" stroke="#555555"/>'
            f'<text x="{x(i):.1f}" y="{at + 18}" font-size="11" text-anchor="{"middle" if fits else "end"}">'
            f"{numbers[i]}</text>"
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
            body.append(_row_label(row, left, y + 15))
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
        f'<defs><pattern id="{_text(name)}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#eeeeee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999999" '
        'stroke-width="3"/></pattern></defs>'
    ]
    for i, (item, value, shaded) in enumerate(items):
        y = top + i * row
        fill = f'url(#{_text(name)}-hatch)" class="shaded' if shaded else PALETTE[0]
        shown = "infeasible" if shaded else label(value)
        end = x(value if not shaded else high)
        body.append(
            _row_label(item, left, y + 15, 12)
            + f'<rect x="{left}" y="{y + 3}" width="{max(end - left, 1):.1f}" height="16" '
            f'fill="{fill}"><title>{_text(item)}: {_text(shown)}</title></rect>'
            f'<text x="{end + 4:.1f}" y="{y + 15}" font-size="11">{_text(shown)}</text>'
        )
    return figure(name, caption, _svg(height, caption, "".join(body)))


Grid = Sequence[Sequence[float] | None]  # one row of cells per row label; None: a row with no figures here


def heat_maps(name: str, caption: str, rows: Sequence[str], numbers: Sequence[int], panels: Sequence[tuple[str, Grid]],
              marked: str | None = None) -> str:  # fmt: skip
    """Grids of cells, row by step, one per panel (what the cells measure), each on its own scale from dark (zero)
    to light (its most), drawn beside its title, so a cell's shade is its size, never its rank among close figures;
    every cell's figure in its title. Rows too thin for a label each are named every few; the ``marked`` row always
    is, in bold. The step numbers run under the last grid."""
    left, right, gap = 76, WIDTH - 10, 34
    cell_h = max(3.0, min(16.0, 360 / max(len(rows), 1)))
    columns = max((len(row) for _, grid in panels for row in grid if row is not None), default=1)
    cell_w = (right - left) / max(columns, 1)
    every = max(1, math.ceil(14 / cell_h))  # every row named where rows are 14 px or more, else every n-th
    mark = rows.index(marked) if marked in rows else None
    named = {r for r in range(0, len(rows), every) if mark is None or abs(r - mark) >= every}
    named |= {mark} if mark is not None else set()
    defs = (f'<defs><linearGradient id="{_text(name)}-scale"><stop offset="0" stop-color="{_cividis(0)}"/>'
            f'<stop offset="0.5" stop-color="{_cividis(0.5)}"/><stop offset="1" stop-color="{_cividis(1)}"/>'
            "</linearGradient></defs>")  # fmt: skip
    body, top = [defs], 0.0
    for title, grid in panels:
        values = [v for row in grid if row is not None for v in row]
        ends = _ticks(0.0, max(values, default=0.0))  # from zero: 8.81 and 8.83 ms look alike, as they are
        low, high = ends[0], ends[-1]
        low_text, high_text = axis_durations([low, high]) if values else ("—", "—")
        body.append(_scale_key(name, title, low_text, high_text, left, right, top + 14))
        top += 22
        for r, (row_label, row) in enumerate(zip(rows, grid)):
            y = top + r * cell_h
            if r in named:
                body.append(_row_label(row_label, left, y + min(cell_h, 12) - 2, bold=row_label == marked))
            for c, value in enumerate(row or []):
                body.append(
                    f'<rect x="{left + c * cell_w:.1f}" y="{y:.1f}" width="{cell_w:.2f}" height="{cell_h - 1:.1f}" '
                    f'fill="{_cividis((value - low) / ((high - low) or 1.0))}"><title>{_text(row_label)}, step '
                    f"{numbers[c]}: {_text(duration(value))} {_text(title)}</title></rect>"
                )
            if row is None:
                body.append(
                    f'<rect x="{left}" y="{y:.1f}" width="{right - left}" height="{cell_h - 1:.1f}" fill="#eeeeee">'
                    f"<title>{_text(row_label)}: not measured</title></rect>"
                )
        top += cell_h * len(rows) + gap
    x = _scale(0, max(columns - 1, 1), left + cell_w / 2, left + cell_w / 2 + cell_w * max(columns - 1, 1))
    body.append(_axis_steps(list(numbers[:columns]), x, top - gap + 2))
    body.append(f'<text x="{(left + right) / 2}" y="{top + 4}" font-size="12" text-anchor="middle">step</text>')
    return figure(name, caption, _svg(int(top + 12), caption, "".join(body)))


def _scale_key(name: str, title: str, low: str, high: str, left: float, right: float, y: float) -> str:
    """A panel's title at the left, and at the right its scale: the least figure, the colours, the most."""
    ramp = 60
    ramp_at = right - _width(high) - 6 - ramp
    title_room = ramp_at - 6 - _width(low) - 10 - left
    return (
        f'<text x="{left}" y="{y}" font-size="12" font-weight="bold">{_text(_fit(title, title_room, 12))}</text>'
        f'<text x="{ramp_at - 6:.1f}" y="{y}" font-size="11" text-anchor="end">{_text(low)}</text>'
        f'<rect x="{ramp_at:.1f}" y="{y - 10}" width="{ramp}" height="11" fill="url(#{_text(name)}-scale)"/>'
        f'<text x="{right}" y="{y}" font-size="11" text-anchor="end">{_text(high)}</text>'
    )


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
            _row_label(text, left, y + 15, 12)
            + f'<rect x="{min(x(a), x(b)):.1f}" y="{y + 3}" width="{max(abs(x(b) - x(a)), 1):.1f}" height="16" '
            f'fill="{fill}"><title>{_text(text)}: {_text(figure_text)}</title></rect>'
            f'<text x="{max(x(a), x(b)) + 4:.1f}" y="{y + 15}" font-size="11">{_text(figure_text)}</text>'
        )

    bar(0, "baseline", low, start, PALETTE[7], label(start))
    for i, (part, delta) in enumerate(parts, start=1):
        sign = "+" if delta >= 0 else ""
        bar(i, part, levels[i - 1], levels[i], PALETTE[5] if delta > 0 else PALETTE[2], sign + label(delta))
    bar(len(parts) + 1, "candidate", low, end, PALETTE[0], label(end))
    return figure(name, caption, _svg(height, caption, "".join(body)))


def strips(name: str, caption: str, samples: Sequence[tuple[str, Sequence[float]]]) -> str:
    """Durations side by side: every sample as a tick on its row, and each row's median as a bar."""
    values = [v for _, row in samples for v in row]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.05 or max(abs(high) * 0.05, 1.0)
    ticks = _ticks(max(low - pad, 0.0), high + pad)
    left, top, row = 110, 10, 40
    x = _scale(ticks[0], ticks[-1], left, WIDTH - 30)
    height = top * 2 + row * len(samples) + 20
    body = []
    for i, (side, row_values) in enumerate(samples):
        y = top + i * row
        colour = PALETTE[i % len(PALETTE)]
        body.append(_row_label(side, left, y + 20, 12))
        for value in row_values:
            body.append(
                f'<line x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{y + 6}" y2="{y + 28}" stroke="{colour}" '
                f'stroke-opacity="0.5"><title>{_text(side)}: {_text(duration(value))}</title></line>'
            )
        if row_values:
            median = statistics.median(row_values)
            body.append(
                f'<rect x="{x(median) - 2:.1f}" y="{y + 2}" width="4" height="30" fill="#000000">'
                f"<title>{_text(side)} median: {_text(duration(median))}</title></rect>"
            )
    for tick, text in zip(ticks, axis_durations(ticks)):
        body.append(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{height - 24}" y2="{height - 20}" stroke="#555555"/>'
            f'<text x="{x(tick):.1f}" y="{height - 6}" font-size="11" text-anchor="middle">{_text(text)}</text>'
        )
    return figure(name, caption, _svg(height, caption, "".join(body)))


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def flops_per_s(value: float) -> str:
    """A FLOP/s figure to 3 digits with an SI prefix, as an axis reads it: ``1e14`` → ``100 T``, ``1e5`` → ``100 k``,
    ``7.14e7`` → ``71.4 M``."""
    scale, prefix = next(((s, p) for s, p in _PREFIXES if value >= s), (1.0, ""))
    return f"{value / scale:.3g} {prefix}".rstrip()


def _decimal(value: float) -> str:
    """A power of ten as a person writes it: ``0.01``, ``1,000``, never ``1e-05``."""
    return f"{value:,.{max(-math.floor(math.log10(value)), 0)}f}"


def roofline(name: str, caption: str, points: Sequence[tuple[str, float, float, float, str]],
             peaks: Sequence[tuple[str, float]], bandwidth: float | None) -> str:  # fmt: skip
    """Ops on log-log axes, arithmetic intensity (FLOP/byte) across and achieved TFLOP/s up, each a dot sized by
    its device time and coloured by family (``points``: label, intensity, TFLOP/s, µs, family); under the device's
    roofs (``peaks``: dtype, TFLOP/s) and its memory's slope (``bandwidth``, bytes/s), when known."""
    height, left, right, top, bottom = 320, 70, WIDTH - 110, 20, 270
    shown = [p for p in points if p[1] > 0 and p[2] > 0]
    xs = [p[1] for p in shown] + ([peak * 1e12 / bandwidth for _, peak in peaks] if bandwidth else [])
    ys = [p[2] for p in shown] + [peak for _, peak in peaks]
    x_low, x_high = math.floor(math.log10(min(xs, default=0.1))), math.ceil(math.log10(max(xs, default=10)))
    y_low, y_high = math.floor(math.log10(min(ys, default=0.1))), math.ceil(math.log10(max(ys, default=10)))
    x_high, y_high = max(x_high, x_low + 1), max(y_high, y_low + 1)
    x_at, y_at = _scale(x_low, x_high, left, right), _scale(y_low, y_high, bottom, top)

    def x(value: float) -> float:
        return x_at(math.log10(value))

    def y(value: float) -> float:
        return y_at(math.log10(value))

    parts = []
    for power in range(x_low, x_high + 1):
        parts.append(
            f'<line x1="{x(10**power):.1f}" x2="{x(10**power):.1f}" y1="{top}" y2="{bottom}" stroke="#eeeeee"/>'
            f'<text x="{x(10**power):.1f}" y="{bottom + 20}" font-size="11" text-anchor="middle">'
            f"{_decimal(10.0**power)}</text>"
        )
    for power in range(y_low, y_high + 1):
        parts.append(
            f'<line x1="{left}" x2="{right}" y1="{y(10**power):.1f}" y2="{y(10**power):.1f}" stroke="#eeeeee"/>'
            f'<text x="{left - 6}" y="{y(10**power) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{flops_per_s(10.0 ** (power + 12))}</text>"
        )
    if bandwidth:
        merged: dict[float, list[str]] = {}
        for dtype, peak in peaks:
            merged.setdefault(peak, []).append(dtype)
        labelled_at = -math.inf
        for index, (peak, dtypes) in enumerate(sorted(merged.items(), reverse=True)):
            dtype = "/".join(dtypes)
            ridge = peak * 1e12 / bandwidth
            start = 10.0**x_low
            dash = "" if index == 0 else ' stroke-dasharray="4 3"'
            parts.append(
                f'<polyline class="roof" points="{x(start):.1f},{y(max(start * bandwidth / 1e12, 10.0**y_low)):.1f} '
                f'{x(ridge):.1f},{y(peak):.1f} {right:.1f},{y(peak):.1f}" fill="none" stroke="#333333"{dash}>'
                f"<title>{_text(dtype)} roof: {peak:g} TFLOP/s, ridge at {ridge:,.0f} FLOP/byte</title></polyline>"
            )
            if y(peak) - labelled_at >= 13:  # a roof too close above the last labelled one keeps its title only
                parts.append(f'<text x="{right + 4}" y="{y(peak) + 4:.1f}" font-size="11">{_text(dtype)}</text>')
                labelled_at = y(peak)
    families = sorted({p[4] for p in shown})
    largest = max((p[3] for p in shown), default=1.0) or 1.0
    for label, intensity, tflops, time_us, family in shown:
        colour = PALETTE[families.index(family) % len(PALETTE)]
        radius = 2.5 + 7 * math.sqrt(time_us / largest)
        parts.append(
            f'<circle class="op" cx="{x(intensity):.1f}" cy="{y(tflops):.1f}" r="{radius:.1f}" fill="{colour}" '
            f'fill-opacity="0.7"><title>{_text(label)}: {flops_per_s(tflops * 1e12)}FLOP/s at {intensity:,.3g} '
            f"FLOP/byte, {_text(duration(time_us))}</title></circle>"
        )
    parts.append(
        f'<text x="{(left + right) / 2}" y="{height - 8}" font-size="12" text-anchor="middle">'
        "arithmetic intensity (FLOP/byte)</text>"
        f'<text x="14" y="{(top + bottom) / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {(top + bottom) / 2})">FLOP/s</text>'
    )
    legend = "".join(
        f'<li><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></span>{_text(family)}</li>'
        for i, family in enumerate(families)
    )
    return figure(name, caption, _svg(height, caption, "".join(parts)), f'<ul class="legend">{legend}</ul>')
