"""The cores perftool may use: those this process may run on, less those other work keeps busy now.

A core another process keeps busy is not one a decoding process can have: started anyway, the decoders and the main
process share what is free with each other and pay for passing the pieces between them, and reading the trace takes
longer than in one process. Other work is read from the kernel's count of runnable tasks (``/proc/loadavg``), less
this process's own threads that run at that moment (``/proc/self/task``: numpy's OpenBLAS threads spin for a tenth of a
second after numpy loads, and would otherwise halve the decoders on a 2-core machine), the least of a few reads, so
that a task that runs only for a moment is not taken for a busy core.
"""

from __future__ import annotations

import os
import time

LOADAVG = "/proc/loadavg"  # its fourth field: runnable tasks / all tasks, this process's running threads among them
OWN_THREADS = "/proc/self/task"  # a folder per thread of this process, its state in the third field of its ``stat``
READS = 3  # reads of the runnable count, a millisecond apart; the least is taken
READ_GAP_S = 0.001


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one, else every core."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def free_cores(path: str = LOADAVG, own_threads: str = OWN_THREADS) -> int:
    """The usable cores less those other tasks keep busy now, at least one; every usable core where the system does
    not say what runs (no ``/proc/loadavg``)."""
    usable = usable_cores()
    counts = []
    for read in range(READS):
        if read:
            time.sleep(READ_GAP_S)
        runnable = _runnable(path)
        if runnable is None:
            return usable
        counts.append(runnable - _running_threads(own_threads))
    others = max(min(counts), 0)
    return max(1, usable - others)


def _runnable(path: str) -> int | None:
    """The runnable tasks ``path`` (``/proc/loadavg``) counts, or None where it cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None


def _running_threads(folder: str) -> int:
    """How many of this process's threads run now (state ``R`` in ``folder``, ``/proc/self/task``): at least this one,
    the one reading; one where the system does not say."""
    running = 0
    try:
        tasks = os.listdir(folder)
    except OSError:
        return 1
    for task in tasks:
        try:
            with open(os.path.join(folder, task, "stat"), encoding="ascii", errors="replace") as handle:
                running += handle.read().rpartition(")")[2].split()[:1] == ["R"]  # the name, in (), may hold spaces
        except OSError:  # a thread that ended meanwhile
            continue
    return max(running, 1)
