"""The work an op does, from its recorded input shapes and types: FLOPs and bytes moved, per op family.

PyTorch's profiler (``record_shapes=True``) writes each op's inputs as ``Input Dims`` (``Input dims`` before
1.10), their element types as ``Input type`` and scalar arguments as ``Concrete Inputs``. An op is counted only
where its family's formula has every figure it needs; otherwise it is unknown (None), never guessed.

Conventions (the tests derive each by hand):

- A multiply-add is 2 FLOPs. GEMMs, convolutions and attention follow ``torch.utils.flop_counter``: a backward
  convolution is one forward's FLOPs per gradient it computes, a backward attention twice the forward. A causal
  attention computes half the score matrix, as FlashAttention's kernels do.
- Pointwise maths is 1 FLOP per output element (fused multiply-adds such as ``addcmul`` 2); a reduction 1 per
  input element; softmax 5 per element (max, subtract, exp, sum, divide), its backward 4; a normalisation 5 per
  element forward (mean, variance, normalise, scale, shift), 8 backward; an embedding lookup none; an Adam step
  13 per parameter (AdamW 15), SGD with momentum 4.
- Bytes are each tensor input read once and each output written once (an in-place op writes its first input).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

# Element types as the profiler names them (c10's scalar type names), with the dtype a device's peak is quoted in.
DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long": ("int64", 8),
    "int": ("int32", 4),
    "short": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
}
ASSUMED = ("fp32", 4)  # where the trace records no element types (PyTorch 1.8): said wherever it is used


@dataclass(frozen=True)
class Work:
    """What one op call computes and moves."""

    family: str  # gemm, conv, attention, norm, softmax, elementwise, reduction, embedding, optimizer
    flops: float
    bytes: float
    dtype: str  # the dtype of its main input: fp32, bf16, ... (ASSUMED's when the trace records none)
    dtype_recorded: bool = True
    mnk: tuple[int, int, int] | None = None  # a GEMM's rows, columns and inner size (of each of a batch's products)
    out_shape: tuple[int, ...] = ()  # the output's shape, where the family's model knows it
    item_bytes: int = 4  # bytes per element of its main input

    @property
    def out_bytes(self) -> float:
        """The bytes of the output it writes (0 where its shape is not known)."""
        return numel(self.out_shape) * self.item_bytes if self.out_shape else 0.0


MAX_ELEMENTS = 2**63  # no tensor holds more: a recorded shape beyond it is not one
MAX_DIMS = 64  # dimensions a recorded shape may have: more is no tensor a profiler records


def _is_shape(value: Any) -> bool:
    """Whether ``value`` is a tensor's shape: at most :data:`MAX_DIMS` sizes, whole, not negative, and multiplying
    to a real tensor (a longer list is never multiplied out: its product would take time quadratic in its length)."""
    return (
        isinstance(value, list)
        and len(value) <= MAX_DIMS
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value)
        and math.prod(value) < MAX_ELEMENTS
    )


@dataclass(frozen=True)
class Inputs:
    """An op call's recorded inputs: per argument its dims (a tensor's shape, a tensor list's shapes, [] for
    others), its type name and its concrete value where recorded ('' where not)."""

    dims: Sequence[Any]
    types: Sequence[str]
    concrete: Sequence[str]

    def tensor(self, index: int) -> list[int] | None:
        """The shape of argument ``index`` if it is a tensor of at least one dimension."""
        if index >= len(self.dims):
            return None
        shape = self.dims[index]
        return shape if _is_shape(shape) and shape else None

    def tensor_list(self, index: int) -> list[list[int]]:
        """The shapes of a tensor-list argument (a foreach or fused optimizer op's)."""
        shapes = self.dims[index] if index < len(self.dims) else []
        if not isinstance(shapes, list):
            return []
        return [s for s in shapes if _is_shape(s)]

    def value(self, index: int) -> str:
        return str(self.concrete[index]) if index < len(self.concrete) else ""

    def dtype(self, index: int = 0) -> tuple[str, int, bool]:
        """(dtype, bytes per element, recorded) of argument ``index``, else of the first argument whose type names
        one; :data:`ASSUMED` where none does."""
        named = [self.types[index]] if index < len(self.types) else []
        found = next((name for name in [*named, *self.types] if name in DTYPES), None)
        return (*DTYPES[found], True) if found else (*ASSUMED, False)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def broadcast(shapes: Sequence[Sequence[int]]) -> list[int] | None:
    """NumPy's broadcast of ``shapes``; None where they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-rank, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out


def _concrete_ints(text: str) -> list[int] | None:
    """``[2, 2]`` or ``2`` as a list of ints; None where nothing was recorded."""
    numbers = re.findall(r"-?\d+", text)
    return [int(n) for n in numbers] if numbers else None


def _flag(text: str) -> bool | None:
    lowered = text.strip().lower()
    return True if lowered == "true" else False if lowered == "false" else None


# ---------------------------------------------------------------------------------------------------------- GEMMs


def _gemm(flops: float, shapes: Sequence[Sequence[int]], out: Sequence[int], inputs: Inputs,
          mnk: tuple[int, int, int]) -> Work:  # fmt: skip
    dtype, size, recorded = inputs.dtype()
    moved = (sum(numel(s) for s in shapes) + numel(out)) * size
    return Work("gemm", flops, moved, dtype, recorded, mnk, tuple(out), size)


def _mm(inputs: Inputs, first: int = 0) -> Work | None:
    a, b = inputs.tensor(first), inputs.tensor(first + 1)
    if not (a and b and len(a) == 2 and len(b) == 2 and a[1] == b[0]):
        return None
    (m, k), n = a, b[1]
    return _gemm(2.0 * m * k * n, [a, b], [m, n], inputs, (m, n, k))


def _bmm(inputs: Inputs, first: int = 0) -> Work | None:
    a, b = inputs.tensor(first), inputs.tensor(first + 1)
    if not (a and b and len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]):
        return None
    batch, m, k = a
    n = b[2]
    return _gemm(2.0 * batch * m * k * n, [a, b], [batch, m, n], inputs, (m, n, k))


def _matmul(inputs: Inputs) -> Work | None:
    """``torch.matmul``'s cases: vectors are promoted to matrices, leading dims broadcast."""
    a, b = inputs.tensor(0), inputs.tensor(1)
    if not (a and b):
        return None
    a2 = [1, a[0]] if len(a) == 1 else a
    b2 = [b[0], 1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    batch = broadcast([a2[:-2], b2[:-2]])
    if batch is None:
        return None
    m, k, n = a2[-2], a2[-1], b2[-1]
    return _gemm(2.0 * numel(batch) * m * k * n, [a, b], [*batch, m, n], inputs, (m, n, k))


def _linear(inputs: Inputs) -> Work | None:
    x, w = inputs.tensor(0), inputs.tensor(1)
    if not (x and w and len(w) == 2 and x[-1] == w[1]):
        return None
    rows = numel(x[:-1])
    bias = inputs.tensor(2)
    shapes = [x, w] + ([bias] if bias else [])
    return _gemm(2.0 * rows * w[1] * w[0], shapes, [*x[:-1], w[0]], inputs, (rows, w[0], w[1]))


def _grouped_mm(inputs: Inputs) -> Work | None:
    """Grouped GEMM: ``a`` [rows, K] split into groups by offsets, each times its own [K, N] of ``b`` [G, K, N]."""
    a, b = inputs.tensor(0), inputs.tensor(1)
    if a and b and len(a) == 3:
        return _bmm(inputs)
    if not (a and b and len(a) == 2 and len(b) == 3 and a[1] == b[1]):
        return None
    return _gemm(2.0 * a[0] * a[1] * b[2], [a, b], [a[0], b[2]], inputs, (a[0], b[2], a[1]))


# ---------------------------------------------------------------------------------------------------- convolutions


def conv_flops(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool = False) -> float:
    """``torch.utils.flop_counter``'s count: 2 x batch x output positions x Cout x Cin/groups x kernel size (a
    transposed convolution slides over its input's positions)."""
    positions = numel((x if transposed else out)[2:])
    return 2.0 * x[0] * positions * w[0] * numel(w[1:])


def _conv_out(x: Sequence[int], w: Sequence[int], stride: list[int], padding: list[int], dilation: list[int],
              transposed: bool, output_padding: list[int], groups: int) -> list[int] | None:  # fmt: skip
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x):
        return None

    def per_axis(values: list[int]) -> list[int]:
        return values * spatial if len(values) == 1 else values

    stride, padding, dilation = per_axis(stride), per_axis(padding), per_axis(dilation)
    output_padding = per_axis(output_padding or [0])
    if any(len(v) != spatial for v in (stride, padding, dilation, output_padding)):
        return None
    if transposed:
        sizes = [
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, k, s, p, d, op in zip(x[2:], w[2:], stride, padding, dilation, output_padding)
        ]
        return [x[0], w[1] * groups, *sizes]
    sizes = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, s, p, d in zip(x[2:], w[2:], stride, padding, dilation)]
    return [x[0], w[0], *sizes] if all(size > 0 for size in sizes) else None


