"""Benchmark: where ``perftool info``'s time goes, phase by phase, on one trace.

    python bench/bench_phases.py --mb 500          # the Kineto-like trace bench_load.py generates
    python bench/bench_phases.py --trace FILE

Each pass runs ``perftool info FILE --format json`` in a fresh process as the command runs (its entry point), with
perftool's modules compiled to bytecode as an install leaves them, and notes the wall time at the seams of its
pipeline: imports (up to the trace's loading: the command's modules, those ``info`` imports when it runs included),
decoding (from the first byte range to the last part received), building the columns, roles and kinds (the
dialect), steps, metrics, roofline, and writing the output. Printed per phase: the median over the
passes and the fastest, then the CPU time of the main process and of the decoding workers (medians).
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PHASES = ("imports", "decoding", "columns", "roles and kinds", "steps", "metrics", "roofline", "output")


def one_pass(path: str) -> dict:
    """One pass in this (fresh) process: each phase's seconds, and CPU seconds of this process and its workers."""
    import resource
    import time

    start = time.perf_counter()
    sys.argv = ["perftool", "info", path, "--format", "json", "-o", os.devnull]
    import importlib

    from perftool.cli.main import main

    marks: dict[str, float] = {}
    reader = importlib.import_module("perftool.pipeline.read")  # what the API's info loads its trace with
    load_trace = reader.load_trace

    def loading(*args: Any, **kwargs: Any) -> Any:  # the command's own imports end as its trace starts loading
        marks["imports"] = time.perf_counter()
        return load_trace(*args, **kwargs)

    reader.load_trace = loading
    columns = importlib.import_module("perftool.trace.columns")
    modules = {
        "columns": (columns.ColumnBuilder, "finish"),
        "roles and kinds": (reader.dialects, "apply"),
        "steps": (importlib.import_module("perftool.analysis.steps"), "detect_steps"),
        "metrics": (importlib.import_module("perftool.analysis.metrics"), "compute_metrics"),
        "roofline": (importlib.import_module("perftool.roofline.figures"), "roofline"),
    }
    for phase, (owner, name) in modules.items():
        setattr(owner, name, _marking(getattr(owner, name), marks, phase))
    finish = columns.ColumnBuilder.finish

    def decoded(self: Any, metadata: dict) -> Any:
        marks["decoding"] = time.perf_counter()
        return finish(self, metadata)

    columns.ColumnBuilder.finish = decoded  # type: ignore[method-assign]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, f"perftool exited with {exc.code}"
    marks["output"] = time.perf_counter()
    seconds, last = {}, start
    for phase in PHASES:
        seconds[phase], last = marks[phase] - last, marks[phase]
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "seconds": seconds,
        "total": last - start,
        "main_cpu": own.ru_utime + own.ru_stime,
        "workers_cpu": workers.ru_utime + workers.ru_stime,
    }


def _marking(function: Callable[..., Any], marks: dict, phase: str) -> Callable[..., Any]:
    """``function``, noting when it returns as the end of ``phase``."""
    import time

    def marked(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        marks[phase] = time.perf_counter()
        return result

    return marked


def main() -> None:
    from bench_load import in_child
    from bench_reference import prepared

    path, repeat = prepared(__doc__, repeat=5)
    runs = [in_child(f"bench_phases.one_pass({path!r})") for _ in range(repeat)]
    print(f"trace      {path} ({os.path.getsize(path) / 1e6:,.1f} MB), cores {os.cpu_count()}, {repeat} passes")
    for phase in PHASES:
        times = [run["seconds"][phase] for run in runs]
        print(f"{phase:16s} median {statistics.median(times):.3f} s   fastest {min(times):.3f} s")
    totals = [run["total"] for run in runs]
    print(f"{'in all':16s} median {statistics.median(totals):.3f} s   fastest {min(totals):.3f} s")
    main_cpu = statistics.median(run["main_cpu"] for run in runs)
    workers_cpu = statistics.median(run["workers_cpu"] for run in runs)
    print(f"CPU time         main process {main_cpu:.2f} s, decoding workers {workers_cpu:.2f} s (medians)")


if __name__ == "__main__":
    main()
