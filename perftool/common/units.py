"""Formatting times and fractions for people: shared by the messages analysis writes and by every report."""

from __future__ import annotations

import math
from collections.abc import Sequence


def duration(us: float | None, unit: str = "ms") -> str:
    """A duration given in µs, in s, ms or µs as its size asks; a trace whose display unit is ``ns`` (a profiler
    recording to the nanosecond) shows what is under a microsecond in ns. None is ``—``."""
    if us is None or math.isnan(us):
        return "—"
    if unit == "ns" and abs(us) < 1:
        return f"{us * 1e3:,.0f} ns"
    if abs(us) < 1e3:
        return f"{us:,.1f} µs"
    if abs(us) < 1e6:
        return f"{us / 1e3:,.3f} ms"
    return f"{us / 1e6:,.3f} s"


def estimate(us: float, low: float, high: float) -> str:
    """A predicted duration (µs) with its interval, in one unit and no more digits than the interval allows:
    ``≈ 124 ms (118–130 ms)``, ``≈ 123.8 ms (123.5–124.2 ms)``."""
    scale, unit = next(((s, u) for s, u in ((1e6, "s"), (1e3, "ms")) if abs(us) >= s), (1.0, "µs"))
    half = (high - low) / 2 / scale
    decimals = min(max(-math.floor(math.log10(half)), 0), 3) if half > 0 else 3
    return f"≈ {us / scale:,.{decimals}f} {unit} ({low / scale:,.{decimals}f}–{high / scale:,.{decimals}f} {unit})"


def axis_durations(ticks: Sequence[float]) -> list[str]:
    """An axis's ticks (µs) in one unit, the largest tick's, each with the decimals the finest tick needs:
    ``0.0 ms, 2.5 ms, 5.0 ms, 7.5 ms``, never ``0.0 µs`` beside ``5.000 ms``."""
    largest = max((abs(t) for t in ticks), default=0.0)
    scale, unit = next(((s, u) for s, u in ((1e6, "s"), (1e3, "ms")) if largest >= s), (1.0, "µs"))
    shown = [t / scale for t in ticks]
    step = min((abs(b - a) for a, b in zip(shown, shown[1:]) if b != a), default=1.0)
    decimals = next(d for d in range(7) if all(abs(round(v, d) - v) < 1e-6 * step for v in shown) or d == 6)
    return [f"{0.0 if round(v, decimals) == 0 else v:,.{decimals}f} {unit}" for v in shown]


def signed_duration(us: float, unit: str = "ms") -> str:
    """A change of duration, with its sign: ``+0.810 ms``, ``-12.0 µs``; none that rounds to nothing: ``0.0 µs``."""
    shown = duration(us, unit)
    if shown.lstrip("-").startswith(("0.0 ", "0 ")):
        return shown.lstrip("-")
    return ("+" if us >= 0 else "") + shown


def timestamp(us: float, unit: str = "ms") -> str:
    """A point in time given in µs from the trace's start, in the trace's display unit, as Perfetto shows it."""
    return f"{us * 1e3:,.0f} ns" if unit == "ns" else f"{us / 1e3:,.3f} ms"


def percent(fraction: float) -> str:
    if math.isnan(fraction):
        return "—"
    shown = f"{fraction * 100:.1f}%"
    return "0.0%" if shown == "-0.0%" else shown


def number(value: float | None) -> str:
    """A figure in a table: whole numbers without decimals, others to four significant digits, never in scientific
    notation (a value below a millionth, floating-point dust, is 0)."""
    if value is None or math.isnan(value):
        return "—"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if float(value).is_integer() or abs(value) >= 1e3:
        return f"{value:,.0f}"
    decimals = min(6, 3 - math.floor(math.log10(abs(value))))
    shown = f"{value:,.{decimals}f}".rstrip("0").rstrip(".")
    return "0" if shown in ("-0", "") else shown


def figure(value: float | None, unit: str) -> str:
    """A value in its unit for people: µs as a duration, a fraction as a percentage, bytes in MB or GB, a count
    as a number, anything else as a number and its unit (``12.3 steps/s``)."""
    if value is None or math.isnan(value):
        return "—"
    if unit == "us":
        return duration(value)
    if unit == "fraction":
        return percent(value)
    if unit == "bytes":
        return f"{number(value / 1e9)} GB" if abs(value) >= 1e9 else f"{number(value / 1e6)} MB"
    return number(value) if unit == "count" else f"{number(value)} {unit}"


def flop_count(flops: float) -> str:
    """FLOPs for people, with an SI prefix: ``135.0 GFLOP``."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(flops) >= scale:
            return f"{flops / scale:,.1f} {prefix}FLOP"
    return f"{flops:,.0f} FLOP"


def change(delta: float, unit: str) -> str:
    """A difference of two values in their unit, signed: ``+0.810 ms``, ``+2.1 pts`` (of a fraction), ``+3``."""
    if unit == "us":
        return signed_duration(delta)
    if unit == "fraction":
        return "0.0 pts" if round(delta * 100, 1) == 0 else f"{delta * 100:+.1f} pts"
    shown = figure(delta, unit)
    return f"+{shown}" if delta > 0 and number(delta) != "0" else shown


def plural(count: float, noun: str) -> str:
    """``1 rank``, ``8 ranks``, ``2 categories``, ``1.5 idle stretches`` (a count per step may be fractional)."""
    if count == 1:
        return f"1 {noun}"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        many = noun[:-1] + "ies"
    else:
        many = noun + ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")
    return f"{number(count)} {many}"


def listed(names: Sequence[str], limit: int) -> str:
    """The first ``limit`` of ``names``, comma-separated, the rest counted: ``a, b, c and 4 more``, ``... and 1,996
    more``."""
    more = f" and {len(names) - limit:,} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
