"""Fitting an emulator config to a trace: what ``perftool calibrate`` writes, and what scan predicts a fix's gain
on a foreign trace with.

The fit reads the trace's steady state only through its measured figures, never a config it may carry:

- **device work** per step (compute, and whatever else keeps the device busy that the emulator has no part of
  its own for) becomes the workload's work per sample, at the family's peak and efficiency;
- **host time** the device waits for becomes the host's time per device call (``device_overrides``): where
  the host waits for each call (graph mode) the device idles while it works; where it runs ahead (eager),
  the device idles only for what exceeds its compute. A host that launches op by op is fitted so, and one
  that launches fewer calls than steps as iteration offload;
- **input**: the input workers' batches when the trace has them (their number, the prefetch depth where a
  worker waits for a free slot, and their times, replayed in the order they ran), else a single worker as slow
  as the device waits for it;
- **copies**: input copies per step become bytes per sample at the link's bandwidth (with IO tiles where they
  overlap compute on an IPU); results copied back to the host each step (a share of the step worth modelling) a
  read-back of the bytes the trace records, at the bandwidth they ran at, blocking the host where they go to
  pageable memory; strided, remote-buffer and CPU-fallback copies their own parts;
- **compiles** in the steady state become a short last batch's compile;
- **communication**: the device's gradient all-reduces (their calls a step, size, time and whether they overlap
  compute) become data-parallel replicas whose buckets take as long as the trace's, with the gradients as the
  workload's weights; compute then counts neither them nor the weight update those gradients cost.

Whichever waits most (the host or the input) is then set on the emulator's fast path so that the fit's expected
steady mean step (its mean over a long run, where the jitter's draws average out) is the trace's.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.context import TraceAnalysis
from perftool.analysis.family import device_properties, job_kind, offers_loop_size, on_tpu
from perftool.analysis.host_calls import blocking_copies, compiles, read_backs
from perftool.analysis.host_work import dispatch_per_step, own_work
from perftool.analysis.idle import CAUSES, fallback_round_trips
from perftool.analysis.in_process_input import loading_per_batch
from perftool.analysis.launches import graphs_in_use
from perftool.analysis.loader import batches_in_order, depth_in_use
from perftool.common.arrays import distinct
from perftool.common.errors import PerftoolError
from perftool.dialects.vocabulary import (
    CPU_FALLBACK,
    PAGEABLE,
    REMOTE_BUFFER_COPY,
    STRIDED_COPY,
)
from perftool.emulator import devices
from perftool.emulator.config import MAX_REPLAYED, EmulatorConfig, validate_config
from perftool.emulator.evaluate import evaluate, evaluate_all
from perftool.emulator.plan import io_tiles_needed
from perftool.emulator.profiles import PROFILES, DeviceProfile
from perftool.emulator.simulate import COMPUTE_STREAM, jitter
from perftool.trace.model import NOT_DEVICE_WORK, Kind, Role, Trace

FIT_SEED = 0
MIN_STEPS = 8  # a calibrated job runs at least this many steps
FIT_ERROR = 0.05  # a fit whose step time is further off the trace's does not reproduce it ...
FIT_BUSY_POINTS = 3.0  # ... nor one whose device is busy for a share of the step this many points off
MAX_FITTED_RANKS = 8  # ranks a fit emulates: more only slow it, and the fitted bandwidth keeps each all-reduce's time
OVERLAPPED = 0.1  # all-reduces this share hidden behind compute are reduced as the backward pass fills their buckets
UNSIZED_BUCKET = 25e6  # bytes of an all-reduce whose size the trace does not record (DDP's default bucket)
MIN_PEER = 0.1  # the fastest another rank may compute, relative to the fitted one (the emulator's bound)
RECOMPILE_BATCH = 16  # samples a step the fit takes, unless given, when it models a compile as a short last batch
SHORT_LAST = 0.9  # a last step computing less than this share of a steady one runs a short last batch
STEPS_BEFORE_LAST = 3  # steady steps before the last one that say what a full batch computes
MATCH_ROUNDS = 8  # runs at most that set the pacing figure to the trace's step time ...
MATCH_TOLERANCE = 1e-4  # ... to this share of it ...
MATCH_CANDIDATES = 16  # ... each of this many values of the figure, run together
FIT_RUN_STEPS = 256  # the fit's step is its mean over a run this long (the model's expected step, not one draw's:
# within 0.32% of an 8,192-step run on every real capture the repo holds, bench/bench_fit_run.py), a power of two so
# that the loop sizes people try divide it
HOST_CAUSES = ("host", "launch", "sync", "blocking_copy", "other")
INPUT_PACE = ("workload", "preprocess_us_per_sample")  # the field that sets the step where input paces it ...
HOST_PACE = ("device_overrides", "python_us")  # ... where the host's Python and dispatch do ...
LAUNCH_PACE = ("device_overrides", "op_launch_us")  # ... and where its launching ops one by one does
OVERLAPPED_COPIES = 0.5  # input copies this much hidden behind compute run beside it, pageable or not
SYNC_STALL = 0.02  # a sync each step drains the device when it idles after them this share of the step or more
READBACK_SHARE = 0.01  # copies back to the host this share of the step or more are a read-back of their own
MAX_BANDWIDTH_GBPS = 1e4  # the most a fitted copy bandwidth may be (the config's bound)
DEFAULT_COMPUTE_JITTER = 0.02  # the workload's default spread of device work per step
MAX_COMPUTE_JITTER = 0.5
MAX_HOST_JITTER = 0.2  # beyond this, the host's time per step varies with how the steps cut it, not by itself
MIN_REPLAYED = 1e-3  # a batch replayed at least this share of the mean (none takes no time at all)
MAD_TO_SIGMA = 1.4826  # a median absolute deviation as the standard deviation of normal noise
INPUT_CAUSES = ("input_wait", "input_pipeline")
# the settings a fit always reads from the trace (the others are defaults, or read where the trace shows them: see
# read_settings)
READ_FROM_TRACE = frozenset(
    {
        "loop_size",
        "device_graphs",
        "io_tiles",
        "pin_memory",
        "pin_readback",
        "cpu_fallback_ops",
        "layout_mismatch",
        "offload_optimizer",
        "workload.input_workers",
        "workload.sync_each_step",
        "replicas.overlap",
    }
)


def fit(
    trace: Trace,
    scope: TraceAnalysis,
    device: str | None = None,
    given: dict[str, Any] | None = None,
    peers: Sequence[float] = (),
) -> EmulatorConfig:
    """The emulator config whose steady state looks like the trace's (``given``: fields the trace does not say;
    ``peers``: where the trace is one rank of a job, the other ranks' device compute per step relative to its own).

    Communication is modelled as data-parallel replicas where the fast path then reproduces the trace's step and
    device busy share; otherwise (collectives the emulator's data parallelism does not describe, such as ones
    filling the host's gaps) it counts as device work, as any other work the emulator has no part for."""
    given = given or {}
    if device is None and on_tpu(trace):
        raise PerftoolError(
            f"{trace.source}: a TPU's trace: the emulator models GPUs, NPUs, HPUs and IPUs, not TPUs, so there is "
            "nothing to fit it to (scan's gains on it stay bounds)"
        )
    family = device or (scope.family if scope.family in PROFILES else "gpu")
    model = devices.identify(family, device_properties(trace))
    given = {"device_model": model.key if model else devices.GENERIC} | given
    trains = job_kind(trace) == "training"  # a forward's all-reduces (tensor parallelism) are no gradients
    gradients = _gradients(scope, _profile(family, given), max(scope.steady_steps, 1), peers) if trains else None
    if gradients is not None:
        try:
            replicated = _fit(trace, scope, family, given, gradients)
        except PerftoolError:  # replicas the emulator cannot take (a size or bandwidth out of its range)
            replicated = None
        if replicated is not None and reproduces(replicated, scope):
            return replicated
    replicas = given.get("replicas")
    if isinstance(replicas, dict) and "count" not in replicas:  # figures for replicas the fit does not model
        if not trains:
            why = "the job trains nothing (a forward's all-reduces are fitted as device work)"
        elif gradients is None:
            why = "the trace shows no all-reduce across two or more ranks on the device each step"
        else:
            why = "replicas fitted to the trace's all-reduces do not reproduce its step (fitted as device work instead)"
        fields = ", ".join(f"replicas.{name}" for name in replicas)
        raise PerftoolError(
            f"calibration of {trace.source}: {fields} given, but {why}; give replicas.count to model replicas anyway"
        )
    return _fit(trace, scope, family, given, None)


def read_settings(trace: Trace, config: EmulatorConfig) -> frozenset[str]:
    """The settings ``config``, a fit, reads from ``trace`` (the others are defaults): a fix changing only these is a
    what-if on what the trace shows. The prefetch depth is read where the trace's input workers show it, what
    becomes of the last batch where the fit runs a short one (the trace's compile of a new shape at its end)."""
    return (
        READ_FROM_TRACE
        | ({"prefetch_depth"} if depth_in_use(trace) else frozenset())
        | ({"last_batch"} if config.workload.last_batch_samples else frozenset())
    )


def readback_time(trace: Trace, scope: TraceAnalysis) -> float:
    """The window's time in the read-back the fit models (:func:`_read_back_copies`), µs; 0 where it models none."""
    steps = max(scope.steady_steps, 1)
    read_back = _read_back_copies(trace, scope, steps)
    return read_back[1] * steps if read_back is not None else 0.0


def work_per_step(trace: Trace, scope: TraceAnalysis) -> float:
    """The device work per steady step the fit takes as compute, µs (communication counted in, a read-back the fit
    models apart left out)."""
    steps = max(scope.steady_steps, 1)
    return _device_work(trace, scope, False, _read_back_copies(trace, scope, steps)) / steps


def reproduces(config: EmulatorConfig, scope: TraceAnalysis) -> bool:
    """Whether the fast path's steady mean step, device busy share and (where it models replicas) share of the step
    in its all-reduces for ``config`` are the trace's, within :data:`FIT_ERROR` and :data:`FIT_BUSY_POINTS`. A fit
    that counts the trace's communication as device work has it in its busy share."""
    figures = evaluate(config)
    step, busy = float(figures["step_time_mean_us"][0]), float(figures["device_busy_fraction"][0])
    steps_agree = abs(step / scope.metrics["step_time_us.mean"] - 1) <= FIT_ERROR
    reducing = sum(figures.plan.bucket_us) / step  # one all-reduce of every bucket a step
    traced = np.nan_to_num(scope.metrics["communication.time_us"]) / scope.window
    communication_agrees = config.replicas is None or abs(reducing - traced) <= FIT_BUSY_POINTS / 100
    return (
        steps_agree
        and communication_agrees
        and abs(busy - scope.metrics["device.busy_fraction"]) <= FIT_BUSY_POINTS / 100
    )


def _fit(
    trace: Trace, scope: TraceAnalysis, family: str, given: dict[str, Any], gradients: _Gradients | None
) -> EmulatorConfig:
    """The fit, with communication as ``gradients`` reduced across replicas or (None) as device work."""
    profile = _profile(family, given)
    steps = max(scope.steady_steps, 1)
    mean = scope.metrics["step_time_us.mean"]
    step = mean if not math.isnan(mean) else scope.window
    idle = {cause: scope.idle.time(cause) / steps for cause in CAUSES} if scope.idle is not None else {}
    read_back = _read_back_copies(trace, scope, steps)
    readback = _readback(trace, scope, profile, read_back, steps) if read_back is not None else None
    pageable = "pin_memory" in profile.knobs and _pageable(trace, scope)
    readback_pageable = readback is not None and readback.pageable
    compute = _device_work(trace, scope, gradients is not None, read_back) / steps
    if gradients is not None:  # the emulator adds the update those gradients cost
        compute = max(compute - 3 * gradients.bytes * 1e6 / profile.memory_bandwidth, 1.0)
    recompiling = scope.metrics["recompilations.count"] > 0
    # room for a short last batch when one compiles; a bad given value is reported when the config is validated
    batch = max(int(_given(given, "knobs", "batch_size", RECOMPILE_BATCH if recompiling else 1)), 1)
    job_steps = _fit_steps(trace, scope, profile, given, recompiling)
    half = max(_given(given, "workload", "half_efficiency_batch", 0.0), 0.0)  # a step computes batch + half
    loading = loading_per_batch(trace, scope) if profile.host_feeds_data else None
    stall = 0.0 if profile.host_blocks_per_call else _stall_each_step(trace, scope)
    syncs = stall > 0
    # a read-back into pageable memory makes the emulated host wait for each step itself: a sync only where the
    # trace's other waits (loss.item(), a stream synchronisation) make one too
    syncs_apart = syncs and (not readback_pageable or _stall_each_step(trace, scope, with_read_backs=False) > 0)
    copies_block = (pageable or readback_pageable) and not syncs
    host = _host(trace, scope, profile, idle, compute, steps, job_steps, loading, stall, copies_block)
    per_step = _steady_compute(scope)
    compute_jitter = _compute_spread(per_step)
    # a graph compiled again in the steady state: the remainder loop where the fit has one, else a short last batch
    # (one sample short of a full one: a new shape compiled at the end)
    short_last = recompiling and job_steps % host.loop == 0
    sample = _sample_bytes(scope, profile.h2d_bandwidth, steps, batch)
    fallbacks = _fallbacks(trace, scope, profile, steps)
    offloaded = _offloaded_state(trace, scope, profile, steps)
    strided = _strided(trace, scope, profile, steps, batch) if "layout_mismatch" in profile.knobs else {}
    workload: dict[str, Any] = {
        "name": os.path.basename(trace.source) or "calibrated",
        "weights": int(gradients.bytes) if gradients is not None else "1MB",
        "gflops_per_sample": max(compute / _own_draw(compute_jitter, job_steps), 1.0)
        * profile.peak_tflops
        * profile.efficiency
        / 1e3
        / (batch + half),
        "sample_size": sample,
        "steps": max(job_steps - (1 if short_last and host.loop == 1 else 0), MIN_STEPS),  # its last: short
        "ops_per_step": host.ops,
        "compute_jitter": compute_jitter,
        "host_jitter": _host_spread(trace, scope),
        **({"sync_each_step": True} if syncs_apart else {}),
        **(readback.workload if readback is not None else {}),
        **host.workload,
        **_input(trace, scope, step, host.pacing == INPUT_PACE, batch, loading),
        **_compiles(scope),
        **({"last_batch_samples": _short_last(per_step, batch) or batch - 1} if short_last and batch >= 2 else {}),
        **strided,
        **offloaded,
    }
    knobs = {
        "batch_size": batch,
        "loop_size": host.loop,
        **_graphs_and_tiles(scope, profile, sample * batch, host.launching),
        **({"pin_memory": False} if pageable else {}),
        **({"pin_readback": False} if readback_pageable else {}),
        **({"prefetch_depth": depth} if (depth := depth_in_use(trace)) else {}),
        **({"cpu_fallback_ops": fallbacks} if fallbacks else {}),
        **({"layout_mismatch": True} if strided else {}),
        **({"offload_optimizer": True} if offloaded else {}),
    }
    document = {
        "device": family,
        "workload": workload | given.get("workload", {}),
        "knobs": knobs | given.get("knobs", {}),
        "device_overrides": host.overrides
        | (readback.overrides if readback is not None else {})
        | given.get("device_overrides", {}),
        **({"replicas": gradients.replicas | given.get("replicas", {})} if gradients is not None else {}),
        "seed": FIT_SEED,
    }
    # given sections the fit sets nothing of: the device model, and typos (which validation reports)
    document |= {key: value for key, value in given.items() if key not in document}
    config: EmulatorConfig = validate_config(document, f"calibration of {trace.source}")
    if "device_overrides" in given or "preprocess_us_per_sample" in given.get("workload", {}) or not host.pacing:
        return config
    return _matched(config, host.pacing, step, host.ops if host.pacing == LAUNCH_PACE else 1)


def _fit_steps(
    trace: Trace, scope: TraceAnalysis, profile: DeviceProfile, given: dict[str, Any], recompiling: bool
) -> int:
    """The steps the fit runs: as many as given; else, where a graph is compiled again in the steady state, the
    trace's (that one-off's share of the mean step is the trace's); else :data:`FIT_RUN_STEPS` rounded up to the
    trace's loops, so that its mean step is the model's expected one, not one short run's draw of its jitter, and
    every what-if on it (scan's gains, tune, emulate) runs that same long run, whatever the capture's length."""
    steps = max(int(_given(given, "workload", "steps", 0)), 0)
    if steps or recompiling:
        return max(steps or scope.steps.count, MIN_STEPS)
    loop = _loop_size(trace, scope, scope.steps.count) if "loop_size" in profile.knobs else 1
    return loop * math.ceil(FIT_RUN_STEPS / loop)


def _profile(family: str, given: dict[str, Any]) -> DeviceProfile:
    """The fit's device: the model given or identified (a name the table does not hold, generic or mistyped, is the
    family's reference figures; a mistyped one is reported when the fitted config is validated)."""
    model = given.get("device_model")
    return devices.model_profile(family, model if model in devices.BY_KEY else None)


def _given(given: dict[str, Any], section: str, name: str, default: float) -> float:
    """A number the user gave for ``section.name``, else ``default`` (a value that is no number is reported when
    the fitted config is validated)."""
    value = given.get(section, {}).get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


@dataclass
class _Host:
    """How the fit's host drives the device: its constants, steps per call, ops per step, and what sets the pace."""

    overrides: dict[str, float]
    loop: int
    ops: int
    launching: bool  # op by op, no device graphs
    pacing: tuple[str, str] | None  # the field whose value sets the step time, when the device waits at all
    workload: dict[str, float]  # what the host's launching makes the device do (its idle between launches)


def _host(
    trace: Trace,
    scope: TraceAnalysis,
    profile: DeviceProfile,
    idle: dict[str, float],
    compute: float,
    steps: int,
    job_steps: int,
    loading: np.ndarray | None,
    stall: float,
    copies_block: bool,
) -> _Host:
    """The host's time per device call, from the device's idle per step (``idle``) and its work (``compute``);
    ``loading``: how long the training process took to load each batch itself (None: it loads none); ``stall``:
    where the host waits for each step's device work before going on, how long the device then idles per step (0
    where it does not wait); ``copies_block``: it waits in each step's copy from pageable memory."""
    syncs = stall > 0
    if "device_graphs" in profile.knobs and not graphs_in_use(trace, scope.in_window):
        return _streamed(trace, scope, idle, compute, steps, loading, stall, copies_block)
    host_idle = host = sum(idle.get(cause, 0.0) for cause in HOST_CAUSES)
    waiting = sum(idle.get(cause, 0.0) for cause in INPUT_CAUSES)
    if waiting > host_idle:  # input sets the pace: the device idles for the host's work only once data is in
        host = host_idle
    elif not (profile.host_blocks_per_call or syncs):  # the host runs a step ahead: the device idles past compute
        host = compute + host if host > 0 else min(profile.python_us + profile.call_dispatch_us, 0.5 * compute)
    loop = _loop_size(trace, scope, job_steps) if "loop_size" in profile.knobs else 1
    host *= loop  # the host's time per device call, one call every ``loop`` steps
    dispatch = min(profile.call_dispatch_us, host)
    pacing = INPUT_PACE if waiting > host_idle else HOST_PACE
    overrides = {"python_us": host - dispatch, "call_dispatch_us": dispatch}
    return _Host(overrides, loop, _ops(scope, steps), False, pacing if max(waiting, host_idle) > 0 else None, {})


def _streamed(
    trace: Trace,
    scope: TraceAnalysis,
    idle: dict[str, float],
    compute: float,
    steps: int,
    loaded: np.ndarray | None,
    stall: float,
    copies_block: bool,
) -> _Host:
    """A host that launches ops one by one (the trace shows no graph launches): of its own time per step (busy
    outside loading batches, syncs and copies that block), what dispatches the ops (:func:`dispatch_per_step`) goes
    to launching them, and the rest (Python that runs no op, the allocator, code loading) to Python before the
    first launch, which a device graph does not remove; the device idles, beyond what that time over its work
    explains, while runs of short ops are launched. A host that waits for each step then loads its batch and runs
    Python before the first launch: at least the device's idle after each wait (``stall``); the device idles
    between launches for the rest of its idle for the host that launching longer than its work does not explain.
    A host that waits in each step's copy from pageable memory (``copies_block``) runs before the first launch no
    more Python than the device idles for the host, the rest beside the device's work, between launches. What sets
    the pace is input, where the device waits for workers most; else the longer of the host's path (loading and
    launching) and the device's (work, and idle between launches)."""
    loads = loaded is not None
    after_syncs = idle.get("sync", 0.0) if stall else 0.0
    host_idle = sum(idle.get(cause, 0.0) for cause in HOST_CAUSES) - after_syncs
    waiting = sum(idle.get(cause, 0.0) for cause in INPUT_CAUSES)
    own = _own_host_time(trace, scope) / steps
    loading = waiting if loads else 0.0  # the loop's loading, as far as the device waits for it
    dispatch = min(dispatch_per_step(trace, scope), own)
    if stall:  # what the host does after each wait is exposed, then its launching as far as it outlasts the work
        gaps = max(host_idle + after_syncs + loading - stall - max(dispatch - compute, 0.0), 0.0)
    else:
        gaps = max(host_idle - max(own - compute, 0.0), 0.0)
    python = max(stall - (float(np.sum(loaded)) / steps if loaded is not None else 0.0), own - dispatch, 0.0)
    if copies_block and python > host_idle:  # the copy's wait exposes the Python before the first launch in full
        python, dispatch = host_idle, own - host_idle
        gaps = max(host_idle - python - max(dispatch - compute, 0.0), 0.0)
    if not loads and waiting > host_idle:
        pacing: tuple[str, str] | None = INPUT_PACE
    else:
        pacing = LAUNCH_PACE if loading + own >= compute + gaps else ("workload", "launch_idle_us")
    ops = _ops(scope, steps)
    overrides = {"python_us": python, "op_launch_us": dispatch / ops}
    paced = pacing if max(waiting, host_idle + after_syncs) > 0 else None
    return _Host(overrides, 1, ops, True, paced, {"launch_idle_us": gaps})


def _stall_each_step(trace: Trace, scope: TraceAnalysis, with_read_backs: bool = True) -> float:
    """How long the device idles per step after the host has waited for it, µs, where the host waits for the device's
    step in every steady step (a value read back each step, ``loss.item()``, or, ``with_read_backs``, the step's
    results copied back); 0 where it does not. A wait in each step (but the last, whose wait may fall past the
    trace's end) counts where the device then idles at least :data:`SYNC_STALL` of the step: a sync after which the
    device hardly idles waited for part of the step only, and the host went on while the rest ran."""
    steps = scope.steps
    starts, ends = steps.start[steps.warmup :], steps.end[steps.warmup :]
    waits = np.flatnonzero(trace.on_roles(Role.HOST) & (trace.kind == Kind.SYNC) & scope.in_window)
    if with_read_backs:
        waits = np.r_[waits, _read_back_calls(trace, scope)]
    if waits.size == 0 or starts.size == 0:
        return 0.0
    stall = intervals.total(_idle_after(scope, (trace.ts[waits], trace.end[waits]))) / starts.size
    if stall < SYNC_STALL * scope.step_time:
        return 0.0
    at = np.sort(trace.ts[waits])
    synced = np.searchsorted(at, ends) > np.searchsorted(at, starts)
    judged = synced[:-1] if synced.size > 1 else synced  # the last step's wait may fall past the trace's end
    return stall if judged.all() else 0.0


def _idle_after(scope: TraceAnalysis, waits: intervals.Intervals) -> intervals.Intervals:
    """The device's idle stretches that begin while the host is in one of ``waits`` (from their starts to their ends:
    the device drained while the host waited for it), as far as its next work; after the window's last work, to
    the window's end and, as the steps repeat, from the window's start to its first work."""
    starts, ends = scope.metrics.busy["device"]
    if starts.size == 0:  # no work in the window: nothing drained
        return np.empty(0), np.empty(0)
    began, returned = waits
    done = np.searchsorted(starts, returned, side="right")  # the device's work begun before each wait returned
    drained = (done > 0) & (ends[np.maximum(done - 1, 0)] <= returned)
    drained[drained] = ends[done[drained] - 1] >= began[drained]  # ... and its last finished during the wait
    idle_from, done = ends[done[drained] - 1], done[drained]
    after_last = done == starts.size
    resumed = np.where(after_last, scope.hi, starts[np.minimum(done, starts.size - 1)])
    wrap = bool(after_last.any())
    return intervals.union(np.r_[idle_from, [scope.lo] if wrap else []], np.r_[resumed, [starts[0]] if wrap else []])


def _ops(scope: TraceAnalysis, steps: int) -> int:
    """Device ops per step."""
    return max(round(float(np.nan_to_num(scope.metrics["device.ops.count"])) / steps), 1)


def _own_host_time(trace: Trace, scope: TraceAnalysis) -> float:
    """The host's busy time in the window outside loading batches, syncs and copies that block it, µs: its traced
    work, with the short gaps between (Python the profiler does not record) counted in."""
    return intervals.total(own_work(trace, scope))


def _host_spread(trace: Trace, scope: TraceAnalysis) -> float:
    """How the host's own time per steady step varies (:func:`spread`; 0 where it cannot say): measured on the host's
    work, not on the steps, so the steps' spread stays a check of the fit."""
    steps, own = scope.steps, own_work(trace, scope)
    first = steps.warmup
    per_step = intervals.totals_in(own, steps.start[first:], steps.end[first:])
    return min(spread(per_step), MAX_HOST_JITTER) if len(per_step) > 1 else 0.0


def _pageable(trace: Trace, scope: TraceAnalysis) -> bool:
    """Whether the input copies come from pageable memory (named so, or made by calls that block the host) and so
    run apart from compute; copies that mostly overlap compute are modelled as asynchronous, whatever memory. A
    call that blocks to read results back (a device-to-host copy alone) says nothing of the input's memory."""
    copies = (trace.kind == Kind.H2D) & scope.in_window
    calls = np.flatnonzero(blocking_copies(trace) & scope.in_window)
    pageable = (copies & trace.name_matches(PAGEABLE)).any() or (~read_backs(trace, calls)).any()
    return bool(pageable) and not scope.metrics["h2d.overlap_fraction"] >= OVERLAPPED_COPIES


def _compute_spread(busy: np.ndarray) -> float:
    """How the device's compute per steady step (``busy``) varies (:func:`spread`; the default where it cannot
    say)."""
    return min(spread(busy), MAX_COMPUTE_JITTER) if len(busy) > 1 else DEFAULT_COMPUTE_JITTER


def _steady_compute(scope: TraceAnalysis) -> np.ndarray:
    """The device's compute in each steady step, µs."""
    steps = scope.steps
    first = steps.warmup
    return intervals.totals_in(scope.compute, steps.start[first:], steps.end[first:])


def _short_last(busy: np.ndarray, batch: int) -> int | None:
    """The samples of a ``batch`` the last of the steady steps computes (``busy``: compute per step) where it
    computes less than the others (:data:`SHORT_LAST`: a short last batch, as the compute per sample says), at
    least 1 and fewer than a batch; None where it does not, or too few steps say what a steady one computes."""
    if len(busy) <= STEPS_BEFORE_LAST or (typical := float(np.median(busy[:-1]))) <= 0:
        return None  # too few steps, or steps that compute nothing, say nothing of a batch's share
    share = busy[-1] / typical
    if not 0 < share < SHORT_LAST:
        return None
    return int(min(max(round(batch * share), 1), max(batch - 1, 1)))


def _own_draw(cv: float, steps: int) -> float:
    """The mean of the factors the fit's own compute jitter draws over its steady steps (all but the first): the
    trace's mean compute is its draw's, so the fit's is divided by this to average the same."""
    factors = jitter(FIT_SEED, steps, cv, COMPUTE_STREAM)
    return float(factors[1:].mean()) if steps > 1 else 1.0


def spread(values: Sequence[float] | np.ndarray) -> float:
    """A coefficient of variation from the median absolute deviation (scaled to agree with the standard deviation
    of normal noise), so that one step with a one-off compile or a slow first call does not make it; 0 with fewer
    than two values."""
    values = np.asarray(values, dtype=np.float64)
    median = float(np.median(values)) if values.size > 1 else 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(values - median)) / median) if median > 0 else 0.0


