"""Each modelled op call in a window: what it computes and moves (from its recorded inputs), and the device time
of the kernels it launched.

An op's kernels are found through the launch flows (Kineto's ``ac2g``): the launch on the host lies inside the op
that made it. Ops nest (``aten::linear`` → ``aten::addmm``), so each launch belongs to the innermost modelled op
around it, and only those innermost ops are counted: a model's FLOPs are never counted twice.

A device graph's replayed kernels have no op of their own: where the engine's traces of the graph's capture lie beside
the profile, each is a call of the op its launch was made in as the graph was captured
(:mod:`~perftool.analysis.graph_captures`).

An XLA program's kernels are its ops themselves: each names its program and op in its args, and the program's HLO
(:mod:`.hlo`) says what the op computes, so in an XLA trace each kernel is a call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np

from perftool.analysis.graph_captures import ReplayOps, replay_ops
from perftool.analysis.launches import launch_rows
from perftool.analysis.nesting import owners
from perftool.analysis.serving import step_lengths
from perftool.common.arrays import distinct, least_per_group
from perftool.dialects.hlo import (
    Programs,
    XlaArgs,
    XlaOp,
    launched_program,
    named_program,
    trace_programs,
    xla_args,
)
from perftool.dialects.op_families import MODELLED_NAMES, SERVING_ATTENTION, Inputs, StepLengths, Work, work
from perftool.trace.model import Kind, Phase, Role, Trace
from perftool.trace.profiler_dirs import xspace_name

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
    attention: tuple[int, str] | None = None  # an XLA op's part in an attention its program writes out (hlo.py)


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
    # int64: which compiled program each call's kernel ran in (XLA; a number per program); None where calls run eagerly
    program: np.ndarray | None = None
    # int64: the host row each call stands at (its op, or the graph launch that replayed it); None where ``rows`` are
    host_rows: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)  # what keeps some calls from a model, where the trace says

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


def _shape_text(inputs: Inputs) -> str:
    return ", ".join(
        "x".join(map(str, d)) if d and all(isinstance(x, int) for x in d) else "[…]" if d else "·"
        for d in inputs.dims
        if isinstance(d, list)
    ).rstrip(", ·")


def op_calls(trace: Trace, window: tuple[float, float]) -> Calls:
    """The innermost modelled ops on host threads whose work starts in ``window`` (their first kernel on the device
    where flows link them, else the op itself), what each computed and its kernels' device time; in an XLA trace
    whose programs' HLO the capture holds, its kernels in ``window`` (:func:`xla_calls`)."""
    if trace.dialect == "xla" and (programs := trace_programs(trace)):
        return xla_calls(trace, window, programs)
    lo, hi = window
    candidates = np.flatnonzero(
        trace.name_matches(MODELLED_NAMES) & trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE)
    )
    ops = trace.innermost(candidates)  # by track, then start
    sources, spans = launch_rows(trace)
    replays = replay_ops(trace, window)  # replayed kernels whose ops a graph's capture gives: calls of their own
    compute = (trace.kind[spans] == Kind.COMPUTE) & ~np.isin(spans, replays.spans)
    sources, spans = sources[compute], spans[compute]
    owner = owners(trace, ops, sources) if ops.size else np.full(sources.size, -1, np.int64)
    # an op is in the window by its first kernel's start on the device, where flows link it (a host running ahead
    # issues the window's ops earlier), else by its own start
    first_kernel = least_per_group(owner[owner >= 0], trace.ts[spans[owner >= 0]], ops.size)
    at = np.where(np.isfinite(first_kernel), first_kernel, trace.ts[ops])
    in_window = (at >= lo) & (at < hi)
    keep = np.flatnonzero(in_window)
    position = np.full(ops.size, -1, np.int64)
    position[keep] = np.arange(keep.size)
    call = position[owner] if ops.size else owner  # -1 stays -1: a launch in no op, or in one outside the window
    call[owner < 0] = -1
    linked = call >= 0
    kernel_rows, kernel_call = spans[linked], call[linked]

    rows = ops[keep]
    refs = trace.args_ref[rows].astype(np.int64)
    # calls of one op with equal inputs share their kept args: each distinct (name, args) is parsed once
    pairs, first, kind = np.unique(
        trace.name[rows].astype(np.int64) << 32 | (refs + 1), return_index=True, return_inverse=True
    )
    keys: dict[tuple[str, bytes], int] = {}
    merged = np.empty(pairs.size, np.int64)
    for index, row in enumerate(rows[first].tolist()):
        ref = int(trace.args_ref[row])
        merged[index] = keys.setdefault((trace.names[trace.name[row]], trace.kept_args[ref] if ref >= 0 else b""),
                                        len(keys))  # fmt: skip
    kind = merged[kind.reshape(-1)]
    device_start = first_kernel[keep]  # its first kernel's start: the kernels of an op in the window are all linked
    replayed = _replayed_calls(trace, window, replays, keys)
    host_rows = np.r_[rows, replayed.by] if replayed.rows.size else None
    if replayed.rows.size:  # each call of an op in a replayed graph, as its capture made it
        rows, kind = np.r_[rows, replayed.rows], np.r_[kind, replayed.kind]
        kernel_rows = np.r_[kernel_rows, replayed.kernel_rows]
        kernel_call = np.r_[kernel_call, keep.size + replayed.kernel_call]
        device_start = np.r_[device_start, trace.ts[replayed.rows]]
    device_start[np.isinf(device_start)] = np.nan
    device_us = np.bincount(kernel_call, weights=trace.dur[kernel_rows], minlength=rows.size)
    tf32 = np.bincount(kernel_call[trace.name_matches(TF32_KERNEL, kernel_rows)], minlength=rows.size) > 0
    kind, described = _by_iteration(trace, rows if host_rows is None else host_rows, kind, list(keys))
    kinds = []
    for name, inputs, lengths in described:
        given = _inputs(inputs)
        shapes = _shape_text(given) + (_lengths_text(lengths) if lengths else "") if given else ""
        kinds.append(OpKind(name, work(name, given, lengths) if given else None, shapes))
    return Calls(
        rows=rows,
        kind=kind,
        kinds=kinds,
        device_us=device_us,
        device_start=device_start,
        tf32=tf32,
        launches_linked=bool(sources.size) or bool(replayed.rows.size),
        kernel_rows=kernel_rows,
        kernel_call=kernel_call,
        host_rows=host_rows,
        notes=_serving_notes(kinds, described, np.flatnonzero(np.bincount(kind, minlength=len(kinds))).tolist()),
    )


