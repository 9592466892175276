"""How far from the hardware: each modelled op's achieved FLOP/s and bytes/s against its device's roofline, and
the steady step's model FLOPs utilisation (MFU).

An op's roofline time is the longer of its FLOPs at the device's peak for its dtype and its bytes at the device's
memory bandwidth; below that line it loses the difference. MFU is the modelled ops' FLOPs over the window's time
at the peak of the dtype that carries most of them: ops without a model add FLOPs the figure leaves out, so it is a
lower bound whenever the modelled share of device time is under 100%.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perftool import hardware
from perftool.analysis.family import (
    HOST_ONLY,
    device_args_hold,
    device_name,
    device_properties,
    device_tracks,
    framework,
    told_models,
)
from perftool.analysis.steps import Steps, detect_steps
from perftool.common.arrays import distinct
from perftool.common.results import MeasuredPipes, RooflineFamily, RooflineOp, RooflineRegion, RooflineSteps
from perftool.common.units import duration, plural
from perftool.dialects.hlo import trace_programs
from perftool.dialects.op_families import ASSUMED, Work
from perftool.hardware import DeviceSpec
from perftool.roofline.calls import Calls, op_calls
from perftool.roofline.measured import measured_pipes
from perftool.trace.model import Kind, Phase, Role, Trace
from perftool.trace.msprof_kernels import KERNEL_DETAILS
from perftool.trace.profiler_dirs import DATABASE_SUFFIX, XSPACE_SUFFIX, xspace_name

PROGRAM_NAMED = b'"hlo_module"'  # what an XLA kernel's args name: the program it belongs to
KERNELS_LOOKED_AT = 1_000  # kernels whose args are read for it (a job that compiles part of its step has many)

MATRIX_FAMILIES = ("gemm", "conv", "attention")
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem)_")  # the kind of kernel Inductor names it by
_INDUCTOR_FAMILY = {"poi": 0, "red": 1, "per": 1, "tem": 2}
_INDUCTOR_WORDS = ("pointwise", "reductions", "GEMM templates")
# the profiler that records the ops' input shapes, by the format of the trace it writes: torch_npu's on Ascend
_SHAPES_PROFILER = {"ascend": "torch_npu.profiler.profile"}
# how a trace format's profiler records the host's framework ops beside the device's work, where it can leave them out
_HOST_ACTIVITY = {
    "kineto": "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)",
    "ascend": "torch_npu.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], record_shapes=True)",
}

HOST_ONLY_NOTE = "no device ran in this capture: its ops have no device time to set against a device's peaks"
FULLY_MODELLED = 0.995  # a modelled share of device time from which the MFU counts every FLOP


@dataclass
class Roofline:
    """The roofline of one trace's steady window (see the module's docstring)."""

    device: str  # as the trace names it
    spec: DeviceSpec | None  # the device's figures; None when perftool does not know it
    window_us: float
    steps: int
    flops: float  # the modelled ops' FLOPs in the window
    dtype: str  # the dtype MFU is measured against
    peak_tflops: float | None
    mfu: float | None
    achieved_tflops: float | None
    device_us: float  # device compute time in the window
    modelled_us: float  # ... of kernels launched by modelled ops
    lost_us: float | None
    ops: list[RooflineOp] = field(default_factory=list)  # the most time lost (or device time) first
    families: list[RooflineFamily] = field(default_factory=list)
    per_step: RooflineSteps = field(default_factory=lambda: RooflineSteps.of([]))  # each steady step's FLOPs and MFU
    regions: list[RooflineRegion] = field(default_factory=list)  # per annotation around the ops, most time first
    measured: list[MeasuredPipes] = field(default_factory=list)  # per NPU kernel type, the pipes its counters saw busy
    notes: list[str] = field(default_factory=list)  # what limits these figures, and what would lift it
    calls: Calls | None = field(default=None, repr=False)  # each modelled call in the window (the findings read them)

    def call_roofline_us(self) -> np.ndarray:
        """Per call: its time at the roofline, µs (NaN where unknown: no device, no peak for its dtype, no model)."""
        calls = self.calls
        if calls is None or not calls.kinds:
            return np.zeros(0)
        at_roof = np.full(2 * len(calls.kinds), np.nan)
        for variant in distinct(calls.kind * 2 + calls.tf32).tolist():
            found = calls.kinds[variant // 2].work
            if found is not None:
                roof = _roofline_us(self.spec, found.family, _dtype(found, bool(variant % 2)), found.flops, found.bytes)
                at_roof[variant] = np.nan if roof is None else roof
        return at_roof[calls.kind * 2 + calls.tf32]

    @property
    def modelled_share(self) -> float | None:
        return self.modelled_us / self.device_us if self.device_us > 0 else None

    @property
    def is_lower_bound(self) -> bool:
        """Whether part of the device time is in ops without a model, so the MFU counts only some of the FLOPs."""
        share = self.modelled_share
        return share is not None and share < FULLY_MODELLED

    @property
    def flops_per_step(self) -> float | None:
        return self.flops / self.steps if self.steps else None

    def to_pandas(self) -> Any:
        """The op table as a DataFrame, a row per op, shapes and dtype (needs pandas)."""
        import pandas as pd

        return pd.DataFrame([op.model_dump() for op in self.ops], columns=list(RooflineOp.model_fields))


def device_spec(trace: Trace) -> DeviceSpec | None:
    """The device the trace's busiest device track ran on, from the device table (models a vendor-only device fits
    alike where their peaks are the same); None when unknown."""
    return hardware.roofline_model(device_properties(trace))


def roofline(trace: Trace, steps: Steps | None = None, spec: DeviceSpec | None = None) -> Roofline:
    """The roofline of ``trace``'s window: that of its ``steps`` (found when not given), as the metrics measure it
    (:func:`~perftool.analysis.metrics.compute_metrics`, which it needs nothing of); ``spec`` replaces the device the
    trace names (``--device-spec``)."""
    spec = spec if spec is not None else device_spec(trace)
    steps = steps if steps is not None else detect_steps(trace)
    lo, hi = steps.window
    window_us = hi - lo  # as the metrics' window.duration_us
    device = device_name(trace)
    calls = op_calls(trace, (lo, lo + window_us))
    kernels = np.flatnonzero(
        (trace.kind == Kind.COMPUTE) & trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)
        & (trace.ts >= lo) & (trace.ts < lo + window_us)
    )  # fmt: skip
    ops = _op_rows(calls, spec)
    flops = float(sum(op.flops for op in ops))
    dtype = _main_dtype(ops)
    peak = spec.peak_flops(dtype) if spec and dtype else None
    seconds = window_us / 1e6
    modelled = calls.matching(lambda w: True)
    notes = (
        [HOST_ONLY_NOTE]
        if device == HOST_ONLY
        else [*_notes(trace, calls, spec, device, ops), *_compiled_kernels(trace, kernels)]
    )
    found = Roofline(
        device=device,
        spec=spec,
        window_us=window_us,
        steps=steps.steady,
        flops=flops,
        dtype=dtype,
        peak_tflops=peak / 1e12 if peak else None,
        mfu=flops / seconds / peak if peak and seconds > 0 and flops > 0 else None,
        achieved_tflops=flops / seconds / 1e12 if seconds > 0 and flops > 0 else None,
        device_us=float(trace.dur[kernels].sum()),
        modelled_us=float(calls.device_us[modelled].sum()),
        lost_us=_total([op.lost_us for op in ops]) if spec and ops else None,
        ops=ops,
        families=_family_rows(ops),
        measured=measured_pipes(trace.metadata.get(KERNEL_DETAILS) or []),
        notes=notes,
        calls=calls,
    )
    if calls.kinds:
        flops_of_call = calls.each(lambda kind: kind.work.flops if kind.work else 0.0, float)
        found.per_step = _step_rows(trace, calls, flops_of_call, steps, peak)
        if device != HOST_ONLY:  # a host's ops ran on no device it captured: no region has device time
            at_roof = found.call_roofline_us()
            found.regions = (
                _region_rows(trace, calls, flops_of_call, at_roof, peak)
                if calls.program is None
                else _scope_rows(calls, flops_of_call, at_roof, peak)
            )
    return found


def _step_rows(trace: Trace, calls: Calls, flops: np.ndarray, steps: Steps, peak: float | None) -> RooflineSteps:
    """Each steady step's modelled FLOPs (of the calls whose kernels started in it, on the steps' clock) and MFU."""
    start, end = steps.start[steps.warmup :], steps.end[steps.warmup :]
    if not start.size:
        return RooflineSteps.of([])
    at = calls.started(trace, steps.clock)
    step = np.searchsorted(start, at, side="right") - 1
    inside = (step >= 0) & (at < end[np.maximum(step, 0)])
    work = np.bincount(step[inside], weights=flops[inside], minlength=start.size)
    time_us = end - start
    seconds = time_us / 1e6
    measured = (seconds > 0) & (work > 0)
    achieved = np.divide(work, seconds, out=np.full(work.size, np.nan), where=measured)
    return RooflineSteps(
        number=steps.numbers()[steps.warmup :].astype(np.int64),
        time_us=time_us,
        flops=work,
        achieved_tflops=achieved / 1e12,
        mfu=achieved / peak if peak else np.full(work.size, np.nan),
    )


def _region_rows(trace: Trace, calls: Calls, flops: np.ndarray, at_roof: np.ndarray,
                 peak: float | None) -> list[RooflineRegion]:  # fmt: skip
    """Per annotation (``record_function`` ranges on the ops' threads, step markers aside), the ops with a model
    inside it, each counted in the innermost one around it; none where the trace has no annotations around ops."""
    annotations = np.flatnonzero(
        (trace.kind == Kind.ANNOTATION) & trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE)
    )
    if not annotations.size or not calls.rows.size:
        return []
    owner = np.full(calls.rows.size, -1, np.int64)
    at = calls.rows if calls.host_rows is None else calls.host_rows  # a replayed kernel where its graph was launched
    call_ts, call_track = trace.ts[at], trace.track[at]
    order = np.lexsort((call_ts, call_track))  # calls by thread, then start
    keys, starts = call_track[order], call_ts[order]
    for row in annotations[np.argsort(-trace.dur[annotations], kind="stable")].tolist():  # outer first, inner last
        track = trace.track[row]
        lo, hi = np.searchsorted(keys, track), np.searchsorted(keys, track, side="right")
        thread = starts[lo:hi]  # a view: each annotation reads its thread's calls by two binary searches
        first = lo + np.searchsorted(thread, trace.ts[row])
        last = lo + np.searchsorted(thread, trace.end[row], side="right")
        owner[order[first:last]] = row
    region = np.where(owner >= 0, trace.name[np.maximum(owner, 0)].astype(np.int64), -1)
    return _regions(calls, region, trace.names, flops, at_roof, peak)


def _scope_rows(calls: Calls, flops: np.ndarray, at_roof: np.ndarray, peak: float | None) -> list[RooflineRegion]:
    """Per name scope of an XLA capture's ops (their path less the op: ``jit(step)/Model/Dense_0`` of
    ``jit(step)/Model/Dense_0/dot_general``, what jax.named_scope and a Flax module name), the ops with a model in it;
    none where no op's path has a scope."""
    scopes = [kind.name.rpartition("/")[0] for kind in calls.kinds]
    names = sorted({scope for scope in scopes if scope})
    if not names:
        return []
    number = {name: i for i, name in enumerate(names)}
    region = np.array([number.get(scope, -1) for scope in scopes], np.int64)[calls.kind]
    return _regions(calls, region, names, flops, at_roof, peak)


