"""Formatting times and fractions for people: shared by the messages analysis writes and by every report."""

from __future__ import annotations

import math


def duration(us: float, unit: str = "ms") -> str:
    """A duration given in µs, shown in the trace's display unit (``ms`` or ``ns``; µs below 1 ms)."""
    if math.isnan(us):
        return "—"
    if unit == "ns":
        return f"{us * 1e3:,.0f} ns"
    if abs(us) < 1e3:
        return f"{us:,.1f} µs"
    if abs(us) < 1e6:
        return f"{us / 1e3:,.3f} ms"
    return f"{us / 1e6:,.3f} s"


def timestamp(us: float, unit: str = "ms") -> str:
    """A point in time given in µs from the trace's start, in the trace's display unit, as Perfetto shows it."""
    return f"{us * 1e3:,.0f} ns" if unit == "ns" else f"{us / 1e3:,.3f} ms"


def percent(fraction: float) -> str:
    return "—" if math.isnan(fraction) else f"{fraction * 100:.1f}%"


def number(value: float | None) -> str:
    """A figure in a table: whole numbers without decimals, others to four significant digits."""
    if value is None or math.isnan(value):
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def plural(count: int, noun: str) -> str:
    """``1 rank``, ``8 ranks``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