def _loop_size(trace: Trace, scope: TraceAnalysis, job_steps: int) -> int:
    """Steps per device call where the host launches fewer calls than the trace has steps (iteration offload), else
    1: the steps that end after each call and before the next, the count most calls run. A trace with a remainder
    loop keeps it where it recompiles for it; otherwise (and for a fit of another length than the trace's) the loop
    is the divisor of ``job_steps`` nearest it, so the fit has no remainder loop the trace does not show. 1 where the
    job's framework runs no loop (:func:`~perftool.analysis.family.offers_loop_size`)."""
    if not offers_loop_size(scope.family, scope.framework):
        return 1
    calls = np.sort(trace.ts[(trace.kind == Kind.RUNTIME) & trace.on_roles(Role.HOST)], kind="stable")
    steps = scope.steps.count
    if not 0 < calls.size < steps:
        return 1
    per_call = np.diff(np.searchsorted(scope.steps.end, np.append(calls, np.inf)))
    counts = Counter(int(n) for n in per_call if n > 0)
    loop = max(counts, key=lambda n: (counts[n], n))
    if job_steps == steps and scope.metrics["recompilations.count"] > 0:
        return loop  # its remainder loop too
    return min((d for d in range(1, job_steps + 1) if job_steps % d == 0), key=lambda d: (abs(d - loop), -d))


