"""The batch size a trace shows: the samples one step's forward pass takes, read from the recorded input shapes of
the ops whose first dimension is the batch by their definition.

A convolution's input is ``N × C × H × W`` (or ``N × C × L``, ``N × C × D × H × W``), scaled dot-product attention's
query ``N × heads × L × E``, an embedding's indices ``N × L``: the first such op of a steady step gives N. A linear
layer's input is not used, as a transformer's flattens its batch and sequence into one dimension (the tokens),
which is no batch size. A video model that folds its frames into the batch for a per-frame convolution (TimeSformer's
``B × T × C × H × W`` viewed as ``B·T × C × H × W``) reshapes the clip just before it: the batch is then the first
dimension of the tensor reshaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from perftool.dialects.vocabulary import RESHAPE
from perftool.trace.model import Phase, Trace

BATCH_FIRST = re.compile(  # op -> which input's first dimension is the batch
    r"^aten::(?:(?P<input>conv[123]d|convolution|_convolution|cudnn_convolution|miopen_convolution"
    r"|mkldnn_convolution|scaled_dot_product_attention|_scaled_dot_product_\w+_attention)"
    r"|(?P<indices>embedding))$"
)
EXAMINED = 64  # at most this many candidate ops are read, the earliest first
FOLD_LOOKBACK = 8  # the reshapes on an op's thread just before it that may have folded its input


@dataclass(frozen=True)
class BatchSize:
    """A batch size read from the trace, and where from (an op and its input's shape, for people)."""

    samples: int
    source: str


def batch_size(trace: Trace, lo: float, hi: float) -> BatchSize | None:
    """The batch size the first batch-first op records: in the steady window ``[lo, hi)`` first, then in the rest of
    the trace (a host that runs ahead of a window on the device's clock records its ops outside it); None where no
    such op records its input shapes."""
    ops = trace.name_matches(BATCH_FIRST) & (trace.phase == Phase.COMPLETE)
    inside = np.flatnonzero(ops & (trace.ts >= lo) & (trace.ts < hi))
    rest = np.flatnonzero(ops & ~((trace.ts >= lo) & (trace.ts < hi)))
    ordered = [rows[np.argsort(trace.ts[rows], kind="stable")] for rows in (inside, rest)]
    for row in np.concatenate(ordered)[:EXAMINED].tolist():
        name = trace.names[int(trace.name[row])]
        match = BATCH_FIRST.match(name)
        args = trace.args(row) or {}
        dims = args.get("Input Dims", args.get("Input dims"))  # named so before PyTorch 1.10
        which = 1 if match is not None and match.group("indices") else 0
        shape = _shape(dims, which)
        if shape is not None and len(shape) >= 2 and shape[0] > 0:
            source = f"{name}'s input {_dims(shape)}"
            folded = _folded_from(trace, row, shape)
            if folded is None:
                return BatchSize(shape[0], source)
            reshape, dims = folded
            return BatchSize(dims[0], f"{source}, folded from {reshape}'s {_dims(dims)}")
    return None


def _folded_from(trace: Trace, row: int, shape: list[int]) -> tuple[str, list[int]] | None:
    """The reshape on ``row``'s thread just before it that folded a tensor into ``shape`` (its first two dimensions
    multiplied into one, the rest the same), and that tensor's shape; None where none of the last few reshapes did."""
    reshapes = trace.name_matches(RESHAPE) & (trace.phase == Phase.COMPLETE) & (trace.track == trace.track[row])
    before = np.flatnonzero(reshapes & (trace.ts < trace.ts[row]))
    for candidate in before[np.argsort(trace.ts[before], kind="stable")][::-1][:FOLD_LOOKBACK].tolist():
        args = trace.args(candidate) or {}
        dims = _shape(args.get("Input Dims", args.get("Input dims")), 0)
        if dims is not None and len(dims) == len(shape) + 1 and dims[0] * dims[1] == shape[0] and dims[2:] == shape[1:]:
            return trace.names[int(trace.name[candidate])], dims
    return None


def _dims(shape: list[int]) -> str:
    return "×".join(map(str, shape))


def _shape(dims: object, which: int) -> list[int] | None:
    """Input ``which``'s shape from recorded ``Input Dims`` (Kineto's list of lists, torch_npu's ``;``-separated
    string); None where it records no list of sizes there."""
    if isinstance(dims, str):
        entries = dims.split(";")
        entry = entries[which].strip() if which < len(entries) else ""
        sizes = entry.split(",") if entry else []
        return [int(s) for s in sizes] if sizes and all(s.strip().isdigit() for s in sizes) else None
    if isinstance(dims, list) and which < len(dims) and isinstance(dims[which], list):
        found = dims[which]
        return found if all(isinstance(s, int) and not isinstance(s, bool) for s in found) else None
    return None
