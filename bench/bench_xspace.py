"""Benchmark: reading a raw XSpace (``*.xplane.pb``): MB/s of protobuf, events a second and peak memory.

    python bench/bench_xspace.py --mb 50          # generates bench/out/xspace_50mb.xplane.pb once (xspace_synth.py)
    python bench/bench_xspace.py --trace FILE     # any XSpace
    python bench/bench_xspace.py --workers 1      # decoded in the loading process alone

Each run loads the XSpace in a fresh process (``load_trace``: decoding the protobuf, building the columns, roles and
kinds) and prints the best of ``--repeat`` runs and every run's MB/s, the events read, and peak RSS against the
file's size: the loading process's and the largest decoding process's; then the time the roofline takes to give the
steady window's kernels their FLOPs and bytes from the programs' HLO (the generated capture holds its step's).
perftool decodes an XSpace itself (its events' and stats' bytes with the compiled scanner where it was built, their
names and args in Python), its lines' events cut into runs that decoding processes share (one per free core, at most
four): per core it reads more slowly than a JSON trace, and a user of large XSpaces who has the profiler's JSON export
(``HOST.trace.json.gz``, written beside it) reads that faster.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(path: str, workers: int | None) -> dict:
    """Load ``path`` in this process (``workers`` decoding processes, or perftool's choice); its time, events, and
    its peak RSS and its largest decoding process's (run in a child process)."""
    from perftool.analysis.steps import detect_steps
    from perftool.pipeline.read import load_trace
    from perftool.roofline.calls import op_calls

    start = time.perf_counter()
    trace = load_trace(path, workers=workers)
    loaded = time.perf_counter()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    window = detect_steps(trace).window
    modelled = time.perf_counter()
    calls = op_calls(trace, window)
    return {
        "load_s": loaded - start,
        "events": len(trace),
        "rss_mb": rss_mb,
        "decoder_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "calls_s": time.perf_counter() - modelled,
        "calls": int(calls.rows.size),
        "modelled": int(calls.matching(lambda work: True).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the generated XSpace (default 50)")
    parser.add_argument("--trace", help="benchmark this XSpace instead of a generated one")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported (default 3)")
    parser.add_argument("--workers", type=int, help="decoding processes (default: perftool's choice)")
    args = parser.parse_args()

    sys.path.insert(0, HERE)
    from bench_load import generated, in_child
    from xspace_synth import write_xspace

    path = args.trace or generated(f"xspace_{args.mb:g}mb.xplane.pb", lambda out: write_xspace(out, args.mb))
    runs = [in_child(f"bench_xspace.measure({path!r}, {args.workers!r})") for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["load_s"])
    mb = os.path.getsize(path) / 1e6
    print(f"xspace       {path} ({mb:,.1f} MB), cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    print(f"events       {best['events']:,}")
    print(f"load         {best['load_s']:.2f} s (best of {len(runs)}): {mb / best['load_s']:,.1f} MB/s, "
          f"{best['events'] / best['load_s']:,.0f} events/s (all runs: "
          + ", ".join(f"{mb / r['load_s']:,.1f}" for r in runs) + " MB/s)")  # fmt: skip
    decoders = f", largest decoding process {best['decoder_rss_mb']:,.0f} MB" if best["decoder_rss_mb"] else ""
    print(f"peak RSS     {best['rss_mb']:,.0f} MB ({best['rss_mb'] / mb:.1f}x the file){decoders}")
    print(
        f"ops modelled {best['modelled']:,} of {best['calls']:,} kernels in the steady window, from the programs' "
        f"HLO: {best['calls_s']:.2f} s (the roofline's share of info and scan)"
    )


if __name__ == "__main__":
    main()
