"""The budgeted strategy: local search from the config as written, with random restarts.

A climber looks along every knob's line through its point (all of the knob's values, or
:data:`LINE_VALUES` of them spread over a long list, the nearest neighbours first), in one batched
evaluation. It then also tries the *jump* that sets every knob to the best value its own line
showed, and moves to the best configuration it has seen. When no single-knob move helps, it tries
moving two knobs one step each, for knobs that only pay off together (a bigger batch needs more
IO tiles). When a climber is stuck, the next starts from a random point; the search ends when the
budget is spent or :data:`PATIENCE` restarts in a row find nothing better than the best so far.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from perftool.tune.evaluator import Evaluator
from perftool.tune.space import Space

LINE_VALUES = 16  # values looked at along one knob per move, for knobs with long lists
PATIENCE = 2  # restarts in a row that find nothing better before the search stops


def local_search(evaluator: Evaluator, start: np.ndarray, budget: int, seed: int) -> None:
    """Climb from ``start``, then from random points, until ``budget`` configurations have been simulated."""
    rng = np.random.default_rng(seed)
    point, best, fruitless = start, -np.inf, 0
    while evaluator.evaluations < budget and fruitless < PATIENCE:
        _climb(evaluator, point, budget)
        fruitless = fruitless + 1 if evaluator.best_score <= best else 0
        best = max(best, evaluator.best_score)
        point = np.array([rng.integers(size) for size in evaluator.space.sizes.tolist()])


def compare_neighbours(evaluator: Evaluator, point: np.ndarray, budget: int) -> None:
    """Evaluate the values either side of each knob at ``point`` (the answer), so it can be compared with them."""
    steps = [_moved(point, {j: point[j] + d}) for j in range(len(point)) for d in (-1, 1)]
    inside = [step for step in steps if (0 <= step).all() and (step < evaluator.space.sizes).all()]
    if inside:
        _evaluate_within(evaluator, np.array(inside), budget)


def _climb(evaluator: Evaluator, point: np.ndarray, budget: int) -> None:
    """Move uphill from ``point`` until no move helps or the budget is spent."""
    _evaluate_within(evaluator, point[None, :], budget)
    pairs = False  # single-knob moves exhausted: try two-knob steps
    while not evaluator.unseen(point[None, :])[0] and evaluator.evaluations < budget:
        here = evaluator(point[None, :])[0]
        hood = _neighbours(evaluator.space, point, pairs)
        _evaluate_within(evaluator, hood, budget)
        seen = _seen(evaluator, hood)
        jump = _jump(evaluator, point, here, seen)
        _evaluate_within(evaluator, jump, budget)
        seen = np.concatenate([seen, _seen(evaluator, jump)])
        scores = evaluator(seen) if len(seen) else np.zeros(0)
        if scores.size and scores.max() > here:
            point, pairs = seen[int(np.argmax(scores))], False
        elif not pairs:
            pairs = True
        else:
            return


def _seen(evaluator: Evaluator, points: np.ndarray) -> np.ndarray:
    return points[~evaluator.unseen(points)]


def _jump(evaluator: Evaluator, point: np.ndarray, here: float, seen: np.ndarray) -> np.ndarray:
    """``point`` with every knob at the best value its own line showed (empty unless two or more knobs moved)."""
    if not len(seen):
        return np.zeros((0, len(point)), dtype=np.int64)
    scores = evaluator(seen)
    jump = point.copy()
    for j in range(len(point)):
        on_line = np.flatnonzero((np.delete(seen, j, axis=1) == np.delete(point, j)).all(axis=1))
        if on_line.size and scores[on_line].max() > here:
            jump[j] = seen[on_line[np.argmax(scores[on_line])], j]
    return jump[None, :] if np.count_nonzero(jump != point) >= 2 else np.zeros((0, len(point)), dtype=np.int64)


def _unique(space: Space, points: np.ndarray) -> np.ndarray:
    _, first = np.unique(space.flat(points), return_index=True)
    return points[np.sort(first)]


def _evaluate_within(evaluator: Evaluator, points: np.ndarray, budget: int) -> None:
    """Evaluate the unseen ``points`` in order, as many as the budget still allows."""
    unseen = _unique(evaluator.space, points[evaluator.unseen(points)])
    room = budget - evaluator.evaluations
    if room > 0 and len(unseen):
        evaluator(unseen[:room])


def _neighbours(space: Space, point: np.ndarray, pair: bool) -> np.ndarray:
    """Points one move away, nearest first: next values, the rest of each line, two-knob steps."""
    near: list[np.ndarray] = []
    far: list[np.ndarray] = []
    both: list[np.ndarray] = []
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
    return np.array(near + far + both, dtype=np.int64).reshape(-1, len(point))


def _moved(point: np.ndarray, changes: dict[int, int]) -> np.ndarray:
    moved = point.copy()
    for j, index in changes.items():
        moved[j] = index
    return moved
