"""Work shared between this thread and helper threads, for passes that spend their time in numpy (which frees the
GIL): the results come back in the items' order, as one thread would give them.

The helpers are daemon threads and take no new item once this thread stops (Ctrl-C, SIGTERM, an error of its own),
so a stopped command ends at once rather than when every item has been worked through (a ``ThreadPoolExecutor``
runs its queued items, and the interpreter waits for them, before the exception leaves).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def ordered_map(work: Callable[[Item], Result], items: Sequence[Item], threads: int) -> list[Result]:
    """``work`` of each of ``items``, in their order, on ``threads`` threads (this one among them). Where an item
    fails, the others are still worked and the first failing item's error is raised, as one thread would raise it."""
    if threads <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    results: dict[int, Result] = {}
    failures: dict[int, BaseException] = {}
    taken = itertools.count()  # next() of a count is one call under the GIL: no item is taken twice
    stopped = threading.Event()

    def take() -> None:
        while not stopped.is_set() and (index := next(taken)) < len(items):
            try:
                results[index] = work(items[index])
            except Exception as exc:  # noqa: BLE001 - raised in this thread below, in the items' order
                failures[index] = exc

    helpers = [threading.Thread(target=take, name=f"perftool-helper-{n}", daemon=True) for n in range(threads - 1)]
    for helper in helpers:
        helper.start()
    try:
        take()
        for helper in helpers:
            helper.join()
    except BaseException:
        stopped.set()  # Ctrl-C or termination here: the helpers finish the item in hand and take no other
        raise
    if failures:
        raise failures[min(failures)]
    return [results[index] for index in range(len(items))]
