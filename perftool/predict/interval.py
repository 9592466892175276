"""How far a measured mean step may fall from a predicted one: the interval a prediction from a fit is printed with.

Two things the fit does not know set it: its own error on steps it did not see (calibrate's held-out check
measures it; a fit that was not checked takes the error that check allows), and the noise of the measurement a
prediction is compared with, the mean of a capture as long as the one fitted, whose steps vary as its steps do.
"""

from __future__ import annotations

import math

Z80 = 1.2816  # a normal variable's 90th percentile: the interval holds 80% of measured means, as p10–p90 would
UNCHECKED_FIT_ERROR = 0.05  # a fit's error on unseen steps where none were held out: what calibrate's check allows


def mean_error(fit_error: float, spread: float, steps: int) -> float:
    """The relative half-width of the interval around a predicted mean step: the fit's error on held-out steps
    (``fit_error``), and how far the mean of ``steps`` steps whose coefficient of variation is ``spread`` strays."""
    return math.hypot(fit_error, Z80 * spread / math.sqrt(max(steps, 1)))


def bounds(mean_us: float, error: float) -> tuple[float, float]:
    """The interval ``mean_us`` ± ``error`` (relative), µs."""
    return mean_us * (1 - error), mean_us * (1 + error)
