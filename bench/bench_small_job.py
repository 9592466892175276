"""Benchmark: what a small job pays for machinery, and the figures behind the local cluster's threshold.

    python bench/bench_small_job.py                   # 4 ranks of 2 MB (generated once into bench/out/)
    python bench/bench_small_job.py --ranks 4 --mb 20

Each measurement runs in a fresh process and times the work inside it (not the interpreter's start):

* ``one by one``: each rank's file scanned in turn, ``perftool.scan(FILE)``, in one process — the reference;
* ``job``: ``perftool.scan(DIRECTORY)`` as ``perftool scan DIRECTORY`` runs it by default;
* ``local cluster``: the same on a local Dask cluster of 2 workers (``workers=2``), start-up included;
* ``cluster start``: a local cluster of 2 workers started, given one task, and closed.

Printed: each time, the job's ratio to the reference (target: <= 1.3x), and the measured cluster start and
one-process scan rate beside the constants perftool.job.cluster decides with.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def one_by_one(directory: str) -> dict:
    import perftool
    from perftool.job.ranks import job_files

    start = time.perf_counter()
    for path in job_files([directory]):
        perftool.scan(path)
    return {"seconds": time.perf_counter() - start}


def job(directory: str, workers: str) -> dict:
    import perftool

    start = time.perf_counter()
    report = perftool.scan(directory, workers=int(workers) if workers != "default" else None)
    assert report.job is not None
    return {"seconds": time.perf_counter() - start}


def cluster_start() -> dict:
    from perftool.job.cluster import dask_client

    start = time.perf_counter()
    with dask_client(None, 2) as client:
        client.submit(sum, [1, 2]).result()
    return {"seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--mb", type=float, default=2.0, help="size of each rank's trace, MB of JSON")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best is reported (default 3)")
    args = parser.parse_args()
    from bench_job import generate
    from bench_load import in_child

    from perftool.job.cluster import CLUSTER_START_S, SCANNED_BYTES_PER_S

    directory = os.path.join(HERE, "out", f"small_job_{args.ranks}x{args.mb:g}mb")
    paths = generate(directory, args.ranks, args.mb)
    total = sum(os.path.getsize(p) for p in paths)
    runs = {
        "one": f"bench_small_job.one_by_one({directory!r})",
        "job": f"bench_small_job.job({directory!r}, 'default')",
        "cluster": f"bench_small_job.job({directory!r}, '2')",
    }
    best = {name: min(in_child(call)["seconds"] for _ in range(args.repeat)) for name, call in runs.items()}
    start = min(in_child("bench_small_job.cluster_start()")["seconds"] for _ in range(args.repeat))
    print(f"job: {args.ranks} ranks, {total / 1e6:,.1f} MB of JSON, on {os.cpu_count()} CPUs, best of {args.repeat}")
    print(f"one by one     {best['one']:6.2f} s   (one process: {total / best['one'] / 1e6:,.1f} MB/s)")
    print(f"job, default   {best['job']:6.2f} s   {best['job'] / best['one']:.2f}x one by one (target <= 1.3x)")
    print(f"local cluster  {best['cluster']:6.2f} s   {best['cluster'] / best['one']:.2f}x one by one")
    print(
        f"cluster start  {start:6.2f} s   (perftool.job.cluster assumes {CLUSTER_START_S:g} s to start and "
        f"{SCANNED_BYTES_PER_S / 1e6:g} MB/s in one process)"
    )


if __name__ == "__main__":
    main()