def _device_work(
    trace: Trace, scope: TraceAnalysis, replicated: bool, read_back: tuple[np.ndarray, float] | None = None
) -> float:
    """The device's busy time in the window that the fit models as compute: compute, and whatever else keeps it
    busy that the emulator has no part of its own for (device-to-device copies on its streams, communication unless
    ``replicated``, copies back to the host but the ``read_back`` modelled apart), µs. Strided and remote-buffer
    copies are modelled apart, and so are input copies: the emulator copies each batch itself, beside compute or
    before it as the device allows."""
    modelled_apart = trace.name_table(STRIDED_COPY) | trace.name_table(REMOTE_BUFFER_COPY)
    apart = trace.by_name(modelled_apart) | (trace.kind == Kind.H2D)
    if replicated:
        apart |= trace.kind == Kind.COMMUNICATION
    if read_back is not None:
        apart[read_back[0]] = True
    busy = trace.on_roles(Role.DEVICE) & ~trace.of_kinds(*NOT_DEVICE_WORK) | (trace.kind == Kind.COMPUTE)
    return intervals.total(scope.busy(busy & ~apart))


@dataclass
class _Gradients:
    """Data parallelism as the fit models it: replicas, and the gradient bytes they all-reduce a step."""

    replicas: dict[str, Any]
    bytes: float


