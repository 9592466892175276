"""Recompilations after warm-up: a graph compiled again in the steady state, and why.

The cause comes from the compile event's own ``args`` when the tool wrote one (``reason``,
``cause``). Operator compiles (``aclopCompile``) in a PyTorch (torch_npu) trace are online
operator compilation, which torch_npu can switch off (the Ascend dialect leaves out those that found the operator
compiled already). Otherwise a compile in the final step is the
short last batch, and any other is a new shape (or a Python value baked into the graph as a constant): under
torch.compile (its dynamo_timed phases), a guard of the compiled model that failed.
"""

from __future__ import annotations

import re

import numpy as np

from perftool.analysis.family import HOST_ONLY, framework
from perftool.analysis.host_calls import compiles
from perftool.common.arrays import distinct
from perftool.common.units import plural
from perftool.rules.detectors.base import Detection, Detector, Scope

CAUSES = {
    "remainder_loop": "a remainder loop (steps not a multiple of the loop size)",
    "last_batch": "the short last batch of the epoch (a new input shape)",
    "shape": "a new input shape, or a Python value baked into the graph as a constant",
    "npu_jit": "torch_npu compiling operators online (jit_compile=True): one compile per new operator shape",
    "dynamo": "torch.compile compiling the model again: a guard it compiled under failed (a new input shape or "
    "dtype, or a Python value it specialised on)",
}
ONCE_PER_JOB = ("remainder_loop", "last_batch")  # causes whose graph is compiled once and reused every epoch
_OP_COMPILE = re.compile(r"aclopCompile|AscendCL@opCompile")
_DYNAMO_COMPILE = re.compile(r"\(dynamo_timed\)$|compile_inner|call_user_compiler|compile_fx", re.MULTILINE)


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    rows = compiles(trace)
    rows = rows[scope.in_window[rows] & (trace.ts[rows] >= scope.lo)]
    if rows.size == 0:
        return None
    idle = scope.idle
    stalled = idle.time("compile") if idle is not None else float(np.sum(trace.dur[rows]))
    cause = _cause(scope, rows)
    values = {
        "count": int(rows.size),
        "compilations": plural(int(rows.size), "compilation"),
        "compile_ms": float(np.sum(trace.dur[rows])) / 1e3,
        "stalled_ms": stalled / 1e3,
        "stalled": "the step stalled" if scope.metrics.device == HOST_ONLY else "device stalled",
        "cause": CAUSES[cause],
        "loop_size": _dividing_loop_size(scope, padded=scope.run is not None and scope.run.padded_step),
        "names": ", ".join(sorted({trace.names[i] for i in trace.name[rows].tolist()})),
    }
    variant = "remainder_loop_unsized" if cause == "remainder_loop" and not values["loop_size"] else cause
    found = Detection(
        stalled,
        values,
        scope.events(rows),
        key=cause,
        variant=variant,
        once_per_job=cause in ONCE_PER_JOB,
        occurrences=rows.size,
    )
    if variant == "remainder_loop":  # a loop dividing the steps of the full shape
        found.changes = {"loop_size": values["loop_size"]}
    elif cause == "last_batch" and scope.run is not None:
        found.changes = {"last_batch": "pad"}
        padded = _dividing_loop_size(scope, padded=True)  # padding adds a step: the loop must divide that too
        found.alternatives = [found.instead("last_batch_drop", {"last_batch": "drop"})]
        if padded > 1:  # a loop of one step is iteration offload switched off, not a fix
            found.alternatives.append(
                found.instead("last_batch_loop", {"last_batch": "pad", "loop_size": padded}, padded_loop_size=padded)
            )
    return found


def _cause(scope: Scope, rows: np.ndarray) -> str:
    trace = scope.trace
    names = "\n".join(trace.names[i] for i in distinct(trace.name[rows]).tolist())
    if scope.family == "npu" and _OP_COMPILE.search(names) and framework(trace) == "pytorch":
        return "npu_jit"
    for row in rows.tolist():
        args = trace.args(row) or {}
        reason = str(args.get("reason") or args.get("cause") or "").lower()
        if "remainder" in reason:
            return "remainder_loop"
        if "last batch" in reason:
            return "last_batch"
    in_last_step = scope.steps.count and np.all(trace.ts[rows] >= scope.steps.start[-1])
    if in_last_step and "inference" not in scope.contexts:  # inference (serving too) has no epochs
        return "last_batch"  # an epoch's short last batch
    return "dynamo" if _DYNAMO_COMPILE.search(names) and scope.framework == "pytorch" else "shape"


def _dividing_loop_size(scope: Scope, padded: bool = False) -> int:
    """The largest loop size below the current one that divides the job's steps, a padded last batch's included
    when ``padded`` (emulator traces); 0 when unknown or when no smaller one divides them."""
    if scope.run is None:
        return 0
    steps, current = scope.run.steps + (1 if padded else 0), scope.run.knobs["loop_size"]
    return max((size for size in range(1, current) if steps % size == 0), default=0)


DETECTOR = Detector(
    name="recompilation",
    summary="graph or op compilations after the warm-up steps",
    values={
        "count": "compilations in the steady state",
        "compilations": "the same in words: 1 compilation, 3 compilations",
        "compile_ms": "their total compile time, ms",
        "stalled_ms": "device idle while they compiled (a capture of the host alone: the steps' time), ms",
        "stalled": "what stalled while they compiled: the device, or the step where no device was captured",
        "cause": "why the graph was compiled again",
        "loop_size": "a loop size dividing the step count (0: unknown)",
        "padded_loop_size": "a loop size dividing the step count with a padded last batch (0: unknown)",
        "names": "the compile events' names",
    },
    detect=detect,
)