@dataclass(frozen=True)
class _ConvArgs:
    """Where a convolution op takes its arguments (-1: it has none of that kind)."""

    stride: int
    padding: int
    dilation: int
    transposed: int = -1
    output_padding: int = -1
    groups: int = -1
    transposed_op: bool = False


_CONV_ARGS = {
    "convolution": _ConvArgs(3, 4, 5, 6, 7, 8),
    "_convolution": _ConvArgs(3, 4, 5, 6, 7, 8),
    "conv1d": _ConvArgs(3, 4, 5, groups=6),
    "conv2d": _ConvArgs(3, 4, 5, groups=6),
    "conv3d": _ConvArgs(3, 4, 5, groups=6),
    "cudnn_convolution": _ConvArgs(3, 2, 4, groups=5),  # (self, weight, padding, stride, dilation, groups, ...)
    "miopen_convolution": _ConvArgs(4, 3, 5, groups=6),  # (self, weight, bias, padding, stride, dilation, groups, ..)
    "mkldnn_convolution": _ConvArgs(4, 3, 5, groups=6),
    "conv_transpose1d": _ConvArgs(3, 4, 6, output_padding=5, groups=7, transposed_op=True),
    "conv_transpose2d": _ConvArgs(3, 4, 6, output_padding=5, groups=7, transposed_op=True),
    "conv_transpose3d": _ConvArgs(3, 4, 6, output_padding=5, groups=7, transposed_op=True),
}


