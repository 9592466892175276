"""PT018's count of the launches a thread makes between two ops, worked by hand on two threads."""

from __future__ import annotations

import numpy as np
import pytest

from perftool.rules.detectors.elementwise_chains import _launched_before

# launches: thread 0 at 5 µs; thread 1 at 3 and 7 µs (thread 0's sort before thread 1's and must not be counted)
LAUNCH_TRACK, LAUNCH_TS = np.array([1, 0, 1]), np.array([3.0, 5.0, 7.0])


@pytest.mark.parametrize(
    ("at_or_before", "counted"),
    [(False, [0, 1, 1, 2]), (True, [0, 1, 2, 2])],  # a launch at 7 µs counts as at 7 µs, not before it
)
def test_launches_before_a_time_count_the_thread_s_own_only(at_or_before, counted):
    when = np.array([2.0, 4.0, 7.0, 9.0])
    found = _launched_before(LAUNCH_TRACK, LAUNCH_TS, np.ones(4, np.int64), when, at_or_before)
    assert found.tolist() == counted


def test_thread_0_s_launches_are_its_own():
    found = _launched_before(LAUNCH_TRACK, LAUNCH_TS, np.array([0, 0]), np.array([5.0, 6.0]), at_or_before=False)
    assert found.tolist() == [0, 1]
