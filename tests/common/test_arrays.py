"""The distinct values of an array by one sort: np.unique's answer, whatever the dtype, shape or size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perftool.common.arrays import distinct, in_order, least_per_group

INTEGERS = st.lists(st.integers(min_value=-(2**40), max_value=2**40), max_size=60)


@given(INTEGERS, st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.intp]))
def test_the_distinct_values_are_np_unique_s_in_its_dtype(values, dtype):
    array = np.array(values, dtype=np.int64).astype(dtype)
    found = distinct(array)
    assert found.dtype == array.dtype
    assert found.tolist() == np.unique(array).tolist()


@pytest.mark.parametrize(
    "array",
    [
        np.zeros(0, np.int32),
        np.array([7], np.int64),
        np.array([[3, 1], [3, 2]], np.int32),  # flattened, as np.unique flattens
        np.array([True, False, True]),
        np.array([2.0, np.nan, 1.0, np.nan]),  # one NaN kept, as np.unique keeps it
    ],
    ids=["empty", "one", "2-d", "bool", "floats"],
)
def test_edge_cases_are_np_unique_s(array):
    np.testing.assert_array_equal(distinct(array), np.unique(array))


def test_a_trace_s_codes_are_sorted_not_hashed(monkeypatch):
    """np.unique asked for the values alone takes a hash table, slower on a trace's codes: never called for them."""
    monkeypatch.setattr(np, "unique", lambda *args, **kwargs: pytest.fail("np.unique called"))
    assert distinct(np.array([5, 1, 5, 3], np.int32)).tolist() == [1, 3, 5]


@given(st.lists(st.tuples(st.integers(0, 7), st.floats(-1e6, 1e6)), max_size=40))
def test_the_least_per_group_is_what_np_minimum_at_leaves(pairs):
    groups = np.array([g for g, _ in pairs], np.intp)
    values = np.array([v for _, v in pairs], float)
    expected = np.full(8, np.inf)
    np.minimum.at(expected, groups, values)
    np.testing.assert_array_equal(least_per_group(groups, values, 8), expected)  # inf where a group has none


@given(st.lists(st.integers(0, 5), max_size=30), st.booleans())
def test_rows_in_order_of_their_times_are_a_stable_sort_s_sorted_only_where_out_of_order(times, presorted):
    """The rows in order of their times, ties as given: a stable argsort's order, and the times read in it; rows
    already in order are returned as they are, with no sort (checked by a sort that fails)."""
    ts = np.array(sorted(times) if presorted else times, float)
    rows = np.arange(ts.size)[::-1].copy()  # read backwards: the times of rows[k] are ts[rows[k]]
    expected = rows[np.argsort(ts[rows], kind="stable")]
    ordered, starts = in_order(rows, ts)
    assert ordered.tolist() == expected.tolist() and starts.tolist() == ts[expected].tolist()
    in_time = expected.copy()
    np_argsort = np.argsort
    try:
        np.argsort = lambda *args, **kwargs: pytest.fail("sorted again")
        again, _ = in_order(in_time, ts)
    finally:
        np.argsort = np_argsort
    assert again is in_time
