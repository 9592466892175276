"""Benchmark: what the roofline costs `perftool info` on a large trace — load + metrics + roofline against load +
metrics with the op model switched off (the loader keeping no op inputs, no roofline), each run in a fresh process,
the two alternated so both see the same machine.

    python bench/bench_roofline.py --mb 500            # generates bench/out/kineto_500mb.json once
    python bench/bench_roofline.py --trace FILE --repeats 5

Target (issue #30): load + analysis within 10% of its time without the model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(path: str, with_model: bool) -> dict:
    """Load + metrics (+ roofline) in this process; seconds and what was found."""
    from perftool import dialects
    from perftool.analysis.metrics import compute_metrics
    from perftool.dialects.vocabulary import COLLECTIVE_ARGS
    from perftool.roofline.figures import roofline
    from perftool.trace.kept_args import KeepArgs
    from perftool.trace.loader import read_trace

    keep = dialects.kept_args()
    if not with_model:
        keep = KeepArgs(keep.categories, f"(?i:{COLLECTIVE_ARGS.pattern})")
    start = time.perf_counter()
    trace = dialects.apply(read_trace(path, None, None, keep))
    metrics = compute_metrics(trace)
    figures = roofline(trace, metrics) if with_model else None
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "mfu": figures.mfu if figures else None, "ops": len(figures.ops) if figures else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0, help="size of the generated trace (default 500)")
    parser.add_argument("--trace", help="benchmark this trace instead")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each, alternated (default 5)")
    parser.add_argument("--child", choices=["with", "without"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.trace, args.child == "with")))
        return
    path = args.trace
    if path is None:
        from kineto_synth import write_trace

        os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
        path = os.path.join(HERE, "out", f"kineto_{args.mb:g}mb.json")
        if not os.path.exists(path):
            write_trace(path, args.mb)
    times: dict[str, list[float]] = {"with": [], "without": []}
    found = {}
    for _ in range(args.repeats):
        for mode in ("without", "with"):
            command = [sys.executable, __file__, "--trace", path, "--child", mode]
            result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            times[mode].append(result["seconds"])
            found = result if mode == "with" else found
    size = os.path.getsize(path) / 1e6
    without, with_model = statistics.median(times["without"]), statistics.median(times["with"])
    print(f"trace: {path} ({size:,.0f} MB), {os.cpu_count()} cores, {args.repeats} runs of each, medians")
    print(f"  load + metrics, no op model:      {without:.2f} s ({size / without:,.0f} MB/s)")
    print(f"  load + metrics + roofline:        {with_model:.2f} s ({size / with_model:,.0f} MB/s)")
    print(f"  ratio with / without:             {with_model / without:.3f}  (target <= 1.10)")
    print(f"  roofline found {found['ops']} op rows, MFU {found['mfu']}")


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
