"""Gradients zeroed in place: the optimizer's zero_grad filling every gradient with zeros, a kernel each.

torch.optim records each ``zero_grad`` (``Optimizer.zero_grad#SGD.zero_grad``). With ``set_to_none=False`` (the
default before PyTorch 2.0) it zeroes each parameter's gradient in place: an op and a small fill kernel per parameter
(one per group of them where it zeroes them with ``_foreach_zero_``), the device idle while the host launches them;
with ``set_to_none=True`` it drops the gradients and launches nothing. The time lost is the device's idle time while
the host is in a zero_grad that launches work, and the device time of what it launches; the fix is no knob of the
emulator, so the gain is that bound.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.dialects.vocabulary import OPTIMIZER_ZERO_GRAD
from perftool.rules.detectors.base import IDLE_WHILE_VALUES, Detection, Detector, Scope


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    calls = scope.host_calls(OPTIMIZER_ZERO_GRAD) if scope.idle is not None else np.zeros(0, dtype=np.int64)
    if calls.size == 0:
        return None
    calls = calls[np.argsort(trace.ts[calls], kind="stable")]
    call, kernels = scope.launched_in(calls)  # the zero_grad each launch is made in
    inside = call >= 0
    zeroing = calls[np.unique(call[inside])]  # the calls that launch work: those that zero in place
    waiting, measured = scope.idle_while(intervals.union(trace.ts[zeroing], trace.end[zeroing]))
    values = {
        "per_step": scope.per_step(zeroing.size),
        "launches_per_step": scope.per_step(int(np.count_nonzero(inside))),
        **measured,
        "kernel_ms_per_step": scope.per_step(kernels) / 1e3,
    }
    return Detection(waiting + kernels, values, scope.events(zeroing), occurrences=zeroing.size)


DETECTOR = Detector(
    name="gradient_zeroing",
    summary="the optimizer's zero_grad zeroing every gradient in place (set_to_none=False), a kernel each",
    values={
        "per_step": "zero_grad calls that launch device work per steady step",
        "launches_per_step": "launches per step made inside them",
        "host_ms_per_step": "host time per step in those zero_grad calls, ms",
        **IDLE_WHILE_VALUES,
        "kernel_ms_per_step": "device time per step of the work they launch, ms",
    },
    detect=detect,
    sets_knobs=False,
)