def _convolution(name: str, inputs: Inputs) -> Work | None:
    """A forward convolution: its output's size needs the stride, padding and dilation (``Concrete Inputs``)."""
    where = _CONV_ARGS[name]
    x, w = inputs.tensor(0), inputs.tensor(1)
    stride, padding, dilation = (_concrete_ints(inputs.value(i)) for i in (where.stride, where.padding, where.dilation))
    if not (x and w and stride and padding is not None and dilation):
        return None
    transposed = where.transposed_op or (where.transposed >= 0 and _flag(inputs.value(where.transposed)) is True)
    output_padding = _concrete_ints(inputs.value(where.output_padding)) if where.output_padding >= 0 else None
    groups = (_concrete_ints(inputs.value(where.groups)) or [1])[0] if where.groups >= 0 else 1
    out = _conv_out(x, w, stride, padding, dilation, transposed, output_padding or [0], groups)
    if out is None:
        return None
    dtype, size, recorded = inputs.dtype()
    moved = (numel(x) + numel(w) + numel(out)) * size
    return Work("conv", conv_flops(x, w, out, transposed), moved, dtype, recorded)


def _convolution_backward(name: str, inputs: Inputs) -> Work | None:
    """A backward convolution: one forward's FLOPs for each of the input's and the weight's gradients it computes
    (``output_mask``; both where the trace does not record it). Its gradient of the output gives every size."""
    if name == "convolution_backward":  # (grad_output, input, weight, bias_sizes, stride, ..., transposed=7, ...)
        grad, x, w, transposed_at, mask_at = inputs.tensor(0), inputs.tensor(1), inputs.tensor(2), 7, 10
    else:  # cudnn/miopen_convolution_backward(self, grad_output, weight, ..., output_mask last)
        x, grad, w, transposed_at, mask_at = (
            inputs.tensor(0),
            inputs.tensor(1),
            inputs.tensor(2),
            -1,
            len(inputs.dims) - 1,
        )
    if not (grad and x and w and len(grad) == len(x) == len(w)):
        return None
    transposed = transposed_at >= 0 and _flag(inputs.value(transposed_at)) is True
    mask = [_flag(v) for v in re.findall(r"[A-Za-z]+", inputs.value(mask_at))][:2]
    wants_input, wants_weight = (bool(mask[0]), bool(mask[1])) if len(mask) == 2 and None not in mask else (True, True)
    gradients = int(wants_input) + int(wants_weight)
    dtype, size, recorded = inputs.dtype(0)
    moved = (numel(grad) + numel(x) + numel(w) + wants_input * numel(x) + wants_weight * numel(w)) * size
    return Work("conv", gradients * conv_flops(x, w, grad, transposed), moved, dtype, recorded)


