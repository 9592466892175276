"""Host-bound gaps: the device idles while the host runs Python and ops, or launches the next call.

Two causes share the rule, told apart by the idle attribution: launch overhead (many short gaps,
each the cost of one more launch, with short device ops) is fixed by launching less often — more
steps per device call (loop size) on graph-mode devices, or a captured device graph replayed with
one launch (HPU / CUDA graphs); plain host work (the host running ops or Python the device waits
for) is fixed by moving that work, which the finding names. Loop-size advice names the loop size in
use only where the trace records it (emulator traces).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.family import offers_loop_size, trace_gpu_words
from perftool.analysis.host_calls import driving_calls, python_frames
from perftool.analysis.host_work import allocator_calls, dispatch_per_step, typical_launches
from perftool.analysis.launches import graphs_in_use, launch_rows
from perftool.analysis.serving import OVERLAP_SCHEDULER, between_iterations, sglang_overlap
from perftool.common.names import host_call
from perftool.common.units import duration, plural
from perftool.dialects import vocabulary
from perftool.dialects.ascend import Ascend
from perftool.rules.detectors.base import GPU_WORD_VALUES, Detection, Detector, Scope, Setting, distinct_names
from perftool.rules.findings import Evidence
from perftool.trace.model import Kind, Phase, Role, Trace
from perftool.trace.profiler_dirs import ENVIRONMENT

LOOP_FAMILIES = ("npu", "ipu")
GRAPH_FAMILIES = ("hpu", "gpu")
PIECEMEAL_GRAPHS = 1.5  # more graph launches a step than this replay the step in pieces
LAUNCH_BLOCKING = "ASCEND_LAUNCH_BLOCKING"  # torch_npu's setting that makes each launch wait for its operator
ALLOCATOR_SHARE = 0.5  # allocating and freeing memory for this share of the idle time is the allocator churning
# A step dispatched as this many compiled calls or more (PjitFunction, one per jnp op) runs op by op: a jitted step
# is one call, or a few (the step, a metric, an evaluation)
OP_BY_OP_CALLS = 8
COMPILED_SHARE = 0.5  # device work launched from torch.compile'd regions: the model runs compiled already
GRAPH_WORDS = {"npu": "NPU graph", "hpu": "HPU graph"}  # a captured graph, as torch_npu and Gaudi name it
BETWEEN_SHARE = 0.5  # idle for this share between a serving engine's iterations: it schedules while the device waits


@dataclass(frozen=True)
class _Measured:
    """What the trace shows of the host-bound idle time, whatever run it is judged on: measured once per trace and
    window (and evidence count), as the finding is detected again on the fitted run of the same trace."""

    lost: float  # µs of device idle while the host works or launches
    launch: float  # ... of it in short gaps between launches
    in_launch_calls: float  # ... of it while the host is inside kernel-launch calls
    in_allocator: float  # ... of it while the host allocates or frees memory
    in_between: float  # ... of it between a serving engine's iterations (its annotations on the host)
    values: dict[str, Any]
    evidence: list[Evidence]


def _measured(scope: Scope) -> _Measured | None:
    key = f"host_bound {scope.lo!r} {scope.hi!r} {scope.evidence_count}"
    return scope.trace.derive(key, lambda: _measure(scope))


def _measure(scope: Scope) -> _Measured | None:
    idle = scope.idle
    if idle is None:
        return None
    launch, host = idle.time("launch"), idle.time("host")
    lost = launch + host
    if lost <= 0:
        return None
    trace = scope.trace
    pieces = intervals.union(
        np.r_[idle.by_cause["launch"][0], idle.by_cause["host"][0]],
        np.r_[idle.by_cause["launch"][1], idle.by_cause["host"][1]],
    )
    # the work the host feeds: the device's, and that of the other devices it drives while this one waits for them
    fed = idle.total - idle.time("other_device")
    busy_per_step = scope.step_time - scope.per_step(fed) if scope.steady_steps else math.nan
    stretches = pieces[0].size
    host_work = trace.on_roles(Role.HOST) & trace.of_kinds(Kind.HOST_OP, Kind.RUNTIME, Kind.OTHER)
    # what the threads driving the device do (a training step's loop and autograd threads): their calls, and their
    # Python beside compiled calls (a batch loaded between jitted steps); not their waits for the device, nor the
    # calls a wait makes inside it (aten::item's copy, Ascend's Runtime@StreamSynchronize)
    waits = trace.kind == Kind.SYNC
    calls = driving_calls(trace, (host_work | waits) & scope.in_window, python_beside_compiled=True, every_thread=True)
    in_window = calls[~waits[calls]]
    # the calls dispatched from Python, each compiled or run on its own: JAX's jitted calls, TensorFlow's eager ops
    # (inside the calls that carry them from Python to its runtime)
    eager = np.flatnonzero(host_work & scope.in_window & trace.name_matches(vocabulary.TF_EAGER_OP))
    dispatched = np.r_[in_window[trace.name_matches(vocabulary.COMPILED_CALL, in_window)], eager]
    compiled_calls_per_step = scope.per_step(dispatched.size)  # all of the step's, waited or not
    driving = in_window[intervals.overlaps_any(trace.ts[in_window], trace.end[in_window], *pieces)]  # meanwhile
    # what the host was doing: the driving thread's calls, else any of its work in the gaps
    named = driving if driving.size else _overlapping(scope, host_work, pieces)
    runtime_calls = (trace.kind == Kind.RUNTIME) & trace.on_roles(Role.HOST) & scope.in_window
    launches = int(np.count_nonzero(runtime_calls))
    graphs_per_step = scope.per_step(int(np.count_nonzero(runtime_calls & trace.name_matches(vocabulary.GRAPH_LAUNCH))))
    split_attention = host_work & scope.in_window & trace.name_matches(vocabulary.PIECEWISE_SPLIT)
    split_attention_per_step = scope.per_step(int(np.count_nonzero(split_attention)))
    in_launch_calls = intervals.overlap(pieces, scope.busy(host_work & typical_launches(trace)))
    allocator = host_work & allocator_calls(trace)
    in_allocator = intervals.overlap(pieces, scope.busy(allocator))
    allocator_rows = _overlapping(scope, allocator, pieces)
    between = between_iterations(trace, scope.lo, scope.hi)
    in_between = intervals.overlap(pieces, between)
    between_rows = named[intervals.overlaps_any(trace.ts[named], trace.end[named], *between)]
    idle_in_named = intervals.totals_in(pieces, trace.ts[named], trace.end[named])  # names the idle time, most first
    ops = ~python_frames(trace, named)  # what dispatches the device's work, not the Python frames around it
    values = {
        "idle_share": idle.total / scope.window,
        "host_share": lost / scope.window,
        "launch_share": launch / lost,
        "in_launch_calls_share": in_launch_calls / lost,
        "host_per_stretch_ms": lost / stretches / 1e3,
        "stretches_per_step": scope.per_step(stretches),
        "device_per_step_ms": busy_per_step / 1e3,
        "dispatch_per_step_ms": dispatch_per_step(trace, scope) / 1e3,
        "pattern": _pattern(scope, stretches, lost, busy_per_step),
        "current_loop_size": None,  # this, the next and target_overhead are detect's: here to keep the order
        "loop_size": None,
        "launches_per_step": scope.per_step(launches),
        "graph_launches_per_step": graphs_per_step,
        "split_attention_per_step": split_attention_per_step,
        "op_median_us": scope.metrics["device.op_time_us.median"],
        "graph": GRAPH_WORDS.get(scope.family) or trace_gpu_words(trace, scope.metrics.device)["graph"],
        "host_names": distinct_names(trace, named, 3, host_call, idle_in_named) or "nothing traced",
        "compiled_names": distinct_names(trace, dispatched, 3),
        "dispatched_names": distinct_names(trace, named[ops], 3, host_call, idle_in_named[ops]) or "nothing traced",
        "compiled_calls_per_step": compiled_calls_per_step,
        "allocator_share": in_allocator / lost,
        "allocator_calls_per_step": scope.per_step(allocator_rows.size),
        "allocator_names": distinct_names(trace, allocator_rows, 2) if allocator_rows.size else "none",
        "between_share": in_between / lost,
        "between_names": distinct_names(trace, between_rows, 3, host_call) or "nothing traced",
        "task_queue": None,  # detect's, for PyTorch on an NPU: here to keep the order
        "overlap_scheduler": sglang_overlap(trace, scope.contexts),
        "target_overhead": None,
    }
    evidence = scope.idle_stretches(pieces, named)
    return _Measured(lost, launch, in_launch_calls, in_allocator, in_between, values, evidence)


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    measured = _measured(scope)
    if measured is None:
        return None
    lost = measured.lost
    current = scope.run.knobs["loop_size"] if scope.run is not None else 1
    loop_size = _loop_size(scope, current, lost, params)
    op_median = scope.metrics["device.op_time_us.median"]
    short_gaps = measured.launch >= params["launch_share"] * lost and not op_median > params["short_op_us"]
    launch_bound = short_gaps or measured.in_launch_calls >= params["launch_share"] * lost
    values = measured.values | {
        "current_loop_size": current,
        "loop_size": loop_size,
        "target_overhead": params["target_overhead"],
    }
    dispatch_paces = values["dispatch_per_step_ms"] >= params["dispatch_paces"] * values["device_per_step_ms"]
    variant, changes = _fix(scope, launch_bound, dispatch_paces, loop_size, current, values["graph_launches_per_step"])
    if variant == "host_work" and (compiled := _compiled_share(scope)) >= COMPILED_SHARE:
        variant, values["compiled_share"] = "compiled_host_work", compiled  # torch.compile'd already: Python around it
    if variant in ("host_work", "launch_bound") and scope.family == "npu" and scope.framework == "pytorch":
        variant, values["task_queue"] = "torch_npu_dispatch", _task_queue(scope.trace)
    if variant == "graphs_in_use" and _piecewise(scope, measured):
        variant = "piecewise_graphs"  # vLLM's graphs split at its attention, which the host launches between them
    if scope.run is None and measured.in_between >= BETWEEN_SHARE * lost:
        variant, changes = "between_iterations", {}  # the engine schedules the next batch while the device waits
    if scope.run is None and scope.steady_steps and values["compiled_calls_per_step"] >= OP_BY_OP_CALLS:
        variant, changes = "op_by_op", {}
    if scope.run is None and measured.in_allocator >= ALLOCATOR_SHARE * lost:  # the host's time goes to the allocator
        variant, changes = "allocator_churn", {}
    return Detection(lost, values, list(measured.evidence), key=variant or "", variant=variant, changes=changes)


def _piecewise(scope: Scope, measured: _Measured) -> bool:
    """Whether vLLM replays each step as pieces of a graph split at its attention (:data:`~perftool.dialects.
    vocabulary.PIECEWISE_SPLIT`), which runs eagerly between them: more graph launches a step than one, and its
    attention ops on the host, at least one a step. Several graphs and no eager attention are no pieces (a draft
    model's graphs beside the target's, in speculative decoding); nor are SGLang's (its engine's name comes first
    where it runs vLLM's layers), which it splits otherwise."""
    values = measured.values
    pieces = values["graph_launches_per_step"] > PIECEMEAL_GRAPHS and values["split_attention_per_step"] >= 1
    return "vllm" in scope.contexts and pieces