def _gradients(scope: TraceAnalysis, profile: DeviceProfile, steps: int, peers: Sequence[float]) -> _Gradients | None:
    """The device's all-reduces across two or more ranks as replicas (None where the trace has none): as many
    bytes a step as the calls move, in buckets of the largest call's size (the rest is the last bucket), reduced
    during the backward pass where the trace hides them behind compute, else after it. A call also lasts while
    it waits for the other ranks, which the emulated ranks wait again, so the bandwidth is the calls' median (most
    wait for none): by byte where sizes are known. The fitted rank is rank 0; the others compute as fast as
    ``peers`` says (spread over them by quantile), or as fast as it where the job's other ranks are not known."""
    comms = scope.metrics.communication
    calls = comms.calls
    reduce = next((c for c in comms.collectives if c.name == "all_reduce"), None)
    if calls.on != "device" or reduce is None or (reduce.group_size or 0) < 2 or round(reduce.count / steps) < 1:
        return None
    mine = (calls.type == calls.names.index("all_reduce")) & (comms.in_window_us > 0)
    durations, sizes = comms.in_window_us[mine], calls.nbytes[mine]
    sized = ~np.isnan(sizes)
    ranks = min(int(reduce.group_size or 2), MAX_FITTED_RANKS)
    latency = min(profile.collective_latency_us, float(np.median(durations)) / 2)
    traffic = 2 * (ranks - 1) / ranks  # bytes on each rank's links per byte reduced
    if sized.any():
        bucket, per_call = float(sizes[sized].max()), float(sizes[sized].mean())  # the cap; the last bucket is less
        transfer = np.maximum(durations[sized] - latency, latency)
        bus_gbps = float(np.median(sizes[sized] * traffic / transfer)) / 1e3
    else:
        bucket = per_call = UNSIZED_BUCKET
        bus_gbps = bucket * traffic / (float(np.median(durations)) - latency) / 1e3
    if not 0 < bus_gbps < math.inf:
        return None  # calls that take no time: nothing a bandwidth describes
    overlap = comms.values["communication.overlap_fraction"] >= OVERLAPPED
    replicas = {"count": ranks, "bucket": int(bucket), "overlap": overlap, "bus_bandwidth": bus_gbps,
                "latency_us": latency, "slow_ranks": _peers(peers, ranks)}  # fmt: skip
    return _Gradients(replicas, per_call * round(reduce.count / steps))


