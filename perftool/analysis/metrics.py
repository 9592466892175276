"""The shared metrics: one flat, named, documented set of numbers per trace.

Rules, ``gate`` and ``tune`` all read these names. Time-based metrics are measured over the
analysis window: the steady-state steps when the trace has step markers, else the whole trace.
A metric that cannot be measured on a trace (no steps, no transfers, no device tracks in a CPU-only
trace) is NaN, written as null.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.communication import METRICS as COMMUNICATION_METRICS
from perftool.analysis.communication import CollectiveStat, Communication, GroupStat, measure
from perftool.analysis.confidence import Caveat, caveats
from perftool.analysis.family import device_name
from perftool.analysis.host_calls import compiles
from perftool.analysis.launches import with_replays
from perftool.analysis.steps import Steps, detect_steps
from perftool.common.arrays import distinct
from perftool.dialects.vocabulary import CPU_FALLBACK, FINDINGS_CATEGORY, FINDINGS_PROCESS, GRAPH_RECORDING
from perftool.trace.model import NOT_DEVICE_WORK, Kind, Role, Trace

TOP_OPS = 10

METRICS: dict[str, str] = {
    "trace.events": "events in the trace after B/E pairing (metadata and counter events excluded, and the findings "
    "perftool drew on a trace it annotated)",
    "trace.tracks": "tracks (pid, tid pairs) that hold events (the tracks of perftool's drawn findings excluded)",
    "trace.span_us": "time from the first event's start to the last event's end, µs",
    "window.start_us": "start of the analysis window (first steady step, or first event), µs",
    "window.duration_us": "length of the analysis window, µs",
    "steps.count": "training steps found (ProfilerStep#N or emulator step markers)",
    "steps.warmup": "leading steps excluded as warm-up (compiling, or 1.5x slower than typical)",
    "steps.steady": "steps in the steady state",
    "step_time_us.mean": "mean steady-state step time, µs",
    "step_time_us.median": "median steady-state step time, µs",
    "step_time_us.p90": "90th percentile steady-state step time, µs",
    "step_time_us.min": "fastest steady-state step, µs",
    "step_time_us.max": "slowest steady-state step, µs",
    "throughput.steps_per_s": "steady-state steps / their total time, per s (not 1/median: loops make steps uneven)",
    "device.busy_us": "time at least one device stream is busy within the window, µs",
    "device.busy_fraction": "device busy time / window",
    "device.idle_fraction": "1 - device.busy_fraction: share of the window with every device stream idle",
    "device.compute_fraction": "share of the window with device compute (kernels/ops) running",
    "device.idle_gaps.count": "stretches of the window with every device stream idle (longer than a nanosecond)",
    "device.idle_gap_us.max": "longest device idle stretch, µs",
    "device.idle_gap_us.p90": "90th percentile device idle stretch, µs",
    "device.ops.count": "device compute ops started in the window",
    "device.op_time_us.median": "median device compute op duration, µs (small: launch-bound)",
    "host.busy_fraction": "share of the window with a host thread running something",
    "h2d.count": "host-to-device copies in the window",
    "h2d.time_us": "time with a host-to-device copy in flight, µs",
    "h2d.overlap_fraction": "share of h2d.time_us that overlaps device compute (1 = fully hidden)",
    "d2h.count": "device-to-host copies in the window",
    "d2h.time_us": "time with a device-to-host copy in flight, µs",
    "d2h.overlap_fraction": "share of d2h.time_us that overlaps device compute",
    "input.time_us": "time the host spends in data loading within the window, µs",
    "input.fraction": "input.time_us / window",
    **COMMUNICATION_METRICS,
    "compile.count": "graph/op compilations anywhere in the trace",
    "compile.time_us": "total compilation time anywhere in the trace, µs",
    "compile.graph_recordings": "of compile.count, device graphs recorded rather than compiled (a CUDA graph's "
    "capture, torch.compile's CUDA graph trees)",
    "recompilations.count": "compilations starting inside the steady-state window (after warm-up)",
    "sync.count": "host-device synchronisation points in the window (stream sync, .item()); nested ones count once",
    "sync.per_step": "synchronisation points per steady-state step",
    "cpu_fallback.count": "calls of ops that fell back to the host CPU, in the window",
    "cpu_fallback.ops": "distinct ops that fell back to the host CPU, in the window",
}


def unit_of(metric: str) -> str:
    """The unit a metric's name says, as :func:`perftool.common.units.figure` takes it: ``us``, ``fraction``, ``bytes``,
    ``count``, or one written out such as ``steps/s``."""
    if "_us" in metric:
        return "us"
    if metric.endswith("fraction"):
        return "fraction"
    if metric.endswith(".bytes"):
        return "bytes"
    if metric.endswith("_per_s"):
        return metric.rsplit(".", 1)[-1].removesuffix("_per_s") + "/s"
    if metric.endswith("_gbps"):
        return "GB/s"
    return "count"


_NOT_BUSY = [Kind.STEP, Kind.ANNOTATION]


@dataclass
class OpStat:
    """Time spent in one op name."""

    name: str
    count: int
    total_us: float
    share: float  # of the summed time of all ops in scope


@dataclass
class Metrics:
    values: dict[str, float]
    step_times_us: list[float] = field(default_factory=list)  # steady-state samples, in order
    step_numbers: list[int] = field(default_factory=list)  # their numbers (the step markers' own, else positions)
    top_ops: list[OpStat] = field(default_factory=list)
    top_ops_scope: str = "device"  # "device" (compute ops) or "host" (host ops, inclusive)
    categories: dict[str, int] = field(default_factory=dict)
    device: str = ""  # what the device tracks ran on (family.device_name)
    step_clock: str = "host"  # "device": steps timed by the device work each host step launched
    caveats: list[Caveat] = field(default_factory=list)  # what limits these figures
    busy: dict[str, intervals.Intervals] = field(default_factory=dict, repr=False)  # device, compute, h2d, comms
    communication: Communication = field(default_factory=Communication.none, repr=False)
    track_events: list[int] = field(default_factory=list)  # events on each track, by track id
    track_samples: list[int] = field(default_factory=list)  # counter samples on each track, by track id

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    @property
    def collectives(self) -> list[CollectiveStat]:
        """Per collective type, the most time first."""
        return self.communication.collectives

    @property
    def groups(self) -> list[GroupStat]:
        """Per process group, the most exposed first."""
        return self.communication.groups


def compute_metrics(trace: Trace, steps: Steps | None = None) -> Metrics:
    """Every metric of :data:`METRICS` for one trace."""
    steps = steps if steps is not None else detect_steps(trace)
    lo, hi = steps.window
    in_window = trace.spans_in(lo, hi)
    kind = trace.kind
    compute = intervals.busy(trace, kind == Kind.COMPUTE, lo, hi)
    device_values, device = _device_metrics(trace, lo, hi, compute)
    comms = measure(trace, lo, hi, compute, steps.steady)
    host_values, h2d = _host_and_link_metrics(trace, lo, hi, compute, comms.calls.rows)
    drawn_events, drawn_tracks = _drawn(trace)
    values: dict[str, float] = {
        "trace.events": float(len(trace) - drawn_events),
        "trace.tracks": float(len(trace.tracks) - drawn_tracks),
        "trace.span_us": steps.last - steps.first,
        "window.start_us": lo,
        "window.duration_us": hi - lo,
        "steps.count": float(steps.count),
        "steps.warmup": float(steps.warmup),
        "steps.steady": float(steps.count - steps.warmup),
        **_step_time_metrics(steps.steady_durations),
        **device_values,
        **host_values,
        **comms.values,
        **_compile_metrics(trace, steps),
        **_sync_metrics(intervals.busy(trace, (kind == Kind.SYNC) & ~trace.on_roles(Role.DEVICE), lo, hi), steps),
        **_fallback_metrics(trace, in_window),
    }
    scope, top = _top_ops(trace, in_window, comms.calls.rows)
    categories = np.bincount(trace.cat, minlength=len(trace.cats))
    return Metrics(
        values=values,
        step_times_us=steps.steady_durations.tolist(),
        step_numbers=steps.numbers()[steps.warmup :].tolist(),
        top_ops=top,
        top_ops_scope=scope,
        categories={c: int(n) for c, n in zip(trace.cats, categories.tolist()) if n and c != FINDINGS_CATEGORY},
        device=device_name(trace),
        step_clock=steps.clock,
        caveats=caveats(trace, steps),
        busy={"device": device, "compute": compute, "h2d": h2d, "communication": comms.busy},
        communication=comms,
        track_events=np.bincount(trace.track, minlength=len(trace.tracks)).tolist(),
        track_samples=np.bincount(trace.counters.track, minlength=len(trace.tracks)).tolist(),
    )


def device_busy(trace: Trace, lo: float, hi: float) -> intervals.Intervals:
    """When the device works in [lo, hi]: its spans, and each device graph replay from its first kernel to its last
    (:func:`~perftool.analysis.launches.with_replays`). Measured once per trace and window, whichever of the metrics
    and the idle attribution asks first (they run on two threads)."""

    def measured() -> intervals.Intervals:
        device = intervals.busy(trace, trace.on_roles(Role.DEVICE) & ~trace.of_kinds(*NOT_DEVICE_WORK), lo, hi)
        return with_replays(trace, device, lo, hi)

    return trace.derive(f"device_busy {lo!r} {hi!r}", measured)


def _device_metrics(
    trace: Trace, lo: float, hi: float, compute: intervals.Intervals
) -> tuple[dict[str, float], intervals.Intervals]:
    """The device.* metrics (NaN without device tracks), and the device's busy intervals."""
    window = hi - lo
    device = device_busy(trace, lo, hi)
    gaps = intervals.gaps(device, lo, hi)
    gap_lengths = gaps[1] - gaps[0]
    compute_rows = np.flatnonzero((trace.kind == Kind.COMPUTE) & trace.spans_in(lo, hi) & (trace.ts >= lo))
    values: dict[str, float] = {
        "device.busy_us": intervals.total(device),
        "device.busy_fraction": _share(intervals.total(device), window),
        "device.idle_fraction": _share(window - intervals.total(device), window),
        "device.compute_fraction": _share(intervals.total(compute), window),
        "device.idle_gaps.count": float(gap_lengths.size),
        "device.idle_gap_us.max": float(gap_lengths.max()) if gap_lengths.size else 0.0,
        "device.idle_gap_us.p90": float(np.percentile(gap_lengths, 90)) if gap_lengths.size else 0.0,
        "device.ops.count": float(compute_rows.size),
        "device.op_time_us.median": float(np.median(trace.dur[compute_rows])) if compute_rows.size else math.nan,
    }
    if not trace.on_roles(Role.DEVICE).any():
        values = dict.fromkeys(values, math.nan)
    return values, device


