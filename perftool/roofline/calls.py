"""Each modelled op call in a window: what it computes and moves (from its recorded inputs), and the device time
of the kernels it launched.

An op's kernels are found through the launch flows (Kineto's ``ac2g``): the launch on the host lies inside the op
that made it. Ops nest (``aten::linear`` → ``aten::addmm``), so each launch belongs to the innermost modelled op
around it, and only those innermost ops are counted: a model's FLOPs are never counted twice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from perftool.analysis.launches import launch_rows
from perftool.dialects.op_families import MODELLED_NAMES, Inputs, Work, work
from perftool.trace.model import Kind, Phase, Role, Trace

# cuBLAS/CUTLASS kernels that run an fp32 GEMM on tensor cores in TF32 (``allow_tf32``): named by their maths
TF32_KERNEL = re.compile(r"(?i)tf32|s1688|s16816|1688gemm")


class _Recorded(msgspec.Struct):
    """An op's recorded inputs as the loader keeps them (:class:`~perftool.trace.kept_args.RecordedInputs`): lists, as
    Kineto writes them, or one string of ``;``-separated entries, as torch_npu does (``"32,3,224,224;\r\n64;"``)."""

    dims: list[Any] | str = msgspec.field(name="Input Dims", default_factory=list)
    dims_before_1_10: list[Any] | str = msgspec.field(name="Input dims", default_factory=list)
    types: list[Any] | str = msgspec.field(name="Input type", default_factory=list)
    concrete: list[Any] | str = msgspec.field(name="Concrete Inputs", default_factory=list)


_DECODE = msgspec.json.Decoder(_Recorded)


def _inputs(kept: bytes) -> Inputs | None:
    """The inputs an op's kept args record; None where they do not parse as lists."""
    try:
        recorded = _DECODE.decode(kept)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    dims = _shapes(recorded.dims) or _shapes(recorded.dims_before_1_10)
    types, concrete = _entries(recorded.types), _entries(recorded.concrete)
    return Inputs(dims, [str(t) for t in types], [str(c) for c in concrete]) if dims else None


def _entries(recorded: list[Any] | str) -> list[Any]:
    """The recorded entries, one per input: a list as it is, torch_npu's string split at its ``;``."""
    return [entry.strip() for entry in recorded.split(";")] if isinstance(recorded, str) else recorded


def _shapes(recorded: list[Any] | str) -> list[Any]:
    """Each input's shape: Kineto's lists as they are; torch_npu's ``"32,3,224,224"`` entries as lists of sizes
    (an entry that is no list of sizes, a scalar's, as none)."""
    if not isinstance(recorded, str):
        return recorded
    shapes: list[Any] = []
    for entry in _entries(recorded):
        sizes = entry.split(",") if entry else []
        shapes.append([int(size) for size in sizes] if all(size.strip().isdigit() for size in sizes) else [])
    return shapes


@dataclass(frozen=True)
class OpKind:
    """Calls of one op with the same recorded inputs: what each computes and moves, and the shapes, for people."""

    name: str
    work: Work | None  # None where the inputs do not say (or none were recorded)
    shapes: str


@dataclass
class Calls:
    """The innermost modelled op calls on host threads in a window, one row each."""

    rows: np.ndarray  # the op events' rows in the trace
    kind: np.ndarray  # int64: each call's index into ``kinds``
    kinds: list[OpKind]
    device_us: np.ndarray  # the device time of the kernels each launched
    device_start: np.ndarray  # when the first of them started (NaN where none)
    tf32: np.ndarray  # bool: an fp32 GEMM run on tensor cores (its kernel's name says TF32)
    launches_linked: bool  # whether the trace links launches to device work (flows)
    kernel_rows: np.ndarray  # the compute kernels the calls launched (rows in the trace)
    kernel_call: np.ndarray  # int64: for each of those, the call that launched it (an index into ``rows``)

    def each(self, value: Callable[[OpKind], Any], dtype: Any) -> np.ndarray:
        """Per call: ``value`` of its op kind (asked once per kind), as an array of ``dtype``."""
        per_kind = np.array([value(kind) for kind in self.kinds], dtype=dtype)
        return per_kind[self.kind] if self.kinds else np.zeros(self.rows.size, dtype=dtype)

    def matching(self, test: Callable[[Work], bool]) -> np.ndarray:
        """Per call: whether what it computes passes ``test`` (a call without a model never passes)."""
        return self.each(lambda kind: kind.work is not None and test(kind.work), bool)

    def work_of(self, call: int) -> Work:
        """What call ``call`` (an index, of a modelled kind) computes and moves."""
        found = self.kinds[int(self.kind[call])].work
        assert found is not None, "only calls of modelled kinds are asked for"
        return found

    def of_work(self, value: Callable[[Work], float]) -> np.ndarray:
        """Per call: ``value`` of what it computes and moves, as floats (asked once per kind; NaN for a call without a
        model)."""
        return self.each(lambda kind: value(kind.work) if kind.work is not None else math.nan, float)

    def started(self, trace: Trace, clock: str) -> np.ndarray:
        """Per call: when it started on a step clock, ``device`` (its first kernel's start, NaN where it launched
        none) or ``host`` (the op's own)."""
        return self.device_start if clock == "device" else trace.ts[self.rows]

    @property
    def shapes_recorded(self) -> bool:
        """Whether any call records its input shapes."""
        return any(kind.shapes for kind in self.kinds)


