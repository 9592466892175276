"""Many small GEMMs: matrix products with so little work that even at the roofline each takes a few µs, run by
the dozen every step. Each pays a launch and a kernel's ramp-up and tail, and none fills the device.

The time lost is their device time beyond their roofline time: what running the same products as a few large
ones (batched, grouped, or fused by a compiler) could win back at most.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.rules.detectors.base import Detection, Detector, Scope, Setting, distinct_names, names_key


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    roof = scope.roofline
    calls = roof.calls
    if calls is None or roof.spec is None or not scope.steady_steps:
        return None
    at_roof = roof.call_roofline_us()
    small = np.flatnonzero(
        calls.matching(lambda w: w.family == "gemm")
        & (calls.device_us > 0)
        & (at_roof < params["max_roofline_us"])  # NaN (no peak for the dtype) is never small
    )
    per_step = small.size / scope.steady_steps
    if per_step < params["min_per_step"]:
        return None
    time = calls.device_us[small]
    lost = float(np.sum(time - np.minimum(at_roof[small], time)))
    rows = calls.rows[small]
    values: dict[str, Any] = {
        "names": distinct_names(scope.trace, rows, 3, time=time),
        "per_step": per_step,
        "median_us": float(np.median(time)),
        "median_mflop": float(np.median(calls.of_work(lambda w: w.flops)[small])) / 1e6,
        "of_roofline": float(at_roof[small].sum() / time.sum()),
    }
    return Detection(lost, values, scope.events(rows), key=names_key(scope.trace, rows), occurrences=rows.size)


DETECTOR = Detector(
    name="small_gemms",
    summary="many small matrix products a step, each too small to fill the device",
    values={
        "names": "the small GEMM ops, most device time first",
        "per_step": "small GEMM calls per steady step",
        "median_us": "median device time of one, µs",
        "median_mflop": "median work of one, MFLOP",
        "of_roofline": "their roofline time over their device time",
    },
    detect=detect,
    sets_knobs=False,  # the emulator models no dtype, shape or kernel fusion
    reads_roofline=True,
    settings={
        "max_roofline_us": Setting(5.0, "a GEMM is small when even at the roofline it would take less than this, µs"),
        "min_per_step": Setting(8.0, "report when at least this many small GEMMs run per steady step"),
    },
)
