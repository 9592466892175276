"""Work shared with helper threads: the items' order, the first error, a stop that stops the helpers, and values
two threads read at once computed once."""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from perftool.common.threads import Helper, computed_once, in_this_context, ordered_map


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


class Slow:
    """An instance whose value takes a while, recording each time it is computed."""

    def __init__(self, wait_for: threading.Event | None = None, then_set: threading.Event | None = None) -> None:
        self.computed = 0
        self.wait_for, self.then_set = wait_for, then_set

    @computed_once
    def value(self) -> str:
        """Who computed it."""
        self.computed += 1
        if self.then_set is not None:
            self.then_set.set()
        if self.wait_for is not None:
            assert self.wait_for.wait(10), "another instance's value was never computed meanwhile"
        time.sleep(0.1)  # long enough for the other thread to read it meanwhile
        return f"made by {threading.current_thread().name}"


def test_a_value_two_threads_read_at_once_is_computed_once():
    slow = Slow()
    with ThreadPoolExecutor(2) as pool:
        values = list(pool.map(lambda _: slow.value, range(2)))
    assert values[0] == values[1] == slow.value and slow.computed == 1
    assert Slow.value.__doc__ == "Who computed it." and "value" in vars(slow)["_computed_once_locks"]  # its own lock


def test_threads_computing_two_instances_values_do_not_wait_on_each_other():
    first_started, second_started = threading.Event(), threading.Event()
    first = Slow(wait_for=second_started, then_set=first_started)
    second = Slow(wait_for=first_started, then_set=second_started)
    with ThreadPoolExecutor(2) as pool:
        values = list(pool.map(lambda slow: slow.value, [first, second]))
    assert values[0] != values[1] and first.computed == second.computed == 1


def test_a_helper_does_its_pieces_in_order_and_each_value_is_read_where_it_is_asked_for():
    started = []

    def piece(value: int) -> int:
        started.append(value)
        return value * 10

    def failing() -> int:
        raise ValueError("piece 1")

    with Helper([lambda: piece(1), failing, lambda: piece(3)]) as helper:
        assert helper.result(2) == 30 and helper.result(0) == 10  # waits for a piece not done yet
        with pytest.raises(ValueError, match="piece 1"):
            helper.result(1)  # a piece's error is raised where its value is read
    assert started == [1, 3]


def test_a_helper_takes_items_once_its_pieces_are_done_and_ends_when_released():
    piece_done, helper_worked = threading.Event(), threading.Event()
    worked_by: dict[int, str] = {}

    def work(item: int) -> int:
        worked_by[item] = threading.current_thread().name
        if threading.current_thread() is threading.main_thread():
            if item == 0:
                assert helper_worked.wait(10)  # the helper joins once its piece is done
        else:
            assert piece_done.is_set()
            helper_worked.set()
        return -item

    before = set(threading.enumerate())
    with Helper([lambda: piece_done.set()]) as helper:
        (thread,) = set(threading.enumerate()) - before
        assert thread.daemon  # never waited for at exit
        assert ordered_map(work, range(30), 2, helper) == [-item for item in range(30)]
    thread.join(10)
    assert not thread.is_alive()  # its job done, it ends
    assert set(worked_by.values()) == {threading.current_thread().name, thread.name}


def test_a_helper_given_no_items_ends_once_released():
    before = set(threading.enumerate())
    with Helper([lambda: None]) as helper:
        (thread,) = set(threading.enumerate()) - before
        assert ordered_map(abs, [-1, -2], 1, helper) == [1, 2]  # one thread: the helper takes none
    thread.join(10)
    assert not thread.is_alive()


SETTING = contextvars.ContextVar("setting", default="unset")  # as numpy's allocator is one (NEP 49)


def test_helpers_work_in_a_copy_of_the_context_of_the_thread_that_starts_them():
    """A new thread starts with no context variable set; the helpers see what their owner set (so that numpy's
    arrays go where the owner's go), and what they set stays theirs."""
    together = threading.Barrier(3, timeout=30)  # each of the three threads holds one item at once

    def read(_: object = None) -> str:
        return SETTING.get()

    def read_together(_: object) -> str:
        together.wait()
        return SETTING.get()

    def run_all() -> tuple:
        SETTING.set("set by the owner")
        with Helper([read]) as helper:
            from_piece = helper.result(0)
            mapped = ordered_map(read_together, [0, 1, 2], threads=3, helper=helper)
        with Helper([lambda: SETTING.set("set by a helper")]) as setter:
            setter.result(0)
        with ThreadPoolExecutor(1) as pool:
            copied, bare = pool.submit(in_this_context(read)).result(), pool.submit(read).result()
        return from_piece, mapped, copied, bare, SETTING.get()

    from_piece, mapped, copied, bare, after = contextvars.Context().run(run_all)
    assert from_piece == copied == after == "set by the owner" and bare == "unset"
    assert mapped == ["set by the owner"] * 3
