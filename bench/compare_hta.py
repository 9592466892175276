"""Cross-check perftool's device figures against HolisticTraceAnalysis on the same trace and window.

    python bench/compare_hta.py TRACE [TRACE ...] --hta-python /path/to/hta-venv/bin/python

HTA runs in its own virtual environment (``python -m venv hta && hta/bin/pip install
HolisticTraceAnalysis``), in a child process. Its temporal breakdown measures a rank from its first
GPU event to its last (after dropping the last ProfilerStep) and calls everything on a stream busy;
perftool's metrics measure the steady-state steps. So the figures are compared over HTA's window:
perftool's busy / idle / compute / non-compute shares there, beside HTA's, and perftool's own
steady-state figures after them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

_HTA_SCRIPT = """
import json, sys
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
row = analysis.get_temporal_breakdown(visualize=False).iloc[0]
trace = analysis.t
frame = next(iter(trace.traces.values()))
gpu = frame[frame["stream"].ne(-1)]
print(json.dumps({
    "lo": float(gpu["ts"].min() + trace.min_ts), "hi": float((gpu["ts"] + gpu["dur"]).max() + trace.min_ts),
    **{name: float(row[name + "_time(us)"] / row["kernel_time(us)"]) for name in ("idle", "compute", "non_compute")},
}))
"""


def hta_figures(trace_path: str, hta_python: str) -> dict:
    """HTA's temporal breakdown of the trace (as rank 0), with the window it measured, in the trace's clock."""
    with tempfile.TemporaryDirectory() as folder:
        name = os.path.basename(trace_path)
        shutil.copy(trace_path, os.path.join(folder, name if name.endswith((".json", ".json.gz")) else name + ".json"))
        done = subprocess.run([hta_python, "-c", _HTA_SCRIPT, folder], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"HTA failed on {trace_path}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def perftool_figures(trace_path: str, lo: float, hi: float) -> tuple[dict, dict]:
    """perftool's busy / idle / compute / non-compute shares over [lo, hi], and its own steady-state metrics."""
    from perftool.analysis import compute_metrics, intervals
    from perftool.analysis.metrics import NOT_DEVICE_WORK
    from perftool.pipeline.read import load_trace
    from perftool.trace import Kind, Role

    trace = load_trace(trace_path)
    window = hi - lo
    device = trace.on_roles(Role.DEVICE) & ~np.isin(trace.kind, NOT_DEVICE_WORK)
    busy = intervals.total(intervals.busy(trace, device, lo, hi))
    compute = intervals.total(intervals.busy(trace, device & (trace.kind == Kind.COMPUTE), lo, hi))
    same_window = {"idle": 1 - busy / window, "compute": compute / window, "non_compute": (busy - compute) / window}
    metrics = compute_metrics(trace).values
    own = {
        "idle": metrics["device.idle_fraction"],
        "compute": metrics["device.compute_fraction"],
        "non_compute": metrics["device.busy_fraction"] - metrics["device.compute_fraction"],
    }
    return same_window, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--hta-python", default=sys.executable, help="a Python that can import hta")
    args = parser.parse_args()
    print(f"{'trace':<34} {'figure':<12} {'HTA':>8} {'perftool':>9} {'diff':>7}  perftool steady state")
    for path in args.traces:
        hta = hta_figures(path, args.hta_python)
        same, own = perftool_figures(path, hta["lo"], hta["hi"])
        for figure in ("idle", "compute", "non_compute"):
            diff = 100 * (same[figure] - hta[figure])
            name = os.path.basename(path)[:34]
            print(
                f"{name:<34} {figure:<12} {100 * hta[figure]:>7.1f}% {100 * same[figure]:>8.1f}%"
                f" {diff:>+6.1f}  {100 * own[figure]:>6.1f}%"
            )


if __name__ == "__main__":
    main()