def _host_and_link_metrics(
    trace: Trace, lo: float, hi: float, compute: intervals.Intervals, collectives: np.ndarray
) -> tuple[dict[str, float], intervals.Intervals]:
    """The host, input and copy metrics, and the H2D copies' busy intervals. A host thread in a collective (a gloo
    all-reduce, recorded as an annotation) is busy."""
    window = hi - lo
    kind, in_window = trace.kind, trace.spans_in(lo, hi)

    def busy(mask: np.ndarray) -> intervals.Intervals:
        return intervals.busy(trace, mask, lo, hi)

    h2d = busy(kind == Kind.H2D)
    input_time = intervals.total(busy(kind == Kind.INPUT))
    working = ~trace.of_kinds(*_NOT_BUSY)
    working[collectives] = True
    host = busy(trace.on_roles(Role.HOST, Role.INPUT) & working)
    values = {
        "host.busy_fraction": _share(intervals.total(host), window),
        **_transfer_metrics("h2d", h2d, compute, int(np.sum((kind == Kind.H2D) & in_window))),
        **_transfer_metrics("d2h", busy(kind == Kind.D2H), compute, int(np.sum((kind == Kind.D2H) & in_window))),
        "input.time_us": input_time,
        "input.fraction": _share(input_time, window),
    }
    return values, h2d