_Described = tuple[str, bytes, StepLengths | None]  # a kind of call: its op's name, recorded args and lengths


def _by_iteration(trace: Trace, anchors: np.ndarray, kind: np.ndarray,
                  kinds: list[tuple[str, bytes]]) -> tuple[np.ndarray, list[_Described]]:  # fmt: skip
    """Each call's kind, with a serving engine's attention told apart by the sequence lengths of its iteration (the
    step annotation around its anchor: its op, or the graph launch that replayed it), and each kind's op name,
    recorded args and lengths (None but for serving attention)."""
    described: dict[_Described, int] = {(name, args, None): i for i, (name, args) in enumerate(kinds)}
    serving_kind = np.array([bool(SERVING_ATTENTION.match(name)) for name, _ in kinds], bool)
    serving = np.flatnonzero(serving_kind[kind]) if serving_kind.any() else np.zeros(0, np.int64)
    if serving.size:
        kind = kind.copy()
        for at, lengths in zip(serving.tolist(), step_lengths(trace, anchors[serving])):
            if lengths is not None:
                name, args = kinds[kind[at]]
                kind[at] = described.setdefault((name, args, lengths), len(described))
    return kind, list(described)


def _lengths_text(lengths: StepLengths) -> str:
    return f" · iteration of {lengths.sq:,} queries over {lengths.sk:,} keys"


def _serving_notes(kinds: list[OpKind], described: list[_Described], called: list[int]) -> list[str]:
    """What keeps a serving engine's attention (of the ``called`` kinds) from a model: no step annotation around it
    counting its iteration's sequences, or shapes that do not fit them."""
    serving = [k for k in called if kinds[k].work is None and SERVING_ATTENTION.match(kinds[k].name)]
    uncounted = sorted({kinds[k].name for k in serving if described[k][2] is None})
    unfit = sorted({kinds[k].name for k in serving if described[k][2] is not None})
    notes = []
    if uncounted:
        notes.append(
            f"{', '.join(uncounted)} (a serving engine's attention) {'has' if len(uncounted) == 1 else 'have'} no "
            "model here: its work depends on each iteration's sequence lengths, which a step annotation counts as "
            "execute_N_context_C(sqAskBsqsqCsqskD)_generation_G(...) (query tokens, keys, their squares and products "
            "summed over the sequences) and none around it does"
        )
    if unfit:
        notes.append(
            f"{', '.join(unfit)} (a serving engine's attention) {'has' if len(unfit) == 1 else 'have'} no model in "
            "some iterations: its recorded shapes do not fit the iteration its annotation counts (a query of "
            "[tokens, heads, head size] holding the iteration's tokens, keys whose heads divide its heads): an "
            "iteration split into micro-batches, or another layout"
        )
    return notes


class _Replayed(NamedTuple):
    """The calls of ops in replayed graphs: one a call of a captured op in a replay, its kernels together."""

    rows: np.ndarray  # each call's first kernel (a replay's kernels come in their order)
    kind: np.ndarray  # int64: each call's kind
    by: np.ndarray  # each call's graph launch (its row)
    kernel_rows: np.ndarray  # the calls' kernels
    kernel_call: np.ndarray  # int64: each kernel's call (an index into rows)


