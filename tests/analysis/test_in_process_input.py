"""Input the training loop prepares itself: its Python decoding and preprocessing inside the step is loading, as a
DataLoader's batch loaded in the loop is; a model's own code, the handling of outputs, another thread's work and a
serving engine's are not."""

from __future__ import annotations

import numpy as np
from builders import meta, span

from perftool.analysis.in_process_input import loading_per_batch, preparing_frames
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.trace.model import Kind, Trace

FRAME = "python_function"
PERIOD = 5_000.0


def job(step_events) -> dict:
    """Four steps of ``PERIOD`` on the loop's thread (tid 1): ``step_events(t)`` at each step's start ``t``, then
    ten ops each launching a 100 µs kernel from 3 ms into the step; a background thread (tid 2) beside it."""
    events = [meta("process_name", 1, 0, name="python3"), meta("process_labels", 0, 0, labels="GPU 0")]
    for step in range(4):
        t = step * PERIOD
        events += [span(f"ProfilerStep#{step}", 1, 1, t, PERIOD - 10, "user_annotation"), *step_events(t)]
        for op in range(10):
            at, flow = t + 3_000 + op * 150, {"correlation": step * 10 + op + 1}
            events += [
                span("aten::linear", 1, 1, at, 30, "cpu_op"),
                span("cudaLaunchKernel", 1, 1, at + 5, 10, "cuda_runtime", flow),
                span("sm90_gemm", 0, 7, at + 20, 100, "kernel", flow),
            ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": events}


def marked(trace: Trace) -> list[str]:
    """The names of the events marked as loading, in time order."""
    rows = np.flatnonzero(trace.kind == Kind.INPUT)
    return [trace.names[trace.name[row]] for row in rows[np.argsort(trace.ts[rows], kind="stable")]]


def test_the_loop_s_outermost_preprocessing_frames_are_its_loading(write_trace):
    """A pipeline's ``preprocess`` (decoding, then an image processor, then the clip stacked into a tensor, inside it)
    is one load; a tokenizer called after it is another; the frames around them (``run_single``, the ``forward`` the
    tokenizer is called in) and inside them (the decoder) are not loads of their own, but the Python in the loads is
    where their time goes. The same names on a background thread, a frame inside a module's call, and the outputs'
    post-processing (and what it calls) stay what they were."""

    def step(t: float) -> list[dict]:
        return [
            span("pipelines/base.py(1373): run_single", 1, 1, t + 1, 4_900, FRAME),
            span("pipelines/video_classification.py(129): preprocess", 1, 1, t + 2, 2_000, FRAME),
            span("pipelines/video_classification.py(174): read_video_pyav", 1, 1, t + 3, 500, FRAME),
            span("models/videomae/image_processing_videomae.py(178): _preprocess_image", 1, 1, t + 600, 1_300, FRAME),
            span("aten::stack", 1, 1, t + 1_950, 40, "cpu_op"),
            span("pipelines/base.py(1266): forward", 1, 1, t + 2_050, 2_500, FRAME),
            span("transformers/tokenization_utils_base.py(2883): __call__", 1, 1, t + 2_100, 400, FRAME),
            span("nn.Module: CLIPTextModel_0", 1, 1, t + 2_600, 300, FRAME),
            span("transformers/masking_utils.py(776): _preprocess_mask_arguments", 1, 1, t + 2_610, 20, FRAME),
            span("image_processing_owlv2.py(503): post_process_object_detection", 1, 1, t + 4_600, 200, FRAME),
            span("image_processing_owlv2.py(69): _scale_boxes", 1, 1, t + 4_610, 100, FRAME),
            span("torchvision/transforms/functional.py(470): resize", 1, 2, t + 100, 800, FRAME),
        ]

    trace = load_trace(write_trace(job(step)))
    assert (
        marked(trace)
        == [
            "pipelines/video_classification.py(129): preprocess",
            "transformers/tokenization_utils_base.py(2883): __call__",
        ]
        * 4
    )
    scope = analyse_trace(trace, [])[1]
    assert loading_per_batch(trace, scope).tolist() == [2_400.0] * scope.steady_steps  # both loads, each step
    loads = np.flatnonzero(trace.kind == Kind.INPUT)
    named = {trace.names[trace.name[row]].split(": ")[-1] for row in preparing_frames(trace, loads)}
    assert named == {"read_video_pyav", "_preprocess_image", "__call__"}  # the innermost: what does the work


def test_frames_inside_a_loader_s_batch_are_that_batch_s_and_it_loads_once_a_step(write_trace):
    """A DataLoader with num_workers=0 runs the dataset's preprocessing inside its ``__next__``: the batch is loaded
    once, by the loader, whatever its frames say."""

    def step(t: float) -> list[dict]:
        return [
            span("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 1, t + 2, 1_500, "user_annotation"),
            span("datasets/video.py(40): preprocess", 1, 1, t + 10, 1_400, FRAME),
        ]

    trace = load_trace(write_trace(job(step)))
    assert marked(trace) == ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] * 4
    scope = analyse_trace(trace, [])[1]
    assert loading_per_batch(trace, scope).tolist() == [1_500.0] * scope.steady_steps


def test_a_serving_engine_s_own_preprocessing_is_its_iteration_s(write_trace):
    """vLLM's model runner prepares each iteration's inputs itself (``_preprocess``): no workers could take it."""

    def step(t: float) -> list[dict]:
        return [
            span("execute_context_1(1)_generation_0(0)", 1, 1, t + 1, 4_900, "user_annotation"),
            span("vllm/v1/worker/gpu_model_runner.py(2438): _preprocess", 1, 1, t + 2, 1_000, FRAME),
        ]

    trace = load_trace(write_trace(job(step)))
    assert marked(trace) == []
    assert loading_per_batch(trace, analyse_trace(trace, [])[1]) is None