# ------------------------------------------------------------------------------------------------------- attention


@dataclass(frozen=True)
class _AttentionArgs:
    """Where an attention op takes its tensors, its ``is_causal`` flag and its sliding window's left size (-1: it
    has none), how it lays them out, and its FLOPs as a multiple of the forward's."""

    query: int
    causal: int
    heads_first: bool = True  # [batch, heads, seq, dim]; else [batch, seq, heads, dim] (the flash kernels' own)
    times: float = 1.0
    window: int = -1


_ATTENTION_ARGS = {
    "scaled_dot_product_attention": _AttentionArgs(0, 5),
    "_scaled_dot_product_flash_attention": _AttentionArgs(0, 4),
    "_scaled_dot_product_efficient_attention": _AttentionArgs(0, 6),
    "_scaled_dot_product_cudnn_attention": _AttentionArgs(0, 6),
    "_scaled_dot_product_flash_attention_for_cpu": _AttentionArgs(0, 4),
    "_flash_attention_forward": _AttentionArgs(0, 8, heads_first=False),
    "_efficient_attention_forward": _AttentionArgs(0, 8, heads_first=False),
    "_scaled_dot_product_flash_attention_backward": _AttentionArgs(1, 11, times=2.0),
    "_scaled_dot_product_efficient_attention_backward": _AttentionArgs(1, 11, times=2.0),
    "_scaled_dot_product_cudnn_attention_backward": _AttentionArgs(1, 12, times=2.0),
    "_flash_attention_backward": _AttentionArgs(1, 11, heads_first=False, times=2.0),
    "_efficient_attention_backward": _AttentionArgs(1, 12, heads_first=False, times=2.0),
    # AMD's aiter: fmha_v3_fwd(q, k, v, dropout_p, softmax_scale, is_causal, window_size_left, window_size_right, ...)
    "aiter::fmha_v3_fwd": _AttentionArgs(0, 5, heads_first=False, window=6),
}


def _attention(name: str, inputs: Inputs) -> Work | None:
    """Q·Kᵀ and the scores times V: 2·B·H·L·S·(E + Ev) FLOPs, half where the mask is causal."""
    where = _ATTENTION_ARGS[name]
    q, k, v = (inputs.tensor(where.query + i) for i in range(3))
    if not (q and k and v and len(q) == len(k) == len(v) == 4):
        return None
    if where.window >= 0 and inputs.value(where.window).strip() != "-1":  # a window: fewer keys a query, or unknown
        return None
    if where.heads_first:
        (batch, heads, length, e), keys, ev = q, k[2], v[3]
    else:
        (batch, length, heads, e), keys, ev = q, k[1], v[3]
    flops = 2.0 * batch * heads * length * keys * (e + ev) * where.times
    if _flag(inputs.value(where.causal)) is True:
        flops /= 2
    dtype, size, recorded = inputs.dtype(where.query)
    out = batch * heads * length * ev
    moved = (numel(q) + numel(k) + numel(v) + out) * size * (2 if where.times > 1 else 1)  # backward: grads too
    return Work("attention", flops, moved, dtype, recorded)


# ---------------------------------------------------------------------------------------------- serving attention


