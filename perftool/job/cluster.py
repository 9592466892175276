"""Running the ranks' analysis on Dask: local worker processes when the work pays for them, or an existing cluster.

Each task loads one rank's trace where the worker runs and sends back its summary only; events never
leave the worker. With one worker, or work too small for a local cluster's start-up to pay off, the ranks are
analysed here, in this process, without Dask (each trace still decoded by parallel processes when it is large).
One trace given with a scheduler is decoded on the cluster instead: its workers read the file's byte ranges and
send back each range's columns (:func:`cluster_decoders`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from perftool.common import interrupts
from perftool.common.errors import PerftoolError
from perftool.trace.loader import Decoders
from perftool.trace.workers import Workers, stderr_unseen

SCHEDULER_ENV = "PERFTOOL_SCHEDULER"  # a scheduler address, like --scheduler
CONNECT_TIMEOUT = "5s"  # to open a connection to a scheduler
HANDSHAKE_S = 15.0  # for the scheduler to answer as a Dask scheduler does; a listener that does not is no scheduler
MAX_HANDSHAKE_BYTES = 1 << 20  # a scheduler's handshake is a few dozen bytes
WORKERS_WAIT_S = 15.0  # for a scheduler to have a worker
# tcp://host:port, host:port, tcp://[::1]:port: the addresses perftool connects to (TLS and UCX need settings it
# does not take)
_ADDRESS = re.compile(
    r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]@]+):(?P<port>\d{1,5})$"
)
_DASK_LOGGERS = ("distributed", "tornado", "asyncio")  # what a closing cluster logs about comms it drops
# Measured with bench/bench_small_job.py on 2 cores: a local cluster of 2 worker processes adds about this long to a
# job (starting, importing perftool in each worker, closing); one process scans a job's traces (each decoded by
# parallel processes when large) at about this many bytes of JSON a second. Cluster and here break even near 46 MB.
CLUSTER_START_S = 1.0
SCANNED_BYTES_PER_S = 23e6


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


def scheduler_address(address: str, where: str = "scheduler") -> str:
    """``address`` as Dask takes it (``tcp://host:port``); a :class:`PerftoolError` naming ``where`` it came from
    when it is not a TCP address with a port."""
    found = _ADDRESS.match(address.strip())
    scheme = (found.group("scheme") or "tcp").lower() if found else None
    if found is None or not 0 < int(found.group("port")) < 65536:
        raise PerftoolError(
            f"{where}: {address!r} is not a scheduler address; give tcp://HOST:PORT (e.g. tcp://host:8786)"
        )
    if scheme != "tcp":
        raise PerftoolError(
            f"{where}: {address!r}: perftool connects to schedulers over tcp:// only ({scheme}:// needs security or "
            "transport settings it does not take)"
        )
    return f"tcp://{found.group('host')}:{int(found.group('port'))}"


def chosen_scheduler(scheduler: str | None, where: str = "scheduler") -> str | None:
    """The scheduler to run on, checked: the one given (from ``where``), else :data:`SCHEDULER_ENV`, else None."""
    if scheduler:
        return scheduler_address(scheduler, where)
    from_env = os.environ.get(SCHEDULER_ENV)
    return scheduler_address(from_env, SCHEDULER_ENV) if from_env else None


def cluster_pays_off(work_bytes: int, workers: int) -> bool:
    """Whether ``work_bytes`` of JSON finish sooner on a local cluster of ``workers`` processes, its start-up
    included, than here one after another."""
    here_s = work_bytes / SCANNED_BYTES_PER_S
    return workers > 1 and here_s * (1 - 1 / workers) > CLUSTER_START_S


def local_workers(workers: int | None, tasks: int) -> int:
    """Local worker processes for ``tasks``: as asked (at least 1), never more than the tasks or the CPUs."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise PerftoolError(f"workers: {workers!r} is not a count of worker processes (1 or more)")
    return min(workers or tasks, default_workers(tasks))


@contextmanager
def dask_client(scheduler: str | None, workers: int) -> Iterator[Any]:
    """A Dask client on ``scheduler`` (an address such as ``tcp://host:8786``), else on a local cluster of
    ``workers`` single-threaded worker processes, closed on exit."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
        raise PerftoolError("running ranks on Dask needs dask.distributed: pip install 'dask[distributed]'") from None
    if scheduler:
        scheduler = scheduler_address(scheduler)
        client = _connected(Client, scheduler)
        with _quiet(), client:
            try:
                client.wait_for_workers(1, timeout=WORKERS_WAIT_S)
            except (OSError, TimeoutError):
                raise PerftoolError(
                    f"the Dask scheduler at {scheduler} has no workers (waited {WORKERS_WAIT_S:g} s); start some with "
                    f"dask worker {scheduler}"
                ) from None
            yield client
        return
    # the workers' scratch space is perftool's own, removed on every way out (Dask's default stays in TMPDIR)
    with (
        _quiet(),
        tempfile.TemporaryDirectory(prefix="perftool-dask-", ignore_cleanup_errors=True) as scratch,
        dask.config.set({"temporary-directory": scratch}),
    ):
        with stderr_unseen():  # the workers' processes inherit it: a Ctrl-C they see too prints nothing of theirs
            cluster = LocalCluster(  # its dashboard on any free port, so another cluster here is no conflict
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,
            )
        with cluster, Client(cluster) as client:
            yield client


def _connected(client_type: Any, scheduler: str) -> Any:
    """A client of the scheduler at ``scheduler``, connected within :data:`HANDSHAKE_S`, once the listener there has
    greeted as a Dask scheduler does (:func:`_greets_as_dask`). Connecting runs in a daemon thread: a listener that
    accepts the connection but never answers as Dask does would hold the handshake forever, and is left behind."""
    _greets_as_dask(scheduler)
    outcome: dict[str, Any] = {}

    def connect() -> None:
        try:
            outcome["client"] = client_type(scheduler, timeout=CONNECT_TIMEOUT)
        except Exception as exc:  # any failure to connect is reported below, in the caller's thread
            outcome["error"] = exc

    attempt = threading.Thread(target=connect, name="perftool-connect", daemon=True)
    attempt.start()
    attempt.join(HANDSHAKE_S)
    if "client" in outcome:
        return outcome["client"]
    problem = outcome.get("error") or f"no answer as a Dask scheduler within {HANDSHAKE_S:g} s"
    raise PerftoolError(f"cannot reach the Dask scheduler at {scheduler}: {problem}")


def _greets_as_dask(scheduler: str) -> None:
    """Check that the listener at ``scheduler`` speaks first, as a Dask scheduler does (its handshake: a frame whose
    first 8 bytes are its length, little-endian), with a length a handshake can have. Dask's own client would take
    the first bytes of any other server's answer for a length, and try to allocate it (exabytes for 'HTTP/1.1')."""
    host, _, port = scheduler.removeprefix("tcp://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=HANDSHAKE_S) as probe:
            greeting = b""
            while len(greeting) < 8 and (more := probe.recv(8 - len(greeting))):
                greeting += more
    except TimeoutError:
        greeting = b""
    except OSError as exc:
        raise PerftoolError(f"cannot reach the Dask scheduler at {scheduler}: {exc.strerror or exc}") from None
    if not greeting:
        raise PerftoolError(f"cannot reach the Dask scheduler at {scheduler}: no answer as a Dask scheduler within "
                            f"{HANDSHAKE_S:g} s")  # fmt: skip
    if len(greeting) < 8 or int.from_bytes(greeting, "little") > MAX_HANDSHAKE_BYTES:
        raise PerftoolError(
            f"cannot reach the Dask scheduler at {scheduler}: the listener there is no Dask scheduler (it begins "
            f"{greeting!r})"
        )


@contextmanager
def _quiet() -> Iterator[None]:
    """Dask's own logging held to critical messages while a cluster runs and closes: a closing cluster logs the
    comms it drops (CommClosedError) on runs that succeed, and failures reach the user as perftool's errors."""
    named = [name for name in list(logging.root.manager.loggerDict) if name.split(".")[0] in _DASK_LOGGERS]
    loggers = [logging.getLogger(name) for name in {*_DASK_LOGGERS, *named}]  # Dask sets some children's own levels
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def map_tasks(
    function: Callable[..., Any],
    tasks: Sequence[tuple],
    scheduler: str | None = None,
    workers: int | None = None,
    done: Callable[[], None] | None = None,
    work_bytes: int | None = None,
) -> list[Any]:
    """``function(*task)`` for every task, in the tasks' order. On Dask with a scheduler; else on a local cluster
    when more than one worker is asked for, or, by default, when the tasks' ``work_bytes`` of JSON are enough for it
    to pay off; else here in turn. A task that fails on the cluster (a worker without perftool, a scheduler gone) is
    a :class:`PerftoolError`."""
    scheduler = chosen_scheduler(scheduler)
    asked = workers
    workers = local_workers(workers, len(tasks))
    small = asked is None and work_bytes is not None and not cluster_pays_off(work_bytes, workers)
    if scheduler is None and (workers == 1 or len(tasks) <= 1 or small):
        results = []
        for task in tasks:
            results.append(function(*task))
            if done:
                done()
        return results
    with interrupts.never_lost(), dask_client(scheduler, workers) as client:
        try:
            futures = [client.submit(function, *task, pure=False) for task in tasks]
            from distributed import as_completed

            for _ in as_completed(futures):
                if done:
                    done()
            return client.gather(futures)
        except PerftoolError:
            raise
        except Exception as exc:  # raised where the task ran, or by the cluster: one line, not a remote traceback
            raise _failed(exc, scheduler) from None


def _failed(exc: Exception, scheduler: str | None) -> PerftoolError:
    """A task's failure on a cluster, in one line."""
    where = f"the Dask scheduler at {scheduler}" if scheduler else "the local Dask cluster"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""  # Dask adds advice on more lines
    return PerftoolError(f"a task failed on {where}: {type(exc).__name__}: {first}")


def cluster_decoders(scheduler: str) -> Decoders:
    """Decoders of a trace's byte ranges on the Dask cluster at ``scheduler`` (for
    :func:`~perftool.trace.loader.read_trace`): each worker reads its ranges of the file itself (at the same path: a
    file system the workers share), and only each range's columns come back, in file order."""
    address = scheduler_address(scheduler)

    @contextmanager
    def decoders(_count: int, function: Callable[..., Any], *fixed: Any) -> Iterator[Workers]:
        with interrupts.never_lost(), dask_client(address, 1) as client:
            yield _OnCluster(client, address, function, fixed)

    return decoders


class _OnCluster:
    """``function(*fixed, *task)`` for each task on a Dask client's workers, results in task order, at most two
    tasks per worker thread in flight (so the ranges' columns waiting to come back stay bounded)."""

    def __init__(self, client: Any, scheduler: str, function: Callable[..., Any], fixed: tuple) -> None:
        self.client, self.scheduler, self.function, self.fixed = client, scheduler, function, fixed

    def run(self, tasks: Iterable[tuple]) -> Iterator[Any]:
        depth = 2 * max(sum(self.client.nthreads().values()), 1)
        in_flight: deque[Any] = deque()
        for task in tasks:
            if len(in_flight) >= depth:
                yield self._result(in_flight.popleft())
            in_flight.append(self.client.submit(self.function, *self.fixed, *task, pure=False))
        while in_flight:
            yield self._result(in_flight.popleft())

    def run_pieces(self, pieces: Iterable[bytes | memoryview]) -> Iterator[Any]:
        return self.run((bytes(piece),) for piece in pieces)

    def _result(self, future: Any) -> Any:
        try:
            return future.result()
        except Exception as exc:
            if type(exc).__module__.startswith("perftool."):  # the loader's own (a bad event, a range to redo)
                raise
            raise _failed(exc, self.scheduler) from None  # the cluster's, or a worker's without perftool: one line
