"""The host's work, named as a person would: the driving thread's outermost calls, the Python frames whose time goes
in Python itself, never the frames around ops, never a sleeping background thread, never an object's address."""

from __future__ import annotations

import json
import re
from itertools import count
from types import SimpleNamespace

import numpy as np
import pytest
from builders import meta, span

from perftool.analysis.host_calls import driving_calls, driving_thread, driving_threads, read_backs
from perftool.common.names import host_call, readable
from perftool.pipeline.read import load_trace
from perftool.trace.model import Trace

FRAME = "python_function"


def preprocessing_job() -> dict:
    """An inference pipeline, 4 steps: 3 ms of pure-Python preprocessing (a video decoder, then an image processor
    calling numpy) with the device idle, then a forward of 20 ops, each launching a 100 µs kernel. A progress bar's
    monitor thread sleeps through every step."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "tqdm monitor"}},
    ]
    period = 6_000.0
    for step in range(4):
        t = step * period
        events += [
            {"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": t,
             "dur": period - 10},
            {"ph": "X", "name": "pipelines/base.py(1373): run_single", "cat": FRAME, "pid": 1, "tid": 1,
             "ts": t + 1, "dur": period - 20},
            {"ph": "X", "name": "pipelines/video.py(129): preprocess", "cat": FRAME, "pid": 1, "tid": 1, "ts": t + 2,
             "dur": 3_100},
            {"ph": "X", "name": "pipelines/video.py(174): read_video", "cat": FRAME, "pid": 1, "tid": 1, "ts": t + 3,
             "dur": 900},
            {"ph": "X", "name": "models/processing.py(235): resize", "cat": FRAME, "pid": 1, "tid": 1,
             "ts": t + 910, "dur": 2_000},
            {"ph": "X", "name": "<built-in method astype of numpy.ndarray object at 0x7cbf780f01b0>", "cat": FRAME,
             "pid": 1, "tid": 1, "ts": t + 920, "dur": 1_500},
            {"ph": "X", "name": "aten::to", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": t + 2_950, "dur": 100},
            {"ph": "X", "name": "threading.py(324): wait", "cat": FRAME, "pid": 1, "tid": 2, "ts": t,
             "dur": period - 5},
        ]  # fmt: skip
        for op in range(20):
            host, flow = t + 3_200 + op * 130, step * 100 + op + 1
            events += [
                {"ph": "X", "name": "aten::linear", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": host, "dur": 20},
                {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": host + 5,
                 "dur": 10, "args": {"correlation": flow}},
                {"ph": "X", "name": "sm90_gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": host + 20, "dur": 100,
                 "args": {"correlation": flow}},
            ]  # fmt: skip
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": events}


def test_the_driving_thread_is_the_one_that_launches_not_a_sleeping_monitor(write_trace):
    trace = load_trace(write_trace(preprocessing_job()))
    assert trace.tracks[driving_thread(trace)].tid == 1


def test_pure_python_frames_are_named_at_their_outermost_and_frames_around_ops_never(write_trace):
    """``preprocess`` encloses an op (``aten::to``), so it is a frame around ops like ``run_single``; the decoder and
    the image processor inside it run Python alone and are what the host does. Their children (``astype``) are
    inside them, so not named apart."""
    trace = load_trace(write_trace(preprocessing_job()))
    rows = driving_calls(trace, np.ones(len(trace.ts), dtype=bool))
    first_step = {trace.names[trace.name[row]] for row in rows if trace.ts[row] < 3_200}
    assert first_step == {"pipelines/video.py(174): read_video", "models/processing.py(235): resize", "aten::to"}


def test_input_bound_names_the_preprocessing_as_a_person_reads_it(run, write_trace):
    """The pipeline's ``preprocess`` is the step loading its input (the device waits in it): the finding names the
    Python in it where the time goes, most first, and the load itself as evidence, never the monitor thread."""
    result = run("scan", write_trace(preprocessing_job()), "--format", "json", "--fail-on", "never")
    (trace,) = json.loads(result.stdout)["traces"]
    (inputs,) = [f for f in trace["findings"] if f["rule_id"] == "PT002"]
    assert inputs["values"]["preparing_names"] == "resize (processing.py:235), read_video (video.py:174)"
    assert {e["name"] for e in inputs["evidence"]} == {"pipelines/video.py(129): preprocess"}


def training_job() -> dict:
    """A training loop as PyTorch runs it, 4 steps: the loop's thread (tid 1) runs the forward, first 2 ms of host work
    with the device idle (DDP's buffers unflattened), then 6 ops each launching a kernel; then it waits in Python's
    ``backward()`` while the autograd thread (tid 3) runs the backward, 1.5 ms of host work (the gradients accumulated)
    then 12 ops each launching a kernel; then it reads the loss back (``aten::item``, a wait holding a copy). A NCCL
    watchdog thread (tid 9) polls an event once a step."""
    events = [
        meta("process_name", 1, 0, name="python3"),
        meta("process_labels", 0, 0, labels="GPU 0"),
        meta("thread_name", 1, 3, name="pt_autograd_0"),
    ]
    flows = count(1)

    def launched(tid: int, name: str, at: float) -> list[dict]:
        args = {"correlation": next(flows)}
        return [
            span(name, 1, tid, at, 40, "cpu_op"),
            span("cudaLaunchKernel", 1, tid, at + 5, 10, "cuda_runtime", args),
            span("sm90_gemm", 0, 7, at + 30, 100, "kernel", args),
        ]

    period = 12_000.0
    for step in range(4):
        t = step * period
        events += [
            span(f"ProfilerStep#{step}", 1, 1, t, period - 10, "user_annotation"),
            span("aten::unflatten_dense_tensors", 1, 1, t + 10, 2_000, "cpu_op"),
            span("torch/autograd/graph.py(856): _engine_run_backward", 1, 1, t + 3_500, 4_000, FRAME),
            span(
                "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 1, 3, t + 3_600, 1_500, "cpu_op"
            ),
            span("aten::item", 1, 1, t + 8_000, 1_050, "cpu_op"),
            span("aten::_local_scalar_dense", 1, 1, t + 8_010, 1_030, "cpu_op"),
            span("cudaMemcpyAsync", 1, 1, t + 8_020, 1_000, "cuda_runtime"),
            span("cudaEventQuery", 1, 9, t + 50, 2, "cuda_runtime"),
        ]
        for op in range(6):
            events += launched(1, "aten::linear", t + 2_100 + op * 130)
        for op in range(12):
            events += launched(3, "autograd::engine::evaluate_function: AddmmBackward0", t + 5_200 + op * 150)
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": events}


def test_a_training_step_is_driven_by_its_loop_and_autograd_threads_not_a_watchdog(write_trace):
    """Nor by a thread of another process that the trace holds (here one that launches two thirds as much)."""
    job = training_job()
    job["traceEvents"] += [span("cudaLaunchKernel", 5, 5, at, 10, "cuda_runtime") for at in range(0, 48_000, 1_500)]
    trace = load_trace(write_trace(job))
    assert [trace.tracks[track].tid for track in driving_threads(trace)] == [3, 1]  # the most launches first
    assert trace.tracks[driving_thread(trace)].tid == 3


def test_host_bound_names_the_work_of_every_thread_that_drives_the_device_and_no_wait(run, write_trace):
    """The forward's host work on the loop thread names the longest idle stretches, the backward's on the autograd
    thread is named too; the loop thread's Python waiting in backward() is not host work, nor is the loss read back
    (a wait) or the copy it makes inside it."""
    result = run("scan", write_trace(training_job()), "--format", "json", "--fail-on", "never")
    (trace,) = json.loads(result.stdout)["traces"]
    (host,) = [f for f in trace["findings"] if f["rule_id"] == "PT001"]
    names = host["values"]["host_names"]
    assert "aten::unflatten_dense_tensors" in names and "AccumulateGrad" in names
    assert host["evidence"][0]["name"] == "idle while host runs aten::unflatten_dense_tensors"
    said = json.dumps(host)
    assert not [
        name for name in ("_engine_run_backward", "aten::item", "_local_scalar_dense", "cudaMemcpy") if name in said
    ]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("transformers/models/videomae/image_processing_videomae.py(178): _preprocess_image",
         "_preprocess_image (image_processing_videomae.py:178)"),
        ("train.py(40): main", "main (train.py:40)"),
        ("/home/Jane Doe/proj/train.py(40): main", "main (train.py:40)"),  # a space in a folder's name
        ("C:\\Users\\jane\\proj\\train.py(40): main", "main (train.py:40)"),  # Windows' separators
        ("<built-in method astype of numpy.ndarray object at 0x7cbf780f01b0>",
         "<built-in method astype of numpy.ndarray object>"),
        ("aten::to", "aten::to"),
        ("PjitFunction(matmul)", "PjitFunction(matmul)"),  # a compiled call keeps the function it runs
    ],
)  # fmt: skip
def test_a_host_call_reads_without_directories_or_addresses(name, shown):
    assert host_call(name) == shown


def test_a_table_shows_a_python_builtin_whole_not_as_a_template():
    assert readable("<built-in function array>") == "<built-in function array>"
    assert readable("<built-in method astype of numpy.ndarray object at 0x7f01>", 20) == "<built-in method as…"


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("together", [True, False], ids=["starting-together", "each-its-own-start"])
def test_top_level_calls_are_those_no_other_encloses_the_longest_first_where_two_start_together(seed, together):
    """Against a direct reading: a call is enclosed by another that starts no later and ends no earlier, of two
    alike the later row; many calls start together (whole microseconds), or none do (the usual thread)."""
    rng = np.random.default_rng(seed)
    ts = (rng.integers(0, 40, 60) if together else rng.permutation(200)[:60]).astype(float)
    dur = rng.integers(0, 10, 60).astype(float)
    trace = SimpleNamespace(ts=ts, dur=dur, end=ts + dur)
    rows = np.flatnonzero(rng.random(60) < 0.8)

    def encloses(a: int, b: int) -> bool:
        same = ts[a] == ts[b] and dur[a] == dur[b]
        return (ts[a] <= ts[b] and trace.end[a] >= trace.end[b] and not same) or (same and a < b)

    expected = sorted((r for r in rows if not any(encloses(o, r) for o in rows if o != r)), key=lambda r: ts[r])
    assert Trace.top_level(trace, rows).tolist() == expected  # it reads only the events' starts and ends


def copying_calls() -> dict:
    """Three blocking copy calls of a CUDA job: one reading a result back while the next batch's pinned copy runs
    on a stream of its own, one copying a batch in from pageable memory after an earlier read-back ended inside
    it, one whose copy the trace does not show, and one whose read-back the device's clock ends just after it."""
    host, device, link = (100, 1), (0, 7), (0, 8)
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    events += [
        span("cudaMemcpyAsync", *host, 0, 5000, "cuda_runtime"),
        span("Memcpy HtoD (Pinned -> Device)", *link, 1000, 800, "gpu_memcpy"),  # the next batch's, during the wait
        span("Memcpy DtoH (Device -> Pageable)", *device, 2000, 2990, "gpu_memcpy"),  # the call's own: ends with it
        span("cudaMemcpyAsync", *host, 10_000, 3000, "cuda_runtime"),
        span("Memcpy DtoH (Device -> Pinned)", *link, 9500, 1000, "gpu_memcpy"),
        span("Memcpy HtoD (Pageable -> Device)", *device, 11_000, 1995, "gpu_memcpy"),
        span("Memcpy DtoH (Device -> Pinned)", *link, 13_000, 500, "gpu_memcpy"),  # before the next call: not its
        span("cudaMemcpyAsync", *host, 14_000, 200, "cuda_runtime"),
        span("Memcpy DtoH (Device -> Pinned)", *link, 15_000, 500, "gpu_memcpy"),  # after it: not its copy
        span("cudaMemcpyAsync", *host, 30_000, 500, "cuda_runtime"),  # its read-back ends 10 µs after it, on the
        span("Memcpy HtoD (Pinned -> Device)", *link, 30_100, 200, "gpu_memcpy"),  # device's clock
        span("Memcpy DtoH (Device -> Pageable)", *device, 30_050, 460, "gpu_memcpy"),
    ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": events}


def test_a_blocking_call_reads_back_where_the_copy_ending_with_it_goes_to_the_host(write_trace):
    """A blocking call returns when its own copy is done: the copy ending nearest the call's end says which way it
    copied, whatever other copies run during its wait."""
    trace = load_trace(write_trace(copying_calls()))
    calls = np.flatnonzero(trace.name_matches(re.compile(r"^cudaMemcpyAsync$")))
    assert read_backs(trace, calls).tolist() == [True, False, False, True]
    assert read_backs(trace, calls[:0]).tolist() == []
