"""The few largest of many values, without sorting them all."""

from __future__ import annotations

import numpy as np


def largest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` largest of ``values`` (floats), largest first, equal values in their order, NaN
    last: what ``np.argsort(-values, kind="stable")[:count]`` gives, in time linear in ``values`` (a partition finds
    the ``count``-th largest; only the values at least as large are sorted)."""
    negated = -values
    if count >= values.size:
        return np.argsort(negated, kind="stable")
    if count <= 0:
        return np.zeros(0, dtype=np.intp)
    cut = np.partition(negated, count - 1)[count - 1]  # NaN sorts last, as in the full sort
    if np.isnan(cut):  # fewer numbers than asked for: NaN among the chosen, in their order
        return np.argsort(negated, kind="stable")[:count]
    kept = np.flatnonzero(negated <= cut)
    return kept[np.argsort(negated[kept], kind="stable")][:count]
