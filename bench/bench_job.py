"""Benchmark: scanning a job of many ranks on Dask — ranks/s, MB/s and peak memory for 1, 2 and 4 workers.

    python bench/bench_job.py                       # 32 ranks of 50 MB (generated once into bench/out/)
    python bench/bench_job.py --ranks 32 --mb 10    # smaller traces, quicker

Each measurement runs in a fresh process. ``single`` scans one rank's trace the way ``perftool scan FILE``
does (its decoding processes included): its MB/s is the reference and its peak RSS the one-trace load peak.
For each worker count, the whole job is scanned on a fresh local Dask cluster of that many worker processes
(1: in this process, without Dask); its wall time includes starting the cluster, and the peak RSS of each
worker is read from the worker itself. The job view is then timed alone, built from the ranks' summaries.
Targets (issue #18): 2 workers at >= 0.9x the single-trace MB/s; peak memory per worker <= one trace's load
peak; the job report built from summaries in < 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def generate(directory: str, ranks: int, megabytes: float) -> list[str]:
    """The job's rank traces, written once and kept between runs."""
    from kineto_synth import write_trace

    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, f"rank{rank:02d}.json") for rank in range(ranks)]
    for rank, path in enumerate(paths):
        if not os.path.exists(path):
            write_trace(path + ".part", megabytes, seed=rank, rank=(rank, ranks))
            os.replace(path + ".part", path)
    return paths


def peak_rss_mb() -> float:
    """The peak resident memory of this process or of the largest process it waited for, MB (Linux reports kB)."""
    return max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1e3


class TreePeak:
    """The peak of the resident memory of this process and its children together, sampled every 5 ms."""

    def __init__(self) -> None:
        import psutil

        self.process, self.peak, self._stop = psutil.Process(), 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            total = 0
            for member in [self.process, *self.process.children(recursive=True)]:
                try:
                    total += member.memory_info().rss
                except Exception:  # a child that ended between listing and reading
                    continue
            self.peak = max(self.peak, total)

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure_single(path: str) -> dict:
    """One rank scanned as ``perftool scan FILE`` does: its time, then (a second pass, sampled, so the sampling
    does not slow the first) the peak memory of the process with its decoding processes: the one-trace load
    peak."""
    from perftool.pipeline.read import load_trace
    from perftool.pipeline.scan import scan_trace
    from perftool.rules.catalog import load_catalog

    rules = load_catalog()
    start = time.perf_counter()
    scan_trace(load_trace(path, analysis="scan"), rules)
    seconds = time.perf_counter() - start
    with TreePeak() as tree:
        scan_trace(load_trace(path, analysis="scan"), rules)
    return {"seconds": seconds, "tree_peak_mb": tree.peak / 1e6}


def measure_job(directory: str, workers: int) -> dict:
    import perftool

    if workers == 1:
        start = time.perf_counter()
        report = perftool.scan(directory, workers=1)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "ranks": len(report.traces), "worker_peak_rss_mb": [peak_rss_mb()]}
    from distributed import Client, LocalCluster

    start = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0", silence_logs=40) as cluster:
        with Client(cluster) as client:
            idle = client.run(peak_rss_mb)
        report = perftool.scan(directory, scheduler=cluster.scheduler_address)
        seconds = time.perf_counter() - start
        with Client(cluster) as client:
            peaks = client.run(peak_rss_mb)
    return {
        "seconds": seconds,
        "ranks": len(report.traces),
        "worker_peak_rss_mb": sorted(peaks.values()),
        "worker_idle_rss_mb": max(idle.values()),
    }


def measure_view(directory: str) -> dict:
    """Summaries first (here), then the job view alone, timed over five builds."""
    from perftool.job.ranks import job_files
    from perftool.job.summary import summarise_rank
    from perftool.job.view import job_view
    from perftool.pipeline.scan import ReadOptions
    from perftool.rules.catalog import load_catalog

    rules = load_catalog()
    summaries = [summarise_rank(p, i, rules, ReadOptions()) for i, p in enumerate(job_files([directory]))]
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        job_view(summaries, rules)
        timings.append(time.perf_counter() - start)
    return {"seconds": min(timings)}


def in_child(kind: str, *args: str) -> dict:
    """Run one measurement in a fresh process and return what it printed."""
    command = [sys.executable, __file__, "--child", kind, *args]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--mb", type=float, default=50.0, help="size of each rank's trace, MB of JSON")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        measure = {"single": measure_single, "job": lambda d, w: measure_job(d, int(w)), "view": measure_view}[kind]
        print(json.dumps(measure(*rest)))
        return
    directory = os.path.join(HERE, "out", f"job_{args.ranks}x{args.mb:g}mb")
    paths = generate(directory, args.ranks, args.mb)
    total_mb = sum(os.path.getsize(p) for p in paths) / 1e6
    size_mb = os.path.getsize(paths[0]) / 1e6
    single = in_child("single", paths[0])
    single_rate = size_mb / single["seconds"]
    load_peak = single["tree_peak_mb"]
    print(f"job: {args.ranks} ranks, {total_mb:,.0f} MB of JSON, on {os.cpu_count()} CPUs")
    print(
        f"single trace ({size_mb:,.0f} MB) as perftool scan FILE: {single_rate:,.1f} MB/s, peak RSS {load_peak:,.0f} "
        "MB with its decoding processes (the one-trace load peak)"
    )
    for workers in args.workers:
        job = in_child("job", directory, str(workers))
        rate = total_mb / job["seconds"]
        peak = max(job["worker_peak_rss_mb"])
        idle = f", {job['worker_idle_rss_mb']:,.0f} MB of it before any rank" if "worker_idle_rss_mb" in job else ""
        print(
            f"{workers} worker(s): {job['seconds']:,.1f} s, {job['ranks'] / job['seconds']:,.2f} ranks/s, "
            f"{rate:,.1f} MB/s ({rate / single_rate:.2f}x single), peak RSS per worker {peak:,.0f} MB{idle} "
            f"({peak / load_peak:.2f}x the one-trace load peak)"
        )
    view = in_child("view", directory)
    print(f"job view from {args.ranks} summaries: {view['seconds'] * 1e3:,.1f} ms")


if __name__ == "__main__":
    main()