def _peers(relative: Sequence[float], ranks: int) -> list[dict[str, Any]]:
    """Ranks 1 .. ``ranks`` - 1 as the job's other ranks compute, relative to the fitted one: the quantiles of
    ``relative`` (none where it is empty or a rank computes as fast)."""
    if not relative:
        return []
    clipped = np.clip(relative, MIN_PEER, 1.0)
    factors = np.quantile(clipped, np.linspace(0, 1, ranks - 1)) if ranks > 2 else [np.median(clipped)]
    return [{"rank": k, "compute": float(f)} for k, f in enumerate(factors, start=1) if f < 1.0]


def _matched(config: EmulatorConfig, field: tuple[str, str], step: float, per: int = 1) -> EmulatorConfig:
    """``config`` with ``field`` set so that its expected steady mean step (:func:`expected_step`) is the trace's
    ``step`` (the closed forms above miss how the stack's host, input and device wait on one another); ``per``: how
    many times a step pays the field (ops launched one by one). The step grows with the field, piecewise linearly:
    each round runs :data:`MATCH_CANDIDATES` values of the bracket together (one run costs about what one value
    does), the false-position point among them, so the bracket narrows more than tenfold a round and the
    false-position point lands on the step once the bracket holds one linear piece."""
    section, name = field

    def with_value(value: float) -> EmulatorConfig:
        part = getattr(config, section).model_copy(update={name: value})
        return config.model_copy(update={section: part})

    def fitted(value: float) -> EmulatorConfig:
        return validate_config(with_value(value).model_dump(mode="json"), "calibration")

    lo, hi = 0.0, max(float(getattr(getattr(config, section), name) or 0.0), step / per) * 4
    values = np.linspace(lo, hi, MATCH_CANDIDATES)  # the first round: the whole reach, its ends included
    for _ in range(MATCH_ROUNDS):
        missed = expected_steps([with_value(float(value)) for value in values]) - step
        closest = int(np.argmin(np.abs(missed)))
        under, over = np.flatnonzero(missed < 0), np.flatnonzero(missed > 0)
        if abs(missed[closest]) <= MATCH_TOLERANCE * step or not under.size or not over.size:
            return fitted(float(values[closest]))  # matched, or out of the field's reach: the nearer end
        lo, below, hi, above = (float(values[under[-1]]), float(missed[under[-1]]), float(values[over[0]]),
                                float(missed[over[0]]))  # fmt: skip
        guess = hi - above * (hi - lo) / (above - below)  # false position
        values = np.unique(np.append(np.linspace(lo, hi, MATCH_CANDIDATES), guess))  # the bracket's ends kept
    return fitted(hi - above * (hi - lo) / (above - below))


