"""DDP's gradient copies: the reducer copies every gradient out of its bucket once the bucket is all-reduced.

DistributedDataParallel reduces gradients in flat buckets. With ``gradient_as_bucket_view=False``, its default, each
parameter's ``.grad`` is a tensor of its own, so once a bucket is reduced the reducer copies every gradient back out of
it (``torch.distributed.ddp.reducer::copy_bucket_to_grad``, one call and one device copy per parameter, at the end of
the backward pass); with views into the buckets there is nothing to copy. The time lost is the device's idle time
while the host makes those calls and the device time of the copies they launch; the fix is no knob of the emulator,
so the gain is that bound.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.dialects.vocabulary import BUCKET_TO_GRAD
from perftool.rules.detectors.base import IDLE_WHILE_VALUES, Detection, Detector, Scope


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    calls = scope.host_calls(BUCKET_TO_GRAD) if scope.idle is not None else np.zeros(0, dtype=np.int64)
    if calls.size == 0:
        return None
    _, copies = scope.launched_in(calls[np.argsort(trace.ts[calls], kind="stable")])
    waiting, measured = scope.idle_while(intervals.union(trace.ts[calls], trace.end[calls]))
    lost = waiting + copies
    if lost <= 0:
        return None
    values = {"per_step": scope.per_step(calls.size), **measured, "copy_ms_per_step": scope.per_step(copies) / 1e3}
    return Detection(lost, values, scope.events(calls), occurrences=calls.size)


DETECTOR = Detector(
    name="bucket_copies",
    summary="DistributedDataParallel copying every gradient out of its all-reduce bucket (gradient_as_bucket_view off)",
    values={
        "per_step": "gradients copied out of their buckets per steady step",
        "host_ms_per_step": "host time per step in the reducer's copy calls, ms",
        **IDLE_WHILE_VALUES,
        "copy_ms_per_step": "device time per step of the copies they launch, ms",
    },
    detect=detect,
    sets_knobs=False,
)
