"""Matrix maths in fp32 on a device whose tensor cores run it several times faster in TF32, bf16 or fp16.

The time lost is each fp32 GEMM's, convolution's and attention's arithmetic at the fp32 peak less the same at
the faster dtype's: what the op takes beyond its FLOPs' time (launch, memory, tails) is kept as it is, so a small
op that never nears the fp32 peak loses almost nothing. Ops whose dtype the trace does not record are left out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.hardware import DeviceSpec
from perftool.roofline.figures import MATRIX_FAMILIES
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting, distinct_names, names_key

TORCH_DTYPES = {"tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def faster_dtype(spec: DeviceSpec) -> tuple[str, float] | None:
    """The dtype an fp32 job moves its matrix maths to with the least change (TF32 keeps fp32 storage, then
    bf16/fp16 autocast), and its peak FLOP/s; None where none beats fp32 in hardware."""
    fp32 = spec.peak_flops("fp32")
    for dtype in ("tf32", "bf16", "fp16"):
        peak = spec.peak_flops(dtype)
        if peak and fp32 and peak > fp32:
            return dtype, peak
    return None


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    roof = scope.roofline
    calls, spec = roof.calls, roof.spec
    if calls is None or spec is None or (faster := faster_dtype(spec)) is None:
        return None
    dtype, fast_peak = faster
    fp32_peak = spec.peak_flops("fp32")
    assert fp32_peak is not None  # faster_dtype found one
    chosen = np.flatnonzero(
        calls.matching(lambda w: w.family in MATRIX_FAMILIES and w.dtype == "fp32" and w.dtype_recorded)
        & ~calls.tf32
        & (calls.device_us > 0)
    )
    if chosen.size == 0:
        return None
    flops = calls.of_work(lambda w: w.flops)[chosen]
    arithmetic_us = flops / fp32_peak * 1e6
    saved_us = np.minimum(arithmetic_us * (1 - fp32_peak / fast_peak), calls.device_us[chosen])
    lost = float(saved_us.sum())
    time = float(calls.device_us[chosen].sum())
    if lost <= 0 or lost < params["min_share_of_time"] * time:
        return None  # too small to near the fp32 peak: the dtype is not what holds them back
    rows = calls.rows[chosen]
    values: dict[str, Any] = {
        "names": distinct_names(scope.trace, rows, 3, time=calls.device_us[chosen]),
        "dtype": dtype,
        "torch_dtype": TORCH_DTYPES[dtype],
        "matrix_ms_per_step": scope.per_step(time) / 1e3,
        "fp32_share": float(arithmetic_us.sum()) / time,
        "speedup": fast_peak / fp32_peak,
    }
    variant = "tf32" if dtype == "tf32" else "autocast"
    return Detection(
        lost, values, scope.events(rows), key=names_key(scope.trace, rows), variant=variant, occurrences=rows.size
    )


DETECTOR = Detector(
    name="fp32_matmul",
    summary="GEMMs, convolutions and attention in fp32 where the device's tensor cores run TF32/bf16 faster",
    values={
        "names": "the fp32 matrix ops, most device time first",
        "dtype": "the faster dtype the device runs them in (tf32, bf16 or fp16)",
        "torch_dtype": "the torch dtype autocast takes for it (bfloat16, float16)",
        "matrix_ms_per_step": "device time of the fp32 matrix ops per steady step, ms",
        "fp32_share": "share of that time their FLOPs take at the fp32 peak",
        "speedup": "the faster dtype's peak over fp32's",
    },
    detect=detect,
    sets_knobs=False,  # the emulator models no dtype, shape or kernel fusion
    reads_roofline=True,
    settings={
        "min_share_of_time": Setting(0.05, "report when the arithmetic saved is at least this share of the ops' time")
    },
)
