"""Work shared with helper threads: the items' order, the first error, and a stop that stops the helpers."""

from __future__ import annotations

import threading

import pytest

from perftool.common.threads import ordered_map


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_results_come_back_in_the_items_order(threads):
    worked_on = set()

    def square(item: int) -> int:
        worked_on.add(threading.current_thread().name)
        return item * item

    assert ordered_map(square, range(50), threads) == [item * item for item in range(50)]
    if threads == 1:
        assert worked_on == {threading.current_thread().name}


def test_the_first_failing_item_s_error_is_raised_after_every_item_is_worked():
    worked = []

    def work(item: int) -> int:
        worked.append(item)
        if item in (3, 7):
            raise ValueError(f"item {item}")
        return item

    with pytest.raises(ValueError, match="item 3"):
        ordered_map(work, range(10), 2)
    assert sorted(worked) == list(range(10))


def test_a_stop_in_this_thread_leaves_the_helpers_no_new_item():
    """Ctrl-C in the calling thread unwinds at once; a helper finishes the item in hand and takes no other."""
    in_hand, release = threading.Event(), threading.Event()
    helper_items = []

    def work(item: int) -> int:
        if threading.current_thread() is threading.main_thread():
            in_hand.wait(10)
            raise KeyboardInterrupt
        helper_items.append(item)
        in_hand.set()
        release.wait(10)
        return item

    helpers_before = set(threading.enumerate())
    with pytest.raises(KeyboardInterrupt):
        ordered_map(work, range(20), 2)
    (helper,) = set(threading.enumerate()) - helpers_before
    assert helper.daemon  # never waited for at exit
    release.set()
    helper.join(10)
    assert not helper.is_alive() and len(helper_items) == 1
