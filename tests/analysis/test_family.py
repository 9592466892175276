"""What a job is, as far as the emulator's settings go: those its framework and kind give it nothing to set."""

from __future__ import annotations

import pytest
from conftest import complete, process_name, thread_name

from perftool.analysis.family import job_kind, settings_absent
from perftool.pipeline.read import load_trace


@pytest.mark.parametrize(
    ("family", "framework", "kind", "absent"),
    [
        ("gpu", "pytorch", "training", set()),
        ("npu", "pytorch", "training", {"loop_size"}),
        ("npu", "tensorflow", "training", set()),
        ("gpu", "jax", "training", {"pin_memory"}),
        ("gpu", "pytorch", "inference", {"replicas.bucket", "replicas.overlap", "gradient_accumulation",
                                         "offload_optimizer"}),
        ("gpu", "pytorch", "serving", {"prefetch_depth", "pin_memory", "workload.input_workers", "replicas.bucket",
                                       "replicas.overlap", "gradient_accumulation", "offload_optimizer"}),
    ],
)  # fmt: skip
def test_the_settings_a_job_has_nothing_to_set(family, framework, kind, absent):
    assert settings_absent(family, framework, kind) == absent


def _xla_kernels(*paths: str) -> dict:
    """A JAX capture's GPU kernels, each naming its op's path in its args as XLA's tracer records it."""
    events = [process_name(1, "/device:GPU:0"), thread_name(1, 16, "Stream #16(Kernel)"),
              process_name(701, "/host:CPU"), thread_name(701, 1, "python")]  # fmt: skip
    for n, path in enumerate(paths):
        args = {"correlation_id": str(n), "name": path, "hlo_module": "jit_train_step"}
        events.append(complete("loop_fusion", n * 100.0, 50, pid=1, tid=16, args=args))
    return {"traceEvents": [*events, {}]}


@pytest.mark.parametrize(
    ("paths", "kind"),
    [
        (["jit(train_step)/jit(main)/dot_general", "jit(train_step)/jit(main)/transpose(jvp(mlp))/dot_general"],
         "training"),
        (["jit(step)/while/body/gradient_tape/dense/MatMul"], "training"),
        (["jit(forward)/jit(main)/dot_general", "jit(forward)/jit(main)/jvp(mlp)/tanh"], "inference"),
    ],
    ids=["jax grad", "tensorflow gradient tape", "forward and a jvp"],
)  # fmt: skip
def test_an_xla_job_trains_where_its_kernels_op_paths_are_a_backward_s(write_trace, paths, kind):
    """XLA's kernels are named by fusion; their op paths, in their args, say which are a backward's: a transposed jvp
    in JAX's name stack (reverse mode; a jvp alone is forward mode), TensorFlow's gradient tape."""
    assert job_kind(load_trace(write_trace(_xla_kernels(*paths)))) == kind


def test_vllm_s_model_runner_annotations_make_a_serving_job(write_trace):
    """vLLM's V1 model runner marks its phases (gpu_model_runner: preprocess, forward, sample): a capture of them is a
    serving engine's, even where no vllm:: op or vLLM frame is recorded."""
    events = [process_name(100, "python"), process_name(0, "GPU 0"), thread_name(0, 7, "stream 7")]
    for n, phase in enumerate(("preprocess", "forward", "sample")):
        events.append(complete(f"gpu_model_runner: {phase}", n * 100.0, 90, pid=100, tid=1, cat="user_annotation"))
    events.append(complete("sm90_xmma_gemm_bf16bf16_bf16f32", 120, 60, pid=0, tid=7, cat="kernel"))
    assert job_kind(load_trace(write_trace({"traceEvents": events}))) == "serving"
    for event in events[3:6]:  # the same phases named otherwise: a forward with no engine
        event["name"] = event["name"].replace("gpu_model_runner", "model")
    assert job_kind(load_trace(write_trace({"traceEvents": events}))) == "inference"
