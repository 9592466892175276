"""Ctrl-C and termination: the parent process handles them, so worker processes ignore Ctrl-C and leave without
tracebacks; SIGTERM and SIGHUP stop a run as Ctrl-C does, through the same clean-up (a partial output file is
removed, see :mod:`perftool.common.output`)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

EXIT_CODE = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
TERMINATING = (signal.SIGTERM, signal.SIGHUP)
HANDLED = (signal.SIGINT, *TERMINATING)


class Terminated(BaseException):
    """The run was asked to stop by SIGTERM or SIGHUP; it exits with 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


def stop(message: str, code: int) -> None:
    """Say why the run stopped, in one line, and exit with ``code``: what the clean-up on the way out prints (a
    cluster interrupted while it started, closing at exit) is not shown."""
    print(message, file=sys.stderr, flush=True)
    with open(os.devnull, "w") as nowhere:
        os.dup2(nowhere.fileno(), 2)
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open until the interpreter exits
    sys.exit(code)


def one_line_while_starting() -> None:
    """While the ``perftool`` command's modules load (:mod:`perftool.common.startup`), a Ctrl-C is the same one line and
    exit code as later, not a traceback: it ends the process from a handler rather than raising, since an exception
    raised inside an extension module's start-up (pydantic-core importing ``datetime``) comes out as that module's
    panic.
    :func:`started` hands Ctrl-C back to Python."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where a shell made it ignored
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    for signum in TERMINATING:  # SIGTERM and SIGHUP likewise, until the command handles them (stop_on_termination)
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _terminated_while_starting)


def _interrupted_while_starting(_signum: int, _frame: FrameType | None) -> None:
    print("perftool: interrupted", file=sys.stderr, flush=True)
    os._exit(EXIT_CODE)  # nothing has started that needs closing


def _terminated_while_starting(signum: int, _frame: FrameType | None) -> None:
    print(f"perftool: terminated ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def started() -> None:
    """The command runs (its options read): from here Ctrl-C raises ``KeyboardInterrupt`` and the run unwinds."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def finished() -> None:
    """The command is over and its exit code decided: a signal while the interpreter exits does not change it."""
    for signum in HANDLED:
        signal.signal(signum, signal.SIG_IGN)


def ignore_in_worker(end_on_termination: bool = True) -> None:
    """For worker processes: SIGINT is the parent's to handle; it then stops its workers. SIGTERM and SIGHUP end a
    worker at once, without the parent's clean-up (it has nothing to clean), unless ``end_on_termination`` is
    false: then the parent ends it (a pool that cannot tell half a result from a slow one needs that), and the
    worker dies with its parent however the parent ends (:func:`die_with_parent`), as no signal reaches it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in TERMINATING:
        signal.signal(signum, signal.SIG_DFL if end_on_termination else signal.SIG_IGN)
    if not end_on_termination:
        die_with_parent()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)  # a worker started within `held()` starts with them blocked


FORKS = "fork" in multiprocessing.get_all_start_methods() and os.name == "posix"


def worker_context() -> Any:  # a multiprocessing context (the stubs' BaseContext lacks Process)
    """How worker processes start: forked where the system can, so that their parent is this process (as
    :func:`die_with_parent` needs) whatever the Python version's default (Python 3.14's is forkserver on Linux),
    else spawned."""
    return multiprocessing.get_context("fork" if FORKS else "spawn")


PR_SET_PDEATHSIG = 1  # Linux's prctl option: the signal a process gets when the thread that started it ends


def die_with_parent() -> None:
    """For a worker process started from its parent's main thread: be killed (SIGKILL) when the parent ends, however
    it ends, SIGKILL and the OOM killer included (Linux's ``PR_SET_PDEATHSIG``; elsewhere nothing is asked). A worker
    ignoring termination would otherwise run on, orphaned, waiting for work that never comes."""
    parent = multiprocessing.parent_process()
    try:
        asked = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError, TypeError):  # no C library to ask, or one without prctl (not Linux)
        return
    if asked and parent is not None and os.getppid() != parent.pid:  # the parent ended before it was asked
        os._exit(1)


@contextmanager
def held() -> Iterator[None]:
    """Signals wait until the block is over, then act as they would have: for starting worker processes and handing
    them work, where a handler raising midway leaves the pool's bookkeeping broken (its queue's writer then waits
    forever at exit). Processes forked within start with the signals blocked, until :func:`ignore_in_worker`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {signum: signal.getsignal(signum) for signum in HANDLED}
    noted: list[int] = []  # signals another thread received meanwhile; Python runs their handlers in this one
    for signum, handler in handlers.items():
        if callable(handler):
            signal.signal(signum, lambda number, _frame: noted.append(number))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            if callable(handler):
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one sent to this thread meanwhile arrives now
        if noted and callable(handler := handlers[signal.Signals(noted[0])]):
            handler(noted[0], None)


def stop_on_termination() -> None:
    """SIGTERM and SIGHUP raise :class:`Terminated` in the main thread, so the run unwinds and cleans up."""
    for signum in TERMINATING:
        signal.signal(signum, _terminate)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextmanager
def never_lost() -> Iterator[None]:
    """Ctrl-C within the block always ends it: raised again after the block where a library inside caught it (a
    Dask client waiting on its futures does, now and then)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not (
        signal.default_int_handler
    ):
        yield
        return
    pressed: list[int] = []

    def noticed(_signum: int, _frame: FrameType | None) -> None:
        pressed.append(1)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, noticed)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt
