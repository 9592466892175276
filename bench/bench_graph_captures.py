"""Benchmark: reading a serving engine's graph-capture traces and giving a profile's replayed kernels their ops.

    python bench/bench_graph_captures.py                     # 67 batch sizes x 60 pieces of 25 launches
    python bench/bench_graph_captures.py --sizes 8 --pieces 4

Generates, once in bench/out, a capture trace as an engine that captures piecewise graphs writes it (per batch size,
each piece between a stream's begin and end of capture, every launch inside an aten::mm of that batch) and a profile
of 20 decode steps replaying one batch size's pieces, its step annotation naming its tokens; then, in a fresh
process each run, reads the capture's graphs (MB/s, graphs a second, peak RSS) and matches the profile's replays to
them (replays a second). Prints the best of ``--repeat`` runs and every run's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHES = 25  # kernel launches a piece
KERNELS = 5  # distinct kernels among them


def write_capture(path: Path, sizes: int, pieces: int) -> None:
    """A capture trace of ``pieces`` graphs for each of ``sizes`` batch sizes (1 to ``sizes``)."""
    events, at = [], 0.0
    for size in range(1, sizes + 1):
        span = pieces * (LAUNCHES * 30 + 50)
        events.append({"ph": "X", "name": f"capture_{size}_PIECEWISE", "cat": "user_annotation", "pid": 1, "tid": 1,
                       "ts": at, "dur": span})  # fmt: skip
        for _ in range(pieces):
            events.append({"ph": "X", "name": "hipStreamBeginCapture", "cat": "cuda_runtime", "pid": 1, "tid": 1,
                           "ts": at + 1, "dur": 1})  # fmt: skip
            for k in range(LAUNCHES):
                start = at + 5 + k * 30
                events.append({"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": start,
                               "dur": 20, "args": {"Input Dims": [[size, 4096], [4096, 4096]],
                                                   "Input type": ["c10::BFloat16"] * 2}})  # fmt: skip
                events.append({"ph": "X", "name": "hipLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1,
                               "ts": start + 5, "dur": 3, "args": {"kernel": f"gemm_{k % KERNELS}"}})  # fmt: skip
            events.append({"ph": "X", "name": "hipStreamEndCapture", "cat": "cuda_runtime", "pid": 1, "tid": 1,
                           "ts": at + 5 + LAUNCHES * 30, "dur": 1})  # fmt: skip
            at += LAUNCHES * 30 + 50
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))


def write_profile(path: Path, pieces: int, tokens: int, steps: int = 20) -> None:
    """A profile of ``steps`` decode steps of ``tokens`` tokens, each replaying ``pieces`` graphs."""
    events, flow, at = [], 0, 0.0
    for step in range(steps):
        length = pieces * (LAUNCHES * 12 + 40) + 100
        events.append({"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation", "pid": 1, "tid": 1,
                       "ts": at, "dur": length - 5})  # fmt: skip
        events.append({"ph": "X", "name": f"execute_{tokens}_context_0(sq0)_generation_{tokens}(sq{tokens})",
                       "cat": "user_annotation", "pid": 1, "tid": 1, "ts": at + 1, "dur": length - 10})  # fmt: skip
        for piece in range(pieces):
            flow += 1
            start = at + 10 + piece * (LAUNCHES * 12 + 40)
            events.append({"ph": "X", "name": "hipGraphLaunch", "cat": "cuda_runtime", "pid": 1, "tid": 1,
                           "ts": start, "dur": 5})  # fmt: skip
            events.append({"ph": "f", "id": flow, "pid": 1, "tid": 1, "ts": start, "cat": "ac2g", "name": "ac2g",
                           "bp": "e"})  # fmt: skip
            for k in range(LAUNCHES):
                kernel = start + 20 + k * 12
                events.append({"ph": "X", "name": f"gemm_{k % KERNELS}", "cat": "kernel", "pid": 0, "tid": 7,
                               "ts": kernel, "dur": 10})  # fmt: skip
                events.append({"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": kernel, "cat": "ac2g",
                               "name": "ac2g", "bp": "e"})  # fmt: skip
        at += length
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))


def measure(capture: str, profile: str) -> dict:
    """Read ``capture``'s graphs, then match ``profile``'s replays to them (the capture beside it), in this process."""
    from perftool.analysis.graph_captures import captured_graphs, replay_ops
    from perftool.pipeline.read import load_trace

    start = time.perf_counter()
    graphs = captured_graphs(Path(capture))
    read = time.perf_counter()
    trace = load_trace(profile)
    loaded = time.perf_counter()
    ops = replay_ops(trace)
    return {
        "read_s": read - start,
        "graphs": len(graphs),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "match_s": time.perf_counter() - loaded,
        "replays": ops.replays,
        "unmatched": ops.unmatched,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, default=67, help="batch sizes captured (default 67, vLLM's default count)")
    parser.add_argument("--pieces", type=int, default=60, help="piecewise graphs a batch size (default 60)")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported (default 3)")
    args = parser.parse_args()

    sys.path.insert(0, HERE)
    from bench_load import in_child

    folder = Path(HERE) / "out" / f"graph_captures_{args.sizes}x{args.pieces}"
    capture = folder / "capture_traces" / "graph_capture_rank_0.pt.trace.json"
    profile = folder / "profile.pt.trace.json"
    if not capture.exists() or not profile.exists():
        capture.parent.mkdir(parents=True, exist_ok=True)
        write_capture(capture, args.sizes, args.pieces)
        write_profile(profile, args.pieces, tokens=max(1, args.sizes - 2))
    runs = [in_child(f"bench_graph_captures.measure({str(capture)!r}, {str(profile)!r})") for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["read_s"] + r["match_s"])
    mb = capture.stat().st_size / 1e6
    print(f"capture      {capture} ({mb:,.1f} MB), cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    print(f"read         {best['read_s']:.2f} s (best of {len(runs)}): {mb / best['read_s']:,.1f} MB/s, "
          f"{best['graphs'] / best['read_s']:,.0f} graphs/s, {best['graphs']:,} graphs (all runs: "
          + ", ".join(f"{r['read_s']:.2f}" for r in runs) + " s)")  # fmt: skip
    print(
        f"match        {best['match_s']:.2f} s: {best['replays']:,} replays, {best['unmatched']} unmatched, "
        f"{best['replays'] / best['match_s']:,.0f} replays/s (profile load excluded)"
    )
    print(f"peak RSS     {best['rss_mb']:,.0f} MB")


if __name__ == "__main__":
    main()
