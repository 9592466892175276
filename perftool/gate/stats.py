"""The statistics a timing regression must pass: a one-sided Mann–Whitney U test, with numpy only.

The normal approximation with the tie correction is accurate for the sample sizes gate sees
(tens of steps and up); with fewer than :data:`MIN_SAMPLES` steps on a side no rank test can reach a
usual significance level, and the gate holds the steps to a bound instead (:mod:`perftool.gate.checks`).
"""

from __future__ import annotations

import math

import numpy as np

MIN_SAMPLES = 5


def ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = np.argsort(values)  # ties share their mean rank, so the sort need not keep their order
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.size]
    mean_rank = (starts + ends + 1) / 2.0  # ranks start..end-1, 1-based
    result = np.empty(values.size)
    result[order] = np.repeat(mean_rank, ends - starts)
    return result


def p_greater(baseline: np.ndarray, candidate: np.ndarray) -> float:
    """P-value that ``candidate`` is not stochastically greater than ``baseline`` (small: it is greater)."""
    a, b = np.asarray(baseline, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    n, m = a.size, b.size
    pooled = np.concatenate([a, b])
    r = ranks(pooled)
    u = r[n:].sum() - m * (m + 1) / 2.0  # pairs (a_i, b_j) with b_j > a_i, ties counting half
    _, counts = np.unique(pooled, return_counts=True)
    total = n + m
    variance = n * m / 12.0 * ((total + 1) - np.sum(counts**3 - counts) / (total * (total - 1)))
    if variance <= 0:
        return 1.0
    z = (u - n * m / 2.0 - 0.5) / math.sqrt(variance)  # continuity correction
    return 0.5 * math.erfc(z / math.sqrt(2.0))
