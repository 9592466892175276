"""The search space as index vectors: a configuration is one value position per knob.

Strategies move through positions (``points``, integer arrays ``[n, knobs]``); the emulator gets
the knob values those positions stand for. Positions follow the order the values were given in,
which is also the order of preference between configurations that perform the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from perftool.emulator.config import EmulatorConfig, setting


@dataclass(frozen=True)
class Space:
    """The knobs being tuned and the values each may take."""

    names: tuple[str, ...]
    values: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, space: dict[str, tuple]) -> Space:
        names = tuple(space)
        return cls(names, tuple(np.array(space[name]) for name in names))

    @property
    def sizes(self) -> np.ndarray:
        return np.array([v.size for v in self.values], dtype=np.int64)

    @property
    def size(self) -> int:
        return prod(v.size for v in self.values)

    def grid(self, points: np.ndarray) -> dict[str, np.ndarray]:
        """The knob values of each point, as the emulator's knob arrays."""
        return {name: values[points[:, j]] for j, (name, values) in enumerate(zip(self.names, self.values))}

    def flat(self, points: np.ndarray) -> np.ndarray:
        """One integer per point (its position in the full, row-major enumeration)."""
        return np.ravel_multi_index(tuple(points.T), tuple(self.sizes)) if len(points) else np.zeros(0, np.int64)

    def points(self, flat: np.ndarray) -> np.ndarray:
        """The points of flat indices."""
        return np.stack(np.unravel_index(np.asarray(flat, dtype=np.int64), tuple(self.sizes)), axis=1)

    def knobs(self, point: np.ndarray) -> dict[str, Any]:
        """The knob settings of one point, as plain Python values."""
        return {name: values[i].item() for name, values, i in zip(self.names, self.values, point)}

    def nearest(self, config: EmulatorConfig) -> np.ndarray:
        """The point closest to ``config``'s settings: the same value where listed, else the nearest number, else
        the first."""
        point = np.zeros(len(self.names), dtype=np.int64)
        for j, (name, values) in enumerate(zip(self.names, self.values)):
            current = setting(config, name)
            same = np.flatnonzero(values == current)
            if same.size:
                point[j] = same[0]
            elif values.dtype.kind in "iuf" and not isinstance(current, bool):
                point[j] = int(np.argmin(np.abs(values - current)))
        return point

    def preference(self, points: np.ndarray) -> np.ndarray:
        """How far into each knob's list a point reaches (0 for the first values): lower is preferred."""
        return (points / np.maximum(self.sizes - 1, 1)).sum(axis=1)