def _regions(calls: Calls, region: np.ndarray, names: Sequence[str], flops: np.ndarray, at_roof: np.ndarray,
             peak: float | None) -> list[RooflineRegion]:  # fmt: skip
    """The modelled calls added up per region (``region``: each call's index into ``names``, -1 for none), the most
    device time first."""
    named = (region >= 0) & calls.matching(lambda w: True)  # ops with a model, as in the op table
    if not named.any():
        return []
    ids, where = np.unique(region[named], return_inverse=True)
    size = ids.size
    device_us = np.bincount(where, weights=calls.device_us[named], minlength=size)
    work = np.bincount(where, weights=flops[named], minlength=size)
    counts = np.bincount(where, minlength=size)
    below = np.maximum(calls.device_us[named] - at_roof[named], 0.0)
    lost = np.bincount(where, weights=np.nan_to_num(below), minlength=size)
    unknown = np.bincount(where, weights=np.isnan(below), minlength=size) > 0
    rows = []
    for i, name in enumerate(ids.tolist()):
        achieved = work[i] / device_us[i] * 1e6 if device_us[i] > 0 and work[i] > 0 else None
        rows.append(
            RooflineRegion(
                name=names[name],
                calls=int(counts[i]),
                flops=float(work[i]),
                device_us=float(device_us[i]),
                achieved_tflops=achieved / 1e12 if achieved else None,
                share_of_peak=achieved / peak if achieved and peak else None,
                lost_us=None if unknown[i] else float(lost[i]),
            )
        )
    return sorted(rows, key=lambda r: (-r.device_us, r.name))


