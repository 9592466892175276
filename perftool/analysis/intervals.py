"""Interval algebra over numpy arrays: unions, clipping, overlap and gaps."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perftool.common.arrays import in_order

if TYPE_CHECKING:
    from perftool.trace.model import Trace

Intervals = tuple[np.ndarray, np.ndarray]  # (starts, ends), float64 µs
CLOCK_RESOLUTION_US = 1e-3  # profilers write times in µs to three decimals


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Merge possibly overlapping intervals into sorted, disjoint ones."""
    order = np.argsort(starts, kind="stable")
    return _union_by_start(starts[order], ends[order])


def _union_by_start(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """:func:`union` of intervals sorted by start; ``ends`` is the caller's to overwrite. Two no more than
    :func:`resolution` apart are one: no time passes between them that a clock can tell."""
    if starts.size == 0:
        return np.empty(0), np.empty(0)
    np.maximum.accumulate(ends, out=ends)
    opens = np.r_[True, starts[1:] - ends[:-1] > resolution(starts[0], ends[-1])]
    first = np.flatnonzero(opens)
    last = np.r_[first[1:] - 1, starts.size - 1]
    return starts[first], ends[last]


def resolution(first: float, last: float) -> float:
    """The longest gap between times from ``first`` to ``last`` (µs) that is no gap: the nanosecond profilers write
    times to (ROCm's write back-to-back kernels 1 ns apart), and two units in the last place of the larger time for
    the rounding of a start plus a length (about 2 ns at 10^12 µs, none at a clock started with the capture)."""
    largest = max(abs(first), abs(last))
    return CLOCK_RESOLUTION_US + (2.0 * float(np.spacing(largest)) if math.isfinite(largest) else 0.0)


def busy(trace: Trace, mask: np.ndarray, lo: float, hi: float) -> Intervals:
    """The union of the spans selected by ``mask`` that overlap [lo, hi], clipped to it. The rows are put in order
    of start before their times are read, so a pass holds three arrays of the spans' length at most (the host's
    spans are half a trace's events)."""
    rows, starts = in_order(np.flatnonzero(mask & trace.spans_in(lo, hi)), trace.ts)
    ends = trace.end[rows]
    del rows
    return clip(_union_by_start(starts, ends), lo, hi)


def clip(intervals: Intervals, lo: float, hi: float) -> Intervals:
    """Restrict intervals to the window [lo, hi], dropping the empty ones."""
    starts, ends = np.maximum(intervals[0], lo), np.minimum(intervals[1], hi)
    keep = ends > starts
    if keep.all():  # most often, intervals already inside the window: np.maximum and np.minimum made new arrays
        return starts, ends
    return starts[keep], ends[keep]


def totals_in(intervals: Intervals, los: np.ndarray, his: np.ndarray) -> np.ndarray:
    """Per window [lo, hi], the time the (disjoint, sorted) intervals cover in it. Each window reads only the
    intervals that reach it (two binary searches), all windows at once: an array of (window, interval) pairs as
    long as the intervals plus the windows where windows do not overlap (a trace's steps), each pair's clipped
    length summed per window in the intervals' order."""
    starts, ends = intervals
    first = np.searchsorted(ends, los, side="right")  # the first interval ending after each window opens
    last = np.searchsorted(starts, his, side="left")  # the intervals starting before each window closes
    counts = np.maximum(last - first, 0)
    window = np.repeat(np.arange(counts.size), counts)
    reaching = np.arange(window.size) - np.repeat(np.cumsum(counts) - counts, counts) + first[window]
    covered = np.minimum(ends[reaching], his[window]) - np.maximum(starts[reaching], los[window])
    return np.bincount(window, weights=np.maximum(covered, 0.0), minlength=counts.size)


def total(intervals: Intervals) -> float:
    return float(np.sum(intervals[1] - intervals[0]))


def overlap(a: Intervals, b: Intervals) -> float:
    """Time covered by both sets of disjoint, sorted intervals: for each interval of the smaller set, the time the
    larger covers up to its end less that up to its start (two binary searches each), where a union of the two
    would sort them all again."""
    if a[0].size > b[0].size:
        a, b = b, a
    if a[0].size == 0:
        return 0.0
    shared = float(np.sum(_covered_until(b, a[1]) - _covered_until(b, a[0])))
    return max(round(shared, 6), 0.0)  # the sums differ by float rounding when nothing is shared


def _covered_until(intervals: Intervals, times: np.ndarray) -> np.ndarray:
    """Per time: how long the (disjoint, sorted) intervals cover before it."""
    starts, ends = intervals
    begun = np.searchsorted(starts, times, side="right")  # intervals starting at or before each time
    lengths = np.r_[0.0, np.cumsum(ends - starts)]  # covered by the first k intervals, whole
    still_open = np.maximum(ends[np.maximum(begun - 1, 0)] - times, 0.0)  # what the last begun lies past the time
    return lengths[begun] - np.where(begun > 0, still_open, 0.0)


def gaps(intervals: Intervals, lo: float, hi: float) -> Intervals:
    """The idle stretches of the window [lo, hi] not covered by the (disjoint, sorted) intervals, longer than
    :func:`resolution` (at the window's edges too)."""
    starts, ends = clip(intervals, lo, hi)
    gap_starts, gap_ends = np.r_[lo, ends], np.r_[starts, hi]
    keep = gap_ends - gap_starts > resolution(lo, hi)
    return gap_starts[keep], gap_ends[keep]


def intersect(a: Intervals, b: Intervals, lo: float, hi: float) -> Intervals:
    """Time covered by both sets of disjoint, sorted intervals, within [lo, hi].

    Each interval of ``a`` overlaps a run of consecutive intervals of ``b``, found with two binary searches;
    the overlapping pairs, in order, are the pieces. The cost is linear in the inputs and the pieces."""
    a, b = clip(a, lo, hi), clip(b, lo, hi)
    if a[0].size == 0 or b[0].size == 0:
        return np.empty(0), np.empty(0)
    first = np.searchsorted(b[1], a[0], side="right")  # the first of b ending after each a starts
    last = np.searchsorted(b[0], a[1], side="left")  # the b intervals starting before each a ends
    counts = np.maximum(last - first, 0)
    of_a = np.repeat(np.arange(a[0].size), counts)
    of_b = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - first, counts)
    starts, ends = np.maximum(a[0][of_a], b[0][of_b]), np.minimum(a[1][of_a], b[1][of_b])
    keep = ends > starts
    return starts[keep], ends[keep]


