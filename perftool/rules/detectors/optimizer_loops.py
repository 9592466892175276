"""The optimizer stepping its parameters one by one: an op and a kernel per parameter and operation.

torch.optim records each step (``Optimizer.step#AdamW.step``). Its foreach and fused implementations update every
parameter in a few launches (``aten::_foreach_add_``, ``aten::_fused_adamw_``); the per-parameter one (PyTorch before
1.12, or ``foreach=False``, parameters on several devices, ``differentiable=True``, an optimizer without a foreach
implementation) makes an op and a launch per parameter and operation, the device idle while the host issues them once
the backward's work has drained. A step counts where PyTorch's own ops inside it (``aten::add_``, ``aten::mul_``) launch
at least ``min_launches`` kernels and it runs no foreach or fused op; an extension's fused update (apex's FusedAdam
launches its kernels from no op) or a compiled optimizer step is none. The time lost is the device's idle time while
the host is in those steps; the update's own kernels would still run (fewer and larger), so the gain is that bound.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.launches import launch_rows
from perftool.dialects.vocabulary import ATEN_OP, BATCHED_UPDATE, OPTIMIZER_STEP
from perftool.rules.detectors.base import IDLE_WHILE_VALUES, Detection, Detector, Scope, Setting, distinct_names


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    steps = scope.host_calls(OPTIMIZER_STEP) if scope.idle is not None else np.zeros(0, dtype=np.int64)
    if steps.size == 0:
        return None
    steps = trace.top_level_by_track(steps)  # a wrapper's step around its local optimizer's is one step
    steps = steps[np.argsort(trace.ts[steps], kind="stable")]
    ops = trace.top_level_by_track(scope.host_calls(ATEN_OP))
    ops = ops[np.argsort(trace.ts[ops], kind="stable")]
    sources, _ = launch_rows(trace)
    by_ops = sources[scope.holding(ops, sources) >= 0]  # an extension's launches (apex's fused Adam) or a compiled
    held = scope.holding(steps, by_ops)  # region's are not an op's: they update many parameters at once
    launches = np.bincount(held[held >= 0], minlength=steps.size)
    batched_held = scope.holding(steps, scope.host_calls(BATCHED_UPDATE))
    batched = np.bincount(batched_held[batched_held >= 0], minlength=steps.size) > 0
    looping = (launches >= params["min_launches"]) & ~batched
    if not looping.any():
        return None
    rows = steps[looping]
    waiting, measured = scope.idle_while(intervals.union(trace.ts[rows], trace.end[rows]))
    values = {
        "optimizers": distinct_names(trace, rows, 2),
        "per_step": scope.per_step(rows.size),
        "launches_per_step": scope.per_step(int(launches[looping].sum())),
        **measured,
    }
    return Detection(waiting, values, scope.events(rows), occurrences=rows.size)


DETECTOR = Detector(
    name="optimizer_loops",
    summary="the optimizer updating its parameters one op and kernel at a time (no foreach or fused update)",
    values={
        "optimizers": "the optimizer steps that loop, most time first",
        "per_step": "such optimizer steps per steady step",
        "launches_per_step": "launches per step PyTorch's ops inside them make",
        "host_ms_per_step": "host time per step in them, ms",
        **IDLE_WHILE_VALUES,
    },
    settings={"min_launches": Setting(8, "an optimizer step launches at least this many kernels to count as one", int)},
    detect=detect,
    sets_knobs=False,
)
