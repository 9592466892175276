"""Emulator speed: the fast path in configurations per second, the trace writer in MB/s.

    python bench/bench_emulator.py [--configs 10000] [--steps 1000] [--trace-steps 20000]

The fast path sweeps loop size x prefetch depth x batch size x transfer dtype of the bundled NPU
sample (every configuration simulated step by step, no trace); it also runs each bundled sample's config alone for
as many steps, as scan runs a fit and each fix (a run of one configuration: the step loop's own cost, not spread
over many; the median over the samples of each one's best time). The trace writer emits one IPU
configuration with many steps; it is timed on its own and together with the simulation it needs.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

from perftool.emulator.config import load_config
from perftool.emulator.evaluate import evaluate
from perftool.emulator.full_run import run
from perftool.emulator.plan import build_plan
from perftool.emulator.simulate import simulate
from perftool.emulator.trace_writer import trace_bytes

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def sweep_grid(configs: int) -> dict[str, np.ndarray]:
    """About ``configs`` knob combinations (10 values per knob, 4 knobs)."""
    per_knob = max(2, round(configs**0.25))
    loop = np.array([1, 2, 4, 5, 8, 10, 20, 25, 40, 50] * 2)[:per_knob]
    depth = np.arange(1, per_knob + 1)
    batch = 16 * np.arange(1, per_knob + 1)
    dtype = np.array(["fp32", "fp16", "int8"] * per_knob)[:per_knob]
    mesh = np.meshgrid(loop, depth, batch, np.arange(per_knob), indexing="ij")
    return {
        "loop_size": mesh[0].ravel(),
        "prefetch_depth": mesh[1].ravel(),
        "batch_size": mesh[2].ravel(),
        "transfer_dtype": dtype[mesh[3].ravel()],
    }


def best_of(repeats: int, work) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=1_000)
    parser.add_argument("--trace-steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    config = load_config(SAMPLES / "npu" / "healthy.yaml", [f"workload.steps={args.steps}"])
    grid = sweep_grid(args.configs)
    count = grid["loop_size"].size
    seconds, result = best_of(args.repeats, lambda: evaluate(config, grid))
    print(
        f"fast path: {count:,} configurations x {args.steps:,} steps in {seconds:.2f} s "
        f"= {count / seconds:,.0f} configs/s ({int(result.feasible.sum()):,} feasible)"
    )

    alone = []
    for path in sorted(SAMPLES.glob("*/*.yaml")):
        sample = load_config(path, [f"workload.steps={args.steps}", "workload.epochs=1"])
        alone.append(best_of(args.repeats, lambda sample=sample: simulate(build_plan(sample), sample.seed))[0])
    print(
        f"one configuration x {args.steps:,} steps: {np.median(alone) * 1e3:.1f} ms "
        f"(median of {len(alone)} samples, {min(alone) * 1e3:.1f}-{max(alone) * 1e3:.1f} ms)"
    )

    one = load_config(SAMPLES / "ipu" / "healthy.yaml", [f"workload.steps={args.trace_steps}"])
    simulate_s, emulated = best_of(args.repeats, lambda: run(one))
    write_s, data = best_of(args.repeats, lambda: trace_bytes(emulated))
    megabytes = len(data) / 1e6
    print(
        f"trace writer: {megabytes:.1f} MB ({args.trace_steps:,} steps) in {write_s:.2f} s = "
        f"{megabytes / write_s:.0f} MB/s; with the simulation {simulate_s:.2f} s: "
        f"{megabytes / (write_s + simulate_s):.0f} MB/s"
    )
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