def expected_step(config: EmulatorConfig) -> float:
    """The config's steady mean step, µs: a fit's expected step, as it runs :data:`FIT_RUN_STEPS` (see
    :func:`_fit_steps`); the fit's own is simulated already, when it was matched."""
    return float(evaluate(config)["step_time_mean_us"][0])


def expected_steps(configs: list[EmulatorConfig]) -> np.ndarray:
    """:func:`expected_step` of each of ``configs`` (one config with a per-configuration figure changed), run
    together in one simulation (the jitter every configuration shares makes each figure the one it has alone), and
    kept as :func:`~perftool.emulator.evaluate.evaluate_all` keeps them: the value matched is the fit, whose checks
    then cost no run of their own."""
    return np.array([evaluation["step_time_mean_us"][0] for evaluation in evaluate_all(configs)])


def _graphs_and_tiles(
    scope: TraceAnalysis, profile: DeviceProfile, batch_bytes: int, launching: bool
) -> dict[str, Any]:
    """Device graphs (one launch a step) where the family has them, unless the trace launches op by op; IO tiles
    where the trace's copies overlap compute on a device that overlaps them only through IO tiles."""
    knobs: dict[str, Any] = {"device_graphs": not launching} if "device_graphs" in profile.knobs else {}
    copies = _input_copies(scope)
    overlapped = intervals.overlap(copies, scope.compute) / intervals.total(copies) if copies[0].size else 0.0
    if profile.tiles and overlapped > 0.5:
        knobs["io_tiles"] = max(int(io_tiles_needed(batch_bytes)), 1)
    return knobs


