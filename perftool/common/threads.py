"""Work shared between this thread and helper threads, for passes that spend their time in numpy (which frees the
GIL): the results come back in the items' order, as one thread would give them.

The helpers are daemon threads and take no new item once this thread stops (Ctrl-C, SIGTERM, an error of its own),
so a stopped command ends at once rather than when every item has been worked through (a ``ThreadPoolExecutor``
runs its queued items, and the interpreter waits for them, before the exception leaves).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import queue
import threading
from _thread import LockType
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

Item = TypeVar("Item")
Result = TypeVar("Result")


class Helper:
    """A daemon thread that works for this one: from the start, ``pieces`` one after another while this thread goes
    on (each value read with :meth:`result`, which waits for it and raises its error), then the items of an
    :func:`ordered_map` it is given beside this thread, so that a core is never left idle between the two; its
    owner releases it when done with it, however it got there (:meth:`release`, or a ``with`` block's end). Being a
    daemon it never holds the command up once this thread stops (Ctrl-C, SIGTERM), as a ``ThreadPoolExecutor``'s
    thread would until its piece in hand is done."""

    def __init__(self, pieces: Sequence[Callable[[], Any]], name: str = "perftool-helper") -> None:
        self._done = [threading.Event() for _ in pieces]
        self._values: dict[int, Any] = {}
        self._errors: dict[int, BaseException] = {}
        self._then: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        threading.Thread(target=in_this_context(self._work), args=(list(pieces),), name=name, daemon=True).start()

    def _work(self, pieces: list[Callable[[], Any]]) -> None:
        for index, piece in enumerate(pieces):
            try:
                self._values[index] = piece()
            except BaseException as exc:  # noqa: BLE001 - raised where the value is read
                self._errors[index] = exc
            self._done[index].set()
        job = self._then.get()  # the first job it is then given; None: none, the thread ends
        if job is not None:
            job()

    def result(self, index: int) -> Any:
        """The value of piece ``index``, waiting for it where it is not done yet; its error raised."""
        self._done[index].wait()
        if index in self._errors:
            raise self._errors[index]
        return self._values[index]

    def then(self, job: Callable[[], None]) -> threading.Event:
        """Do ``job`` once the pieces are done; the event returned is set when it has returned."""
        finished = threading.Event()

        def doing() -> None:
            try:
                job()
            finally:
                finished.set()

        self._then.put(doing)
        return finished

    def release(self) -> None:
        """Let the thread end once its pieces are done where it was given no job (after :meth:`then`, no effect)."""
        self._then.put(None)

    def __enter__(self) -> Helper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def ordered_map(
    work: Callable[[Item], Result], items: Sequence[Item], threads: int, helper: Helper | None = None
) -> list[Result]:
    """``work`` of each of ``items``, in their order, on ``threads`` threads (this one among them; ``helper``, where
    given, one of the others, which joins once its own pieces are done). Where an item fails, the others are still
    worked and the first failing item's error is raised, as one thread would raise it."""
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

    joined = [helper.then(take)] if helper is not None else []
    helpers = [
        threading.Thread(target=in_this_context(take), name=f"perftool-helper-{n}", daemon=True)
        for n in range(threads - 1 - len(joined))
    ]
    for thread in helpers:
        thread.start()
    try:
        take()
        for thread in helpers:
            thread.join()
        for finished in joined:
            finished.wait()
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


def in_this_context(work: Callable[..., Result]) -> Callable[..., Result]:
    """``work``, to be run in another thread in a copy of this thread's context variables, where a new thread would
    start with none: numpy's allocator is one, so a helper's arrays go where this thread's go (into files, for a
    trace whose columns are on disk: :mod:`perftool.trace.store`)."""
    return functools.partial(contextvars.copy_context().run, work)
