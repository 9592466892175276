"""Kernels launched with fewer thread blocks than the device has SMs: however fast each block runs, the SMs without
one sit idle for the kernel's whole time. Read from the launch configuration Kineto records with each kernel
(``grid``), which the loader keeps for kernels of :data:`~perftool.trace.kept_args.LAUNCH_MIN_US` or more.

The time lost is, per kernel, the time it runs with no other compute kernel beside it times the share of SMs its
grid leaves without a block: the most that the same work spread over every SM could win back. Kernels that share the
device with another stream's kernels leave their idle SMs to those, and count only for the time they run alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.analysis.communication import covered
from perftool.analysis.family import device_properties, gpu_words
from perftool.analysis.kernel_launch import launch_of
from perftool.common.arrays import distinct
from perftool.common.names import shortened
from perftool.rules.detectors.base import (
    GPU_WORD_VALUES,
    KERNEL_RUN_VALUES,
    Detection,
    Detector,
    Scope,
    kernel_runs,
    names_key,
)
from perftool.trace.model import Kind, Role


def _sm_count(scope: Scope) -> int:
    """The SMs of the device the kernels ran on: as the trace records them, else its spec's; 0 when unknown."""
    recorded = device_properties(scope.trace).get("numSms")
    if isinstance(recorded, int) and recorded > 0:
        return recorded
    spec = scope.roofline.spec
    return spec.compute_units if spec is not None else 0


def _alone_us(scope: Scope, rows: np.ndarray) -> np.ndarray:
    """Per kernel row: its time in the window with no compute kernel of another track running beside it."""
    trace = scope.trace
    kernels = (trace.kind == Kind.COMPUTE) & trace.on_roles(Role.DEVICE)
    starts, ends = np.maximum(trace.ts[rows], scope.lo), np.minimum(trace.end[rows], scope.hi)
    alone = ends - starts
    for track in distinct(trace.track[rows]).tolist():
        on_track = trace.track[rows] == track
        others = scope.busy(kernels & (trace.track != track))
        alone[on_track] -= covered(others, starts[on_track], ends[on_track])
    return np.maximum(alone, 0.0)


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    sms = _sm_count(scope)
    if not sms or not scope.steady_steps:
        return None
    launched = np.flatnonzero(
        (trace.kind == Kind.COMPUTE) & trace.on_roles(Role.DEVICE) & (trace.args_ref >= 0) & scope.in_window
    )
    refs, of_ref = np.unique(trace.args_ref[launched], return_inverse=True)
    launches = [launch_of(trace.kept_args[ref]) for ref in refs.tolist()]
    blocks = np.array([launch.blocks if launch else 0 for launch in launches], dtype=np.int64)[of_ref]
    small = (blocks > 0) & (blocks < sms)
    rows, blocks = launched[small], blocks[small]
    if not rows.size:
        return None
    lost_each = _alone_us(scope, rows) * (1 - blocks / sms)
    lost = float(lost_each.sum())
    if lost <= 0:
        return None
    lost_by_name = np.bincount(trace.name[rows], weights=lost_each)
    worst = int(np.argmax(lost_by_name))
    of_worst = trace.name[rows] == worst
    time = trace.dur[rows]
    values: dict[str, Any] = {
        **kernel_runs(scope, rows),
        "sms": sms,
        **gpu_words(scope.metrics.device),
        "worst": shortened(trace.names[worst]),
        "blocks": int(np.median(blocks[of_worst])),
        "sm_share": float(np.sum(time * blocks / sms) / time.sum()),
    }
    return Detection(lost, values, scope.events(rows), key=names_key(scope.trace, rows), occurrences=rows.size)


DETECTOR = Detector(
    name="small_grids",
    summary="kernels launched with fewer thread blocks than the device has SMs, leaving the rest idle",
    values={
        **KERNEL_RUN_VALUES,
        **GPU_WORD_VALUES,
        "sms": "the device's SMs (or compute units)",
        "worst": "the kernel losing most time",
        "blocks": "its median thread blocks",
        "sm_share": "the share of SMs they give a block, weighted by their time",
    },
    detect=detect,
    sets_knobs=False,  # the emulator models no kernel's launch configuration
    reads_roofline=True,
)