class StepLengths(NamedTuple):
    """The sequences a serving engine's iteration attends over, its prefills and decodes together, as its step
    annotation counts them (:data:`~perftool.dialects.vocabulary.ENGINE_STEP_LENGTHS`): the sums over its sequences
    of query tokens, keys, queries squared and queries times keys."""

    sq: int
    sk: int
    sqsq: int
    sqsk: int


@dataclass(frozen=True)
class _ServingArgs:
    """Where a serving engine's attention op takes its queries ([tokens, heads, head size]) and its keys ([...,
    key-value heads, head size]: the iteration's new keys, or the cache), and its ``is_causal`` flag where it records
    one (-1: it records none, and attends causally, as a decoder does)."""

    query: int
    keys: int
    causal: int = -1


_SERVING_ATTENTION_ARGS = {
    "aiter::mha_batch_prefill": _ServingArgs(0, 1, causal=12),
    "vllm::unified_attention": _ServingArgs(0, 1),
    "vllm::unified_attention_with_output": _ServingArgs(0, 1),
    # aiter's decode kernel as SGLang's kernel shape profiler records it: its tensor arguments alone, in order
    # (out, workspace, query, key cache, value cache, ...), under sglang_profiler::attention_paged_attention_ragged_N
    "attention_paged_attention_ragged": _ServingArgs(2, 3),
}
# The kernels SGLang's kernel shape profiler wraps as ops of their own, each named by the last part of its module and
# its function, numbered (aiter.ops.attention's paged_attention_ragged: sglang_profiler::attention_paged_attention_
# ragged_100), recording its tensor arguments: those a family covers
_PROFILER_WRAPPED = ("attention_paged_attention_ragged",)


def serving_attention(name: str, inputs: Inputs, lengths: StepLengths) -> Work | None:
    """An engine iteration's attention, over its sequences' lengths (a serving op's shapes hold its tokens, not
    which sequence each belongs to): Q·Kᵀ and the scores times V, 2·H·(E + E)·pairs FLOPs, where the query-key
    pairs are Σ sq·sk, less Σ sq·(sq − 1)/2 where causal (a sequence's queries come last and see no key after their
    own). Bytes: the queries read and the outputs written, and each sequence's keys and values read once from the
    cache (the key-value heads' share of the heads). None where the op's shapes do not fit the step's tokens (a
    step split into micro-batches) or its heads."""
    where = _SERVING_ATTENTION_ARGS[name]
    q, k = inputs.tensor(where.query), inputs.tensor(where.keys)
    if not (q and k and len(q) == 3 and len(k) >= 3 and k[-1] == q[2] and k[-2] > 0 and q[1] % k[-2] == 0):
        return None
    tokens, heads, size = q
    causal = where.causal < 0 or _flag(inputs.value(where.causal)) is not False
    pairs = lengths.sqsk - (lengths.sqsq - lengths.sq) / 2 if causal else lengths.sqsk
    if not (0 < lengths.sq <= tokens and pairs > 0):
        return None
    dtype, size_q, recorded = inputs.dtype(where.query)
    _, size_kv, _ = inputs.dtype(where.keys)
    moved = 2 * numel(q) * size_q + 2 * lengths.sk * k[-2] * size * size_kv
    return Work("attention", 4.0 * heads * size * pairs, moved, dtype, recorded, out_shape=tuple(q), item_bytes=size_q)


# ------------------------------------------------------------------------------------------ memory-bound families


def _largest(inputs: Inputs) -> tuple[list[int], str, int, bool] | None:
    """The largest tensor input (the activation of a normalisation or softmax): its shape and its dtype, bytes per
    element and whether the type was recorded."""
    shapes = [(numel(s), i, s) for i in range(len(inputs.dims)) if (s := inputs.tensor(i))]
    if not shapes:
        return None
    _, index, shape = max(shapes)
    return (shape, *inputs.dtype(index))