def _replayed_calls(trace: Trace, window: tuple[float, float], replays: ReplayOps,
                    keys: dict[tuple[str, bytes], int]) -> _Replayed:  # fmt: skip
    """The calls of ops of a modelled family in the replays in ``window``: the kernels a call of a captured op launched
    in one replay, together (``keys``: (op name, recorded args) → kind, the new ones added)."""
    lo, hi = window
    inside = (trace.ts[replays.spans] >= lo) & (trace.ts[replays.spans] < hi)
    kind_of = np.full(len(replays.launches), -1, np.int64)  # -1: made in no modelled op
    for index in distinct(replays.launch[inside]).tolist():
        if (made := replays.launches[index]).op:
            kind_of[index] = keys.setdefault((made.op, made.inputs), len(keys))
    launch = replays.launch[inside]
    modelled = kind_of[launch] >= 0
    spans, launch, by = replays.spans[inside][modelled], launch[modelled], replays.replayed_by[inside][modelled]
    captured_call = np.array([made.call for made in replays.launches], np.int64)[launch] if launch.size else launch
    # a call is its graph launch and its op's call in the capture; the first of its kernels stands for it
    _, first, call = np.unique(np.c_[by, captured_call], axis=0, return_index=True, return_inverse=True)
    return _Replayed(spans[first], kind_of[launch[first]], by[first], spans, call.reshape(-1).astype(np.int64))


def xla_calls(trace: Trace, window: tuple[float, float], programs: Programs) -> Calls:
    """The XLA kernels that start in ``window``, each a call of the op of its program it ran: what it computes by
    the program's HLO (none where the capture holds no HLO for it), its own device time. A kernel of a JSON export
    names no program id: where programs of one name hold different ops of its op's name, the id is read from the
    XSpace beside it (by the kernel's device and correlation id)."""
    lo, hi = window
    rows = np.flatnonzero(
        (trace.kind == Kind.COMPUTE) & trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)
        & (trace.ts >= lo) & (trace.ts < hi) & (trace.args_ref >= 0)
    )  # fmt: skip
    refs, first, by_ref = np.unique(trace.args_ref[rows], return_index=True, return_inverse=True)
    kinds: list[OpKind] = []
    fast_of_kind: list[bool] = []
    kind_of: dict[tuple[str, XlaOp | None], int] = {}
    units: dict[tuple[str, int | None], int] = {}  # each distinct program: by its id, or by its name alone
    untold: set[str] = set()

    def placed(args: XlaArgs, program: int | None, row: int) -> tuple[int, int]:
        """The kind and the program of kernel ``row`` with these args, of program ``program`` where known."""
        found = programs.op(args.module, args.op, program) if args.op else None
        name = args.path or args.op or trace.names[trace.name[row]]  # a copy names no op: the kernel's own name
        index = kind_of.setdefault((name, found), len(kind_of))
        if index == len(kinds):
            kinds.append(OpKind(name, found.work, found.shapes, found.attention) if found else OpKind(name, None, ""))
            fast_of_kind.append(bool(found and found.fast_fp32))
        return index, units.setdefault((args.module, program), len(units))

    # kernels of one op of one program differ in their args by their correlation ids alone: placed once, unless
    # their program is to be looked up by it (a JSON export's kernel of an op several programs hold)
    by_signature: dict[tuple[str, str, str, str], tuple[int, int] | None] = {}
    kind_of_ref, unit_of_ref = [], []
    for ref, row in zip(refs.tolist(), rows[first].tolist()):
        args = xla_args(trace.kept_args[ref])
        signature = (args.module, args.op, str(args.program), args.path)
        if signature not in by_signature:
            program = named_program(args)
            ambiguous = program is None and bool(args.op) and programs.ambiguous(args.module, args.op)
            by_signature[signature] = None if ambiguous else placed(args, program, row)
        at = by_signature[signature]
        if at is None:
            program = launched_program(trace, args, row)
            if program is None:
                untold.add(args.module)
            at = placed(args, program, row)
        kind_of_ref.append(at[0])
        unit_of_ref.append(at[1])
    per_row = by_ref.reshape(-1)
    kind = np.array(kind_of_ref, np.int64)[per_row] if rows.size else np.zeros(0, np.int64)
    notes = [
        f"{', '.join(sorted(untold))} compiled more than once (one jax.jit, several input shapes): their kernels name "
        f"no program id here, so those with ops of the same name and other shapes have no model; the XSpace names it "
        f"({xspace_name(Path(trace.source).name)})"
    ] if untold else []  # fmt: skip
    return Calls(
        rows=rows,
        kind=kind,
        kinds=kinds,
        device_us=trace.dur[rows].astype(float),
        device_start=trace.ts[rows].astype(float),
        tf32=np.array(fast_of_kind, bool)[kind] if rows.size else np.zeros(0, bool),
        launches_linked=True,  # each call is its kernel
        kernel_rows=rows,
        kernel_call=np.arange(rows.size),
        program=np.array(unit_of_ref, np.int64)[per_row] if rows.size else np.zeros(0, np.int64),
        notes=notes,
    )
