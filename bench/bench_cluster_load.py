"""Benchmark: one large trace decoded by a Dask cluster's workers (``perftool info TRACE --scheduler ADDRESS``)
against the same trace decoded by local processes, on this machine.

    python bench/bench_cluster_load.py                  # bench/out/kineto_500mb.json (generated once), 2 workers
    python bench/bench_cluster_load.py --workers 4 --trace FILE

A local Dask cluster of ``--workers`` single-threaded processes is started once; each measurement then runs in
a fresh process (load + metrics, as bench_load.py times them), alternating the two ways, and the best of
``--repeat`` of each is printed: MB/s of JSON, the ratio of the two, the main process's peak RSS against the
file, and whether both ways give the same metrics.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="an uncompressed trace (default: the 500 MB Kineto-like one in bench/out)")
    parser.add_argument("--workers", type=int, default=2, help="the local cluster's worker processes (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each way; the best is printed (default 3)")
    args = parser.parse_args()

    from bench_load import generated, in_child
    from kineto_synth import write_trace

    from perftool.job.cluster import dask_client

    path = args.trace or generated("kineto_500mb.json", lambda out: write_trace(out, 500, seed=0, compress=False))
    mb = os.path.getsize(path) / 1e6
    runs: dict[str, list[dict]] = {"local processes": [], "cluster": []}
    with dask_client(None, args.workers) as client:
        address = client.scheduler.address
        for _ in range(args.repeat):
            runs["local processes"].append(in_child(f"bench_load.measure({path!r}, {args.workers})"))
            runs["cluster"].append(in_child(f"bench_load.measure({path!r}, None, {address!r})"))
    print(f"trace        {path} ({mb:,.1f} MB of JSON), cores {os.cpu_count()}, {args.workers} workers each way")
    best = {}
    for way, measured in runs.items():
        best[way] = min(r["load_s"] + r["metrics_s"] for r in measured)
        peak = max(r["main_rss_mb"] for r in measured)
        rates = ", ".join(f"{mb / (r['load_s'] + r['metrics_s']):,.0f}" for r in measured)
        print(f"{way:<16} {mb / best[way]:,.0f} MB/s load+metrics (runs: {rates}), main peak RSS {peak:,.0f} MB "
              f"({peak / mb:.2f}x the file)")  # fmt: skip
    same = len({r["metrics"] for measured in runs.values() for r in measured}) == 1
    print(f"cluster / local time {best['cluster'] / best['local processes']:.2f}x; the same metrics both ways: {same}")


if __name__ == "__main__":
    main()
