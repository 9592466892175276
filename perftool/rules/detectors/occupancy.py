"""Memory-bound kernels that an SM holds too few warps of, because each thread takes many registers or each block
much shared memory: with few warps resident, too few memory requests are in flight to hide the memory's latency,
and the kernel runs below the bandwidth its op's bytes need.

Read from the launch configuration Kineto records with each kernel (``block``, ``registers per thread``,
``shared memory``) against the trace's ``deviceProperties``, by the CUDA occupancy calculator's rules. Low
occupancy alone costs nothing (tensor-core GEMMs run so by design), so a kernel counts only where the op that
launched it moves more bytes than it computes FLOPs for (memory-bound on the roofline), is not matrix maths, and
runs at under a share of its roofline. The time lost is each such kernel's share of its op's time below the
roofline: an upper bound on what more resident warps could win back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.analysis.family import device_properties, gpu_words
from perftool.analysis.kernel_launch import Occupancy, SmLimits, launch_of, occupancy
from perftool.common.names import shortened
from perftool.roofline.figures import MATRIX_FAMILIES
from perftool.rules.detectors.base import (
    GPU_WORD_VALUES,
    KERNEL_RUN_VALUES,
    Detection,
    Detector,
    Scope,
    Setting,
    kernel_runs,
    names_key,
)

LIMITS = ("registers", "shared memory")  # what a kernel's own launch decides; threads and blocks are the grid's


def _memory_bound_below_roof(scope: Scope, most_of_roof: float) -> np.ndarray:
    """Per modelled call: memory-bound, not matrix maths, and at under ``most_of_roof`` of its roofline."""
    calls, spec = scope.roofline.calls, scope.roofline.spec
    assert calls is not None and spec is not None
    at_roof = scope.roofline.call_roofline_us()
    memory_us = calls.each(lambda kind: kind.work.bytes if kind.work else np.nan, float) / spec.memory_bandwidth * 1e6
    not_matrix = calls.matching(lambda work: work.family not in MATRIX_FAMILIES)
    with np.errstate(invalid="ignore"):  # NaN where a call has no model or no roofline: never chosen
        return not_matrix & (memory_us >= at_roof) & (at_roof < most_of_roof * calls.device_us)


def _held_back(held: Occupancy, most: float) -> bool:
    """Whether registers or shared memory hold a kernel to ``most`` of an SM's warps or fewer, where lifting that
    limit alone would let the SM hold more."""
    return held.limit in LIMITS and held.share <= most and held.without_limit > held.share


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    calls, trace = scope.roofline.calls, scope.trace
    sm = SmLimits.of(device_properties(trace))
    if calls is None or sm is None or scope.roofline.spec is None or not calls.kernel_rows.size:
        return None
    slow_calls = _memory_bound_below_roof(scope, params["most_of_roofline"])
    chosen = slow_calls[calls.kernel_call] & (trace.args_ref[calls.kernel_rows] >= 0)
    rows, call = calls.kernel_rows[chosen], calls.kernel_call[chosen]
    refs, of_ref = np.unique(trace.args_ref[rows], return_inverse=True)
    found: list[Occupancy | None] = []
    for ref in refs.tolist():
        launch = launch_of(trace.kept_args[ref])
        held = occupancy(launch, sm) if launch else None
        found.append(held if held is not None and _held_back(held, params["max_occupancy"]) else None)
    limited_ref = np.array([held is not None for held in found], dtype=bool)
    if not limited_ref.any():
        return None
    keep = limited_ref[of_ref]
    rows, call, of_ref = rows[keep], call[keep], of_ref[keep]
    below = 1 - scope.roofline.call_roofline_us()[call] / calls.device_us[call]
    lost_each = trace.dur[rows] * below
    lost = float(lost_each.sum())
    if lost <= 0:
        return None
    worst_ref = int(np.argmax(np.bincount(of_ref, weights=lost_each)))
    worst = found[worst_ref]
    assert worst is not None
    worst_row = rows[of_ref == worst_ref][0]
    values: dict[str, Any] = {
        **kernel_runs(scope, rows),
        "worst": shortened(trace.names[trace.name[worst_row]]),
        "occupancy": worst.share,
        "limit": worst.limit,
        **gpu_words(scope.metrics.device),
        "without_limit": worst.without_limit,
        "of_roofline": float(1 - np.average(below, weights=trace.dur[rows])),
    }
    return Detection(lost, values, scope.events(rows), key=names_key(scope.trace, rows), occurrences=rows.size)


DETECTOR = Detector(
    name="occupancy",
    summary="memory-bound kernels held to few warps per SM by their registers or shared memory",
    values={
        **KERNEL_RUN_VALUES,
        **GPU_WORD_VALUES,
        "worst": "the kernel losing most time",
        "occupancy": "its theoretical occupancy: resident warps as a share of the most an SM holds",
        "limit": "what limits it: registers or shared memory",
        "without_limit": "the occupancy the other limits would allow",
        "of_roofline": "the share of their ops' roofline they reach, weighted by their time",
    },
    detect=detect,
    sets_knobs=False,  # the emulator models no kernel's launch configuration
    reads_roofline=True,
    settings={
        "max_occupancy": Setting(0.25, "a kernel counts at or below this theoretical occupancy"),
        "most_of_roofline": Setting(0.5, "... and where its op runs at under this share of its roofline"),
    },
)
