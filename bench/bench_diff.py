"""Benchmark: ``perftool diff`` of two traces against the time to load both.

    python bench/bench_diff.py --mb 500            # two Kineto-like traces bench_load.py's generator writes
    python bench/bench_diff.py --traces A B        # any two traces

Each measurement runs in a fresh process: ``load`` = load the baseline, then the candidate (one held at a
time, as diff holds them); ``diff`` = the same loads, each trace profiled (steady steps, idle causes, the
per-kernel, op, category and track tables) and the two compared. The passes alternate; the best of each
is printed with its peak RSS. Target (issue #20): diff <= 1.2x load on two 500 MB traces.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(baseline: str, candidate: str, diff: bool) -> dict:
    """Time loading both traces, and with ``diff`` profiling and comparing them (run in a child process)."""
    from perftool.diff.compare import diff_profiles
    from perftool.diff.names import load_op_map
    from perftool.diff.profile import profile
    from perftool.pipeline.read import load_trace

    op_map = load_op_map()
    start = time.perf_counter()
    loading = 0.0
    profiles = []
    for path in (baseline, candidate):
        began = time.perf_counter()
        trace = load_trace(path)
        loading += time.perf_counter() - began
        if diff:
            profiles.append(profile(trace))
        del trace
    rows = len(diff_profiles(*profiles, "kernel", op_map).rows) if diff else 0
    return {
        "total_s": time.perf_counter() - start,
        "load_s": loading,
        "rows": rows,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_child(baseline: str, candidate: str, diff: bool) -> dict:
    from bench_load import in_child

    return in_child(f"bench_diff.measure({baseline!r}, {candidate!r}, {diff!r})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0, help="size of each generated trace (default 500)")
    parser.add_argument("--traces", nargs=2, metavar=("BASELINE", "CANDIDATE"), help="diff these instead")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best is reported (default 3)")
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    from bench_load import generated
    from kineto_synth import write_trace

    def seeded(seed: int) -> str:
        name = f"kineto_{args.mb:g}mb_seed{seed}.json"
        return generated(name, lambda out: write_trace(out, args.mb, seed=seed, compress=False))

    paths = args.traces or [seeded(seed) for seed in (0, 1)]
    passes = [(run_child(*paths, False), run_child(*paths, True)) for _ in range(args.repeat)]  # interleaved
    load = min((p[0] for p in passes), key=lambda r: r["total_s"])
    diff = min((p[1] for p in passes), key=lambda r: r["total_s"])
    sizes = " + ".join(f"{os.path.getsize(p) / 1e6:,.1f} MB" for p in paths)
    print(f"traces    {paths[0]}, {paths[1]} ({sizes}), cores {os.cpu_count()}, best of {args.repeat}")
    print(f"load both {load['total_s']:.2f} s   peak RSS {load['rss_mb']:,.0f} MB")
    print(
        f"diff      {diff['total_s']:.2f} s  (load {diff['load_s']:.2f} s, profiles and compare "
        f"{diff['total_s'] - diff['load_s']:.2f} s, {diff['rows']} kernels)   peak RSS {diff['rss_mb']:,.0f} MB"
    )
    print(f"ratio     diff / load = {diff['total_s'] / load['total_s']:.2f}x  (target <= 1.2x)")
    fastest = min(r["load_s"] for pair in passes for r in pair)  # the same loads in both: their spread is the machine's
    same = (fastest + diff["total_s"] - diff["load_s"]) / fastest
    print(f"same load {same:.2f}x  (the fastest load, {fastest:.2f} s, plus the diff's profiles and compare)")


if __name__ == "__main__":
    main()