def _input_copies(scope: TraceAnalysis) -> intervals.Intervals:
    """Host-to-device input copies in the window (remote-buffer copies of offloaded state, and the copies back of
    CPU fallbacks' results, are no input)."""
    trace = scope.trace
    copies = scope.busy((trace.kind == Kind.H2D) & ~trace.name_matches(REMOTE_BUFFER_COPY))
    return intervals.subtract(copies, fallback_round_trips(trace, scope.lo, scope.hi), scope.lo, scope.hi)


def _sample_bytes(scope: TraceAnalysis, bandwidth: float, steps: int, batch: int) -> int:
    """Bytes per sample as copied to the device: the input copies' time per step at the link's bandwidth
    (remote-buffer copies of offloaded state are no input)."""
    return max(int(intervals.total(_input_copies(scope)) / steps * bandwidth / 1e6 / batch), 1)


def _input(
    trace: Trace, scope: TraceAnalysis, step: float, pacing: bool, batch: int, loading: np.ndarray | None
) -> dict[str, Any]:
    """Preprocessing time per sample, its spread and the workers, from the input workers' batches when traced, or
    from the batches the training process loads itself (``loading``); ``pacing``: the device waits for input more
    than for anything else."""
    if loading is not None:
        mean = float(loading.mean())
        spread = float(loading.std() / mean) if mean > 0 else 0.0
        return {"preprocess_us_per_sample": mean / batch, "preprocess_jitter": min(spread, 5.0), "input_workers": 0}
    batches = (trace.kind == Kind.INPUT) & trace.on_roles(Role.INPUT)
    rows = np.flatnonzero(batches & scope.in_window)
    if rows.size:
        workers = int(distinct(trace.track[rows]).size)
        durations = trace.dur[rows]
        mean = float(durations.mean())
        spread = float(durations.std() / mean) if mean > 0 else 0.0
        ordered = batches_in_order(trace, np.flatnonzero(batches))
        seen = scope.in_window[ordered]  # the window's batches, aligned with the trace's: the fit's i-th is its i-th
        replayed = np.roll(trace.dur[ordered[seen]], int(np.argmax(seen)))
        return {
            "preprocess_us_per_sample": mean / batch,
            "preprocess_jitter": min(spread, 5.0),
            "input_workers": workers,
            **({"preprocess_replay": _relative(replayed)} if mean > 0 else {}),
        }
    if pacing:  # only the waits are traced, and they set the pace: one worker as slow as a step
        return {"preprocess_us_per_sample": step / batch, "input_workers": 1}
    return {"preprocess_us_per_sample": 0.0}  # waits that do not set the pace: input keeps up


def _relative(durations: np.ndarray) -> list[float]:
    """Durations relative to their mean, as a replayed sequence holds them (4 significant digits, none zero)."""
    relative = np.clip(durations / durations.mean(), MIN_REPLAYED, None)[:MAX_REPLAYED]
    return [float(f"{value:.4g}") for value in relative]


def _fallbacks(trace: Trace, scope: TraceAnalysis, profile: DeviceProfile, steps: int) -> list[dict[str, Any]]:
    """The ops that fell back to the host CPU, each named as the trace names it, with its host time and calls per
    step, and the bytes its copies move (the device-to-host copy time per call of any of them, at the link's
    bandwidth: the copies do not say whose they are)."""
    rows = np.flatnonzero(trace.name_matches(CPU_FALLBACK) & trace.on_roles(Role.HOST) & scope.in_window)
    if rows.size == 0 or "cpu_fallback_ops" not in profile.knobs:
        return []
    per_call = scope.metrics["d2h.time_us"] / rows.size  # a number wherever there are steps: 0 without copies
    names, op_of_row, calls = np.unique(trace.name[rows], return_inverse=True, return_counts=True)
    host_us = np.bincount(op_of_row, weights=trace.dur[rows]) / calls
    return [
        {
            "op": _fallback_op(trace.names[name]),
            "host_us": float(host),
            "tensor_size": max(int(per_call * profile.d2h_bandwidth / 1e6), 1),
            "calls_per_step": max(round(count / steps), 1),
        }
        for name, host, count in zip(names.tolist(), host_us.tolist(), calls.tolist(), strict=True)
    ]


