"""Tuning speed and search quality.

    python bench/bench_tune.py [--repeats 3] [--seeds 3] [--budgets 0.01 0.05]

1. End to end: ``perftool tune`` on a 10,692-configuration exhaustive sweep of the IPU example
   (process start, config, sweep, report), best of ``--repeats``, with 1 and 2 jobs; configs/s. And the
   sweep itself as tune times it (every configuration simulated once, then the contenders re-judged over
   the same noise draws whatever the seed), configs/s. The speed target is set on epochs of 256 steps for
   every configuration; the example as shipped, whose dataset gives batch 8 an epoch of 512 steps and
   batch 32 one of 128, is timed too.
2. A fitted config's default sweep: ``perftool calibrate`` on the bundled Kineto sample, then ``perftool tune`` on
   the fit as written (every speed setting the fit read, input workers among them: each worker count a plan of its
   own, all simulated in one run); configs/s of the sweep, best of ``--repeats``.
3. Search quality at equal budgets (1% and 5% of each bundled example's space): perftool's local
   search against random sampling and, when installed (``pip install '.[bench]'``), Optuna's TPE
   sampler. A configuration the plan prunes (out of memory, too few IO tiles) does not count
   against the budget, for any of them. Prints the gap to the exhaustive optimum and wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perftool.tune.evaluator import Evaluator
from perftool.tune.search import tune
from perftool.tune.space import Space
from perftool.tune.spec import Objective, load_tune_config

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "tune"
KINETO_SAMPLE = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
WIDER_PREFETCH = "tune.space.prefetch_depth={range: [1, 9]}"  # 9,504 -> 10,692 configurations
# the speed target's workload: every configuration runs an epoch of 256 steps, whatever its batch size
FIXED_EPOCH = ("workload.dataset_samples=null", "workload.steps=256")


def end_to_end(repeats: int) -> None:
    for epoch, label in ((FIXED_EPOCH, "256 steps per configuration"), ((), "the example's dataset: 128-512 steps")):
        overrides = [WIDER_PREFETCH, *epoch]
        command = [sys.executable, "-m", "perftool", "tune", str(EXAMPLES / "ipu.yaml"), "--strategy", "exhaustive"]
        command += [*(part for item in overrides for part in ("--set", item)), "--format", "json"]
        size = tune(load_tune_config(EXAMPLES / "ipu.yaml", overrides)).space.size
        for jobs in (1, 2):
            best, sweep = float("inf"), float("inf")
            for _ in range(repeats):
                started = time.perf_counter()
                done = subprocess.run([*command, "--jobs", str(jobs)], check=True, capture_output=True, text=True)
                best = min(best, time.perf_counter() - started)
                sweep = min(sweep, json.loads(done.stdout)["seconds"])  # the sweep and its contenders' noise draws
            target = ", target >= 40,000 on 2 cores" if epoch else ""
            print(
                f"exhaustive end to end, {size:,} configurations ({label}), --jobs {jobs}: {best:.2f} s "
                f"({size / best:,.0f} configs/s, target <= 3 s); the sweep with its noise draws {sweep:.3f} s "
                f"({size / sweep:,.0f} configs/s{target})"
            )


def fitted_sweep(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        fit = Path(folder) / "fit.yaml"
        calibrate_command = [sys.executable, "-m", "perftool", "calibrate", str(KINETO_SAMPLE), "-o", str(fit)]
        subprocess.run(calibrate_command, check=True, capture_output=True)
        size = tune(load_tune_config(fit)).space.size
        command = [sys.executable, "-m", "perftool", "tune", str(fit), "--format", "json"]
        sweep = min(json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)["seconds"]
                    for _ in range(repeats))  # fmt: skip
    print(f"a fit's default sweep ({KINETO_SAMPLE.name}), {size:,} configurations: {sweep:.3f} s "
          f"({size / sweep:,.0f} configs/s)")  # fmt: skip


def sampled(config, budget: int, draw) -> tuple[float, float]:
    """Best throughput found and seconds taken when ``draw(evaluator)`` proposes one point at a time."""
    space = Space.of(config.tune.space)
    started = time.perf_counter()
    with Evaluator(config, space) as evaluator:
        attempts = 0
        while evaluator.evaluations < budget and attempts < 20 * budget:
            draw(evaluator)
            attempts += 1
        return evaluator.best_score, time.perf_counter() - started


def random_draw(seed: int):
    rng = np.random.default_rng(seed)

    def draw(evaluator: Evaluator) -> None:
        evaluator(np.array([[rng.integers(size) for size in evaluator.space.sizes]]))

    return draw


def tpe_search(config, budget: int, seed: int) -> tuple[float, float]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = Space.of(config.tune.space)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))

    def draw(evaluator: Evaluator) -> None:
        trial = study.ask()
        point = np.array([[trial.suggest_int(name, 0, size - 1) for name, size in zip(space.names, space.sizes)]])
        score = float(evaluator(point)[0])
        if np.isfinite(score):
            study.tell(trial, score)
        else:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)

    return sampled(config, budget, draw)


def quality(seeds: int, shares: list[float]) -> None:
    try:
        import optuna  # noqa: F401

        have_optuna = True
    except ImportError:
        have_optuna = False
        print("optuna is not installed (pip install '.[bench]'): TPE is left out")
    print(
        f"{'example':8} {'space':>7} {'budget':>6}  {'local gap':>10} {'time':>7}  {'random gap':>10} {'time':>7}"
        + (f"  {'TPE gap':>10} {'time':>7}" if have_optuna else "")
    )
    for family in ("npu", "ipu", "hpu", "gpu"):
        full = tune(load_tune_config(EXAMPLES / f"{family}.yaml", ["tune.strategy=exhaustive"]))
        optimum = full.rows.score(Objective.THROUGHPUT)[full.optimum]
        for share in shares:
            budget = max(10, round(share * full.space.size))
            gaps: dict[str, list[float]] = {"local": [], "random": [], "tpe": []}
            times: dict[str, list[float]] = {"local": [], "random": [], "tpe": []}
            for seed in range(seeds):
                settings = ["tune.strategy=local", f"tune.seed={seed}", f"tune.budget={budget}"]
                config = load_tune_config(EXAMPLES / f"{family}.yaml", settings)
                local = tune(config)
                runs = {
                    "local": (local.rows.score(Objective.THROUGHPUT).max(), local.seconds),
                    "random": sampled(config, budget, random_draw(seed)),
                }
                if have_optuna:
                    runs["tpe"] = tpe_search(config, budget, seed)
                for name, (found, seconds) in runs.items():
                    gaps[name].append(1 - found / optimum)
                    times[name].append(seconds)
            cells = "".join(
                f"  {np.mean(gaps[name]):>10.2%} {np.mean(times[name]):>6.2f}s"
                for name in ("local", "random", "tpe")
                if gaps[name]
            )
            print(f"{family:8} {full.space.size:>7,} {budget:>6}{cells}")
    print(f"(gap: 1 - best found / exhaustive optimum, mean over {seeds} seeds; same budget of evaluations for all)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.01, 0.05], help="shares of each space")
    args = parser.parse_args()
    end_to_end(args.repeats)
    fitted_sweep(args.repeats)
    quality(args.seeds, args.budgets)


if __name__ == "__main__":
    main()
