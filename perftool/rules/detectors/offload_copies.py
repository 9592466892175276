"""Variable-offload stream copies: optimizer state streamed to and from remote buffers.

Graphcore names them ``StreamCopyMidRemoteBuffer`` (with ``StreamCopyBegin``/``End``). When they
take a large share of the device's time and the state fits in device memory, keeping it there
removes them.
"""

from __future__ import annotations

import math

from perftool.analysis import intervals
from perftool.dialects.vocabulary import REMOTE_BUFFER_COPY
from perftool.rules.detectors.base import Detection, Detector, Scope

TARGET_SHARE = 0.02  # of the run left in remote-buffer copies once updates are rarer


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    copies, rows = scope.named_on_device(REMOTE_BUFFER_COPY)
    if rows.size == 0:
        return None
    busy = scope.busy(copies)
    lost = intervals.total(intervals.subtract(busy, scope.compute, scope.lo, scope.hi))
    device_busy = scope.metrics["device.busy_us"]
    state = scope.run.optimizer_state_bytes if scope.run else math.nan
    values = {
        "device_share": lost / device_busy if device_busy > 0 else math.nan,
        "copy_ms_per_step": scope.per_step(lost) / 1e3,
        "copies": int(rows.size),
        "state_mb": state / 1e6,
        "state_size": f"{state / 1e6:,.0f} MB" if not math.isnan(state) else "the optimizer state",
    }
    found = Detection(lost, values, scope.events(rows), changes={"offload_optimizer": False}, occurrences=rows.size)
    if scope.run is not None:  # when the state does not fit on the device, stream it less often
        accumulation = _accumulation(int(scope.run.knobs["gradient_accumulation"]), lost, scope.window)
        found.alternatives = [
            found.instead("accumulate", {"gradient_accumulation": accumulation}, accumulation=accumulation)
        ]
    return found


def _accumulation(now: int, copies_us: float, window_us: float) -> int:
    """Micro-batches per weight update (a power of two) that bring the copies to about 2% of the run, at most
    eight times today's."""
    wanted = now * copies_us / (TARGET_SHARE * max(window_us - copies_us, 1.0))
    return int(min(2 ** math.ceil(math.log2(max(wanted, 2 * now))), 8 * now))


DETECTOR = Detector(
    name="offload_copies",
    summary="optimizer state streamed to and from remote buffers (variable offloading)",
    values={
        "device_share": "share of the device's busy time spent in these copies",
        "copy_ms_per_step": "copy time per steady step not overlapped with compute, ms",
        "copies": "remote-buffer copies in the window",
        "state_mb": "optimizer state size, MB (emulator traces; else nan)",
        "state_size": "the optimizer state's size in words",
        "accumulation": "micro-batches per weight update that make the copies rare (when the state cannot stay)",
    },
    detect=detect,
)