def _per_element(family: str, flops_each: float, tensors_moved: int) -> Any:
    """A family whose work is so many FLOPs per element of its largest input, moving that many tensors of it."""

    def model(name: str, inputs: Inputs) -> Work | None:
        if (found := _largest(inputs)) is None:
            return None
        shape, dtype, size, recorded = found
        elements = numel(shape)
        moved = tensors_moved * elements * size
        return Work(family, flops_each * elements, moved, dtype, recorded, out_shape=tuple(shape), item_bytes=size)

    return model


def _out_arguments(family: str, flops_each: float, updated: tuple[int, ...] = ()) -> Any:
    """A serving engine's fused kernel that takes its outputs as arguments, its first the one it writes: ``flops_each``
    per element of its largest tensor argument; every tensor argument moved once, read or written, those it updates in
    place (``updated``: their positions) twice."""

    def model(name: str, inputs: Inputs) -> Work | None:
        if (found := _largest(inputs)) is None:
            return None
        shape, dtype, size, recorded = found
        moved = sum(numel(s) * (2 if i in updated else 1) for i in range(len(inputs.dims)) if (s := inputs.tensor(i)))
        out = tuple(inputs.tensor(0) or ())  # unknown where the output is not recorded
        return Work(family, flops_each * numel(shape), moved * size, dtype, recorded, out_shape=out, item_bytes=size)

    return model


def _elementwise(flops_each: float) -> Any:
    """Pointwise ops: every tensor input read, the broadcast output written."""

    def model(name: str, inputs: Inputs) -> Work | None:
        shapes = [s for i in range(len(inputs.dims)) if (s := inputs.tensor(i)) is not None]
        if not shapes:
            return None
        out = broadcast(shapes)
        if out is None:
            return None
        dtype, size, recorded = inputs.dtype()
        moved = (sum(numel(s) for s in shapes) + numel(out)) * size
        flops = flops_each * numel(out)
        return Work("elementwise", flops, moved, dtype, recorded, out_shape=tuple(out), item_bytes=size)

    return model


def _foreach(flops_each: float, family: str = "elementwise") -> Any:
    """Foreach and fused optimizer ops over tensor lists: per element of the first list, ``flops_each``;
    every list read, the first written (and for optimizers the state lists with it)."""

    def model(name: str, inputs: Inputs) -> Work | None:
        lists = [inputs.tensor_list(i) for i in range(len(inputs.dims))]
        lists = [shapes for shapes in lists if shapes]
        if not lists:
            return None
        elements = sum(numel(s) for s in lists[0])
        dtype, size, recorded = inputs.dtype()
        read = sum(sum(numel(s) for s in shapes) for shapes in lists)
        written = elements * (min(len(lists), 3) if family == "optimizer" else 1)
        return Work(family, flops_each * elements, (read + written) * size, dtype, recorded)

    return model


def _reduction(name: str, inputs: Inputs) -> Work | None:
    x = inputs.tensor(0)
    if not x:
        return None
    dtype, size, recorded = inputs.dtype()
    return Work("reduction", float(numel(x)), numel(x) * size, dtype, recorded)


def _embedding(name: str, inputs: Inputs) -> Work | None:
    """A lookup: no FLOPs; each index reads one row and writes it out (a bag sums its rows: one add each)."""
    weight, indices = inputs.tensor(0), inputs.tensor(1)
    if not (weight and indices and len(weight) == 2):
        return None
    dtype, size, recorded = inputs.dtype(0)
    rows, width = numel(indices), weight[1]
    index_bytes = rows * DTYPES.get(inputs.types[1] if len(inputs.types) > 1 else "", ("", 8))[1]
    if name == "embedding_bag" or name == "_embedding_bag":
        offsets = inputs.tensor(2)
        bags = numel(offsets) if offsets else 1
        return Work("embedding", float(rows * width), (rows + bags) * width * size + index_bytes, dtype, recorded)
    return Work("embedding", 0.0, 2 * rows * width * size + index_bytes, dtype, recorded)


def _embedding_backward(name: str, inputs: Inputs) -> Work | None:
    grad = inputs.tensor(0)
    if not grad:
        return None
    dtype, size, recorded = inputs.dtype(0)
    return Work("embedding", float(numel(grad)), 2 * numel(grad) * size, dtype, recorded)


