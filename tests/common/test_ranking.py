"""The few largest of many values: the indices a full stable sort gives, found without one."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from perftool.common.ranking import largest

VALUES = st.lists(st.sampled_from([0.0, 1.0, 2.5, 2.5, 7.0, -3.0, np.nan, np.inf]), max_size=40)


@given(VALUES, st.integers(min_value=0, max_value=45))
def test_the_largest_are_those_a_full_stable_sort_puts_first(values, count):
    values = np.array(values, dtype=float)
    assert largest(values, count).tolist() == np.argsort(-values, kind="stable")[:count].tolist()


def test_ties_keep_their_order_and_the_largest_comes_first():
    values = np.array([3.0, 9.0, 3.0, 1.0, 9.0, 3.0])
    assert largest(values, 4).tolist() == [1, 4, 0, 2]  # both 9s, then the first two 3s of three
    assert largest(values, 0).tolist() == []


@given(VALUES, st.integers(min_value=0, max_value=45), st.randoms(use_true_random=False))
def test_with_a_tie_key_equal_values_come_in_its_order(values, count, rng):
    values = np.array(values, dtype=float)
    ties = np.array(rng.sample(range(100), values.size), dtype=float)  # distinct keys, in no particular order
    chosen = largest(values, count, ties=ties)
    assert chosen.tolist() == np.lexsort((ties, -values))[:count].tolist()


def test_ties_across_the_cut_are_settled_by_the_key_not_by_position():
    durations = np.array([5.0, 2.0, 5.0, 5.0])
    starts = np.array([30.0, 0.0, 10.0, 20.0])  # the file lists the latest first
    assert largest(durations, 2, ties=starts).tolist() == [2, 3]  # the two earliest of the three 5s
    assert largest(durations, 2).tolist() == [0, 2]  # without the key: by position
