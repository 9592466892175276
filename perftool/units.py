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
    """A figure in a table: whole numbers without decimals, others to four significant digits."""
    if value is None or math.isnan(value):
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def plural(count: int, noun: str) -> str:
    """``1 rank``, ``8 ranks``, ``2 categories``."""
    if count == 1:
        return f"{count:,} {noun}"
    many = noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"
    return f"{count:,} {many}"