def _total(values: list[float | None]) -> float | None:
    """The sum, or None where any is unknown."""
    return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))


def _op_rows(calls: Calls, spec: DeviceSpec | None) -> list[RooflineOp]:
    """The calls added up per op, shapes and dtype (an fp32 GEMM whose kernels run TF32 is judged as TF32)."""
    variant = calls.kind * 2 + calls.tf32
    counted = calls.device_us > 0
    size = 2 * len(calls.kinds)
    number = np.bincount(variant[counted], minlength=size)
    device_us = np.bincount(variant[counted], weights=calls.device_us[counted], minlength=size)
    groups: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for v in np.flatnonzero(number).tolist():
        kind = calls.kinds[v // 2]
        if kind.work is not None:
            groups[kind.name, kind.work.family, kind.shapes, _dtype(kind.work, bool(v % 2))].append(v)
    rows = []
    for (name, family, shapes, dtype), variants in groups.items():
        works = [(calls.kinds[v // 2].work, int(number[v])) for v in variants]
        flops = float(sum(w.flops * n for w, n in works if w))
        moved = float(sum(w.bytes * n for w, n in works if w))
        time_us = float(device_us[variants].sum())
        roof = _roofline_us(spec, family, dtype, flops, moved)
        peak = spec.peak_flops(dtype) if spec else None
        rows.append(
            RooflineOp(
                name=name,
                family=family,
                shapes=shapes,
                dtype=dtype,
                calls=sum(n for _, n in works),
                flops=flops,
                bytes=moved,
                device_us=time_us,
                achieved_tflops=flops / time_us / 1e6,
                achieved_gbps=moved / time_us / 1e3,
                intensity=flops / moved if moved else 0.0,
                bound=("compute" if peak and flops / peak >= moved / spec.memory_bandwidth else "memory")
                if spec and roof is not None
                else "",
                roofline_us=roof,
                of_roofline=roof / time_us if roof is not None else None,
                lost_us=max(time_us - roof, 0.0) if roof is not None else None,
            )
        )
    return sorted(rows, key=lambda r: (-(r.lost_us or 0.0), -r.device_us, r.name, r.shapes, r.dtype))


def _dtype(found: Work, tf32: bool) -> str:
    return "tf32" if tf32 and found.dtype == "fp32" and found.family in MATRIX_FAMILIES else found.dtype


def _roofline_us(spec: DeviceSpec | None, family: str, dtype: str, flops: float, moved: float) -> float | None:
    """The time at the roofline: the longer of the FLOPs at the dtype's peak and the bytes at the memory's
    bandwidth. Pointwise maths in a dtype without a published peak meets memory's roof only; a GEMM has none."""
    if spec is None:
        return None
    peak = spec.peak_flops(dtype)
    if peak is None and family in MATRIX_FAMILIES:
        return None
    return max(flops / peak if peak else 0.0, moved / spec.memory_bandwidth) * 1e6


def _main_dtype(ops: list[RooflineOp]) -> str:
    """The dtype of most of the matrix FLOPs (of all FLOPs where there are none)."""
    by_dtype: dict[str, float] = defaultdict(float)
    for op in ops:
        if op.family in MATRIX_FAMILIES:
            by_dtype[op.dtype] += op.flops
    if not by_dtype:
        for op in ops:
            by_dtype[op.dtype] += op.flops
    return max(by_dtype, key=by_dtype.__getitem__) if by_dtype else ""


def _family_rows(ops: list[RooflineOp]) -> list[RooflineFamily]:
    groups: dict[str, list[RooflineOp]] = defaultdict(list)
    for op in ops:
        groups[op.family].append(op)
    rows = [
        RooflineFamily(
            family=family,
            calls=sum(op.calls for op in members),
            flops=sum(op.flops for op in members),
            bytes=sum(op.bytes for op in members),
            device_us=sum(op.device_us for op in members),
            achieved_tflops=sum(op.flops for op in members) / sum(op.device_us for op in members) / 1e6,
            lost_us=_total([op.lost_us for op in members]),
        )
        for family, members in groups.items()
    ]
    return sorted(rows, key=lambda r: (-r.device_us, r.family))


def _compiled_kernels(trace: Trace, kernels: np.ndarray) -> list[str]:
    """What Inductor's kernels among ``kernels`` (the window's) are, by the family their names give
    (``triton_poi_`` pointwise, ``triton_red_``/``triton_per_`` reductions, ``triton_tem_`` GEMM templates) and
    their device time: a compiled model's ops record no shapes of their own, so they have no FLOPs."""
    family_of = np.array(
        [_INDUCTOR_FAMILY[m.group(1)] if (m := _INDUCTOR.match(n)) else -1 for n in trace.names] or [-1]
    )
    family = family_of[trace.name[kernels]]
    found = family >= 0
    if not found.any():
        return []
    time = np.bincount(family[found], weights=trace.dur[kernels[found]], minlength=len(_INDUCTOR_WORDS))
    calls = np.bincount(family[found], minlength=len(_INDUCTOR_WORDS))
    parts = [
        f"{words} {duration(float(time[i]))} ({plural(int(calls[i]), 'kernel')})"
        for i, words in enumerate(_INDUCTOR_WORDS)
        if calls[i]
    ]
    share = float(time.sum()) / max(float(trace.dur[kernels].sum()), 1e-9)
    return [
        f"{share:.0%} of device compute time is Inductor's kernels (torch.compile): {', '.join(parts)}; they record no "
        "shapes, so no FLOPs or % of peak"
    ]


def _capture_advice(trace_format: str) -> str:
    """How to capture ops with their input shapes, with the profiler that writes traces of ``trace_format``."""
    profiler = _SHAPES_PROFILER.get(trace_format, "torch.profiler.profile")
    return f"capture with {profiler}(record_shapes=True, with_flops=True) so ops record their input shapes"


def _unmodelled(trace: Trace, calls: Calls) -> list[str]:
    """Why no op of the trace has a model, where none has."""
    if not calls.rows.size:
        if not (trace.kind == Kind.HOST_OP).any() and (capture := _HOST_ACTIVITY.get(trace.dialect)):
            return [f"the trace records no framework op on the host, only the device's work and the runtime's calls: "
                    f"capture the CPU activity too, {capture}, so ops and their shapes are recorded"]  # fmt: skip
        return ["no op of a modelled family (GEMM, convolution, attention, normalisation, pointwise, ...) ran on a "
                "host thread in the window"]  # fmt: skip
    if not calls.shapes_recorded:
        return [f"no op in this trace records its input shapes: {_capture_advice(trace.dialect)}"]
    if not calls.launches_linked:
        return ["the trace does not link host launches to device work (no flow events): no op's device time"]
    return []


def _notes(trace: Trace, calls: Calls, spec: DeviceSpec | None, device: str, ops: list[RooflineOp]) -> list[str]:
    notes = list(calls.notes)
    notes += [elsewhere] if (elsewhere := programs_note(trace)) else _unmodelled(trace, calls)
    if spec is None:
        notes.append(_no_peaks(trace, device))
    if any(kind.work is not None and not kind.work.dtype_recorded for kind in calls.kinds):
        notes.append(f"some ops record no element type (PyTorch 1.8, tensor lists): {ASSUMED[0]} assumed for them")
    missing = sorted({op.dtype for op in ops if op.roofline_us is None})
    if spec is not None and missing:
        notes.append(f"{spec.model} has no published peak for {', '.join(missing)}: those GEMMs have no roofline")
    return notes


def _no_peaks(trace: Trace, device: str) -> str:
    """Why the roofline has no peaks: a device named by its vendor alone whose units and memory fit no model, or
    several whose peaks or memory bandwidth differ; a model perftool does not know; or a trace that names no model
    at all (its device is only a place, "GPU 0" or XLA's "/device:GPU:0"); and where the model would come from."""
    lost = "no peaks, so no % of peak, MFU or time lost"
    properties = device_properties(trace)
    if hardware.vendor_only(str(properties.get("name") or "")):
        units, memory = properties.get("numSms"), properties.get("totalGlobalMem")
        said = [
            *([f"{units} compute units"] if isinstance(units, int) and units > 0 else []),
            *([f"{memory / 2**30:,.1f} GiB"] if isinstance(memory, int | float) and memory > 0 else []),
        ]
        alike = told_models(properties)
        if not said:
            why = "records nothing to tell it by"
        elif len(alike) > 1:
            models = " and ".join(m.model for m in alike)
            why = f"its {' and '.join(said)} fit {models} alike, whose peaks or memory bandwidth differ"
        else:
            why = f"its {' and '.join(said)} fit no one model perftool knows"
        return (
            f"the trace names its device only by its vendor ('{device}'), and {why}: {lost} (give its figures with "
            "--device-spec FILE)"
        )
    if trace.metadata.get("deviceProperties"):
        return f"device '{device}' is not one perftool knows: {lost} (give its figures with --device-spec FILE)"
    return (
        f"the trace does not name its device's model ('{device}' says only where the work ran): {lost};"
        f" {_named_elsewhere(trace)}give its figures with --device-spec FILE"
    )


def _named_elsewhere(trace: Trace) -> str:
    """Where the same capture names the device's model that this trace does not, in words ending "or "; empty where
    nothing does: an XLA JSON export's XSpace, an Ascend timeline's db export (its NPU_INFO table)."""
    name = Path(trace.source).name
    if trace.dialect == "xla" and not name.lower().endswith(XSPACE_SUFFIX):
        return f"the capture's XSpace names it (scan {xspace_name(name)}, or keep it beside this file), or "
    if trace.dialect == "ascend" and not name.lower().endswith(DATABASE_SUFFIX):
        return (
            "the profiler's db export names it (torch_npu: torch_npu.profiler.ExportType.Db in _ExperimentalConfig's "
            "export_type; msprof: --type=db), or "
        )
    return ""


def programs_note(trace: Trace) -> str | None:
    """Where an XLA trace with device work but none of its programs' HLO would find it, and what goes unjudged
    without it (a JSON export holds no shapes; the XSpace it was made from does); where TensorFlow ran its kernels
    without XLA, that no program describes them; None elsewhere."""
    if trace.dialect != "xla" or not device_tracks(trace) or trace_programs(trace):
        return None
    if framework(trace) == "tensorflow" and not device_args_hold(trace, (PROGRAM_NAMED,), KERNELS_LOOKED_AT):
        return (
            "TensorFlow ran the device's kernels without XLA (jit_compile): they name no compiled program and record "
            "no shapes, so no rule that reads what an op computes (its matrix products, attention, fusion) judges "
            "this trace, and no op has a roofline"
        )
    name = Path(trace.source).name
    if name.lower().endswith(XSPACE_SUFFIX):
        where = "this XSpace holds none of its programs' HLO"
    else:
        where = f"the profiler keeps it in the capture's XSpace: scan {xspace_name(name)}, or keep it beside this file"
    return (
        f"XLA's kernels record no shapes: what each computes is in its program's HLO, and {where}; without it, no "
        "rule that reads what an op computes (its matrix products, attention, fusion) judges this trace, and no op "
        "has a roofline"
    )