def subtract(a: Intervals, b: Intervals, lo: float, hi: float) -> Intervals:
    """The parts of ``a`` (disjoint, sorted) within [lo, hi] that ``b`` (disjoint, sorted) does not cover."""
    if b[0].size == 0:
        return clip(a, lo, hi)
    return intersect(a, gaps(b, lo, hi), lo, hi)


def split(a: Intervals, b: Intervals, lo: float, hi: float) -> tuple[Intervals, Intervals]:
    """``a`` (disjoint, sorted) within [lo, hi] in two: the parts ``b`` (disjoint, sorted) covers, and the rest.
    Only the intervals of ``a`` that ``b`` overlaps are cut; the others pass to the rest as they are."""
    a = clip(a, lo, hi)
    if b[0].size == 0 or a[0].size == 0:
        return (np.empty(0), np.empty(0)), a
    hit = touched(a, b)
    cut = a[0][hit], a[1][hit]
    inside, outside = intersect(cut, b, lo, hi), subtract(cut, b, lo, hi)
    starts, ends = np.r_[a[0][~hit], outside[0]], np.r_[a[1][~hit], outside[1]]
    order = np.argsort(starts, kind="stable")  # two sorted runs: merged in linear time
    return inside, (starts[order], ends[order])


def touched(a: Intervals, b: Intervals) -> np.ndarray:
    """Per interval of ``a`` (disjoint, sorted): whether an interval of ``b`` (disjoint, sorted) overlaps it.

    Of the intervals of ``b`` starting before an interval of ``a`` ends, only the last can reach into it (the
    earlier ones end before that one starts): one binary search per interval of ``a``.
    """
    if b[0].size == 0:
        return np.zeros(a[0].size, dtype=bool)
    last = np.searchsorted(b[0], a[1], side="left") - 1
    return (last >= 0) & (b[1][np.maximum(last, 0)] > a[0])


def overlaps_any(starts: np.ndarray, ends: np.ndarray, other_starts: np.ndarray, other_ends: np.ndarray) -> np.ndarray:
    """For each interval, whether any of the others overlaps it."""
    if other_starts.size == 0:
        return np.zeros(starts.size, dtype=bool)
    order = np.argsort(other_starts, kind="stable")  # mostly in order already: timsort runs through them
    sorted_starts, running_end = other_starts[order], np.maximum.accumulate(other_ends[order])
    before_end = np.searchsorted(sorted_starts, ends, side="left")  # others starting before each end
    latest_end = np.where(before_end > 0, running_end[np.maximum(before_end - 1, 0)], -np.inf)
    return latest_end > starts
