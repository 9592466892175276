"""A serving engine's attention on the roofline: its work from the sequence lengths the iteration's step annotation
counts (execute_N_context_C(sq…sk…sqsq…sqsk…)_generation_G(…)), each iteration's calls apart; where no annotation
counts them, the roofline says why the op has no model."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import DATA, complete

from perftool.analysis.serving import step_lengths
from perftool.dialects.op_families import StepLengths
from perftool.pipeline.read import load_trace
from perftool.roofline.figures import roofline

HOST = {"pid": 1, "tid": 1}
# one prompt of 100 tokens beside 3 decodes over 300 keys in all: prefill pairs 100·101/2 = 5,050, decode 300
MIXED = "execute_103_context_1(sq100sk100sqsq10000sqsk10000)_generation_3(sq3sk300sqsq3sqsk300)"
DECODES = "execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk2000sqsq4sqsk2000)"  # 4 decodes, 2,000 keys
UNCOUNTED = "execute_context_1(103_10609)_generation_3(300)"  # an engine's older annotation: no lengths by name


def _step(at: float, annotation: str, tokens: int, flow: int) -> list[dict]:
    """One iteration: its annotation around vLLM's attention op (query [tokens, 8, 64], one key-value head), which
    launches one kernel of 50 µs."""
    dims = [[tokens, 8, 64], [tokens, 1, 64], [tokens, 1, 64], [tokens, 8, 64], []]
    return [
        complete(annotation, at, 100, cat="user_annotation", **HOST),
        complete("vllm::unified_attention_with_output", at + 10, 40, cat="cpu_op", **HOST,
                 args={"Input Dims": dims, "Input type": ["c10::BFloat16"] * 4 + [""]}),
        complete("cudaLaunchKernel", at + 20, 5, cat="cuda_runtime", **HOST),
        {"ph": "s", "id": flow, "pid": 1, "tid": 1, "ts": at + 21, "cat": "ac2g", "name": "ac2g"},
        complete("flash_fwd_splitkv_kernel", at + 30, 50, cat="kernel", pid=0, tid=7),
        {"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": at + 30, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]  # fmt: skip


def _trace(write_trace, *steps: tuple[str, int]):
    events = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    for index, (annotation, tokens) in enumerate(steps):
        events += _step(index * 200, annotation, tokens, index + 1)
    device = {"id": 0, "name": "NVIDIA H100 80GB HBM3"}
    return load_trace(str(write_trace({"traceEvents": events, "deviceProperties": [device]})))


def test_each_iteration_s_attention_counts_the_sequences_its_annotation_sums(write_trace):
    """A mixed iteration (a prompt beside decodes) and two decode-only ones: the lengths are the prefills' and the
    decodes' together, and the calls of iterations of other lengths are other kinds, with their own FLOPs and keys
    read."""
    trace = _trace(write_trace, (MIXED, 103), (DECODES, 4), (DECODES, 4))
    found = roofline(trace)
    assert found.steps == 3
    by_keys = {op.shapes.rsplit("over ", 1)[1]: op for op in found.ops}
    mixed, decodes = by_keys["400 keys"], by_keys["2,000 keys"]
    assert (mixed.calls, decodes.calls) == (1, 2) and found.modelled_share == 1.0
    assert mixed.flops == 4 * 8 * 64 * (10_300 - (10_003 - 103) / 2)  # 5,350 query-key pairs
    assert mixed.bytes == 2 * 103 * 8 * 64 * 2 + 2 * 400 * 64 * 2
    assert decodes.flops == 2 * 4 * 8 * 64 * 2_000 and decodes.bound == "memory"
    assert mixed.shapes.startswith("103x8x64") and "iteration of 103 queries over 400 keys" in mixed.shapes
    assert not [note for note in found.notes if "serving engine's attention" in note]


def test_the_lengths_are_those_of_the_annotation_around_the_event_on_its_thread(write_trace):
    trace = _trace(write_trace, (MIXED, 103), (DECODES, 4))
    ops = np.flatnonzero(trace.name_matches(re.compile(r"^vllm::")))
    launches = np.flatnonzero(trace.name_matches(re.compile(r"^cudaLaunchKernel$")))
    kernels = np.flatnonzero(trace.name_matches(re.compile(r"^flash_fwd")))
    assert step_lengths(trace, ops) == [StepLengths(103, 400, 10_003, 10_300), StepLengths(4, 2_000, 4, 2_000)]
    assert step_lengths(trace, launches)[1] == StepLengths(4, 2_000, 4, 2_000)
    assert step_lengths(trace, kernels) == [None, None]  # the device's tracks hold no annotation


@pytest.mark.parametrize("annotation", [UNCOUNTED, "decode_step"])
def test_a_serving_attention_no_annotation_counts_has_no_model_and_the_roofline_says_why(write_trace, annotation):
    found = roofline(_trace(write_trace, (annotation, 103)))
    (op,) = found.ops if found.ops else [None]
    assert op is None and found.modelled_share == 0.0
    (note,) = [n for n in found.notes if "serving engine's attention" in n]
    assert note.startswith("vllm::unified_attention_with_output (a serving engine's attention) has no model here")
    assert "execute_N_context_C(sqAskBsqsqCsqskD)_generation_G(...)" in note


def test_the_real_prefill_s_attention_is_its_fifteen_prompts_causal_pairs():
    """SGLang's prefill of 15 prompts of 1,024 tokens on an MI300X (``sq15360sk15360sqsq15728640sqsk15728640``):
    aiter's batch prefill, causal as its flag says, 15·1024·1025/2 = 7,872,000 query-key pairs a layer of 32 heads of
    128, compute-bound; with it nearly all the step's device time has a model."""
    found = roofline(load_trace(str(DATA / "real" / "sglang_mi300x_qwen3_8b_prefill_window.json.gz")))
    (attention,) = [op for op in found.ops if op.family == "attention"]
    assert attention.name == "aiter::mha_batch_prefill" and attention.calls == 36 and attention.bound == "compute"
    assert attention.flops == 36 * 4 * 32 * 128 * 15 * 1024 * 1025 // 2
    assert found.modelled_share > 0.98


def test_a_serving_attention_holding_fewer_tokens_than_its_iteration_has_no_model_and_says_why(write_trace):
    """An iteration of 103 tokens whose attention op holds 52 (one of two micro-batches): no model, and the note says
    the shapes do not fit, not that the lengths are missing."""
    found = roofline(_trace(write_trace, (MIXED, 52)))
    assert found.modelled_share == 0.0
    (note,) = [n for n in found.notes if "serving engine's attention" in n]
    assert "no model in some iterations: its recorded shapes do not fit the iteration its annotation counts" in note