def _share(part: float, whole: float) -> float:
    """``part`` as a share of ``whole``, held to [0, 1] against floating-point rounding (NaN without a whole)."""
    return min(max(part / whole, 0.0), 1.0) if whole > 0 else math.nan


def _drawn(trace: Trace) -> tuple[int, int]:
    """The events and tracks perftool drew on a trace it annotated (``scan --format perfetto``): its findings'
    tracks, and the arrows from them to the capture's events."""
    tracks = [t.id for t in trace.tracks if t.process_name == FINDINGS_PROCESS]
    if not tracks:
        return 0, 0
    drawn = np.isin(trace.track, tracks)
    if FINDINGS_CATEGORY in trace.cats:
        drawn |= trace.cat == trace.cats.index(FINDINGS_CATEGORY)
    return int(np.count_nonzero(drawn)), len(tracks)


def _step_time_metrics(durations: np.ndarray) -> dict[str, float]:
    if durations.size == 0:
        return {k: math.nan for k in METRICS if k.startswith("step_time_us.")} | {"throughput.steps_per_s": math.nan}
    median, mean = float(np.median(durations)), float(durations.mean())
    return {
        "step_time_us.mean": mean,
        "step_time_us.median": median,
        "step_time_us.p90": float(np.percentile(durations, 90)),
        "step_time_us.min": float(durations.min()),
        "step_time_us.max": float(durations.max()),
        "throughput.steps_per_s": 1e6 / mean if mean > 0 else math.nan,
    }


