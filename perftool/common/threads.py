"""Work shared between this thread and helper threads, for passes that spend their time in numpy (which frees the
GIL): the results come back in the items' order, as one thread would give them.

The helpers are daemon threads and take no new item once this thread stops (Ctrl-C, SIGTERM, an error of its own),
so a stopped command ends at once rather than when every item has been worked through (a ``ThreadPoolExecutor``
runs its queued items, and the interpreter waits for them, before the exception leaves).
"""

from __future__ import annotations

import itertools
import threading
from _thread import LockType
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

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


_MAKING_LOCKS = threading.Lock()  # held only to make a key's lock


def made_once(kept: dict[Any, Any], locks: dict[Any, LockType], key: Any, compute: Callable[[], Result]) -> Result:
    """``kept[key]``, computed by ``compute`` for the first thread that asks; a thread asking meanwhile waits for that
    value rather than computing it again. ``locks`` holds one lock per key, so threads after other keys never wait
    on each other."""
    with _MAKING_LOCKS:
        lock = locks.setdefault(key, threading.Lock())
    with lock:
        if key not in kept:
            kept[key] = compute()
    return kept[key]


class computed_once(Generic[Result]):  # noqa: N801 - a decorator, named like functools.cached_property
    """A property computed when first read and kept, like ``functools.cached_property``, that two threads reading it
    at once compute once: the first computes, the other waits for its value (``cached_property`` locks no more since
    Python 3.12, and locked every instance at once before). The lock is the instance's own, so threads computing
    other instances' values never wait on each other (:func:`made_once`)."""

    def __init__(self, compute: Callable[[Any], Result]) -> None:
        self.compute = compute
        self.__doc__ = compute.__doc__
        self.name = compute.__name__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> computed_once[Result]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Result: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> computed_once[Result] | Result:
        if instance is None:
            return self
        held = instance.__dict__  # read first from here once made: this descriptor sets nothing else
        locks = held.setdefault("_computed_once_locks", {})  # one call under the GIL: every thread gets the same
        return made_once(held, locks, self.name, lambda: self.compute(instance))
