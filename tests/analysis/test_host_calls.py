"""The host's work, named as a person would: the driving thread's outermost calls, the Python frames whose time goes
in Python itself, never the frames around ops, never a sleeping background thread, never an object's address."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from perftool.analysis.host_calls import driving_calls, driving_thread
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


def test_host_bound_names_the_preprocessing_as_a_person_reads_it(run, write_trace):
    result = run("scan", write_trace(preprocessing_job()), "--format", "json", "--fail-on", "never")
    (trace,) = json.loads(result.stdout)["traces"]
    (host,) = [f for f in trace["findings"] if f["rule_id"] == "PT001"]
    assert host["values"]["host_names"].startswith("resize (processing.py:235), read_video (video.py:174)")
    assert all("0x" not in e["name"] and "monitor" not in e["name"] for e in host["evidence"])
    assert host["evidence"][0]["name"] == "idle while host runs resize (processing.py:235)"


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
