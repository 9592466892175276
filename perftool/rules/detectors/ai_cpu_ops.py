"""AI CPU ops: Ascend operators that run on the NPU's own AI CPU cores instead of its AI Cores.

They are device work (``Task Type: AI_CPU`` on the ``Ascend Hardware`` streams), not host fallbacks:
the device stays busy, but on a slow path. Their time is the cost; the fix makes the op run on AI
Core (a supported dtype, an equivalent op with an AI Core kernel).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.analysis import intervals
from perftool.dialects.ascend import ai_cpu_tasks
from perftool.rules.detectors.base import Detection, Detector, Scope, distinct_names, names_key


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    tasks = ai_cpu_tasks(trace)
    rows = np.flatnonzero(tasks & scope.in_window)
    if rows.size == 0:
        return None
    lost = intervals.total(scope.busy(tasks))
    device_busy = scope.metrics["device.busy_us"]
    values: dict[str, Any] = {
        "ops": distinct_names(trace, rows, 4),
        "calls_per_step": scope.per_step(rows.size),
        "ms_per_step": scope.per_step(lost) / 1e3,
        "busy_share": lost / device_busy if device_busy > 0 else float("nan"),
    }
    return Detection(lost, values, scope.events(rows), key=names_key(trace, rows), occurrences=rows.size)


DETECTOR = Detector(
    name="ai_cpu_ops",
    summary="device ops that run on the NPU's AI CPU (a slow path) instead of its AI Cores",
    values={
        "ops": "the AI CPU ops, most time first",
        "calls_per_step": "AI CPU tasks per steady step",
        "ms_per_step": "time with an AI CPU task running, per step, ms",
        "busy_share": "share of the device's busy time spent in AI CPU tasks",
    },
    detect=detect,
)
