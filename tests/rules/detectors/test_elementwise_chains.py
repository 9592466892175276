"""PT018's count of the launches a thread makes between two ops, worked by hand on two threads."""

from __future__ import annotations

import numpy as np

from perftool.rules.detectors.elementwise_chains import _launched_before

# launches: thread 0 at 5 µs; thread 1 at 3 and 7 µs (thread 0's sort before thread 1's and must not be counted)
LAUNCH_TRACK, LAUNCH_TS = np.array([1, 0, 1]), np.array([3.0, 5.0, 7.0])


def test_launches_before_a_time_count_the_thread_s_own_only_and_until_it_count_those_at_it_too():
    when = np.array([2.0, 4.0, 7.0, 9.0])
    before, until = _launched_before(LAUNCH_TRACK, LAUNCH_TS, np.ones(4, np.int64), when, when)
    assert before.tolist() == [0, 1, 1, 2]  # a launch at 7 µs counts as at 7 µs, not before it ...
    assert until.tolist() == [0, 1, 2, 2]  # ... and until 7 µs


def test_thread_0_s_launches_are_its_own():
    before, until = _launched_before(LAUNCH_TRACK, LAUNCH_TS, np.array([0, 0]), np.array([5.0, 6.0]), np.zeros(2))
    assert before.tolist() == [0, 1] and until.tolist() == [0, 0]
