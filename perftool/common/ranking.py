"""The few largest of many values, without sorting them all."""

from __future__ import annotations

import numpy as np


def largest(values: np.ndarray, count: int, ties: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``count`` largest of ``values`` (floats), largest first, NaN last: what
    ``np.argsort(-values, kind="stable")[:count]`` gives, in time linear in ``values`` (a partition finds the
    ``count``-th largest; only the values at least as large are sorted). Equal values come in their order, or in the
    order of ``ties`` (one key per value, such as start times) where given, so that the choice does not depend on
    where the values happen to lie."""
    negated = -values
    if count <= 0:
        return np.zeros(0, dtype=np.intp)
    if count < values.size:
        cut = np.partition(negated, count - 1)[count - 1]  # NaN sorts last, as in the full sort
        kept = np.flatnonzero(negated <= cut) if not np.isnan(cut) else np.arange(values.size)
    else:
        kept = np.arange(values.size)
    order = np.argsort(negated[kept], kind="stable") if ties is None else np.lexsort((ties[kept], negated[kept]))
    return kept[order][:count]