def _fallback_op(name: str) -> str:
    """The op a fallback's event names: ``CPU fallback digamma : self=HPUBFloat16Type`` and ``aten::digamma (CPU
    fallback)`` are ``digamma``'s (``op`` where the name says nothing more)."""
    op = CPU_FALLBACK.sub("", name).split(" : ")[0].strip(" ()")
    return op.removeprefix("aten::") or "op"


def _strided(trace: Trace, scope: TraceAnalysis, profile: DeviceProfile, steps: int, batch: int) -> dict[str, Any]:
    """Bytes rearranged per sample by layout-changing copies (``TransData``, ``DstStridedCopy``) on the device."""
    copies = scope.busy(trace.name_matches(STRIDED_COPY) & trace.on_roles(Role.DEVICE))
    per_step = intervals.total(copies) / steps
    return {"layout_copy_per_sample": int(per_step * profile.strided_copy_bandwidth / 1e6 / batch)} if per_step else {}


def _offloaded_state(trace: Trace, scope: TraceAnalysis, profile: DeviceProfile, steps: int) -> dict[str, Any]:
    """Optimizer state streamed to and from remote buffers each update: its size, from the copies' time."""
    copies = scope.busy(trace.name_matches(REMOTE_BUFFER_COPY) & trace.on_roles(Role.DEVICE))
    per_step = intervals.total(copies) / steps
    if not per_step or not profile.remote_buffer_bandwidth:
        return {}
    return {"optimizer_state": int(per_step * profile.remote_buffer_bandwidth / 2 / 1e6)}


@dataclass
class _ReadBack:
    """Results copied back to the host after each step, as the fit models them."""

    workload: dict[str, int]  # their bytes a step
    overrides: dict[str, float]  # the bandwidth they ran at, GB/s, where the trace records their sizes
    pageable: bool  # into pageable memory: the host waits for them


def _read_back_copies(trace: Trace, scope: TraceAnalysis, steps: int) -> tuple[np.ndarray, float] | None:
    """The device's copies to the host in the window, outside CPU fallbacks' round trips (rows), and their time per
    step, µs, where they take at least :data:`READBACK_SHARE` of the step: the read-back the fit models; None
    otherwise (device work, as a ``loss.item()``'s few bytes are)."""
    copying = (trace.kind == Kind.D2H) & trace.on_roles(Role.DEVICE, Role.D2H) & ~trace.name_matches(REMOTE_BUFFER_COPY)
    rows = np.flatnonzero(copying & scope.in_window)
    trips = fallback_round_trips(trace, scope.lo, scope.hi)
    rows = rows[~intervals.overlaps_any(trace.ts[rows], trace.end[rows], *trips)]
    mask = np.zeros(len(trace), dtype=bool)
    mask[rows] = True
    per_step = intervals.total(scope.busy(mask)) / steps
    return (rows, per_step) if per_step >= READBACK_SHARE * scope.step_time else None


def _readback(
    trace: Trace, scope: TraceAnalysis, profile: DeviceProfile, read_back: tuple[np.ndarray, float], steps: int
) -> _ReadBack:
    """The read-back the fit models (:func:`_read_back_copies`: its copies' rows, their time per step): its bytes
    (as the copies record them, else their time at the family's bandwidth into that memory), and whether it goes to
    pageable memory (named so, or made by calls that block the host) on a family whose jobs can pin it (elsewhere its
    bandwidth is the link's)."""
    rows, per_step = read_back
    calls = _read_back_calls(trace, scope)
    waited_for = intervals.overlaps_any(trace.ts[rows], trace.end[rows], trace.ts[calls], trace.end[calls])
    pageable = "pin_readback" in profile.knobs and bool((trace.name_matches(PAGEABLE)[rows] | waited_for).any())
    field = "pageable_d2h_bandwidth" if pageable else "d2h_bandwidth"
    recorded = _copied_bytes(trace, rows)
    if recorded is None:
        return _ReadBack({"readback_per_step": max(int(per_step * getattr(profile, field) / 1e6), 1)}, {}, pageable)
    per_step_bytes = recorded / steps
    bandwidth = min(per_step_bytes / per_step / 1e3, MAX_BANDWIDTH_GBPS)  # bytes per µs / 1e3: GB/s
    return _ReadBack({"readback_per_step": max(int(per_step_bytes), 1)}, {field: bandwidth}, pageable)


def _read_back_calls(trace: Trace, scope: TraceAnalysis) -> np.ndarray:
    """The window's blocking copy calls (host calls by construction) that read results back (:func:`read_backs`),
    rows."""
    calls = np.flatnonzero(blocking_copies(trace) & scope.in_window)
    return calls[read_backs(trace, calls)]


def _copied_bytes(trace: Trace, rows: np.ndarray) -> float | None:
    """The bytes the copies at ``rows`` moved, as their ``args`` record them (Kineto's ``bytes``); None where any of
    them records none."""
    sizes = [args.get("bytes") if args else None for args in trace.args_of(rows)]
    counted = [float(size) for size in sizes if isinstance(size, int | float) and size >= 0]
    return sum(counted) if counted and len(counted) == len(sizes) else None


def _compiles(scope: TraceAnalysis) -> dict[str, Any]:
    """The graph compile time: the steady state's compiles together (the fit compiles once there), else the mean."""
    trace = scope.trace
    rows = compiles(trace)  # each compile once, not again for each phase timed inside it
    steady = rows[scope.in_window[rows] & (trace.ts[rows] >= scope.lo)]
    if steady.size:
        return {"graph_compile_ms": max(float(trace.dur[steady].sum()) / 1e3, 0.001)}
    count, time = scope.metrics["compile.count"], scope.metrics["compile.time_us"]
    return {"graph_compile_ms": max(time / count / 1e3, 0.001)} if count > 0 else {}
