"""Each op family's FLOPs and bytes, against counts worked out by hand from the shapes (the arithmetic is in each
case's comment), and ops whose inputs do not say enough are unknown, never guessed."""

from __future__ import annotations

import pytest

from perftool.dialects.op_families import Inputs, StepLengths, conv_flops, op_key, work

F32, BF16, HALF = "float", "c10::BFloat16", "c10::Half"


def inputs(dims, types=(), concrete=()):
    return Inputs(list(dims), list(types), list(concrete))


@pytest.mark.parametrize(
    "name, given, family, flops, moved, dtype",
    [
        # [64,512] x [512,256]: 2*64*512*256 = 16,777,216; (64*512 + 512*256 + 64*256) * 4 B = 720,896 B
        ("aten::mm", inputs([[64, 512], [512, 256]], [F32, F32]), "gemm", 16_777_216, 720_896, "fp32"),
        # bias, [1024,1705] x [1705,512] in bf16: 2*1024*1705*512 = 1,787,822,080; (1024*1705 + 1705*512 + 1024*512)*2
        (
            "aten::addmm",
            inputs([[512], [1024, 1705], [1705, 512], [], []], [BF16] * 3),
            "gemm",
            1_787_822_080,
            6_286_336,
            "bf16",
        ),  # fmt: skip
        # 8 x [128,64] x [64,32]: 2*8*128*64*32 = 4,194,304; 8*(128*64 + 64*32 + 128*32) * 2 B = 229,376 B
        ("aten::bmm", inputs([[8, 128, 64], [8, 64, 32]], [HALF] * 2), "gemm", 4_194_304, 229_376, "fp16"),
        (
            "aten::baddbmm",
            inputs([[8, 128, 32], [8, 128, 64], [8, 64, 32]], [HALF] * 3),
            "gemm",
            4_194_304,
            229_376,
            "fp16",
        ),  # fmt: skip
        # matmul [4,16,32] x [32,8] broadcasts the batch: 2*4*16*32*8 = 32,768; (2048 + 256 + 512) * 4 = 11,264 B
        ("aten::matmul", inputs([[4, 16, 32], [32, 8]], [F32] * 2), "gemm", 32_768, 11_264, "fp32"),
        # linear x[2,10,64] w[128,64] b[128]: 2*20*64*128 = 327,680; (1280 + 8192 + 128 + 2560) * 4 = 48,640 B
        ("aten::linear", inputs([[2, 10, 64], [128, 64], [128]], [F32] * 3), "gemm", 327_680, 48_640, "fp32"),
        # grouped: 96 rows of K=64, 4 groups of [64,32]: 2*96*64*32 = 393,216; (6144 + 8192 + 3072) * 2 = 34,816 B
        (
            "aten::_grouped_mm",
            inputs([[96, 64], [4, 64, 32], [4]], [BF16, BF16, "int"]),
            "gemm",
            393_216,
            34_816,
            "bf16",
        ),  # fmt: skip
        # ResNet-50's first conv: x[32,3,224,224] w[64,3,7,7] stride 2 pad 3 -> out [32,64,112,112];
        # 2 * 32 * 112*112 * 64 * 3*7*7 = 7,552,892,928; (4,816,896 + 9,408 + 25,690,112) * 2 B = 61,032,832 B
        (
            "aten::convolution",
            inputs(
                [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
                [BF16, BF16],
                ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"],
            ),
            "conv",
            7_552_892_928,
            61_032_832,
            "bf16",
        ),  # fmt: skip
        # a transposed conv slides over its input: x[1,16,8,8] w[16,8,4,4] stride 2 pad 1 -> [1,8,16,16];
        # 2 * 1 * 8*8 * 16 * 8*4*4 = 262,144; (1024 + 2048 + 2048) * 4 = 20,480 B
        (
            "aten::conv_transpose2d",
            inputs(
                [[1, 16, 8, 8], [16, 8, 4, 4], [], [], [], [], [], []],
                [F32, F32],
                ["", "", "", "[2, 2]", "[1, 1]", "[0, 0]", "1", "[1, 1]"],
            ),
            "conv",
            262_144,
            20_480,
            "fp32",
        ),  # fmt: skip
        # backward of x[8,16,32,32] w[32,16,3,3] -> grad_out[8,32,32,32], input and weight gradients: 2 forwards;
        # one forward = 2 * 8 * 32*32 * 32 * 16*3*3 = 75,497,472; bytes: read all three, write both gradients:
        # (262,144 + 131,072 + 4,608 + 131,072 + 4,608) * 4 = 2,134,016
        (
            "aten::convolution_backward",
            inputs([[8, 32, 32, 32], [8, 16, 32, 32], [32, 16, 3, 3]], [F32] * 3, [""] * 10 + ["[True, True, False]"]),
            "conv",
            150_994_944,
            2_134_016,
            "fp32",
        ),  # fmt: skip
        # the first layer's backward needs no input gradient: one forward, and no input gradient written
        (
            "aten::convolution_backward",
            inputs([[8, 32, 32, 32], [8, 16, 32, 32], [32, 16, 3, 3]], [F32] * 3, [""] * 10 + ["[False, True, False]"]),
            "conv",
            75_497_472,
            1_609_728,
            "fp32",
        ),  # fmt: skip
        # PyTorch 1.8's cudnn backward (self, grad_output, weight): no mask recorded, so both gradients
        (
            "aten::cudnn_convolution_backward",
            inputs([[8, 16, 32, 32], [8, 32, 32, 32], [32, 16, 3, 3], [], []]),
            "conv",
            150_994_944,
            2_134_016,
            "fp32",
        ),  # fmt: skip
        # attention q,k,v [2,16,1024,64]: 2*2*16*1024*1024*(64+64) = 8,589,934,592; causal halves it;
        # (3 * 2,097,152 + 2,097,152) * 2 B = 16,777,216 B
        (
            "aten::_scaled_dot_product_flash_attention",
            inputs([[2, 16, 1024, 64]] * 3 + [[], []], [BF16] * 3, ["", "", "", "0.", "False"]),
            "attention",
            8_589_934_592,
            16_777_216,
            "bf16",
        ),  # fmt: skip
        (
            "aten::scaled_dot_product_attention",
            inputs([[2, 16, 1024, 64]] * 3 + [[], [], []], [BF16] * 3, ["", "", "", "", "0.", "True"]),
            "attention",
            4_294_967_296,
            16_777_216,
            "bf16",
        ),  # fmt: skip
        # the flash kernel's own layout is [batch, seq, heads, dim]: the same FLOPs
        (
            "aten::_flash_attention_forward",
            inputs([[2, 1024, 16, 64]] * 3 + [[]] * 6, [BF16] * 3, [""] * 8 + ["False"]),
            "attention",
            8_589_934_592,
            16_777_216,
            "bf16",
        ),  # fmt: skip
        # backward: twice the forward; reads and writes its gradients too
        (
            "aten::_scaled_dot_product_flash_attention_backward",
            inputs([[2, 16, 1024, 64]] * 5, [BF16] * 5, [""] * 11 + ["False"]),
            "attention",
            17_179_869_184,
            33_554_432,
            "bf16",
        ),  # fmt: skip
        # layer norm of [1024,512]: 5 * 524,288 = 2,621,440 FLOPs; read + write 524,288 * 4 B = 4,194,304 B
        (
            "aten::native_layer_norm",
            inputs([[1024, 512], [], [512], [512], []], [F32, "", F32, F32, "Scalar"]),
            "norm",
            2_621_440,
            4_194_304,
            "fp32",
        ),  # fmt: skip
        # its backward: 8 per element, three tensors of it moved: 4,194,304 FLOPs, 6,291,456 B
        (
            "aten::native_layer_norm_backward",
            inputs([[1024, 512], [1024, 512], [], [1024, 1], [1024, 1]], [F32] * 5),
            "norm",
            4_194_304,
            6_291_456,
            "fp32",
        ),  # fmt: skip
        # softmax of [64,512] in fp16: 5 * 32,768 = 163,840 FLOPs; 2 * 32,768 * 2 B = 131,072 B
        ("aten::_softmax", inputs([[64, 512], [], []], [HALF, "", ""]), "softmax", 163_840, 131_072, "fp16"),
        (
            "aten::_softmax_backward_data",
            inputs([[64, 512], [64, 512], [], []], [HALF, HALF]),
            "softmax",
            131_072,
            196_608,
            "fp16",
        ),  # fmt: skip
        # add [32,1,8] + [4,8] broadcasts to [32,4,8] = 1,024 elements; (256 + 32 + 1,024) * 4 = 5,248 B
        ("aten::add", inputs([[32, 1, 8], [4, 8], []], [F32, F32, "Scalar"]), "elementwise", 1_024, 5_248, "fp32"),
        ("aten::relu_", inputs([[32, 64, 112, 112]], [HALF]), "elementwise", 25_690_112, 102_760_448, "fp16"),
        ("aten::addcmul_", inputs([[1000], [1000], [1000], []], [F32] * 3), "elementwise", 2_000, 16_000, "fp32"),
        ("aten::copy_", inputs([[256, 256], [256, 256], []], [BF16, F32, ""]), "elementwise", 0, 393_216, "bf16"),
        # sum of [1024,96]: 98,304 additions, reading 98,304 * 4 B
        ("aten::sum", inputs([[1024, 96], [], [], []], [F32]), "reduction", 98_304, 393_216, "fp32"),
        # embedding [50000,768] of [8,128] indices: 1,024 rows read and written * 768 * 4 B, and 1,024 int64 indices
        (
            "aten::embedding",
            inputs([[50000, 768], [8, 128], [], [], []], [F32, "long"]),
            "embedding",
            0,
            6_299_648,
            "fp32",
        ),  # fmt: skip
        # a bag sums its rows: 1,024 indices in 8 bags, 1,024 * 768 additions; reads 1,024 rows, writes 8
        (
            "aten::embedding_bag",
            inputs([[50000, 768], [1024], [8]], [F32, "long", "long"]),
            "embedding",
            786_432,
            3_178_496,
            "fp32",
        ),  # fmt: skip
        # Adam over two tensors of 16,384 + 128 parameters: 13 * 16,512 = 214,656 FLOPs; params, grads and two states
        # read, three written ((4 + 3) * 16,512 * 4 B = 462,336 B), and the two 0-d step counters read (8 B)
        (
            "aten::_fused_adam_",
            inputs([[[128, 128], [128]]] * 4 + [[], [[], []]], ["TensorList"] * 4),
            "optimizer",
            214_656,
            462_344,
            "fp32",
        ),  # fmt: skip
        (
            "aten::_foreach_add_",
            inputs([[[128, 128], [128]], [[128, 128], [128]], []], ["TensorList"] * 2 + ["Scalar"]),
            "elementwise",
            16_512,
            198_144,
            "fp32",
        ),  # fmt: skip
        # serving engines' kernels, their outputs arguments: vLLM's RMS norm (result!, input, weight, eps) of
        # [888,2880] bf16: 4 * 2,557,440 = 10,229,760 FLOPs; (2 * 2,557,440 + 2,880) * 2 B = 10,235,520 B
        (
            "_C::rms_norm",
            inputs([[888, 2880], [888, 2880], [2880], []], [BF16] * 3),
            "norm",
            10_229_760,
            10_235_520,
            "bf16",
        ),
        # its residual-adding form, in place (input!, residual!, ...): 5 * 2,557,440; both read and written
        # ((4 * 2,557,440 + 2,880) * 2 B)
        (
            "_C::fused_add_rms_norm",
            inputs([[888, 2880], [888, 2880], [2880], []], [BF16] * 3),
            "norm",
            12_787_200,
            20_465_280,
            "bf16",
        ),
        # aiter's (out!, input, residual_in, residual_out!, weight, eps) of [32,4096]: 5 * 131,072 FLOPs; four
        # [32,4096] and the weight once each ((4 * 131,072 + 4,096) * 2 B)
        ("aiter::add_rmsnorm", inputs([[32, 4096]] * 4 + [[4096], []], [BF16] * 5), "norm", 655_360, 1_056_768, "bf16"),
        # aiter's flash attention over [1, 4608, 24, 128] (batch, tokens, heads, head size), not causal (arg 5), no
        # window (arg 6 = -1): 2 * 24 * 4608^2 * (128 + 128) = 260,919,263,232; q, k, v and out each 14,155,776 bf16
        (
            "aiter::fmha_v3_fwd",
            inputs([[1, 4608, 24, 128]] * 3, [BF16] * 3, ["", "", "", "0.", "0.088", "False", "-1", "-1"]),
            "attention",
            260_919_263_232,
            113_246_208,
            "bf16",
        ),
        # SGLang's SiLU-and-multiply (out! [32,12288], input [32,24576]): 5 per output, 5 * 393,216 = 1,966,080;
        # (393,216 + 786,432) * 2 B
        (
            "sgl_kernel::silu_and_mul",
            inputs([[32, 12288], [32, 24576]], [BF16] * 2),
            "elementwise",
            1_966_080,
            2_359_296,
            "bf16",
        ),
    ],
)
def test_each_family_counts_the_flops_and_bytes_worked_out_by_hand(name, given, family, flops, moved, dtype):
    found = work(name, given)
    assert found is not None
    assert (found.family, found.flops, found.bytes, found.dtype) == (family, flops, moved, dtype)


def test_the_convolution_count_is_torch_flop_counter_s():
    """``torch.utils.flop_counter.conv_flop_count``: batch x output positions x Cout x (Cin/groups x kernel) x 2;
    a depthwise conv (groups = channels) has a weight of [C, 1, k, k]."""
    assert conv_flops([32, 3, 224, 224], [64, 3, 7, 7], [32, 64, 112, 112]) == 7_552_892_928
    assert conv_flops([1, 32, 56, 56], [32, 1, 3, 3], [1, 32, 56, 56]) == 2 * 56 * 56 * 32 * 9


@pytest.mark.parametrize(
    "name, given, why",
    [
        ("aten::mm", inputs([[64, 512], [256, 128]], [F32, F32]), "inner dimensions differ"),
        ("aten::mm", inputs([[64, 512]], [F32]), "one input"),
        ("aten::convolution", inputs([[32, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 7, [F32, F32]), "stride not recorded"),
        ("aten::add", inputs([[3, 4], [5, 4]], [F32, F32]), "shapes that do not broadcast"),
        ("aten::scaled_dot_product_attention", inputs([[2, 1024, 64]] * 3, [BF16] * 3), "three dims, not four"),
        ("fbgemm::split_embedding_codegen_lookup", inputs([[10]], [F32]), "no modelled family"),
        ("aten::mm", inputs(["x", [512, 256]], [F32, F32]), "a shape of the wrong type"),
        (
            "aiter::fmha_v3_fwd",
            inputs([[1, 4608, 24, 128]] * 3, [BF16] * 3, ["", "", "", "0.", "0.088", "False", "128", "0"]),
            "a sliding window of 128 keys: fewer pairs than its shapes say",
        ),
        (
            "aiter::mha_batch_prefill",
            inputs([[15360, 32, 128], [835874, 8, 128]], [BF16] * 2),
            "a serving engine's attention without its iteration's sequence lengths",
        ),
        (
            "sgl_kernel::rotary_embedding",
            inputs([[32], [32, 4096], [32, 1024], [], [41216, 128]], [BF16] * 4),
            "a lookup table among its arguments: its bytes are not its shapes'",
        ),
    ],
)
def test_an_op_whose_inputs_do_not_say_enough_is_unknown(name, given, why):
    assert work(name, given) is None, why


def test_an_op_without_recorded_types_is_counted_as_fp32_and_says_so():
    found = work("aten::mm", inputs([[64, 512], [512, 256]]))
    assert found is not None and found.dtype == "fp32" and not found.dtype_recorded
    assert work("aten::mm", inputs([[64, 512], [512, 256]], [F32, F32])).dtype_recorded


def test_ops_are_named_with_or_without_their_namespace_and_in_place_forms_too():
    assert op_key("aten::addmm") == op_key("addmm") == "addmm"
    assert op_key("aten::add_") == "add_" and op_key("aten::_foreach_mul_") == "_foreach_mul_"
    assert (
        op_key("aten::linear_backward") is None and op_key("autograd::engine::evaluate_function: MmBackward0") is None
    )


def test_a_serving_engine_s_kernel_writes_its_first_argument():
    """The engines' kernels take their output first (silu_and_mul(out!, input)): its shape is the output's, half the
    input's; where it is not recorded, the output is unknown and the rest still counts."""
    found = work("sgl_kernel::silu_and_mul", inputs([[32, 12288], [32, 24576]], [BF16] * 2))
    assert found is not None and found.out_shape == (32, 12288) and found.out_bytes == 32 * 12288 * 2
    unrecorded = work("_C::rms_norm", inputs([[], [888, 2880], [2880], []], [BF16] * 3))
    assert unrecorded is not None and unrecorded.out_shape == () and unrecorded.flops == 4 * 888 * 2880


PREFILL = StepLengths(sq=15 * 1024, sk=15 * 1024, sqsq=15 * 1024**2, sqsk=15 * 1024**2)  # 15 prompts of 1,024 tokens
DECODE = StepLengths(sq=32, sk=32_785, sqsq=32, sqsk=32_785)  # 32 sequences, one token each, over 32,785 keys in all
PREFILL_ARGS = ["", "", "", "", "", "", "1024", "1024", "0.", "0.088", "0.", "False", "True", "-1", "-1"]


@pytest.mark.parametrize(
    "name, given, lengths, flops, moved",
    [
        # aiter's batch prefill, q [15360, 32, 128], key cache [..., 8, 128], causal (arg 12): query-key pairs
        # Σsq·sk − (Σsq² − Σsq)/2 = 15,728,640 − 7,856,640 = 7,872,000; 4 * 32 * 128 FLOPs each; q read and out
        # written (2 * 15,360 * 32 * 128 * 2 B), each sequence's keys and values read once (2 * 15,360 * 8 * 128 * 2 B)
        (
            "aiter::mha_batch_prefill",
            inputs([[15360, 32, 128], [835874, 8, 128], [835874, 8, 128]], [BF16] * 3, PREFILL_ARGS),
            PREFILL,
            4 * 32 * 128 * 7_872_000,
            2 * 15360 * 32 * 128 * 2 + 2 * 15360 * 8 * 128 * 2,
        ),
        # the same, not causal: every query sees its sequence's 1,024 keys, Σsq·sk pairs
        (
            "aiter::mha_batch_prefill",
            inputs([[15360, 32, 128], [835874, 8, 128]], [BF16] * 2, [*PREFILL_ARGS[:12], "False"]),
            PREFILL,
            4 * 32 * 128 * 15_728_640,
            2 * 15360 * 32 * 128 * 2 + 2 * 15360 * 8 * 128 * 2,
        ),
        # aiter's decode kernel as SGLang's kernel shape profiler records it (out, workspace, query, key cache, ...):
        # one query a sequence sees all its keys, 32,785 pairs; the 32,785 keys' and values' 8 heads read
        (
            "sglang_profiler::attention_paged_attention_ragged_100",
            inputs(
                [[32, 32, 128], [10905190400], [32, 32, 128], [835874, 1, 8, 128], [835874, 1, 8, 128]],
                [BF16, "unsigned char", BF16, BF16, BF16],
            ),
            DECODE,
            4 * 32 * 128 * 32_785,
            2 * 32 * 32 * 128 * 2 + 2 * 32_785 * 8 * 128 * 2,
        ),
        # vLLM's (query, key, value, output, layer name): a query of 8 heads of 64 over one key-value head, a step
        # padded to 40 tokens for its 32 sequences
        (
            "vllm::unified_attention_with_output",
            inputs([[40, 8, 64], [40, 1, 64], [40, 1, 64], [40, 8, 64], []], [BF16] * 4),
            DECODE,
            4 * 8 * 64 * 32_785,
            2 * 40 * 8 * 64 * 2 + 2 * 32_785 * 1 * 64 * 2,
        ),
    ],
)
def test_a_serving_engine_s_attention_counts_its_iteration_s_sequences(name, given, lengths, flops, moved):
    """A serving op's shapes hold its tokens, not which sequence each belongs to: the iteration's lengths, as its step
    annotation sums them, give the query-key pairs (fewer where causal) and the keys read."""
    assert work(name, given) is None  # without the lengths
    found = work(name, given, lengths)
    assert found is not None
    assert (found.family, found.flops, found.bytes, found.dtype) == ("attention", flops, moved, "bf16")


@pytest.mark.parametrize(
    "keys, lengths, why",
    [
        ([835874, 5, 128], PREFILL, "5 key-value heads do not divide 32 heads: the arguments are not these"),
        ([835874, 8, 64], PREFILL, "keys of another head size"),
        ([835874, 8, 128], StepLengths(30720, 30720, 30 * 1024**2, 30 * 1024**2), "more tokens than the op holds"),
        ([835874, 8, 128], StepLengths(0, 0, 0, 0), "an iteration of no tokens"),
    ],
)
def test_a_serving_attention_whose_shapes_do_not_fit_its_iteration_is_unknown(keys, lengths, why):
    given = inputs([[15360, 32, 128], keys], [BF16] * 2, PREFILL_ARGS)
    assert work("aiter::mha_batch_prefill", given, lengths) is None, why


def test_only_the_kernels_sglang_s_shape_profiler_wraps_for_a_family_are_modelled_ops():
    """SGLang's kernel shape profiler names each wrapped kernel by module and function, numbered
    (sglang_profiler::attention_paged_attention_ragged_100); a wrapper no family covers is no modelled op (its
    inner op is, where it has one: aiter::mha_batch_prefill inside sglang_profiler::mha__mha_batch_prefill_167)."""
    assert op_key("sglang_profiler::attention_paged_attention_ragged_100") == "attention_paged_attention_ragged"
    assert op_key("sglang_profiler::attention_paged_attention_ragged") is None
    assert op_key("sglang_profiler::mha__mha_batch_prefill_167") is None
    assert op_key("aiter::mha_batch_prefill") == "aiter::mha_batch_prefill"