def _compiled_share(scope: Scope) -> float:
    """The share of the window's device work the host launched from inside torch.compile'd regions (the model's
    calls, :data:`~perftool.dialects.vocabulary.COMPILED_REGION`), through the trace's launch flows: most of it, and
    the model runs compiled already."""
    trace = scope.trace
    complete = trace.phase == Phase.COMPLETE
    regions = np.flatnonzero(trace.name_matches(vocabulary.COMPILED_REGION) & complete & scope.in_window)
    sources, spans = launch_rows(trace)
    in_window = scope.in_window[spans]
    sources, spans = sources[in_window], spans[in_window]
    work = float(trace.dur[spans].sum())
    if regions.size == 0 or work <= 0:
        return 0.0
    starts, ends = intervals.union(trace.ts[regions], trace.end[regions])
    at = trace.ts[sources]
    within = np.searchsorted(starts, at, side="right") - 1
    inside = (within >= 0) & (ends[np.maximum(within, 0)] >= at)
    return float(trace.dur[spans[inside]].sum()) / work


def _fix(
    scope: Scope, launch_bound: bool, dispatch_paces: bool, loop_size: int, current: int, graphs_per_step: float
) -> tuple[str | None, dict]:
    """Which fix applies, and the emulator knobs it sets.

    Emulator traces keep their family's knob (loop size, device graphs), whose value the trace records; a fit to
    another trace gives the loop size in use, where the job's framework has one
    (:func:`~perftool.analysis.family.offers_loop_size`: not PyTorch on Ascend). Other traces get device graphs only
    where the host does not replay graphs already (then: larger graphs; for a serving engine, which replays or
    captures them, its host work between replays) and a graph removes what the device waits for: launches, or the
    host's dispatch of the step's ops one by one where that takes about as long as the device's work
    (``dispatch_paces``), not Python that runs no op; loop-size advice needs a known loop size and a framework that
    has one, so elsewhere the advice names the host work instead.
    """
    has_loop = scope.family in LOOP_FAMILIES and offers_loop_size(scope.family, scope.framework)
    if scope.run is not None and (scope.run.recorded or has_loop):
        if scope.family in LOOP_FAMILIES and loop_size > current:
            return None, {"loop_size": loop_size}
        if scope.family in GRAPH_FAMILIES and not scope.run.knobs["device_graphs"]:
            return None, {"device_graphs": True}
        return None, {}
    captured = scope.trace.name_matches(vocabulary.GRAPH_CAPTURE).any()
    if "serving" in scope.contexts and (graphs_per_step > 0 or captured):
        return "graphs_in_use", {}  # an engine that replays (or captured) graphs: its host work between replays
    if graphs_in_use(scope.trace, scope.in_window):  # the step in several graphs: larger ones; in one: host work
        return ("graphs_in_use" if graphs_per_step > PIECEMEAL_GRAPHS else "host_work"), {}
    if not launch_bound:
        dispatching = dispatch_paces and scope.family in GRAPH_FAMILIES and not {"jax", "serving"} & set(scope.contexts)
        return ("dispatch_bound", {"device_graphs": True}) if dispatching else ("host_work", {})
    if scope.family in GRAPH_FAMILIES:
        return None, {"device_graphs": True}
    return "launch_bound", {}


