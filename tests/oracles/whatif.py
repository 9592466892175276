"""What a calibrated config predicts against what happens: a real before/after pair (the fit to one capture
predicting the other's measured mean step) and the emulator pairs (self-consistency: a sample emulated under hidden
constants, calibrated, a knob changed on both). bench/bench_whatif.py prints them; tests assert them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from perftool.emulator.config import load_config, validate_config
from perftool.emulator.evaluate import evaluate
from perftool.emulator.full_run import run
from perftool.emulator.trace_writer import write_job, write_trace
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.tune.calibration import calibrate

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
REAL = Path(__file__).resolve().parents[2] / "tests" / "data" / "real"
REAL_PAIRS = [  # the capture fitted, the capture predicted, their input workers
    ("resnet50_pt18_workers0", "resnet50_pt18_workers4", 4),
]
PAIRS = [  # sample, hidden device constants, the knob change
    ("npu/host_bound_loop_size", {"python_us": 1100, "efficiency": 0.3}, "loop_size=32"),
    ("npu/host_bound_loop_size", {"call_dispatch_us": 900}, "loop_size=8"),
    ("npu/healthy", {"python_us": 2500}, "loop_size=128"),
    ("npu/input_bound_prefetch", {"efficiency": 0.4}, "workload.input_workers=8"),
    ("npu/input_bound_prefetch", {"python_us": 1000}, "prefetch_depth=4"),
    ("npu/strided_copies_transdata", {"efficiency": 0.3}, "layout_mismatch=false"),
    ("ipu/host_bound_device_iterations", {"python_us": 2200}, "loop_size=64"),
    ("ipu/healthy", {"efficiency": 0.5}, "loop_size=16"),
    ("ipu/input_bound_prefetch", {"python_us": 1200}, "prefetch_depth=3"),
    ("ipu/input_bound_prefetch", {"efficiency": 0.3}, "workload.input_workers=2"),
    ("ipu/serialised_transfers_no_io_tiles", {"efficiency": 0.35}, "io_tiles=8"),
    ("ipu/strided_copies", {"efficiency": 0.5}, "layout_mismatch=false"),
    ("ipu/offload_stream_copies", {"efficiency": 0.3}, "offload_optimizer=false"),
    ("hpu/host_bound_no_hpu_graphs", {"op_launch_us": 35}, "device_graphs=true"),
    ("hpu/host_bound_no_hpu_graphs", {"efficiency": 0.3}, "device_graphs=true"),
    ("hpu/cpu_fallback", {"efficiency": 0.5}, "cpu_fallback_ops=[]"),
    ("hpu/recompile_unpadded_last_batch", {"efficiency": 0.3}, "last_batch=pad"),
    ("hpu/healthy", {"efficiency": 0.3}, "workload.input_workers=1"),
    ("gpu/launch_bound_no_cuda_graphs", {"op_launch_us": 8}, "device_graphs=true"),
    ("gpu/launch_bound_no_cuda_graphs", {"efficiency": 0.3}, "device_graphs=true"),
    ("gpu/input_bound_prefetch", {"efficiency": 0.35}, "workload.input_workers=4"),
    ("gpu/input_bound_prefetch", {"python_us": 300}, "prefetch_depth=4"),
    ("gpu/healthy", {"efficiency": 0.3}, "workload.input_workers=1"),
    ("gpu/sync_every_step", {"python_us": 300}, "workload.sync_each_step=false"),
    ("gpu/pageable_readback", {"pageable_d2h_bandwidth": 3}, "pin_readback=true"),
    ("jobs/npu_exposed_allreduce/job", {"collective_bandwidth": 18}, "replicas.overlap=true"),
    ("jobs/npu_exposed_allreduce/job", {"efficiency": 0.3}, "replicas.bucket=50MB"),
    ("jobs/npu_exposed_allreduce/job", {"python_us": 2000}, "gradient_accumulation=4"),
    ("jobs/gpu_ddp_straggler/job", {"collective_bandwidth": 60}, "replicas.bucket=100MB"),
    ("jobs/gpu_ddp_straggler/job", {"efficiency": 0.3}, "gradient_accumulation=2"),
]


def step_time(config) -> float:
    return float(evaluate(config)["step_time_mean_us"][0])


def with_change(config, change: str):
    """``config`` with one ``--set`` change applied, validated."""
    document = config.model_dump(mode="json", exclude_none=True)
    from perftool.emulator.config import apply_override

    apply_override(document, change, "pair", None)
    return validate_config(document, "pair")


def pair(sample: str, hidden: dict, change: str) -> tuple[float, float]:
    """The step time the calibrated config predicts for ``change``, and the one the hidden truth gives."""
    truth = load_config(SAMPLES / f"{sample}.yaml", [f"device_overrides.{k}={v}" for k, v in hidden.items()])
    with tempfile.TemporaryDirectory() as directory:  # a job's ranks, calibrated from the one that sets its pace
        if truth.replicas is None:
            path = os.path.join(directory, "trace.json")
            write_trace(run(truth), path)
        else:
            path = directory
            write_job(run(truth), directory)
        fitted = calibrate(path, overrides={"knobs": {"batch_size": truth.knobs.batch_size}})
    return step_time(with_change(fitted.config, change)), step_time(with_change(truth, change))


def measured_mean(path: Path) -> float:
    """A capture's steady mean step, µs, as perftool measures it."""
    scan, _ = analyse_trace(load_trace(str(path)), [])
    return float(scan.step_time_us or np.nan)


def real_pair(fitted: str, other: str, workers: int) -> tuple[dict[str, float], float, float]:
    """The prediction of capture ``other`` (``workers`` input workers) from a fit to capture ``fitted`` (its long
    run), the relative half-width of its interval (calibrate's), and the other capture's measured mean step, µs.
    Nothing of the other capture goes into the prediction."""
    calibration = calibrate(str(REAL / f"{fitted}.json.gz"))
    document = calibration.config.model_dump(mode="json", exclude_none=True)
    document["workload"]["input_workers"] = workers
    predicted = evaluate(validate_config(document, "pair")).row(0)
    return predicted, calibration.interval, measured_mean(REAL / f"{other}.json.gz")
