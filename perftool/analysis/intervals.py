"""Interval algebra over numpy arrays: unions, clipping, overlap and gaps."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from perftool.trace.model import Trace

Intervals = tuple[np.ndarray, np.ndarray]  # (starts, ends), float64 µs


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Merge possibly overlapping intervals into sorted, disjoint ones."""
    if starts.size == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    opens = np.r_[True, starts[1:] > ends[:-1]]
    first = np.flatnonzero(opens)
    last = np.r_[first[1:] - 1, starts.size - 1]
    return starts[first], ends[last]


def busy(trace: Trace, mask: np.ndarray, lo: float, hi: float) -> Intervals:
    """The union of the spans selected by ``mask`` that overlap [lo, hi], clipped to it."""
    rows = np.flatnonzero(mask & trace.spans_in(lo, hi))
    return clip(union(trace.ts[rows], trace.end[rows]), lo, hi)


def clip(intervals: Intervals, lo: float, hi: float) -> Intervals:
    """Restrict intervals to the window [lo, hi], dropping the empty ones."""
    starts, ends = np.maximum(intervals[0], lo), np.minimum(intervals[1], hi)
    keep = ends > starts
    return starts[keep], ends[keep]


def total(intervals: Intervals) -> float:
    return float(np.sum(intervals[1] - intervals[0]))


def overlap(a: Intervals, b: Intervals) -> float:
    """Time covered by both sets of disjoint intervals: |A| + |B| - |A ∪ B|."""
    both = union(np.r_[a[0], b[0]], np.r_[a[1], b[1]])
    shared = total(a) + total(b) - total(both)
    return max(round(shared, 6), 0.0)  # the sums differ by float rounding when nothing is shared


def gaps(intervals: Intervals, lo: float, hi: float) -> Intervals:
    """The idle stretches of the window [lo, hi] not covered by the (disjoint, sorted) intervals."""
    starts, ends = clip(intervals, lo, hi)
    gap_starts, gap_ends = np.r_[lo, ends], np.r_[starts, hi]
    keep = gap_ends > gap_starts
    return gap_starts[keep], gap_ends[keep]


def intersect(a: Intervals, b: Intervals, lo: float, hi: float) -> Intervals:
    """Time covered by both sets of disjoint intervals, within [lo, hi]: the gaps of the gaps."""
    if a[0].size == 0 or b[0].size == 0:
        return np.empty(0), np.empty(0)
    a, b = _touching(a, b), _touching(b, a)
    not_a, not_b = gaps(a, lo, hi), gaps(b, lo, hi)
    return gaps(union(np.r_[not_a[0], not_b[0]], np.r_[not_a[1], not_b[1]]), lo, hi)


def subtract(a: Intervals, b: Intervals, lo: float, hi: float) -> Intervals:
    """The parts of ``a`` (disjoint, sorted) within [lo, hi] that ``b`` does not cover."""
    if b[0].size == 0:
        return clip(a, lo, hi)
    return intersect(a, gaps(_touching(b, a), lo, hi), lo, hi)


def _touching(a: Intervals, b: Intervals) -> Intervals:
    """The intervals of ``a`` that overlap some interval of ``b``: the rest cannot change an intersection with
    ``b``, nor ``b`` less ``a``. Worth it only when ``a`` is much the larger set."""
    if a[0].size <= 4 * b[0].size:
        return a
    keep = touched(a, b)
    return a[0][keep], a[1][keep]


def touched(a: Intervals, b: Intervals) -> np.ndarray:
    """Per interval of ``a`` (disjoint, sorted): whether an interval of ``b`` (disjoint, sorted) overlaps it.

    Each interval of ``b`` overlaps a run of consecutive intervals of ``a``, found with two binary
    searches; the runs are marked with a running count, so the cost is linear in ``a``.
    """
    first = np.searchsorted(a[1], b[0], side="right")  # the first of a ending after b starts
    last = np.searchsorted(a[0], b[1], side="left")  # the a intervals starting before b ends
    size = a[0].size + 1
    covering = np.cumsum(np.bincount(first, minlength=size) - np.bincount(last, minlength=size))
    return covering[:-1] > 0


def overlaps_any(starts: np.ndarray, ends: np.ndarray, other_starts: np.ndarray, other_ends: np.ndarray) -> np.ndarray:
    """For each interval, whether any of the others overlaps it."""
    if other_starts.size == 0:
        return np.zeros(starts.size, dtype=bool)
    order = np.argsort(other_starts)
    sorted_starts, running_end = other_starts[order], np.maximum.accumulate(other_ends[order])
    before_end = np.searchsorted(sorted_starts, ends, side="left")  # others starting before each end
    latest_end = np.where(before_end > 0, running_end[np.maximum(before_end - 1, 0)], -np.inf)
    return latest_end > starts
