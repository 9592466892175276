"""Input-bound data loading: the device waits for the next batch.

Either the training loop waits in its data loader (``DataLoader.__next__``, ``IteratorGetNext``)
or the device waits while the input workers are still preparing the batch. Deeper prefetching
absorbs uneven preprocessing; when the workers cannot keep up on average, only more of them help;
when the loop loads batches itself (PyTorch's ``_SingleProcessDataLoaderIter``: ``num_workers=0``),
or decodes and preprocesses its input in Python inside the step
(:mod:`~perftool.analysis.in_process_input`), nothing is prefetched at all and the fix is workers.
Only emulator traces record the prefetch depth in use, so only their advice says what it is now.
"""

from __future__ import annotations

import math

import numpy as np

from perftool.analysis.host_calls import python_frames
from perftool.analysis.in_process_input import loading_per_batch, preparing_frames
from perftool.common.arrays import distinct
from perftool.common.names import host_call
from perftool.common.units import plural
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting, distinct_names
from perftool.trace.model import Kind, Role

INPUT = ("input_wait", "input_pipeline")  # the idle causes this finding is about
MIN_DEMAND_SHARE = 0.05  # the unstalled step is never taken below this share of the measured one


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    idle = scope.idle
    if idle is None:
        return None
    lost = sum(idle.time(cause) for cause in INPUT)
    if lost <= 0:
        return None
    trace = scope.trace
    loading = trace.kind == Kind.INPUT
    worker_rows = np.flatnonzero(loading & trace.on_roles(Role.INPUT) & scope.in_window)
    wait_rows = np.flatnonzero(loading & trace.on_roles(Role.HOST) & scope.in_window)
    workers = distinct(trace.track[worker_rows]).size
    step = scope.step_time
    demand = max(step - scope.per_step(lost), step * MIN_DEMAND_SHARE)  # the step the device needs with no wait
    # where the loop loads its batches itself: a loader's one a call, its own Python's one a step, however many calls
    loads = None if workers else loading_per_batch(trace, scope)
    in_process = loads is not None
    prepare = trace.dur[worker_rows] if worker_rows.size else loads if loads is not None else trace.dur[wait_rows]
    mean_prepare, slow_prepare = float(prepare.mean()), float(np.percentile(prepare, 99))  # lost > 0: some exist
    current = scope.run.knobs["prefetch_depth"] if scope.run else int(params["assumed_prefetch_depth"])
    preparing = wait_rows[python_frames(trace, wait_rows)]  # the loop's own Python preparing inputs
    keeps_up = not workers or mean_prepare / workers <= demand
    if workers:
        # a worker serves every `workers`-th step: its ready batches must cover its slowest batch
        depth = math.ceil(slow_prepare / (workers * step)) + 1
    else:  # only the loop's waits are traced: deepen by a long wait, in steps
        depth = current + math.ceil(float(np.percentile(trace.dur[wait_rows], 90)) / step)
    depth = max(depth, current + 1)
    needed_workers = math.ceil(params["worker_headroom"] * mean_prepare / demand)
    values = {
        "input_share": lost / scope.window,
        "wait_per_step_ms": scope.per_step(lost) / 1e3,
        "workers": workers,
        "prepared_by": plural(workers, "traced worker") if workers else _untraced(in_process),
        "needed_workers": max(needed_workers, workers + 1),
        "prepare_mean_ms": mean_prepare / 1e3,
        "prepare_p99_ms": slow_prepare / 1e3,
        "step_ms": step / 1e3,
        "demand_ms": demand / 1e3,
        "current_prefetch_depth": current,
        "prefetch_depth": depth,
        "preparing_names": distinct_names(trace, preparing_frames(trace, preparing), 3, host_call) or "none",
    }
    if in_process:  # num_workers=0, or no loader: the training loop loads every batch itself, nothing is prefetched
        values["needed_workers"] = max(needed_workers, 2)
        variant = "preparing_inputs" if preparing.size else "no_workers"
        changes = {"workload.input_workers": values["needed_workers"]}
    elif not keeps_up:
        variant, changes = "too_few_workers", {"workload.input_workers": values["needed_workers"]}
    elif scope.run is None:  # the prefetch depth in use is not in the trace: advice names none
        variant, changes = "deeper_prefetch", {}
    else:
        variant, changes = None, {"prefetch_depth": depth}
    alternatives = [("too_few_workers", {"workload.input_workers": values["needed_workers"]}),
                    (None, {"prefetch_depth": depth})]  # fmt: skip
    pieces = idle.by_cause["input_wait"] if idle.time("input_wait") else idle.by_cause["input_pipeline"]
    if wait_rows.size:
        evidence, occurrences = scope.events(wait_rows), wait_rows.size
    else:
        evidence, occurrences = scope.idle_stretches(pieces, np.flatnonzero(loading & scope.in_window)), 0
    bound = scope.stalls_from(np.concatenate([idle.by_cause[cause][0] for cause in INPUT]))
    found = Detection(lost, values, evidence, variant or "", variant, changes, bound_us=bound, occurrences=occurrences)
    if scope.run is not None and changes:  # the emulator decides between more workers and deeper prefetching
        found.alternatives = [found.instead(v, c) for v, c in alternatives if c != changes]
    return found


def _untraced(in_process: bool) -> str:
    """Who prepares the batches where no worker is traced."""
    return "the main process itself" if in_process else "workers the trace does not show"


DETECTOR = Detector(
    name="input_bound",
    summary="device idle while the next batch is loaded or preprocessed",
    values={
        "input_share": "share of the window the device waits for input",
        "wait_per_step_ms": "device wait for input per steady step, ms",
        "workers": "input worker threads in the trace (0: not traced)",
        "prepared_by": "who prepares the batches: '3 traced workers', the main process itself, or untraced workers",
        "needed_workers": "workers that keep up with the device on average",
        "prepare_mean_ms": "mean time to prepare one batch, ms",
        "prepare_p99_ms": "99th percentile time to prepare one batch, ms",
        "step_ms": "mean steady step time, ms",
        "demand_ms": "the step time the device needs without waiting for input, ms: what the workers must keep up with",
        "current_prefetch_depth": "prefetch depth now (the emulator's, else the assumed default)",
        "prefetch_depth": "prefetch depth that covers the slow batches",
        "preparing_names": "the loop's Python frames that decode and preprocess its input inside the step, or none",
    },
    detect=detect,
    settings={
        "assumed_prefetch_depth": Setting(2, "the prefetch depth taken for the trace's when it does not say", int),
        "worker_headroom": Setting(1.2, "spare capacity asked of the input workers (1.2: 20% more than needed)"),
    },
)
