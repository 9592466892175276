"""How long a fit's run must be: its mean step against a much longer run of the same fit, and what a run costs.

    python bench/bench_fit_run.py [--long 8192] [--seeds 8]

A fit (and every what-if on it: scan's gains, tune, emulate) takes its step as the mean over a run of
:data:`~perftool.predict.fitting.FIT_RUN_STEPS` steps, so that it is the model's expected step rather than one short
draw of its jitter. For each real capture the repo holds (bench_calibrate.py's list) this prints the fit's mean step,
the same fit's mean over ``--long`` steps, how far apart the two are, the spread (standard deviation) of the run's
mean over ``--seeds`` seeds, and the time one run takes. Both sides are the model: this measures the run's sampling
error (self-consistency), not how well the model predicts a real job.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from perftool.analysis import compute_metrics
from perftool.analysis.family import device_family
from perftool.analysis.steps import detect_steps
from perftool.common.errors import PerftoolError
from perftool.emulator.config import EmulatorConfig
from perftool.emulator.evaluate import evaluate_plan
from perftool.emulator.plan import build_plan
from perftool.pipeline.read import load_trace
from perftool.predict.fitting import FIT_RUN_STEPS, fit
from perftool.rules.detectors import Scope


def mean_step(config: EmulatorConfig, steps: int | None = None, seed: int | None = None) -> tuple[float, float]:
    """The config's steady mean step over ``steps`` (its own where None) with ``seed``, µs, and the run's seconds."""
    workload = config.workload if steps is None else config.workload.model_copy(update={"steps": steps})
    config = config.model_copy(update={"workload": workload, "seed": config.seed if seed is None else seed})
    start = time.perf_counter()
    figures = evaluate_plan(build_plan(config), config.seed)
    return float(figures["step_time_mean_us"][0]), time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, default=8192, help="steps of the run compared with (default 8192)")
    parser.add_argument("--seeds", type=int, default=8, help="seeds the run's spread is taken over (default 8)")
    args = parser.parse_args()
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_calibrate import CAPTURES

    print(f"a fit's run: {FIT_RUN_STEPS} steps (rounded up to whole loops), against {args.long:,} steps")
    print(f"{'capture':44} {'steps':>5} {'mean step':>13} {'long run':>13} {'apart':>7} {'seeds sd':>8} {'run':>8}")
    worst = 0.0
    for capture in CAPTURES:
        name = capture.name.removesuffix(".json.gz").removesuffix(".pt.trace")
        try:
            trace = load_trace(str(capture))
            steps = detect_steps(trace)
            config = fit(trace, Scope(trace, steps, compute_metrics(trace, steps), device_family(trace), None, 3, None))
        except PerftoolError as exc:
            print(f"{name:44} not fitted: {str(exc).split(': ', 1)[-1]}")
            continue
        fitted, seconds = mean_step(config)
        long, _ = mean_step(config, args.long)
        draws = [mean_step(config, seed=seed)[0] for seed in range(1, args.seeds + 1)]
        apart = fitted / long - 1
        worst = max(worst, abs(apart))
        print(
            f"{name:44} {config.workload.steps:5} {fitted:13.1f} {long:13.1f} {apart:+7.2%}"
            f" {np.std(draws) / np.mean(draws):8.2%} {seconds * 1e3:6.1f}ms"
        )
    print(f"largest gap to the {args.long:,}-step run: {worst:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
