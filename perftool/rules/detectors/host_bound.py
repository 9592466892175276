"""Host-bound gaps: the device idles while the host runs Python and launches the next device call.

The fix amortises the host's work over more device work: more steps per device call (loop size)
on graph-mode devices, or a captured device graph replayed with one launch (HPU / CUDA graphs).
"""

from __future__ import annotations

import math

import numpy as np

from perftool.rules.detectors.base import Detection, Detector, Scope, distinct_names
from perftool.trace.model import Kind, Role

LOOP_FAMILIES = ("npu", "ipu")
GRAPH_FAMILIES = ("hpu", "gpu")


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    idle = scope.idle
    if idle is None or idle.time("host") <= 0:
        return None
    trace = scope.trace
    pieces = idle.by_cause["host"]
    lost = idle.time("host")
    busy_per_step = scope.step_time - scope.per_step(idle.total) if scope.steady_steps else math.nan
    stretches = pieces[0].size
    host_work = trace.on_roles(Role.HOST) & np.isin(trace.kind, [Kind.HOST_OP, Kind.RUNTIME, Kind.OTHER])
    launches = np.flatnonzero((trace.kind == Kind.RUNTIME) & trace.on_roles(Role.HOST) & scope.in_window)
    current = _current_loop_size(scope, stretches)
    loop_size = _loop_size(scope, current, lost, params)
    values = {
        "idle_share": idle.total / scope.window,
        "host_share": lost / scope.window,
        "host_per_stretch_ms": lost / stretches / 1e3,
        "stretches_per_step": scope.per_step(stretches),
        "device_per_step_ms": busy_per_step / 1e3,
        "current_loop_size": current,
        "loop_size": loop_size,
        "launches_per_step": scope.per_step(launches.size),
        "op_median_us": scope.metrics["device.op_time_us.median"],
        "host_names": distinct_names(trace, np.flatnonzero(host_work & scope.in_window), 3),
        "target_overhead": params["target_overhead"],
    }
    changes = {}
    if scope.family in LOOP_FAMILIES and loop_size > current:
        changes = {"loop_size": loop_size}
    elif scope.family in GRAPH_FAMILIES and not (scope.emulator and scope.emulator.knobs.device_graphs):
        changes = {"device_graphs": True}
    evidence = scope.idle_stretches(pieces, host_work)
    return Detection(lost, values, evidence, changes=changes)


def _current_loop_size(scope: Scope, stretches: int) -> int:
    """Steps per device call: the emulator config's, else steady steps per host-bound idle stretch."""
    if scope.emulator is not None:
        return scope.emulator.knobs.loop_size
    if not scope.steady_steps or not stretches:
        return 1
    return max(1, round(scope.steady_steps / stretches))


def _loop_size(scope: Scope, current: int, lost: float, params: dict[str, float]) -> int:
    """The smallest power of two that cuts the host's share of a step to ``target_overhead``.

    With a known step count (emulator traces), a loop size that divides it avoids a remainder loop.
    """
    device = max(scope.window - (scope.idle.total if scope.idle else 0.0), 1e-9)
    needed = current * lost / (params["target_overhead"] * device)
    ceiling = int(params["max_loop_size"])
    if scope.emulator is not None:
        ceiling = min(ceiling, scope.emulator.workload.steps)
    candidates = [2**k for k in range(0, 31) if current < 2**k <= ceiling] or [current]
    enough = [size for size in candidates if size >= needed] or [candidates[-1]]
    if scope.emulator is not None:
        steps = scope.emulator.workload.steps
        dividing = [size for size in enough if steps % size == 0]
        enough = dividing or enough
    return int(enough[0])


DETECTOR = Detector(
    name="host_bound",
    summary="device idle while the host runs Python and dispatches the next device call",
    values={
        "idle_share": "share of the window the device is idle, all causes",
        "host_share": "share of the window the device is idle while the host runs Python or dispatch",
        "host_per_stretch_ms": "mean length of an idle stretch the host causes, ms",
        "stretches_per_step": "such idle stretches per steady step",
        "device_per_step_ms": "device busy time per steady step, ms",
        "current_loop_size": "steps per device call now",
        "loop_size": "steps per device call that brings host time under target_overhead",
        "launches_per_step": "runtime launch calls per steady step",
        "op_median_us": "median device op duration, µs",
        "host_names": "what the host runs during the idle time",
        "target_overhead": "the share of a step host time should be cut to",
    },
    params={"target_overhead": 0.02, "max_loop_size": 1024},
    detect=detect,
)
