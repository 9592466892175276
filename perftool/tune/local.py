"""The budgeted strategy: local search from the config as written, with random restarts.

Each climber looks along every knob's line through its point (all of the knob's values, or
:data:`LINE_VALUES` of them spread over a long list, the nearest neighbours first) and moves to
the best configuration it sees. When no single-knob move helps, it tries moving two knobs one
step each, for knobs that only pay off together (a bigger batch needs more IO tiles). Climbers
move side by side, so each round of moves is one batched evaluation. When every climber is stuck,
new ones start from random points; the search ends when the budget is spent, or when a round of
restarts finds nothing better than the best so far.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from perftool.tune.evaluator import Evaluator
from perftool.tune.space import Space

LINE_VALUES = 16  # values looked at along one knob per move, for knobs with long lists
CLIMBERS = 3  # the config as written and random points
RESTARTS = 2  # climbers started from random points in each later round


def local_search(evaluator: Evaluator, start: np.ndarray, budget: int, seed: int) -> None:
    """Climb from ``start`` and random points until ``budget`` configurations have been simulated."""
    rng = np.random.default_rng(seed)
    space = evaluator.space
    climbers = np.vstack([start[None, :], _random_points(rng, space, CLIMBERS - 1)])
    best = -np.inf
    while evaluator.evaluations < budget:
        _climb(evaluator, climbers, budget)
        if evaluator.best_score <= best:
            break
        best = evaluator.best_score
        climbers = _random_points(rng, space, RESTARTS)


def _random_points(rng: np.random.Generator, space: Space, count: int) -> np.ndarray:
    return np.stack([rng.integers(0, size, count) for size in space.sizes], axis=1)


def _climb(evaluator: Evaluator, climbers: np.ndarray, budget: int) -> None:
    """Move every climber uphill until none can move or the budget is spent."""
    current = _unique(evaluator.space, climbers)
    _evaluate_within(evaluator, current, budget)
    current = current[~evaluator.unseen(current)]
    pairs = np.zeros(len(current), dtype=bool)  # climbers whose single-knob moves are exhausted
    while len(current) and evaluator.evaluations < budget:
        hoods = [_neighbours(evaluator.space, point, pair) for point, pair in zip(current, pairs)]
        tiers = [np.concatenate([hood[tier] for hood in hoods]) for tier in range(3)]
        _evaluate_within(evaluator, np.concatenate(tiers), budget)
        following: dict[int, tuple[np.ndarray, bool]] = {}
        for point, pair, hood in zip(current, pairs, hoods):
            seen = np.concatenate(hood)
            seen = seen[~evaluator.unseen(seen)]
            scores = evaluator(seen) if len(seen) else np.zeros(0)
            if scores.size and scores.max() > evaluator(point[None, :])[0]:
                step = (seen[int(np.argmax(scores))], False)
            elif not pair:
                step = (point, True)
            else:
                continue
            following.setdefault(int(evaluator.space.flat(step[0][None, :])[0]), step)
        current = np.array([point for point, _ in following.values()]).reshape(-1, current.shape[1])
        pairs = np.array([pair for _, pair in following.values()], dtype=bool)


def _unique(space: Space, points: np.ndarray) -> np.ndarray:
    _, first = np.unique(space.flat(points), return_index=True)
    return points[np.sort(first)]


def _evaluate_within(evaluator: Evaluator, points: np.ndarray, budget: int) -> None:
    """Evaluate the unseen ``points`` in order, as many as the budget still allows."""
    unseen = _unique(evaluator.space, points[evaluator.unseen(points)])
    room = budget - evaluator.evaluations
    if room > 0 and len(unseen):
        evaluator(unseen[:room])


def _neighbours(space: Space, point: np.ndarray, pair: bool) -> list[np.ndarray]:
    """Points one move away, in three tiers: next values, the rest of each line, two-knob steps."""
    near, far, both = [], [], []
    for j, size in enumerate(space.sizes.tolist()):
        at = int(point[j])
        line = range(size) if size <= LINE_VALUES else np.unique(np.linspace(0, size - 1, LINE_VALUES).round())
        for index in sorted({*map(int, line), at - 2, at + 2} - {at}, key=lambda i: abs(i - at)):
            if 0 <= index < size:
                (near if abs(index - at) == 1 else far).append(_moved(point, {j: index}))
    if pair:
        for j, k in combinations(range(len(point)), 2):
            for dj in (-1, 1):
                for dk in (-1, 1):
                    if 0 <= point[j] + dj < space.sizes[j] and 0 <= point[k] + dk < space.sizes[k]:
                        both.append(_moved(point, {j: point[j] + dj, k: point[k] + dk}))
    width = len(point)
    return [np.array(tier, dtype=np.int64).reshape(-1, width) for tier in (near, far, both)]


def _moved(point: np.ndarray, changes: dict[int, int]) -> np.ndarray:
    moved = point.copy()
    for j, index in changes.items():
        moved[j] = index
    return moved