_GEMMS = {
    "mm": _mm,
    "addmm": lambda inputs: _mm(inputs, 1),
    "_addmm_activation": lambda inputs: _mm(inputs, 1),
    "bmm": _bmm,
    "baddbmm": lambda inputs: _bmm(inputs, 1),
    "addbmm": lambda inputs: _bmm(inputs, 1),
    "matmul": _matmul,
    "linear": _linear,
    "_scaled_mm": _mm,
    "_grouped_mm": _grouped_mm,
    "_scaled_grouped_mm": _grouped_mm,
}
_NORMS = ("native_layer_norm", "layer_norm", "native_batch_norm", "batch_norm", "cudnn_batch_norm",
          "miopen_batch_norm", "_batch_norm_impl_index", "native_group_norm", "group_norm", "rms_norm",
          "_fused_rms_norm", "instance_norm", "_native_batch_norm_legit",
          "_native_batch_norm_legit_no_training")  # fmt: skip
_NORM_BACKWARDS = ("native_layer_norm_backward", "native_batch_norm_backward", "cudnn_batch_norm_backward",
                   "miopen_batch_norm_backward", "native_group_norm_backward", "_fused_rms_norm_backward",
                   "_batch_norm_impl_index_backward", "batch_norm_backward")  # fmt: skip
_POINTWISE = ("add", "sub", "mul", "div", "rsub", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "pow", "reciprocal",
              "relu", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "leaky_relu", "elu", "mish", "clamp",
              "clamp_min", "clamp_max", "where", "threshold", "threshold_backward", "gelu_backward", "silu_backward",
              "sigmoid_backward", "tanh_backward", "hardtanh_backward", "leaky_relu_backward", "native_dropout",
              "dropout", "native_dropout_backward", "masked_fill", "maximum", "minimum", "sign", "erf", "sin",
              "cos", "copy_", "fill_", "zero_", "to", "_to_copy", "clone", "contiguous")  # fmt: skip
_NO_FLOPS = {"copy_", "fill_", "zero_", "to", "_to_copy", "clone", "contiguous"}  # they move data, computing nothing
_FUSED_POINTWISE = ("addcmul", "addcdiv", "lerp")  # two FLOPs an element
_REDUCTIONS = ("sum", "mean", "amax", "amin", "max", "min", "norm", "linalg_vector_norm", "var", "std", "argmax",
               "argmin", "logsumexp", "prod", "cumsum", "var_mean", "std_mean")  # fmt: skip
_FOREACH = {"_foreach_add": 1, "_foreach_sub": 1, "_foreach_mul": 1, "_foreach_div": 1, "_foreach_addcmul": 2,
            "_foreach_addcdiv": 2, "_foreach_lerp": 2, "_foreach_sqrt": 1, "_foreach_neg": 1, "_foreach_zero": 0,
            "_foreach_copy": 0, "_foreach_norm": 1, "_foreach_maximum": 1}  # fmt: skip
_OPTIMIZERS = {"_fused_adam": 13, "_fused_adamw": 15, "_fused_sgd": 4, "_fused_adagrad": 6}
# Serving engines' fused kernels (vLLM's _C, SGLang's sgl_kernel, AMD's aiter), by their schemas: an RMS norm is 4 FLOPs
# an element (square, sum, scale, weight), one that adds the residual first 5; an activation-and-multiply 5 for each
# of its outputs, half its input's elements. In place: vLLM's and SGLang's fused_add_rms_norm(input!, residual!, ...).
_ENGINE_OPS = {
    "_C::rms_norm": _out_arguments("norm", 4), "sgl_kernel::rmsnorm": _out_arguments("norm", 4),
    "aiter::rmsnorm": _out_arguments("norm", 4), "aiter::rms_norm": _out_arguments("norm", 4),
    "_C::fused_add_rms_norm": _out_arguments("norm", 5, (0, 1)),
    "sgl_kernel::fused_add_rmsnorm": _out_arguments("norm", 5, (0, 1)),
    "aiter::add_rmsnorm": _out_arguments("norm", 5),  # (out!, input, residual_in, residual_out!, weight, eps)
    **{f"{space}::{act}_and_mul": _out_arguments("elementwise", 2.5) for space in ("_C", "sgl_kernel")
       for act in ("silu", "gelu", "gelu_tanh")},
}  # fmt: skip


