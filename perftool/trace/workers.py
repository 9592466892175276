"""Decoding processes for large traces: task i goes to process i mod N, results come back in task order.

Each process has a pipe for its tasks and one for its results, and nothing else: no helper threads
in the parent (a :class:`multiprocessing.pool.Pool` spends more CPU time on its threads than the
parent spends merging the results). The number of tasks in flight is bounded, so memory is too.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from perftool.interrupts import ignore_in_worker

Run = Callable[[Iterable[tuple], int], Iterator[Any]]


class WorkerDied(Exception):
    """A decoding process ended without answering (killed, or out of memory)."""


@contextmanager
def processes(count: int, function: Callable[..., Any]) -> Iterator[Run]:
    """``run(tasks, depth)``: ``function(*task)`` for each task, results (or raised exceptions) in order.

    ``depth`` tasks per process may be in flight: 2 for tasks that fit in a pipe's buffer, 1 for
    large ones (a process must be idle before a large task is written to it, or both sides could
    wait on each other). With ``count`` 1 the work runs in this process, when each result is asked for.
    """
    if count <= 1:
        yield lambda tasks, _depth: (function(*task) for task in tasks)
        return
    pool = _Processes(count, function)
    try:
        yield pool.run
    finally:
        pool.stop()


class _Processes:
    def __init__(self, count: int, function: Callable[..., Any]) -> None:
        fork = "fork" in multiprocessing.get_all_start_methods() and os.name == "posix"
        context = multiprocessing.get_context("fork" if fork else "spawn")
        self.tasks: list[Connection] = []
        self.results: list[Connection] = []
        self.members: list[multiprocessing.process.BaseProcess] = []
        for _ in range(count):
            task_out, task_in = context.Pipe(duplex=False)
            result_out, result_in = context.Pipe(duplex=False)
            member = context.Process(target=_serve, args=(function, task_out, result_in), daemon=True)
            member.start()
            task_out.close()
            result_in.close()
            self.tasks.append(task_in)
            self.results.append(result_out)
            self.members.append(member)

    def run(self, tasks: Iterable[tuple], depth: int) -> Iterator[Any]:
        count = len(self.members)
        in_flight: deque[int] = deque()  # the process of each task sent and not yet answered, in task order
        for index, task in enumerate(tasks):
            while len(in_flight) >= count * depth:
                yield self._receive(in_flight.popleft())
            member = index % count
            self.tasks[member].send(task)
            in_flight.append(member)
        while in_flight:
            yield self._receive(in_flight.popleft())

    def _receive(self, member: int) -> Any:
        try:
            succeeded, value = self.results[member].recv()
        except (EOFError, OSError):
            self.members[member].join(timeout=1)
            exit_code = self.members[member].exitcode
            raise WorkerDied(f"a decoding process ended unexpectedly (exit code {exit_code})") from None
        if not succeeded:
            raise value
        return value

    def stop(self) -> None:
        for member in self.members:
            member.terminate()
        for member in self.members:
            member.join()
        for connection in (*self.tasks, *self.results):
            connection.close()


def _serve(function: Callable[..., Any], tasks: Connection, results: Connection) -> None:
    """A decoding process: answer each task with (True, result) or (False, the exception raised)."""
    ignore_in_worker()
    while True:
        try:
            task = tasks.recv()
        except EOFError:  # the parent is gone
            return
        try:
            answer = (True, function(*task))
        except Exception as exc:  # handed to the parent, which raises it in task order
            answer = (False, exc)
        results.send(answer)
