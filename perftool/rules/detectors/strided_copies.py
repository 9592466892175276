"""Strided copies: device time spent rearranging operands into the layout an op wants.

Graphcore ``DstStridedCopy`` vertices and ``PreArrange-N`` steps, Ascend ``TransData``. Measured
against the compute they feed: a copy costing a large fraction of the op is a layout problem.
"""

from __future__ import annotations

import math
from typing import Any

from perftool.analysis import intervals
from perftool.dialects.vocabulary import STRIDED_COPY
from perftool.rules.detectors.base import Detection, Detector, Scope, distinct_names, names_key


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    strided, rows = scope.named_on_device(STRIDED_COPY)
    if rows.size == 0:
        return None
    copies = scope.busy(strided)
    lost = intervals.total(copies)
    compute = intervals.total(intervals.subtract(scope.compute, copies, scope.lo, scope.hi))  # the ops they feed
    values: dict[str, Any] = {
        "names": distinct_names(trace, rows),
        "copy_ms_per_step": scope.per_step(lost) / 1e3,
        "compute_ratio": lost / compute if compute > 0 else math.nan,
        "device_share": lost / scope.metrics["device.busy_us"] if scope.metrics["device.busy_us"] > 0 else math.nan,
    }
    changes = {"layout_mismatch": False}
    return Detection(
        lost, values, scope.events(rows), key=names_key(trace, rows), changes=changes, occurrences=rows.size
    )


DETECTOR = Detector(
    name="strided_copies",
    summary="layout-rearranging copies (DstStridedCopy, PreArrange, TransData) on the device",
    values={
        "names": "the copy ops found, most time first",
        "copy_ms_per_step": "their time per steady step, ms",
        "compute_ratio": "their time relative to the compute ops they feed",
        "device_share": "share of the device's busy time they take",
    },
    detect=detect,
)
