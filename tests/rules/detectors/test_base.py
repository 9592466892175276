"""What the detectors share: the event that overlaps an idle stretch most, read only where it can be."""

from __future__ import annotations

import numpy as np
import pytest

from perftool.rules.detectors.base import overlapping_most


def _directly(begin: np.ndarray, finish: np.ndarray, start: float, end: float) -> int | None:
    shared = np.minimum(finish, end) - np.maximum(begin, start)
    return int(np.argmax(shared)) if shared.size and shared.max() > 0 else None


@pytest.mark.parametrize("seed", range(20))
def test_the_span_sharing_most_time_is_found_between_two_searches_where_the_spans_are_in_order(seed):
    rng = np.random.default_rng(seed)
    begin = np.sort(rng.integers(0, 200, 40)).astype(float)  # top-level calls: ends in order too, some touching
    finish = np.maximum.accumulate(begin + rng.integers(0, 12, 40))
    for start, end in rng.integers(-10, 220, (30, 2)).astype(float):
        start, end = min(start, end), max(start, end)
        expected = _directly(begin, finish, start, end)
        assert overlapping_most(begin, finish, True, start, end) == expected
        backwards = overlapping_most(begin[::-1], finish[::-1], False, start, end)  # not in order: every span read
        assert backwards == _directly(begin[::-1], finish[::-1], start, end)


def test_ties_go_to_the_first_and_no_overlap_is_none():
    begin, finish = np.array([0.0, 10.0, 20.0]), np.array([10.0, 20.0, 30.0])
    assert overlapping_most(begin, finish, True, 5.0, 15.0) == 0  # 5 µs in each of the first two
    assert overlapping_most(begin, finish, True, 30.0, 40.0) is None  # touching is not sharing
    assert overlapping_most(np.zeros(0), np.zeros(0), True, 0.0, 1.0) is None