def _named(gemm: Any) -> Any:
    """A GEMM model (of the inputs alone) as a family model (of the op's name and inputs)."""
    return lambda name, inputs: gemm(inputs)


def _families() -> dict[str, Any]:
    models: dict[str, Any] = {name: _named(gemm) for name, gemm in _GEMMS.items()}
    models |= {name: _convolution for name in _CONV_ARGS}
    models |= {name: _convolution_backward for name in ("convolution_backward", "cudnn_convolution_backward",
                                                         "miopen_convolution_backward")}  # fmt: skip
    models |= {name: _attention for name in _ATTENTION_ARGS}
    models |= {name: _per_element("norm", 5, 2) for name in _NORMS}
    models |= {name: _per_element("norm", 8, 3) for name in _NORM_BACKWARDS}
    models |= {name: _per_element("softmax", 5, 2) for name in ("softmax", "_softmax", "log_softmax", "_log_softmax")}
    models |= {name: _per_element("softmax", 4, 3) for name in ("_softmax_backward_data", "_log_softmax_backward_data")}
    models |= {name: _elementwise(0 if name in _NO_FLOPS else 1) for name in _POINTWISE}
    models |= {name: _elementwise(2) for name in _FUSED_POINTWISE}
    models |= {name: _reduction for name in _REDUCTIONS}
    models |= {name: _embedding for name in ("embedding", "embedding_bag", "_embedding_bag")}
    backwards = ("embedding_dense_backward", "embedding_backward", "_embedding_bag_backward",
                 "_embedding_bag_dense_backward")  # fmt: skip
    models |= {name: _embedding_backward for name in backwards}
    models |= {name: _foreach(flops) for name, flops in _FOREACH.items()}
    models |= {name: _foreach(flops, "optimizer") for name, flops in _OPTIMIZERS.items()}
    models |= _ENGINE_OPS
    inplace = {f"{name}_": model for name, model in models.items() if not name.endswith("_") and
               (name in _POINTWISE or name in _FUSED_POINTWISE or name in _FOREACH or name in _OPTIMIZERS)}  # fmt: skip
    return models | inplace


MODELS: dict[str, Any] = _families()


def _alternatives(names: Sequence[str]) -> str:
    return "|".join(sorted(map(re.escape, names), key=len, reverse=True))


# The names the loader keeps args for: ATen's own (``aten::mm``), the same without the namespace, and the kernels
# SGLang's kernel shape profiler wraps (sglang_profiler::attention_paged_attention_ragged_100).
MODELLED_NAMES = re.compile(
    rf"^(?:aten::)?({_alternatives([*MODELS, *_SERVING_ATTENTION_ARGS])})$"
    rf"|^sglang_profiler::({_alternatives(_PROFILER_WRAPPED)})_\d+$"
)
SERVING_ATTENTION = re.compile(
    rf"^({_alternatives([n for n in _SERVING_ATTENTION_ARGS if n not in _PROFILER_WRAPPED])})$"
    rf"|^sglang_profiler::({_alternatives(_PROFILER_WRAPPED)})_\d+$"
)  # the ops whose work needs their iteration's sequence lengths


def op_key(name: str) -> str | None:
    """The model's name for an event name (``aten::addmm`` → ``addmm``); None for an op no family covers."""
    match = MODELLED_NAMES.match(name)
    return (match.group(1) or match.group(2)) if match else None


def work(name: str, inputs: Inputs, lengths: StepLengths | None = None) -> Work | None:
    """What the op ``name`` computes and moves with these inputs (a serving engine's attention: in an iteration of
    these ``lengths``); None when it is of no modelled family or its inputs (or lengths) do not say enough."""
    key = op_key(name)
    if key is None:
        return None
    try:
        if key in _SERVING_ATTENTION_ARGS:
            return serving_attention(key, inputs, lengths) if lengths else None
        return MODELS[key](key, inputs)
    except (TypeError, ValueError, IndexError, OverflowError):  # recorded inputs of an unexpected form
        return None
