"""The device's clock set against the host's, where the trace shows it behind: device work that starts before the
call that launched it.

A kernel cannot start before the host calls the runtime to launch it. Where a device's work starts before its
launch calls in more than a few of its launches, the trace wrote the device's times at an offset from the host's
clock: a conversion of one clock to the other measured once (ROCm's tracer, which Kineto set against the host's clock
by a fixed offset until 2024; msprof's conversion of an NPU's clock for the whole capture). Every later figure reads
device work against the host's calls (what the host did while the device idled, the steps' windows), so the device's
events are moved later by the least offset that puts all but the earliest :data:`SHIFT_QUANTILE` of its launches'
work at or after their calls, and the trace says so. A device clock ahead of the host's cannot be told from a queue
of work waiting to run, and is left; so are the clocks of a trace of several devices or ranks, each its own.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis.launches import launch_rows
from perftool.trace.model import Role, Trace

CLOCK_SLACK_US = 2.0  # work starting this little before its launch call is the clocks' rounding, not an offset
BEFORE_SHARE = 0.01  # a device whose work starts before its launch call in this share of its launches ...
BEFORE_AT_LEAST = 3  # ... and in this many at least is on a clock behind the host's (one such pair: an id reused)
SHIFT_QUANTILE = 0.01  # the device's events moved so that all but this share of its launches start after their calls
DEVICE_CLOCK = "perftool.device_clock"  # the trace metadata of how far the device's events were moved, and why
_DEVICE_SIDE = (Role.DEVICE, Role.H2D, Role.D2H)  # the tracks on the device's clock (an NPU's HCCL planes too)
# a trace of several devices or ranks holds several device clocks, each its own offset: left as written
_SEVERAL_CLOCKS = (Role.OTHER_DEVICE, Role.OTHER_RANK)


def align_device_clock(trace: Trace) -> None:
    """Move the device's events later where its work starts before its launch calls (the module's rule), and record
    the µs moved, the launches that started early and the launches paired (``DEVICE_CLOCK``)."""
    if len(trace.tracks_with_role(*_SEVERAL_CLOCKS)):
        return
    sources, spans = launch_rows(trace)
    early = trace.ts[spans] - trace.ts[sources]
    before = int(np.count_nonzero(early < -CLOCK_SLACK_US))
    if before < max(BEFORE_AT_LEAST, BEFORE_SHARE * early.size):
        return
    shift = -float(np.quantile(early, SHIFT_QUANTILE))
    device_side = trace.on_roles(*_DEVICE_SIDE)
    for chunk in trace.store.chunks(len(trace)):
        trace.ts[chunk][device_side[chunk]] += shift
    trace.times_moved()
    trace.metadata[DEVICE_CLOCK] = {"shift_us": shift, "before": before, "launches": int(early.size)}