def _innermost(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of op rows (properly nested on each track), those that contain no other of them, by track and start."""
    if rows.size < 2:
        return rows
    by_track = rows[np.argsort(trace.track[rows], kind="stable")]
    starts = trace.ts[by_track]
    same_track = trace.track[by_track[1:]] == trace.track[by_track[:-1]]
    if not np.all(starts[1:][same_track] > starts[:-1][same_track]):  # out of order, or a parent and a child at once
        by_track = by_track[np.lexsort((-trace.dur[by_track], trace.ts[by_track], trace.track[by_track]))]
    contains_next = same_track & (trace.ts[by_track[1:]] < trace.end[by_track[:-1]])
    return by_track[np.append(~contains_next, True)]


def _owners(trace: Trace, ops: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """For each launch (its flow's start row on the host), the index into ``ops`` (innermost ops, sorted by
    track and start) of the op it lies in; -1 where none."""
    owner = np.full(sources.size, -1, np.int64)
    for track in np.unique(trace.track[sources]).tolist():
        mine = np.flatnonzero(trace.track[sources] == track)
        on_track = np.flatnonzero(trace.track[ops] == track)
        if not on_track.size:
            continue
        at = trace.ts[sources[mine]]
        index = np.searchsorted(trace.ts[ops[on_track]], at, side="right") - 1
        inside = (index >= 0) & (trace.end[ops[on_track[np.maximum(index, 0)]]] >= at)
        owner[mine[inside]] = on_track[index[inside]]
    return owner


def _earliest(groups: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Per group of ``size``: the least of its ``values`` (inf for a group without one). One stable sort and a
    reduction per run: ``np.minimum.at`` takes twice as long where a group's values come one after another (kernels
    of one op), each waiting for the one before it."""
    least = np.full(size, np.inf)
    if groups.size:
        order = np.argsort(groups, kind="stable")
        groups, values = groups[order], values[order]
        first = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        least[groups[first]] = np.minimum.reduceat(values, first)
    return least


def _shape_text(inputs: Inputs) -> str:
    return ", ".join(
        "x".join(map(str, d)) if d and all(isinstance(x, int) for x in d) else "[…]" if d else "·"
        for d in inputs.dims
        if isinstance(d, list)
    ).rstrip(", ·")


def op_calls(trace: Trace, window: tuple[float, float]) -> Calls:
    """The innermost modelled ops on host threads whose work starts in ``window`` (their first kernel on the device
    where flows link them, else the op itself), what each computed and its kernels' device time."""
    lo, hi = window
    candidates = np.flatnonzero(
        trace.name_matches(MODELLED_NAMES) & trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE)
    )
    ops = _innermost(trace, candidates)  # by track, then start
    sources, spans = launch_rows(trace)
    compute = trace.kind[spans] == Kind.COMPUTE
    sources, spans = sources[compute], spans[compute]
    owner = _owners(trace, ops, sources) if ops.size else np.full(sources.size, -1, np.int64)
    # an op is in the window by its first kernel's start on the device, where flows link it (a host running ahead
    # issues the window's ops earlier), else by its own start
    first_kernel = _earliest(owner[owner >= 0], trace.ts[spans[owner >= 0]], ops.size)
    at = np.where(np.isfinite(first_kernel), first_kernel, trace.ts[ops])
    in_window = (at >= lo) & (at < hi)
    keep = np.flatnonzero(in_window)
    position = np.full(ops.size, -1, np.int64)
    position[keep] = np.arange(keep.size)
    call = position[owner] if ops.size else owner  # -1 stays -1: a launch in no op, or in one outside the window
    call[owner < 0] = -1
    linked = call >= 0
    kernel_rows, kernel_call = spans[linked], call[linked]
    device_us = np.bincount(kernel_call, weights=trace.dur[kernel_rows], minlength=keep.size)
    device_start = first_kernel[keep]  # its first kernel's start: the kernels of an op in the window are all linked
    device_start[np.isinf(device_start)] = np.nan
    tf32_kernel = trace.name_matches(TF32_KERNEL, kernel_rows)
    tf32 = np.bincount(kernel_call[tf32_kernel], minlength=keep.size) > 0

    rows = ops[keep]
    refs = trace.args_ref[rows].astype(np.int64)
    # calls of one op with equal inputs share their kept args: each distinct (name, args) is parsed once
    pairs, first, kind = np.unique(
        trace.name[rows].astype(np.int64) << 32 | (refs + 1), return_index=True, return_inverse=True
    )
    keys: dict[tuple[int, bytes], int] = {}
    merged = np.empty(pairs.size, np.int64)
    for index, row in enumerate(rows[first].tolist()):
        ref = int(trace.args_ref[row])
        merged[index] = keys.setdefault((int(trace.name[row]), trace.kept_args[ref] if ref >= 0 else b""), len(keys))
    kind = merged[kind.reshape(-1)]
    kinds = []
    for name, inputs in keys:
        given = _inputs(inputs)
        kinds.append(OpKind(trace.names[name], work(trace.names[name], given) if given else None,
                            _shape_text(given) if given else ""))  # fmt: skip
    return Calls(
        rows=rows,
        kind=kind,
        kinds=kinds,
        device_us=device_us,
        device_start=device_start,
        tf32=tf32,
        launches_linked=bool(sources.size),
        kernel_rows=kernel_rows,
        kernel_call=kernel_call,
    )