def _transfer_metrics(
    prefix: str, copies: intervals.Intervals, compute: intervals.Intervals, count: int
) -> dict[str, float]:
    copy_time = intervals.total(copies)
    return {
        f"{prefix}.count": float(count),
        f"{prefix}.time_us": copy_time,
        f"{prefix}.overlap_fraction": _share(intervals.overlap(copies, compute), copy_time),
    }


def _compile_metrics(trace: Trace, steps: Steps) -> dict[str, float]:
    rows = compiles(trace)
    steady = steps.steady_window
    recompiles = float(np.sum(trace.ts[rows] >= steady[0])) if steady else math.nan
    return {
        "compile.count": float(rows.size),
        "compile.time_us": float(np.sum(trace.dur[rows])),
        "compile.graph_recordings": float(np.count_nonzero(trace.name_matches(GRAPH_RECORDING, rows))),
        "recompilations.count": recompiles,
    }


def _sync_metrics(syncs: intervals.Intervals, steps: Steps) -> dict[str, float]:
    count = float(syncs[0].size)
    steady = steps.count - steps.warmup
    return {"sync.count": count, "sync.per_step": count / steady if steady else math.nan}


def _fallback_metrics(trace: Trace, in_window: np.ndarray) -> dict[str, float]:
    rows = np.flatnonzero(trace.name_matches(CPU_FALLBACK) & in_window)
    return {"cpu_fallback.count": float(rows.size), "cpu_fallback.ops": float(distinct(trace.name[rows]).size)}


def _top_ops(trace: Trace, in_window: np.ndarray, collectives: np.ndarray) -> tuple[str, list[OpStat]]:
    """The op names taking most time: device compute ops, or host ops (collectives such as gloo's among them)
    when the trace has none."""
    scope = "device"
    rows = np.flatnonzero((trace.kind == Kind.COMPUTE) & in_window)
    if rows.size == 0:
        host = trace.kind == Kind.HOST_OP
        host[collectives] = True
        scope, rows = "host", np.flatnonzero(host & in_window)
    if rows.size == 0:
        return scope, []
    time_by_name = np.bincount(trace.name[rows], weights=trace.dur[rows], minlength=len(trace.names))
    count_by_name = np.bincount(trace.name[rows], minlength=len(trace.names))
    overall = float(time_by_name.sum())
    return scope, [
        OpStat(trace.names[i], int(count_by_name[i]), float(time_by_name[i]), _share(float(time_by_name[i]), overall))
        for i in _most_time(trace, time_by_name, count_by_name)
    ]


def _most_time(trace: Trace, time_by_name: np.ndarray, count_by_name: np.ndarray) -> list[int]:
    """The :data:`TOP_OPS` names run in the window with most time, most first; of equal times (to the nanosecond,
    whatever order the sums were added in), the first by name: the same whatever order the file lists events in."""
    ran = np.flatnonzero(count_by_name)
    shown = np.round(np.nan_to_num(time_by_name[ran]), 3)
    if ran.size > TOP_OPS:  # those above the TOP_OPS-th time, and of those at it only the first few by name
        cut = np.partition(shown, ran.size - TOP_OPS)[ran.size - TOP_OPS]
        tied = heapq.nsmallest(TOP_OPS, ran[shown == cut].tolist(), key=trace.names.__getitem__)
        ran = np.r_[ran[shown > cut], np.array(tied, dtype=ran.dtype)]
        shown = np.round(np.nan_to_num(time_by_name[ran]), 3)
    order = sorted(range(ran.size), key=lambda k: (-shown[k], trace.names[ran[k]]))[:TOP_OPS]
    return [int(ran[k]) for k in order]
