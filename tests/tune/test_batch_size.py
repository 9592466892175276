"""The batch size a trace shows, and what calibrate and tune make of it: samples where the trace gives the batch,
steps where it does not."""

from __future__ import annotations

import json

import pytest
from conftest import DATA

from perftool.analysis.batch import batch_size
from perftool.pipeline.read import load_trace

REAL = DATA / "real"


def _trace(write_trace, op: str, args: dict, extra: list | None = None):
    """One host op with ``args`` (after a linear layer whose flattened input is no batch), in a step."""
    events = [
        {"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "name": "aten::linear", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
         "args": {"Input Dims": [[4096, 512], [512, 512], [512]]}},
        {"ph": "X", "name": op, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": args},
        *(extra or []),
    ]  # fmt: skip
    return load_trace(str(write_trace({"traceEvents": events})))


@pytest.mark.parametrize(
    ("op", "args", "samples"),
    [
        ("aten::conv2d", {"Input Dims": [[16, 3, 224, 224], [64, 3, 7, 7], []]}, 16),
        ("aten::cudnn_convolution", {"Input dims": [[8, 3, 32, 32], [16, 3, 3, 3]]}, 8),  # PyTorch 1.8's key
        ("aten::scaled_dot_product_attention", {"Input Dims": [[4, 16, 1024, 64], [4, 16, 1024, 64]]}, 4),
        ("aten::embedding", {"Input Dims": [[50257, 768], [12, 1024]]}, 12),  # the indices, not the table
        ("aten::conv2d", {"Input Dims": "32,3,224,224;\r\n64,3,11,11;\r\n64;"}, 32),  # torch_npu's string
    ],
)
def test_the_batch_is_the_first_dimension_of_a_batch_first_op_s_input(write_trace, op, args, samples):
    trace = _trace(write_trace, op, args)
    found = batch_size(trace, 0.0, 100.0)
    assert found is not None and found.samples == samples and op in found.source


@pytest.mark.parametrize(
    "args",
    [{}, {"Input Dims": [[], [64, 3, 7, 7]]}, {"Input Dims": [[224], [64]]}, {"Input Dims": "not shapes"}],
    ids=["no shapes", "no input shape", "one dimension", "a string of no sizes"],
)
def test_no_batch_where_no_batch_first_op_records_one(write_trace, args):
    assert batch_size(_trace(write_trace, "aten::conv2d", args), 0.0, 100.0) is None


_CLIP = {"Input Dims": [[128, 3, 224, 224], [768, 3, 16, 16], [768]]}  # a video model's per-frame patch embedding


def _reshape(dims: list, ts: float = 5, tid: int = 1, name: str = "aten::reshape") -> dict:
    return {"ph": "X", "name": name, "cat": "cpu_op", "pid": 1, "tid": tid, "ts": ts, "dur": 1,
            "args": {"Input Dims": [dims, []]}}  # fmt: skip


@pytest.mark.parametrize("name", ["aten::reshape", "aten::view", "aten::flatten"])
def test_frames_folded_into_the_batch_by_a_reshape_before_the_op_are_not_samples(write_trace, name):
    trace = _trace(write_trace, "aten::conv2d", _CLIP, [_reshape([2, 64, 3, 224, 224], name=name)])
    found = batch_size(trace, 0.0, 100.0)
    assert found is not None and found.samples == 2
    assert found.source == f"aten::conv2d's input 128×3×224×224, folded from {name}'s 2×64×3×224×224"


@pytest.mark.parametrize(
    "reshape",
    [
        _reshape([1, 128, 3, 112, 448]),  # the same count, another shape
        _reshape([4, 16, 3, 224, 224]),  # 64 frames, not 128
        _reshape([1, 128, 3, 224, 224], tid=2),  # on another thread
        _reshape([1, 128, 3, 224, 224], ts=20),  # after the op
        _reshape([1, 128, 3, 224, 224], name="aten::expand"),  # no reshape
    ],
    ids=["other shape", "other count", "other thread", "after", "not a reshape"],
)
def test_only_a_reshape_that_made_the_op_s_input_unfolds_it(write_trace, reshape):
    found = batch_size(_trace(write_trace, "aten::conv2d", _CLIP, [reshape]), 0.0, 100.0)
    assert found is not None and found.samples == 128 and "folded" not in found.source


def test_a_video_model_s_clip_is_one_sample_on_a_real_capture():
    """TimeSformer on an H100: one clip of 128 frames, which its patch embedding convolves as 128 images."""
    found = batch_size(load_trace(str(REAL / "h100_timesformer_k400.json.gz")), 0.0, float("inf"))
    assert found is not None and found.samples == 1 and "1×128×3×224×224" in found.source


def test_the_window_s_ops_come_before_the_rest(write_trace):
    later = {"ph": "X", "name": "aten::conv2d", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 200, "dur": 5,
             "args": {"Input Dims": [[64, 3, 8, 8], [8, 3, 3, 3]]}}  # fmt: skip
    trace = _trace(write_trace, "aten::conv2d", {"Input Dims": [[2, 3, 8, 8], [8, 3, 3, 3]]}, [later])
    assert batch_size(trace, 150.0, 300.0).samples == 64  # type: ignore[union-attr]
    assert batch_size(trace, 0.0, 100.0).samples == 2  # type: ignore[union-attr]


def test_calibrate_takes_the_trace_s_batch_and_tune_counts_samples(run, tmp_path):
    fitted = tmp_path / "fit.yaml"
    result = run("calibrate", REAL / "resnet50_pt18_workers0.json.gz", "-o", fitted, "--format", "json")
    document = json.loads(result.stdout)
    assert document["config"]["knobs"]["batch_size"] == 32 and document["calibration"]["batch_size_from"] == "trace"
    assert any("batch size 32, read from the trace (aten::conv2d's input 32×3×224×224)" in note
               for note in document["calibration"]["notes"])  # fmt: skip
    tuned = json.loads(run("tune", fitted, "--format", "json").stdout)
    assert tuned["throughput_unit"] == "samples/s"
    # PyTorch 1.8's capture: its device graphs are named with the releases that bring them, beside a note
    record = document["calibration"]
    assert record["job"] == {"framework": "pytorch", "kind": "training", "engine": None, "profiler": "early pytorch"}
    assert any(note.startswith("the capture is from an early PyTorch") and "torch.cuda.graph (1.10 or later)" in note
               for note in record["notes"])  # fmt: skip
    assert tuned["why"]["device_graphs"].startswith(
        "device graphs true (CUDA/HIP graphs (torch.cuda.graph from PyTorch 1.10, torch.compile mode='reduce-overhead' "
        "from 2.0: the capture is from an early PyTorch))"
    )
    step, rate = tuned["best"]["figures"]["step_time_mean_us"], tuned["best"]["figures"]["throughput"]
    assert rate == pytest.approx(32 / (step / 1e6), rel=0.01)  # 32 samples a step
    top = tuned["top"]  # input workers change nothing once device graphs free the host: one row, the rest alike
    assert len({(c["figures"]["step_time_mean_us"], c["figures"]["throughput"]) for c in top}) == len(top)
    assert top[0]["alike"] > 0


def test_a_trace_without_the_batch_gives_steps_per_second(run, tmp_path):
    fitted = tmp_path / "fit.yaml"
    result = run("calibrate", DATA / "cuda_launch_bound.pt.trace.json.gz", "-o", fitted, "--format", "json")
    document = json.loads(result.stdout)
    assert document["calibration"]["batch_size_from"] == "unknown" and document["config"]["knobs"]["batch_size"] == 1
    text = run("tune", fitted).output
    assert "throughput (steps/s, higher is better)" in text and "samples/s" not in text
    assert "steps/s" in run("tune", fitted, "--format", "markdown").output
