"""Running the ranks' analysis on Dask: local worker processes by default, or an existing cluster.

Each task loads one rank's trace where the worker runs and sends back its summary only; events never
leave the worker. With one worker the ranks are analysed here, in this process, without Dask.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from perftool.errors import PerftoolError

SCHEDULER_ENV = "PERFTOOL_SCHEDULER"  # a scheduler address, like --scheduler
CONNECT_TIMEOUT = "5s"  # to reach a scheduler


@dataclass(frozen=True)
class Cluster:
    """Where work runs: a Dask scheduler's address, else this many local worker processes (None: one per CPU;
    1: here, without Dask)."""

    scheduler: str | None = None
    workers: int | None = None


LOCAL = Cluster()  # local worker processes, one per CPU


def default_workers(tasks: int) -> int:
    """Local worker processes: one per CPU, at most one per task."""
    return max(1, min(os.cpu_count() or 1, tasks))


@contextmanager
def dask_client(scheduler: str | None, workers: int) -> Iterator[Any]:
    """A Dask client on ``scheduler`` (an address such as ``tcp://host:8786``), else on a local cluster of
    ``workers`` single-threaded worker processes, closed on exit."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
        raise PerftoolError("running ranks on Dask needs dask.distributed: pip install 'dask[distributed]'") from None
    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise PerftoolError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        with client:
            yield client
        return
    cluster = LocalCluster(  # its dashboard on any free port, so another cluster on this machine is no conflict
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    )
    with cluster, Client(cluster) as client:
        yield client


def map_tasks(
    function: Callable[..., Any],
    tasks: Sequence[tuple],
    scheduler: str | None = None,
    workers: int | None = None,
    done: Callable[[], None] | None = None,
) -> list[Any]:
    """``function(*task)`` for every task, in the tasks' order; on Dask unless one local worker is asked for."""
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    workers = workers or default_workers(len(tasks))
    if scheduler is None and (workers == 1 or len(tasks) <= 1):
        results = []
        for task in tasks:
            results.append(function(*task))
            if done:
                done()
        return results
    with dask_client(scheduler, workers) as client:
        futures = [client.submit(function, *task, pure=False) for task in tasks]
        from distributed import as_completed

        for _ in as_completed(futures):
            if done:
                done()
        return client.gather(futures)