def _task_queue(trace: Trace) -> str:
    """torch_npu's task queue as the trace shows it, in words for the fix: off where the profiler recorded
    ASCEND_LAUNCH_BLOCKING=1 in the job's environment (every launch then waits for its operator), else on where
    operators pass through it (its Enqueue@ and Dequeue@ events), else off in torch_npu's own profiler's output,
    which records them; PyTorch's profiler (torch_npu as its PrivateUse1 device) records neither."""
    if (trace.metadata.get(ENVIRONMENT) or {}).get(LAUNCH_BLOCKING) == "1":
        return (
            f"{LAUNCH_BLOCKING}=1 is set in the job's environment (the profiler recorded it), which makes every "
            "launch wait for its operator to finish and turns the task queue off: unset it"
        )
    level_two = (
        "set TASK_QUEUE_ENABLE=2, the level that moves more of each launch off the Python thread (1 is the default; "
        "2 works where operators run as binary kernels, torch_npu.npu.set_compile_mode(jit_compile=False))"
    )
    if trace.name_matches(vocabulary.TASK_QUEUE).any():
        return f"its task queue is on (the trace's Enqueue@/Dequeue@ events): {level_two}"
    if trace.dialect != Ascend.name:  # PyTorch's own profiler, torch_npu its PrivateUse1 device: no queue events
        return (
            "this trace cannot show whether its task queue is on (PyTorch's own profiler records none of its "
            "Enqueue@/Dequeue@ events; torch_npu's profiler does): keep it on (ASCEND_LAUNCH_BLOCKING=1 and "
            f"TASK_QUEUE_ENABLE=0 turn it off) and {level_two}"
        )
    return (
        "its task queue is off (no Enqueue@/Dequeue@ event in the trace), so the Python thread launches every "
        "operator itself: unset ASCEND_LAUNCH_BLOCKING and TASK_QUEUE_ENABLE=0, which turn it off, or set "
        "TASK_QUEUE_ENABLE=2"
    )


