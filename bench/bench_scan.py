"""Benchmark: what ``perftool scan`` costs on top of ``perftool info`` (load + steps + metrics + roofline).

    python bench/bench_scan.py --mb 500        # the Kineto-like trace bench_load.py generates
    python bench/bench_scan.py --trace FILE    # any trace
    python bench/bench_scan.py --cores 1       # each pass on one core: the analysis on one thread's worth of CPU

Each measurement runs in a fresh process: ``info`` = load + steps + metrics + roofline (what ``perftool info``
computes); ``scan`` = load + metrics + idle attribution + every built-in rule (the roofline among them) and the fit
behind the gains; the passes alternate. Prints both wall times, the ratio
and peak RSS, the ratio over the same (fastest) load, which the machine's noise moves less, the median and range of
the ratio over the alternating pairs of passes (the spread the machine gives it), and the analyses' median CPU time
(every thread's), which the machine moves less still.
Target (issue #4): scan <= 1.2x info on the 500 MB trace.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(path: str, scan: bool, cores: int | None = None) -> dict:
    """Time one info or scan pass in this process (run in a child process), numpy's OpenBLAS without threads, as the
    ``perftool`` command sets it for itself (:mod:`perftool.common.startup`); on the first ``cores`` of the cores
    this process may use (all of them: None), as a container limited to them runs it."""
    from perftool.common.startup import BLAS_THREADS  # the package alone: numpy is not loaded yet

    if cores is not None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    os.environ.setdefault(BLAS_THREADS, "1")
    from perftool.analysis import compute_metrics
    from perftool.analysis.steps import detect_steps
    from perftool.pipeline.read import load_trace
    from perftool.pipeline.scan import scan_trace
    from perftool.roofline.figures import roofline
    from perftool.rules.catalog import load_catalog

    start = time.perf_counter()
    trace = load_trace(path, analysis="scan" if scan else "info")  # what each command reads: a scan keeps launches
    loaded, cpu = time.perf_counter(), _cpu_s()
    findings = len(scan_trace(trace, load_catalog()).findings) if scan else 0
    if not scan:  # what `perftool info` computes: the steps, the metrics and the roofline
        steps = detect_steps(trace)
        compute_metrics(trace, steps)
        roofline(trace, steps, None)
    done = time.perf_counter()
    return {
        "load_s": loaded - start,
        "analysis_s": done - loaded,
        "analysis_cpu_s": _cpu_s() - cpu,
        "findings": findings,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _cpu_s() -> float:
    """This process's CPU time so far, every thread's, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_child(path: str, scan: bool, cores: int | None) -> dict:
    from bench_load import in_child

    return in_child(f"bench_scan.measure({path!r}, {scan!r}, {cores!r})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0, help="size of the generated trace (default 500)")
    parser.add_argument("--trace", help="benchmark this file instead of a generated one")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best is reported (default 3)")
    parser.add_argument("--cores", type=int, help="run each pass on this many of the usable cores (default: all)")
    args = parser.parse_args()
    if args.cores is not None and args.cores < 1:
        parser.error(f"--cores {args.cores}: a pass needs one core at least")
    if args.cores is not None and not hasattr(os, "sched_setaffinity"):
        parser.error("--cores needs a system that pins a process to cores (Linux)")
    sys.path.insert(0, HERE)
    from bench_load import generated
    from kineto_synth import write_trace

    name = f"kineto_{args.mb:g}mb.json"
    path = args.trace or generated(name, lambda out: write_trace(out, args.mb, seed=0, compress=False))
    # info and scan interleaved
    passes = [(run_child(path, False, args.cores), run_child(path, True, args.cores)) for _ in range(args.repeat)]
    info = min((p[0] for p in passes), key=lambda r: r["load_s"] + r["analysis_s"])
    scan = min((p[1] for p in passes), key=lambda r: r["load_s"] + r["analysis_s"])
    info_s, scan_s = info["load_s"] + info["analysis_s"], scan["load_s"] + scan["analysis_s"]
    from perftool.common.cores import usable_cores

    cores = min(args.cores or usable_cores(), usable_cores())
    print(f"trace     {path} ({os.path.getsize(path) / 1e6:,.1f} MB), cores {cores}, best of {args.repeat}")
    for label, best, total in (("info", info, info_s), ("scan", scan, scan_s)):
        analysis = "steps + metrics + roofline" if label == "info" else f"metrics + rules, {best['findings']} findings"
        print(
            f"{label:<9} {total:.2f} s  (load {best['load_s']:.2f} s, {analysis} {best['analysis_s']:.2f} s)"
            f"   peak RSS {best['rss_mb']:,.0f} MB"
        )
    print(f"ratio     scan / info = {scan_s / info_s:.2f}x  (target <= 1.2x)")
    load = min(r["load_s"] for pair in passes for r in pair)  # the same code in both: its spread is the machine's
    analysis = {label: min(p[i]["analysis_s"] for p in passes) for i, label in enumerate(("info", "scan"))}
    print(
        f"same load {(load + analysis['scan']) / (load + analysis['info']):.2f}x  (the fastest load, {load:.2f} s, "
        f"plus each pass's fastest analysis: rules add {analysis['scan'] - analysis['info']:.2f} s)"
    )
    paired = sorted((b["load_s"] + b["analysis_s"]) / (a["load_s"] + a["analysis_s"]) for a, b in passes)
    print(  # each scan pass against the info pass just before it: the spread the machine gives the ratio
        f"pairs     scan / info {paired[len(paired) // 2]:.2f}x median of {len(paired)} alternating pairs"
        f" ({paired[0]:.2f}x to {paired[-1]:.2f}x)"
    )
    cpu = {label: sorted(p[i]["analysis_cpu_s"] for p in passes) for i, label in enumerate(("info", "scan"))}
    print(  # the CPU the analysis takes moves less with the machine's load than its wall time
        f"CPU       analysis info {cpu['info'][len(passes) // 2]:.2f} s, scan {cpu['scan'][len(passes) // 2]:.2f} s"
        f" (medians, every thread's user and system time)"
    )


if __name__ == "__main__":
    main()
