"""A sweep from start to answer: pick the strategy, search, evaluate the baseline, choose the best.

The *optimum* is the configuration with the best objective. The *best* — what perftool
recommends — is, among the configurations within ``tolerance`` of the optimum, the one whose
values come earliest in each knob's list (lists are tried in the order given; ranges and pow2
ascend), so the smallest setting that does the job wins over one that is 0.1% faster by luck.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from perftool.common.errors import PerftoolError
from perftool.tune.evaluator import Evaluator, Rows, evaluate_grid
from perftool.tune.exhaustive import exhaustive
from perftool.tune.explain import why
from perftool.tune.local import compare_neighbours, local_search
from perftool.tune.result import TuneResult
from perftool.tune.sensitivity import knob_lines
from perftool.tune.space import Space
from perftool.tune.spec import Objective, TuneConfig, TuneSpec

AUTO_EXHAUSTIVE_WORK = 20_000_000  # configurations x steps that auto still sweeps exhaustively (seconds of work)
DEFAULT_BUDGET_SHARE = 0.05  # local search's default budget: this share of the space ...
MIN_DEFAULT_BUDGET = 100  # ... at least this many configurations ...
MAX_DEFAULT_BUDGET = 10_000  # ... and at most this many
NOISE_DRAWS = 8  # jitter draws the finalists for the answer are averaged over ...
SCREEN_DRAWS = 2  # ... after every contender is screened on this many
FINALISTS_SHARE = 0.02  # contenders this close to the best screened mean are finalists
CONTENDERS_SHARE = 0.08  # configurations this close to the best draw are contenders ...
MAX_CONTENDERS = 1024  # ... at most this many
NOISY_FIGURES = (
    "step_time_us",
    "step_time_mean_us",
    "step_time_p10_us",
    "step_time_p90_us",
    "throughput",
    "device_busy_fraction",
)


class NoFeasibleConfiguration(PerftoolError):
    """Every configuration looked at is out of memory or breaks a constraint: exit code 1."""

    exit_code = 1


def tune(
    config: TuneConfig,
    jobs: int = 1,
    on_start: Callable[[str, int], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    scheduler: str | None = None,
) -> TuneResult:
    """Run the sweep ``config.tune`` describes; ``on_start(strategy, total)`` and ``on_progress`` report it.
    Configurations are simulated in ``jobs`` processes, or on the Dask cluster at ``scheduler``."""
    spec = config.tune
    space = Space.of(spec.space)
    strategy = _strategy(config, space)
    budget = _budget(config, space, strategy)
    if on_start:
        on_start(strategy, space.size if budget is None else budget)
    started = time.perf_counter()
    with Evaluator(config, space, jobs, on_progress, scheduler) as evaluator:
        if strategy == "exhaustive":
            exhaustive(evaluator)
        else:
            assert budget is not None  # local search always has one (see _budget)
            kept_back = min(8 * len(space.names), budget // 10)  # to compare the answer with its neighbours
            local_search(evaluator, space.nearest(config), budget - kept_back, spec.seed)
            _compare_answer(evaluator, spec, budget)
        rows = evaluator.rows()
        _over_noise_draws(config, rows, evaluator.draws)
    seconds = time.perf_counter() - started
    optimum, best = choose(rows, space, spec.objective, spec.tolerance)
    baseline = evaluate_grid(config, None)
    _over_noise_draws(config, baseline, _as_written(config), every=True)
    result = TuneResult(
        config,
        space,
        strategy,
        budget,
        rows,
        evaluator.evaluations,
        evaluator.pruned,
        seconds,
        baseline,
        optimum,
        best,
    )
    result.sensitivity = knob_lines(result)  # computed once, here: renderers only format them
    result.explanation = why(result)
    return result


def _compare_answer(evaluator: Evaluator, spec: TuneSpec, budget: int) -> None:
    """Evaluate the values either side of the answer's knobs, again while that changes the answer and budget is left."""
    answers: set[int] = set()
    while evaluator.evaluations < budget:
        rows = evaluator.rows()
        if not np.isfinite(rows.score(spec.objective)).any():
            return
        point = rows.points[choose(rows, evaluator.space, spec.objective, spec.tolerance)[1]]
        answer = int(evaluator.space.flat(point[None, :])[0])
        if answer in answers:
            return
        answers.add(answer)
        compare_neighbours(evaluator, point, budget)