def _overlapping(scope: Scope, mask: np.ndarray, pieces: intervals.Intervals) -> np.ndarray:
    """Rows of ``mask`` in the window that overlap one of ``pieces``."""
    rows = np.flatnonzero(mask & scope.in_window)
    trace = scope.trace
    return rows[intervals.overlaps_any(trace.ts[rows], trace.end[rows], *pieces)]


def _pattern(scope: Scope, stretches: int, lost: float, busy_per_step: float) -> str:
    """How the idle time comes: so many stretches of so long, per step where the trace has steps (in so many steps,
    where there are fewer stretches than steps)."""
    length = duration(lost / stretches)
    if not scope.steady_steps:
        return f"{plural(stretches, 'idle stretch')} of {length} on average"
    if stretches < scope.steady_steps:
        how_often = f"{plural(stretches, 'idle stretch')} of {length} each in {plural(scope.steady_steps, 'step')}"
    else:
        how_often = f"{plural(scope.per_step(stretches), 'idle stretch')} per step of {length} each"
    return f"{how_often}, against {duration(busy_per_step)} of device work per step"


def _loop_size(scope: Scope, current: int, lost: float, params: dict[str, float]) -> int:
    """The smallest power of two that cuts the host's share of a step to ``target_overhead``.

    With a known step count (emulator traces), a loop size that divides it avoids a remainder loop.
    """
    device = max(scope.window - (scope.idle.total if scope.idle else 0.0), 1e-9)
    needed = current * lost / (params["target_overhead"] * device)
    ceiling = int(params["max_loop_size"])
    if scope.run is not None:
        ceiling = min(ceiling, scope.run.steps)
    candidates = [2**k for k in range(0, 31) if current < 2**k <= ceiling] or [current]
    enough = [size for size in candidates if size >= needed] or [candidates[-1]]
    if scope.run is not None:
        steps = scope.run.steps
        dividing = [size for size in enough if steps % size == 0]
        enough = dividing or enough
    return int(enough[0])


