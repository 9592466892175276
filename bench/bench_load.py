"""Benchmark: load + metrics throughput and peak memory on a Kineto-like trace.

    python bench/bench_load.py --mb 500            # generates bench/out/kineto_500mb.json once
    python bench/bench_load.py --mb 500 --gzip     # the same trace, gzip-compressed
    python bench/bench_load.py --trace FILE        # any trace
    python bench/bench_load.py --mb 500 --msgspec  # every piece read by msgspec, as without the compiled scanner
    python bench/bench_load.py --mb 500 --scanner  # also the compiled scanner alone: MB/s a core

Each measurement runs in a fresh process and prints MB/s (of uncompressed JSON), the time split,
and peak RSS of the main process and of the largest decoding worker, against the file size.
Targets (issue #2): >= 200 MB/s on a 500 MB trace with 2 cores; peak RSS <= 1.5x the file size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")


def measure(path: str, workers: int | None, scheduler: str | None = None, scanner: bool = True) -> dict:
    """Load + metrics in this process (its byte ranges decoded on the Dask cluster at ``scheduler`` where given;
    without the compiled scanner unless ``scanner``, as an install without a C compiler reads); return timings,
    peak RSS and a digest of the metrics (run in a child process)."""
    from perftool.analysis import compute_metrics
    from perftool.job.cluster import cluster_decoders
    from perftool.pipeline.read import load_trace
    from perftool.trace import events

    if not scanner:
        events._scan = None  # the decoding processes are forked from this one, so they read with msgspec too
    start = time.perf_counter()
    trace = load_trace(path, workers=workers, decoders=cluster_decoders(scheduler) if scheduler else None)
    loaded = time.perf_counter()
    metrics = compute_metrics(trace)
    done = time.perf_counter()
    return {
        "events": len(trace),
        "steps": metrics["steps.count"],
        "load_s": loaded - start,
        "metrics_s": done - loaded,
        "main_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "metrics": json.dumps({name: value for name, value in metrics.values.items()}, sort_keys=True, default=str),
    }


def scanner_alone(path: str, pieces: int = 60, repeat: int = 3) -> float:
    """MB/s of the compiled scanner alone, in this process, over the first ``pieces`` pieces of an uncompressed trace
    read into memory first: the best of ``repeat`` passes (run in a child process)."""
    from perftool.trace import decode
    from perftool.trace._scan import scan
    from perftool.trace.loader import _pieces

    events = decode.locate_events(path, {})
    data = [bytes(decode.read_events_range(path, *events, *piece)) for piece in list(_pieces(*events))[:pieces]]
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        for piece in data:
            scan(piece)
        best = min(best, time.perf_counter() - start)
    return sum(map(len, data)) / 1e6 / best


def decompress_only(path: str) -> float:
    start = time.perf_counter()
    with gzip.open(path, "rb") as fh:
        while fh.read(8 << 20):
            pass
    return time.perf_counter() - start


def generated(name: str, write: Callable[[str], None]) -> str:
    """The bench trace ``name`` in bench/out, written by ``write(path)`` the first time it is asked for."""
    path = os.path.join(OUT, name)
    if not os.path.exists(path):
        os.makedirs(OUT, exist_ok=True)
        print(f"generating {path} ...", flush=True)
        write(path)
    return path


def in_child(call: str) -> dict:
    """Evaluate ``call`` (an expression over the bench modules) in a fresh interpreter; return its JSON result."""
    module = call.split(".")[0]  # the bench module the call names
    code = f"import json, sys; sys.path.insert(0, {HERE!r}); import {module}; print(json.dumps({call}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_child(path: str, workers: int | None, scanner: bool) -> dict:
    return in_child(f"bench_load.measure({path!r}, {workers!r}, scanner={scanner!r})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0, help="size of the generated trace (default 500)")
    parser.add_argument("--gzip", action="store_true", help="benchmark the gzip-compressed trace")
    parser.add_argument("--trace", help="benchmark this file instead of a generated one")
    parser.add_argument("--workers", type=int, default=None, help="decoding processes (default: perftool's choice)")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported (default 3)")
    parser.add_argument("--msgspec", action="store_true", help="read every piece with msgspec, not the scanner")
    parser.add_argument("--scanner", action="store_true", help="also time the compiled scanner alone (MB/s a core)")
    args = parser.parse_args()

    sys.path.insert(0, HERE)
    from kineto_synth import write_trace

    name = f"kineto_{args.mb:g}mb.json" + (".gz" if args.gzip else "")
    path = args.trace or generated(name, lambda out: write_trace(out, args.mb, seed=0, compress=args.gzip))
    compressed = path.endswith(".gz")
    json_bytes = os.path.getsize(path)
    if compressed:
        with gzip.open(path, "rb") as fh:
            json_bytes = sum(len(chunk) for chunk in iter(lambda: fh.read(8 << 20), b""))

    runs = [run_child(path, args.workers, not args.msgspec) for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["load_s"] + r["metrics_s"])
    total = best["load_s"] + best["metrics_s"]
    mb = json_bytes / 1e6
    file_mb = os.path.getsize(path) / 1e6
    print(f"trace        {path}")
    print(f"size         {mb:,.1f} MB of JSON" + (f" ({file_mb:,.1f} MB gzip)" if compressed else ""))
    print(f"events       {best['events']:,} ({best['steps']:,.0f} steps), cores {os.cpu_count()}")
    print(f"read by      {'msgspec' if args.msgspec else 'the compiled scanner, msgspec where it declines'}")
    print(f"load         {best['load_s']:.2f} s   metrics {best['metrics_s']:.2f} s   (best of {len(runs)})")
    print(
        f"throughput   {mb / total:,.0f} MB/s load+metrics   (all runs: "
        + ", ".join(f"{mb / (r['load_s'] + r['metrics_s']):,.0f}" for r in runs)
        + ")"
    )
    if compressed:
        unzip = decompress_only(path)
        print(f"gzip         decompression alone {unzip:.2f} s ({mb / unzip:,.0f} MB/s)")
    if args.scanner and not compressed:
        alone = in_child(f"bench_load.scanner_alone({path!r})")
        print(f"scanner      {alone:,.0f} MB/s a core, alone (the first 60 pieces, in memory; best of 3)")
    peak = max(r["main_rss_mb"] for r in runs)
    worker = max(r["worker_rss_mb"] for r in runs)
    print(f"peak RSS     main {peak:,.0f} MB ({peak / mb:.2f}x the JSON size)   largest worker {worker:,.0f} MB")


if __name__ == "__main__":
    main()
