"""The exhaustive strategy: every configuration of the space, in batches through the fast path."""

from __future__ import annotations

import numpy as np

from perftool.tune.evaluator import Evaluator

BLOCK = 65_536  # configurations enumerated at a time (bounds the memory of the index arrays)


def exhaustive(evaluator: Evaluator) -> None:
    """Evaluate the whole space."""
    size = evaluator.space.size
    for first in range(0, size, BLOCK):
        evaluator(evaluator.space.points(np.arange(first, min(first + BLOCK, size))))