DETECTOR = Detector(
    name="host_bound",
    summary="device idle while the host runs Python and ops, or launches the next device call",
    values={
        "idle_share": "share of the window the device is idle, all causes",
        "host_share": "share of the window the device is idle while the host runs Python, ops or launches",
        "launch_share": "share of that idle time in short gaps between launches (launch overhead)",
        "in_launch_calls_share": "share of that idle time the host spends inside kernel-launch calls",
        "host_per_stretch_ms": "mean length of an idle stretch the host causes, ms",
        "stretches_per_step": "such idle stretches per steady step",
        "device_per_step_ms": "device busy time per steady step, with the other devices' its host drives while it "
        "waits for them (a model split over devices in turn), ms",
        "dispatch_per_step_ms": "host time per steady step dispatching the step's ops one by one (op and runtime "
        "calls, the short gaps between them), outside waits and the allocator, ms",
        "pattern": "the idle stretches in words: how many, how long, against how much device work",
        "current_loop_size": "steps per device call now (emulator traces; 1 elsewhere)",
        "loop_size": "steps per device call that brings host time under target_overhead",
        "graph_launches_per_step": "device graph launches (cudaGraphLaunch, hipGraphLaunch) per steady step",
        "split_attention_per_step": "vLLM's attention ops the host runs per steady step (those its piecewise graphs "
        "are split at, run eagerly between the pieces)",
        "launches_per_step": "runtime launch calls per steady step",
        "op_median_us": "median device op duration, µs",
        "graph": GPU_WORD_VALUES["graph"] + " (a GPU's), an NPU graph, an HPU graph",
        "host_names": "the outermost calls of the thread driving the device during the idle time, most of it first",
        "compiled_names": "the calls dispatched from Python one by one in the window (JAX's jitted calls, TensorFlow's "
        "eager ops), most time first; empty where none",
        "dispatched_names": "... of them, the ops and runtime calls (not Python frames), most of the idle time first",
        "compiled_calls_per_step": "calls dispatched from Python one by one (JAX's PjitFunction, TensorFlow's eager "
        "ops) per steady step",
        "compiled_share": "share of the device's work launched from torch.compile'd regions (where the model runs "
        "compiled already; absent elsewhere)",
        "allocator_share": "share of that idle time the host spends allocating or freeing memory",
        "allocator_calls_per_step": "allocation and free calls during the idle time per steady step",
        "allocator_names": "the allocation and free calls, most time first",
        "between_share": "share of that idle time between a serving engine's iterations: after one of its iteration "
        "annotations on the host ends and before the next begins",
        "between_names": "the outermost calls of the thread driving the device then, most time first",
        "task_queue": "PyTorch on an NPU: whether torch_npu's task queue is on, and what to set, in words",
        "overlap_scheduler": OVERLAP_SCHEDULER,
        "target_overhead": "the share of a step host time should be cut to",
    },
    detect=detect,
    settings={
        "target_overhead": Setting(0.02, "the share of a step host time should be cut to (loop-size advice)"),
        "max_loop_size": Setting(1024, "the largest loop size advice may name", int),
        "launch_share": Setting(
            0.5, "launch overhead when at least this share of the idle time is in short gaps, or in launch calls"
        ),
        "short_op_us": Setting(50.0, "... and the median device op is no longer than this, µs"),
        "dispatch_paces": Setting(
            0.8, "device graphs, too, where the host's dispatch of the step's ops takes this share of its device work"
        ),
    },
)
