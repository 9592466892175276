"""Evaluating points of the search space on the emulator's fast path.

Configurations the plan already rules out (out of memory, a micro-batch too big for the IO tiles,
over ``max_memory_fraction``) are *pruned*: rejected before any simulation. The others are
*evaluations*: simulated through every step, then checked against ``max_step_time``. Each point is
evaluated once; batches are split over ``jobs`` processes. Results do not depend on how points are
batched (every configuration sees the same per-step jitter), so any split gives the same numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np

from perftool.common.interrupts import held, ignore_in_worker, worker_context
from perftool.emulator.config import SECTION_SETTINGS, with_settings
from perftool.emulator.evaluate import FIGURES, evaluate_plan, job_figures
from perftool.emulator.plan import Plan, build_plan
from perftool.job.cluster import dask_client
from perftool.tune.space import Space
from perftool.tune.spec import Objective, TuneConfig

PIECE = 2048  # configurations simulated in one call (one progress update)
MIN_PARALLEL_PIECE = 256  # smaller pieces cost more in process hand-offs than they save

MEMORY_FIGURES = {
    "memory_bytes": "device memory the configuration needs, bytes",
    "memory_fraction": "share of the device memory (IPU: of the compute tiles' memory) it needs",
}
ROW_FIGURES = {**FIGURES, **MEMORY_FIGURES}


@dataclass
class Rows:
    """Configurations looked at: evaluated ones with their figures, pruned ones with the reason."""

    points: np.ndarray  # [n, knobs] value positions
    figures: dict[str, np.ndarray]  # ROW_FIGURES, NaN where not simulated
    reason: np.ndarray  # why the configuration does not count ('' when it does)
    simulated: np.ndarray  # went through the simulation (an evaluation) rather than being pruned

    @classmethod
    def concat(cls, parts: list[Rows]) -> Rows:
        return cls(
            np.concatenate([p.points for p in parts]),
            {name: np.concatenate([p.figures[name] for p in parts]) for name in ROW_FIGURES},
            np.concatenate([p.reason for p in parts]),
            np.concatenate([p.simulated for p in parts]),
        )

    def take(self, rows: np.ndarray) -> Rows:
        """These rows, in this order."""
        figures = {name: values[rows] for name, values in self.figures.items()}
        return Rows(self.points[rows], figures, self.reason[rows], self.simulated[rows])

    @property
    def feasible(self) -> np.ndarray:
        return self.reason == ""

    def causes(self, rows: np.ndarray | None = None) -> Counter[str]:
        """How many of ``rows`` (default: all that do not count) fail for each cause, most common first."""
        reasons = self.reason[~self.feasible] if rows is None else self.reason[rows]
        return Counter(cause(reason) for reason in reasons)

    def score(self, objective: Objective) -> np.ndarray:
        """Higher is better; ``-inf`` where the configuration does not count."""
        value = self.figures[objective.figure]
        return np.where(self.feasible, value if objective.higher_is_better else -value, -np.inf)


def cause(reason: str) -> str:
    """The kind of a reason: what comes before its first colon (``out of memory``, ``too few IO tiles``)."""
    return reason.split(":")[0]


def evaluate_points(config: TuneConfig, space: Space, points: np.ndarray) -> Rows:
    """Prune, simulate and check the constraints of ``points``."""
    rows = evaluate_grid(config, space.grid(points))
    rows.points = points
    return rows


def evaluate_grid(config: TuneConfig, grid: dict[str, np.ndarray] | None) -> Rows:
    """Prune, simulate and check the constraints of the knob combinations in ``grid`` (or the config as written).

    The settings of other sections in ``grid`` (input workers, gradient buckets) shape the plan itself: each
    combination of their values is its own plan, all simulated in one run where they differ only per configuration
    (input workers), else one run each (a gradient bucket sets what every configuration of its plan reduces).
    """
    swept = [name for name in SECTION_SETTINGS if grid and name in grid]
    if not swept:
        return _evaluate_plan(config, build_plan(config, grid))
    assert grid is not None
    values = np.stack([grid[name].astype(np.int64) for name in swept], axis=1)
    _, which = np.unique(values, axis=0, return_inverse=True)
    knobs = {name: column for name, column in grid.items() if name not in swept}
    plans, order = [], []
    for g in range(int(which.max()) + 1):
        rows = np.flatnonzero(which.ravel() == g)
        settings = {name: grid[name][rows[0]].item() for name in swept}
        plans.append(build_plan(with_settings(config, settings), {k: v[rows] for k, v in knobs.items()}))
        order.append(rows)
    joined = Plan.joined(plans)
    evaluated = (_evaluate_plan(config, joined) if joined is not None
                 else Rows.concat([_evaluate_plan(config, plan) for plan in plans]))  # fmt: skip
    return evaluated.take(np.argsort(np.concatenate(order), kind="stable"))


def _evaluate_plan(config: TuneConfig, plan: Plan) -> Rows:
    """Check ``plan`` (of ``config`` with settings swept) against the constraints, and simulate what passes."""
    limits = config.tune.constraints
    fraction = plan.memory_bytes / plan.capacity_bytes
    if limits.max_memory_fraction is not None:
        for row in np.flatnonzero(plan.feasible & (fraction > limits.max_memory_fraction)):
            plan.infeasible[row] = (
                f"over max_memory_fraction: uses {fraction[row]:.0%} of device memory, "
                f"not more than {limits.max_memory_fraction:.0%}"
            )
    ranks = plan.replicas  # a data-parallel job: each configuration is that many columns, one per rank
    simulated = plan.feasible[::ranks].copy()
    figures = {
        **job_figures(evaluate_plan(plan, config.seed).figures, ranks),
        "memory_bytes": plan.memory_bytes[::ranks],
        "memory_fraction": fraction[::ranks],
    }
    reason = plan.infeasible[::ranks].copy()
    if limits.max_step_time is not None:
        for row in np.flatnonzero(simulated & (figures["step_time_mean_us"] > limits.max_step_time)):
            reason[row] = (
                f"over max_step_time: mean step time {figures['step_time_mean_us'][row] / 1e3:,.2f} ms, "
                f"not more than {limits.max_step_time / 1e3:,.2f} ms"
            )
    return Rows(np.zeros((simulated.size, 0), np.int64), figures, reason, simulated)


class Evaluator:
    """Evaluates points once each, in pieces over ``jobs`` processes (or the workers of the Dask cluster at
    ``scheduler``), and keeps every result."""

    def __init__(
        self,
        config: TuneConfig,
        space: Space,
        jobs: int = 1,
        on_progress: Callable[[int, int], None] | None = None,
        scheduler: str | None = None,
    ) -> None:
        self.config, self.space, self.jobs = config, space, jobs
        self.on_progress = on_progress or (lambda evaluations, pruned: None)
        self.scores: dict[int, float] = {}  # flat index -> score
        self.parts: list[Rows] = []
        self.evaluations = 0
        self.pruned = 0
        self._pool: Executor | None = None
        self._cluster = ExitStack()
        if scheduler:
            client = self._cluster.enter_context(dask_client(scheduler, 1))
            self._pool = client.get_executor(pure=False)
            self.jobs = max(1, sum(client.nthreads().values()))

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if isinstance(self._pool, ProcessPoolExecutor):
            if kind is not None:  # stopped (Ctrl-C, SIGTERM, an error): the pieces in hand are not waited for
                _kill_workers(self._pool)
            self._pool.shutdown(cancel_futures=True)
        self._cluster.close()  # a Dask client's executor goes with its client

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """The score of each point (higher is better, ``-inf`` when it does not count), evaluating new ones."""
        unseen = self.unseen(points)
        if unseen.any():
            _, first = np.unique(self.space.flat(points[unseen]), return_index=True)
            self._evaluate(points[unseen][np.sort(first)])
        return np.array([self.scores[f] for f in self.space.flat(points).tolist()])

    def unseen(self, points: np.ndarray) -> np.ndarray:
        """Which points have not been looked at yet."""
        return np.array([f not in self.scores for f in self.space.flat(points).tolist()], dtype=bool)

    @property
    def best_score(self) -> float:
        return max(self.scores.values(), default=-np.inf)

    def draws(self, points: np.ndarray, seeds: range) -> list[Rows]:
        """``points`` evaluated under each of ``seeds``' jitter draws (nothing kept), a draw per process."""
        configs = [self.config.model_copy(update={"seed": seed}) for seed in seeds]
        return list(self._map(configs, [points] * len(configs)))

    def _evaluate(self, points: np.ndarray) -> None:
        size = PIECE if self.jobs == 1 else max(MIN_PARALLEL_PIECE, min(PIECE, -(-len(points) // self.jobs)))
        pieces = [points[i : i + size] for i in range(0, len(points), size)]
        for rows in self._map([self.config] * len(pieces), pieces):
            self._keep(rows)

    def _map(self, configs: list[TuneConfig], pieces: list[np.ndarray]) -> Iterator[Rows]:
        """``evaluate_points`` of each (config, piece), in order: over the processes when there are several."""
        if self._pool is not None or (self.jobs > 1 and len(pieces) > 1):
            with held():  # the pool starts its processes and queues the pieces whole, whatever signal comes
                if self._pool is None:  # its workers leave signals to this process: one killed while it sends a
                    # result would leave the pool waiting forever on the rest of it
                    self._pool = ProcessPoolExecutor(
                        self.jobs, worker_context(), initializer=ignore_in_worker, initargs=(False,)
                    )
                work = zip(configs, pieces)
                futures = [self._pool.submit(evaluate_points, config, self.space, piece) for config, piece in work]
            # Not `Executor.map`: stopped midway, it cancels the futures it made, and a pool whose workers were killed
            # too then fails to mark them broken (CPython gh-107219, unfixed in 3.10 and 3.11), its queue's writer
            # left waiting forever at exit. The pool's own shutdown cancels what has not started.
            return (future.result() for future in futures)
        return (evaluate_points(config, self.space, piece) for config, piece in zip(configs, pieces))

    def _keep(self, rows: Rows) -> None:
        self.parts.append(rows)
        self.scores.update(zip(self.space.flat(rows.points).tolist(), rows.score(self.config.tune.objective).tolist()))
        self.evaluations += int(rows.simulated.sum())
        self.pruned += int((~rows.simulated).sum())
        self.on_progress(self.evaluations, self.pruned)

    def rows(self) -> Rows:
        """Every configuration looked at, in the order they were looked at."""
        return Rows.concat(self.parts)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """End ``pool``'s workers now, whatever they are doing, and let its shutdown finish.

    A worker killed while it sends a result leaves half a message in the results pipe, and the pool's manager
    thread waits for the rest of it for ever (the pool keeps a writing end of that pipe itself, so it never reads
    an end of file). With every worker gone, closing that last writing end ends the wait: the pool reads the end
    of the file, takes itself for broken and closes.
    """
    workers = list((getattr(pool, "_processes", None) or {}).values())  # CPython's own record of them, by pid
    for process in workers:
        process.kill()
    for process in workers:
        process.join()
    results = getattr(pool, "_result_queue", None)
    if results is not None:
        results._writer.close()