Draws = Callable[[np.ndarray, range], list[Rows]]  # points evaluated under each seed's jitter draw


def _as_written(config: TuneConfig) -> Draws:
    """The config as written (no knob swept) under each seed's draw."""
    return lambda _points, seeds: [evaluate_grid(config.model_copy(update={"seed": seed}), None) for seed in seeds]


def _over_noise_draws(config: TuneConfig, rows: Rows, draws: Draws, every: bool = False) -> None:
    """Replace the figures of the configurations that could win (within ``CONTENDERS_SHARE`` of the best, at most
    ``MAX_CONTENDERS``; ``every`` row when asked) by their mean over the same draws of the jitter whatever the
    config's seed, so the recommendation is the expected best, not one draw's luck. The contenders are screened
    on ``SCREEN_DRAWS`` draws first; those still within ``FINALISTS_SHARE`` of the best get ``NOISE_DRAWS``."""
    score = rows.score(config.tune.objective)
    finite = np.isfinite(score)
    if not finite.any():
        return
    chosen = np.flatnonzero(finite)
    if not every:
        best = score[finite].max()
        near = np.flatnonzero(finite & (score >= best - CONTENDERS_SHARE * abs(best)))
        chosen = near[np.argsort(-score[near], kind="stable")[:MAX_CONTENDERS]]
    screened = _mean_over_draws(rows, chosen, draws, range(SCREEN_DRAWS))
    finalists = chosen
    if not every:
        score = rows.score(config.tune.objective)[chosen]
        finalists = chosen[score >= score.max() - FINALISTS_SHARE * abs(score.max())]
    kept = {name: values[np.isin(chosen, finalists)] for name, values in screened.items()}
    _mean_over_draws(rows, finalists, draws, range(SCREEN_DRAWS, NOISE_DRAWS), kept)


def _mean_over_draws(
    rows: Rows, chosen: np.ndarray, draws: Draws, seeds: range, earlier: dict | None = None
) -> dict[str, np.ndarray]:
    """Set ``chosen`` rows' noisy figures to their mean over the draws of ``seeds`` and of the seeds before them,
    whose sums ``earlier`` holds; returns the sums so far, per figure, for later draws to add to."""
    drawn = draws(rows.points[chosen], seeds)
    sums = {}
    for name in NOISY_FIGURES:
        sums[name] = (earlier or {}).get(name, 0.0) + np.sum([draw.figures[name] for draw in drawn], axis=0)
        rows.figures[name][chosen] = sums[name] / seeds.stop  # the draws of seeds 0 .. stop - 1
    return sums


def choose(rows: Rows, space: Space, objective: Objective, tolerance: float) -> tuple[int, int]:
    """The optimum's row and the recommended row (earliest values within ``tolerance`` of the optimum)."""
    score = rows.score(objective)
    if not np.isfinite(score).any():
        raise NoFeasibleConfiguration(_nothing_feasible(rows))
    optimum = int(np.argmax(score))
    near = np.flatnonzero(score >= score[optimum] - tolerance * abs(score[optimum]))
    points = rows.points[near]
    order = np.lexsort((*points.T[::-1], space.preference(points)))
    return optimum, int(near[order[0]])


def _nothing_feasible(rows: Rows) -> str:
    listed = ", ".join(f"{count:,} {cause}" for cause, count in rows.causes().most_common())
    return f"no feasible configuration among the {len(rows.reason):,} looked at: {listed}"


def _strategy(config: TuneConfig, space: Space) -> str:
    spec = config.tune
    if spec.strategy == "auto":
        fits = space.size * _longest_epoch(config, space) <= AUTO_EXHAUSTIVE_WORK and spec.budget is None
        return "exhaustive" if fits else "local"
    return spec.strategy


def _longest_epoch(config: TuneConfig, space: Space) -> int:
    """The most steps an epoch takes at any batch size the space holds."""
    batches = space.values[space.names.index("batch_size")] if "batch_size" in space.names else config.knobs.batch_size
    steps, _ = config.workload.epoch(np.atleast_1d(batches))
    return int(steps.max())


def _budget(config: TuneConfig, space: Space, strategy: str) -> int | None:
    if strategy == "exhaustive":
        return None
    default = min(MAX_DEFAULT_BUDGET, max(MIN_DEFAULT_BUDGET, int(np.ceil(DEFAULT_BUDGET_SHARE * space.size))))
    return min(space.size, config.tune.budget or default)
