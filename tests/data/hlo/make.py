"""Write the HLO programs in this folder and the FLOPs XLA's own cost analysis counts for each (``xla_flops.json``):
GEMMs and convolutions jitted by jax on the CPU (padding, strides, dilations, feature and batch groups), two
patterns of GEMMs (attention written out; a GELU or a softplus between two GEMMs, which is not), and cuDNN's fused
attention as jax lowers jax.nn.dot_product_attention(implementation="cudnn") for an NVIDIA GPU (lowered here, not
compiled: no GPU is needed), each program's ``HloModuleProto`` wrapped as the ``HloProto`` XProf writes beside a
profile (``MODULE(ID).hlo_proto.pb``).

    pip install jax && python tests/data/hlo/make.py     # jax 0.10.2 wrote the files here
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "bench"))
from xspace_synth import message  # noqa: E402  (the protobuf encoder the tests share)

NHWC = ("NHWC", "HWIO", "NHWC")


def conv(x, w, stride=(1, 1), padding="SAME", dims=NHWC, **options):
    return lax.conv_general_dilated(x, w, stride, padding, dimension_numbers=dims, **options)


CASES = {
    "dot": (lambda a, b: a @ b, [(64, 128), (128, 32)]),
    "batched_dot": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [(4, 64, 32), (4, 32, 16)]),
    "conv2d_same": (conv, [(2, 16, 16, 8), (3, 3, 8, 32)]),
    "conv2d_valid_stride2": (lambda x, w: conv(x, w, (2, 2), "VALID"), [(2, 17, 17, 8), (3, 3, 8, 16)]),
    "conv3d_same": (lambda x, w: conv(x, w, (1, 1, 1), dims=("NDHWC", "DHWIO", "NDHWC")),
                    [(1, 8, 12, 16, 16), (3, 3, 3, 16, 64)]),
    "conv2d_grouped": (lambda x, w: conv(x, w, feature_group_count=4), [(1, 16, 16, 32), (3, 3, 8, 32)]),
    "conv2d_dilated": (lambda x, w: conv(x, w, dims=("NCHW", "OIHW", "NCHW"), rhs_dilation=(2, 2)),
                       [(2, 8, 20, 20), (16, 8, 3, 3)]),
    "conv2d_transposed": (lambda x, w: conv(x, w, padding=((2, 2), (2, 2)), lhs_dilation=(2, 2)),
                          [(2, 9, 9, 16), (3, 3, 16, 8)]),
    "conv2d_batch_grouped": (lambda x, w: conv(x, w, padding="VALID", batch_group_count=4),
                             [(8, 10, 10, 4), (3, 3, 4, 4)]),
}  # fmt: skip


def attention(q, k, v):
    """Attention written out: the scores' GEMM, a softmax over the keys, the values' GEMM."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def gated(q, k, v):
    """Two GEMMs with pointwise maths between them but no softmax: not attention."""
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.gelu(jnp.einsum("bhqd,bhkd->bhqk", q, k)), v)


def softplus_gated(q, k, v):
    """Two GEMMs with an exponential between them (softplus) but no reduction: not attention either."""
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softplus(jnp.einsum("bhqd,bhkd->bhqk", q, k)), v)


def cudnn_attention(**options):
    """A jitted function of q, k, v ([batch, seq, heads, dim]) running cuDNN's fused attention."""
    return lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="cudnn", **options)


def cudnn_training(q, k, v):
    """The gradients of a loss over cuDNN's fused attention: its forward and its backward call."""
    loss = lambda *qkv: cudnn_attention()(*qkv).astype(jnp.float32).sum()  # noqa: E731
    return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)


CUDNN_ATTENTION = {  # [batch 2, seq 256, heads 4, dim 64] in bf16
    "cudnn_attention_causal": cudnn_attention(is_causal=True),
    "cudnn_attention_window": cudnn_attention(is_causal=True, local_window_size=(63, 0)),  # 64 keys a query
    "cudnn_attention_training": cudnn_training,
}


def cuda_program(function) -> bytes:
    """``function``'s HloModuleProto as jax lowers it for an NVIDIA GPU, its cuDNN calls included (jax checks the
    cuDNN version and the GPU's compute capability as it lowers them: here there is none, so a recent one is said)."""
    from jax._src.cudnn import fused_attention_stablehlo as cudnn
    from jax._src.lib import _jax

    cudnn.check_cudnn_version = lambda: 91000
    cudnn.check_compute_capability = lambda capability: True
    cudnn.is_cuda_compute_capability_equal = lambda capability: False
    calls = [f"__cudnn${name}" for name in ("fmhaSoftmax", "fmhaSoftmaxBackward")]
    exported = jax.export.export(
        jax.jit(function), platforms=["cuda"],
        disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(c) for c in calls],
    )(*(jnp.zeros((2, 256, 4, 64), jnp.bfloat16) for _ in range(3)))  # fmt: skip
    computation = _jax.mlir.mlir_module_to_xla_computation(exported.mlir_module(), use_tuple_args=False,
                                                           return_tuple=False)  # fmt: skip
    return computation.as_serialized_hlo_module_proto()


PATTERNS = {  # programs for the rules that read a program's dataflow (their FLOPs are not XLA's alone)
    "attention": (attention, [(2, 4, 128, 64)] * 3),
    "gated": (gated, [(2, 4, 128, 64)] * 3),
    "softplus_gated": (softplus_gated, [(2, 4, 128, 64)] * 3),
}


def main() -> None:
    flops = {}
    for name, (function, shapes) in PATTERNS.items():
        compiled = jax.jit(function).lower(*(jnp.zeros(s, jnp.bfloat16) for s in shapes)).compile()
        module = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
        (HERE / f"{name}.hlo_proto.pb").write_bytes(message(1, module))
    for name, function in CUDNN_ATTENTION.items():
        (HERE / f"{name}.hlo_proto.pb").write_bytes(message(1, cuda_program(function)))
    for name, (function, shapes) in CASES.items():
        compiled = jax.jit(function).lower(*(jnp.zeros(s, jnp.float32) for s in shapes)).compile()
        module = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
        (HERE / f"{name}.hlo_proto.pb").write_bytes(message(1, module))  # HloProto.hlo_module
        flops[name] = int(compiled.cost_analysis()["flops"])
    (HERE / "xla_flops.json").write_text(json.dumps(dict(sorted(flops.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
