"""Decoding processes for large traces: task i goes to process i mod N, results come back in task order.

Each process has a pipe for its tasks and one for its results, and nothing else: no helper threads
in the parent (a :class:`multiprocessing.pool.Pool` spends more CPU time on its threads than the
parent spends merging the results). The number of tasks in flight is bounded, so memory is too.

Pieces of a decompressed stream are handed over through memory shared with the processes (two
slots each, so that a process's next piece is written while it decodes one) where the platform forks,
instead of being copied through a pipe. Each result pipe holds a whole part where the system lets it
(Linux), so a process that has finished a piece goes on to its next while the parent is busy with
another's part.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from itertools import count as counting
from multiprocessing.connection import Connection
from typing import Any, Protocol

from perftool.common.interrupts import FORKS, held, ignore_in_worker, worker_context

try:
    import fcntl
except ImportError:  # Windows: its pipes are not resized
    fcntl = None  # type: ignore[assignment]

RESULT_PIPE_BYTES = 1 << 20  # a part of a 4 MiB piece is about 0.6 MiB; a pipe holds 64 KiB unless told
PIECES_IN_FLIGHT = 2  # per process: one decoded, the next written (a 500 MB gzip'd trace loads 6-9% faster)


class WorkerDied(Exception):
    """A decoding process ended without answering (killed, or out of memory)."""


class Workers(Protocol):
    def run(self, tasks: Iterable[tuple]) -> Iterator[Any]:
        """``function(*fixed, *task)`` for each small task; results in task order."""

    def run_pieces(self, pieces: Iterable[bytes | memoryview]) -> Iterator[Any]:
        """``function(*fixed, piece)`` for each piece of bytes; results in piece order."""


class _InProcess:
    """The work done in this process, each result when it is asked for (one worker)."""

    def __init__(self, function: Callable[..., Any], fixed: tuple) -> None:
        self.function = function
        self.fixed = fixed

    def run(self, tasks: Iterable[tuple]) -> Iterator[Any]:
        return (self.function(*self.fixed, *task) for task in tasks)

    def run_pieces(self, pieces: Iterable[bytes | memoryview]) -> Iterator[Any]:
        return (self.function(*self.fixed, piece) for piece in pieces)


@contextmanager
def processes(count: int, function: Callable[..., Any], *fixed: Any, piece_bytes: int = 0) -> Iterator[Workers]:
    """Workers calling ``function(*fixed, ...)``: ``count`` processes, or this one when ``count`` is 1.

    ``fixed`` is sent once, when a process starts. ``piece_bytes`` sizes the shared slot through
    which ``run_pieces`` hands over each piece (a larger piece goes through the pipe).
    """
    if count <= 1:
        yield _InProcess(function, fixed)
        return
    workers = _Processes(count, function, fixed, piece_bytes)
    try:
        yield workers
    finally:
        workers.stop()


class _Slots:
    """Memory shared with forked processes, :data:`PIECES_IN_FLIGHT` slots per process taken in turn, so a piece
    travels as its slot and length."""

    def __init__(self, count: int, size: int) -> None:
        self.size = size
        self.memory = mmap.mmap(-1, count * PIECES_IN_FLIGHT * size)
        self.turns = [0] * count  # the pieces each process has been sent through its slots

    def put(self, member: int, piece: bytes | memoryview) -> tuple[int, int | bytes]:
        """What to send process ``member`` for ``piece``: the slot it was written to and its length, or the piece
        itself when it does not fit. A slot is written again only after the piece sent through it was answered
        (no more than :data:`PIECES_IN_FLIGHT` of a process's pieces are ever unanswered)."""
        if len(piece) > self.size:
            return -1, bytes(piece)
        slot = member * PIECES_IN_FLIGHT + self.turns[member] % PIECES_IN_FLIGHT
        self.turns[member] += 1
        self.memory[slot * self.size : slot * self.size + len(piece)] = piece
        return slot, len(piece)

    def take(self, slot: int, sent: int | bytes) -> bytes | memoryview:
        """The piece that ``put`` sent (a view of its slot, valid until the slot's next piece)."""
        if isinstance(sent, bytes):
            return sent
        return memoryview(self.memory)[slot * self.size : slot * self.size + sent]


class _Processes:
    def __init__(self, count: int, function: Callable[..., Any], fixed: tuple, piece_bytes: int) -> None:
        context = worker_context()
        self.slots = _Slots(count, piece_bytes) if piece_bytes and FORKS else None
        self.tasks: list[Connection] = []
        self.results: list[Connection] = []
        self.members: list[multiprocessing.process.BaseProcess] = []
        with held():  # each process starts with signals blocked, until it has set how it takes them
            for _ in range(count):
                task_out, task_in = context.Pipe(duplex=False)
                result_out, result_in = context.Pipe(duplex=False)
                _widen(result_in)
                setup = (function, fixed, self.slots)
                # a forked process holds copies of the parent's ends, its own and its elder siblings': it closes them,
                # so that when the parent dies (even by SIGKILL) no one holds them and it sees the end of its tasks
                parents_ends = [task_in, result_out, *self.tasks, *self.results] if FORKS else []
                member = context.Process(target=_serve, args=(setup, task_out, result_in, parents_ends), daemon=True)
                member.start()
                task_out.close()
                result_in.close()
                self.tasks.append(task_in)
                self.results.append(result_out)
                self.members.append(member)

    def run(self, tasks: Iterable[tuple]) -> Iterator[Any]:
        """Small tasks (they fit in a pipe's buffer), two per process in flight."""
        return self._in_order(tasks, lambda _member, task: task, depth=2)

    def run_pieces(self, pieces: Iterable[bytes | memoryview]) -> Iterator[Any]:
        """Pieces, :data:`PIECES_IN_FLIGHT` per process: each is written to a slot no piece in flight uses, and sent
        as a few bytes, so sending never waits on the process. A piece larger than a slot goes through the pipe, and
        only to a process with nothing in flight: one busy would read it only once its answer is read, and an answer
        larger than its pipe waits for the parent, which would be waiting to send."""
        if self.slots is None:
            return self._in_order(pieces, lambda _member, piece: (bytes(piece),), depth=1)
        size = self.slots.size
        return self._in_order(pieces, self.slots.put, PIECES_IN_FLIGHT, lambda piece: len(piece) > size)

    def _in_order(
        self,
        tasks: Iterable[Any],
        message: Callable[[int, Any], Any],
        depth: int,
        to_idle: Callable[[Any], bool] | None = None,
    ) -> Iterator[Any]:
        """Send each task (as ``message(process, task)``) and yield the results in task order; a task
        is drawn from ``tasks`` only when fewer than ``depth`` per process are in flight, and one that ``to_idle``
        holds is sent only once its process has answered all it was sent."""
        count = len(self.members)
        in_flight: deque[int] = deque()  # the process of each task sent and not yet answered, in task order
        tasks = iter(tasks)
        for index in counting():
            while len(in_flight) >= count * depth:
                yield self._receive(in_flight.popleft())
            task = next(tasks, _DONE)
            if task is _DONE:
                break
            member = index % count
            while to_idle is not None and member in in_flight and to_idle(task):
                yield self._receive(in_flight.popleft())
            try:
                self.tasks[member].send(message(member, task))
            except OSError:  # the process is gone: its pipe is closed
                raise self._died(member) from None
            in_flight.append(member)
        while in_flight:
            yield self._receive(in_flight.popleft())

    def _receive(self, member: int) -> Any:
        try:
            succeeded, value = self.results[member].recv()
        except (EOFError, OSError):
            raise self._died(member) from None
        if not succeeded:
            raise value
        return value

    def _died(self, member: int) -> WorkerDied:
        self.members[member].join(timeout=1)
        return WorkerDied(f"a decoding process ended unexpectedly (exit code {self.members[member].exitcode})")

    def stop(self) -> None:
        for member in self.members:
            member.terminate()
        for member in self.members:
            member.join()
        for connection in (*self.tasks, *self.results):
            connection.close()
        if self.slots is not None:
            self.slots.memory.close()


_DONE = object()


def _widen(pipe: Connection) -> None:
    """Room for RESULT_PIPE_BYTES in ``pipe`` where the system allows it: a process's send of its part then returns
    without waiting for the parent to read it (on 2 cores, waiting took a sixth of each process's time)."""
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        with suppress(OSError):  # past the system's limit for a user (/proc/sys/fs/pipe-max-size) it stays as it is
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, RESULT_PIPE_BYTES)


def _serve(setup: tuple, tasks: Connection, results: Connection, parents_ends: list[Connection]) -> None:
    """A decoding process: answer each task with (True, result) or (False, the exception raised). It ends when its
    parent is gone: its tasks end, or its answer has no one to read it."""
    ignore_in_worker()
    for end in parents_ends:
        end.close()
    function, fixed, shared = setup
    while True:
        try:
            task = tasks.recv()
        except EOFError:  # the parent is gone
            return
        if shared is not None:
            task = (shared.take(*task),)
        try:
            answer = (True, function(*fixed, *task))
        except Exception as exc:  # handed to the parent, which raises it in task order
            answer = (False, exc)
        try:
            results.send(answer)
        except OSError:  # the parent is gone: no one reads the answer
            return


@contextmanager
def stderr_unseen() -> Iterator[None]:
    """Standard error goes nowhere in the block, for the processes started in it and the native code run in it (a
    library's C++ logging); Python's own ``sys.stderr`` is flushed first and restored after."""
    sys.stderr.flush()
    kept = os.dup(2)
    try:
        with open(os.devnull, "wb") as nowhere:
            os.dup2(nowhere.fileno(), 2)
        yield
    finally:
        os.dup2(kept, 2)
        os.close(kept)
