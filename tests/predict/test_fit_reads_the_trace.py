"""What a fit reads from a trace that does not record its config (the emulator's own traces, stripped of their
``perftool`` record as a real profiler writes them): the prefetch depth and the order of the input workers'
batches, the loop size with its remainder loop, a short last batch, and what a fix of a cost paid once is worth
over a job whose length the user states."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from builders import stripped
from click.testing import CliRunner
from conftest import REPO

from perftool.analysis.loader import batches_in_order, depth_in_use
from perftool.api import load_trace, scan
from perftool.cli.main import cli
from perftool.common.errors import PerftoolError
from perftool.emulator.config import load_config, validate_config
from perftool.emulator.evaluate import evaluate
from perftool.emulator.full_run import run as emulate
from perftool.emulator.simulate import jitter
from perftool.emulator.trace_writer import write_trace
from perftool.predict.fitting import _short_last
from perftool.rules.findings import Finding
from perftool.trace.model import Kind, Role
from perftool.tune.calibration import calibrate

SAMPLES = REPO / "sample_traces"


@pytest.mark.parametrize(
    "sample", ["gpu/input_bound_prefetch", "npu/input_bound_prefetch", "gpu/healthy", "npu/healthy", "ipu/healthy"]
)
def test_the_prefetch_depth_is_read_from_when_waiting_workers_resume(sample, tmp_path):
    config = load_config(str(SAMPLES / f"{sample}.yaml"))
    assert depth_in_use(load_trace(str(stripped(sample, tmp_path)))) == config.knobs.prefetch_depth


def test_no_depth_is_read_where_the_trace_cannot_show_it():
    # a CPU fallback's copies back make more copies than batches; a Kineto capture traces no input workers
    assert depth_in_use(load_trace(str(SAMPLES / "hpu" / "cpu_fallback.trace.json.gz"))) is None
    assert depth_in_use(load_trace(str(SAMPLES / "gpu_training_kineto.pt.trace.json.gz"))) is None


def test_eight_workers_batches_come_back_in_the_order_the_loop_took_them():
    """Batch i is worker i mod 8's, whichever finished first: in that order, the batches' times are the emulator's
    own draws of preprocessing jitter, one per step."""
    config = load_config(str(SAMPLES / "npu" / "healthy.yaml"))
    trace = load_trace(str(SAMPLES / "npu" / "healthy.trace.json.gz"))
    rows = np.flatnonzero((trace.kind == Kind.INPUT) & trace.on_roles(Role.INPUT))
    by_start = trace.dur[rows[np.argsort(trace.ts[rows], kind="stable")]]
    ordered = trace.dur[batches_in_order(trace, rows)]
    work = config.workload
    drawn = jitter(config.seed, rows.size, work.preprocess_jitter, 0) * work.preprocess_us_per_sample
    drawn *= config.knobs.batch_size
    assert np.allclose(ordered, drawn, rtol=1e-6)
    assert not np.allclose(by_start, drawn, rtol=1e-6)  # start order is not the loop's order


def test_a_replayed_sequence_is_what_the_workers_take(tmp_path):
    """``preprocess_replay`` sets each batch's time, in turn, scaled to the configured mean."""
    document = yaml.safe_load((SAMPLES / "gpu" / "input_bound_prefetch.yaml").read_text())
    document["workload"]["preprocess_replay"] = [1.0, 3.0]
    config = validate_config(document, "replayed")
    mean = document["workload"]["preprocess_us_per_sample"] * document["knobs"]["batch_size"]
    out = tmp_path / "replayed.trace.json.gz"
    write_trace(emulate(config), str(out))
    trace = load_trace(str(out))
    rows = np.flatnonzero((trace.kind == Kind.INPUT) & trace.on_roles(Role.INPUT))
    durations = trace.dur[batches_in_order(trace, rows)]
    assert np.allclose(durations[:4], [0.5 * mean, 1.5 * mean] * 2, rtol=1e-3)
    document["workload"]["preprocess_replay"] = None
    jittered = evaluate(validate_config(document, "jittered"))
    assert float(evaluate(config)["step_time_mean_us"][0]) != float(jittered["step_time_mean_us"][0])


def findings_of(path: Path) -> dict[str, Finding]:
    """The trace's findings by rule."""
    return {finding.rule_id: finding for finding in scan(path, workers=1).traces[0].findings}


@pytest.mark.slow
def test_a_remainder_loop_is_fitted_as_the_trace_runs_it_and_its_fix_is_a_bound(tmp_path):
    """250 steps in loops of 64 leave a remainder loop of 58 that compiles again: the fit keeps that loop size (not
    a divisor of 250 near it), so the fix's loop size is emulated; a compile is paid once, and the capture does
    not say how long the job is, so the gain is what a job as long as the capture wins at most."""
    path = stripped("ipu/recompile_remainder_loop", tmp_path)
    recompile = findings_of(path)["PT003"]
    assert recompile.fix.changes == {"loop_size": 50}
    assert recompile.gain.kind == "upper_bound" and "a longer job gains less" in recompile.gain.text
    assert "(250 steps)" in recompile.gain.text and recompile.severity.value == "warning"
    assert recompile.gain.text.startswith("loop size 64 → 50: up to ")  # the fix the bound is for, in words
    config = calibrate(str(path)).config
    assert config.knobs.loop_size == 64 and config.workload.steps == 250 and config.workload.last_batch_samples == 0


def test_a_stripped_input_bound_trace_predicts_deeper_prefetch_from_its_own_batches(tmp_path):
    input_bound = findings_of(stripped("npu/input_bound_prefetch", tmp_path))["PT002"]
    assert input_bound.gain.kind == "predicted" and "emulator fitted to this trace" in input_bound.gain.text
    assert input_bound.fix.changes == {"prefetch_depth": 4} and "(now 1)" in input_bound.fix.text


def test_a_stripped_lazy_mode_trace_predicts_hpu_graphs(tmp_path):
    """In lazy mode the host builds each step's graph op by op and launches it in one call whose name ends in
    synLaunch: that call is the launching HPU Graphs remove, so the fit predicts them instead of a bound."""
    host_bound = findings_of(stripped("hpu/host_bound_no_hpu_graphs", tmp_path))["PT001"]
    assert host_bound.fix.changes == {"device_graphs": True}
    assert host_bound.gain.kind == "predicted" and "emulator fitted to this trace" in host_bound.gain.text
    assert host_bound.gain.speedup is not None and 1.3 < host_bound.gain.speedup < 1.4


@pytest.mark.parametrize("sample", ["ipu/recompile_remainder_loop", "npu/recompile_remainder_loop"])
@pytest.mark.slow
def test_a_stated_job_length_makes_a_compiles_fix_a_prediction_over_the_job(sample, tmp_path):
    """Told how long the job runs (as its config does), the fit pays the capture's steady compile once over the
    job: the gain is what the sample's own config predicts, within 10%, not a bound over the capture."""
    config = load_config(str(SAMPLES / f"{sample}.yaml"))
    path = stripped(sample, tmp_path)
    job_steps = config.workload.steps * config.workload.epochs
    out = tmp_path / "report.json"
    arguments = ["scan", str(path), "--job-steps", str(job_steps), "--format", "json", "-o", str(out)]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code in (0, 1), result.output
    compile_fix = next(f for f in json.loads(out.read_text())["traces"][0]["findings"] if f["rule_id"] == "PT003")
    as_written = findings_of(SAMPLES / f"{sample}.trace.json.gz")["PT003"]
    assert compile_fix["gain"]["kind"] == "predicted" and compile_fix["fix"]["changes"] == as_written.fix.changes
    won_back = 1 - 1 / compile_fix["gain"]["speedup"]
    assert as_written.gain.speedup is not None
    assert won_back == pytest.approx(1 - 1 / as_written.gain.speedup, rel=0.1)
    assert findings_of(path)["PT003"].gain.kind == "upper_bound"  # the same capture, its job's length unknown


def test_a_job_length_must_be_a_positive_count(tmp_path):
    path = stripped("npu/recompile_remainder_loop", tmp_path)
    result = CliRunner().invoke(cli, ["scan", str(path), "--job-steps", "0"])
    assert result.exit_code == 2 and "--job-steps" in result.output and "Traceback" not in result.output


def test_a_short_last_step_is_fitted_as_the_short_last_batch_it_computes(tmp_path):
    """The last step computes 5 of 16 samples (about 42% of a full step's compute): the fit runs a last batch of
    about that share, not one sample short of a full one."""
    config = calibrate(str(stripped("hpu/recompile_unpadded_last_batch", tmp_path))).config
    assert config.knobs.batch_size == 16 and 5 <= config.workload.last_batch_samples <= 7


def test_a_short_last_batch_is_read_from_the_last_steps_share_of_a_steady_steps_compute():
    """A last step computing a quarter of the others' work ran a quarter of a batch, where three steps before it say
    what a steady step computes (two are too few); steps that compute nothing say nothing (no division by zero)."""
    assert _short_last(np.array([100.0, 100.0, 100.0, 25.0]), 32) == 8
    assert _short_last(np.array([100.0, 100.0, 25.0]), 32) is None
    assert _short_last(np.array([100.0, 100.0, 100.0, 100.0, 95.0]), 32) is None  # above SHORT_LAST: a full batch
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _short_last(np.zeros(8), 32) is None


def _fitted_case(write_trace, rule: str, vocabulary: str, device: str | None = None):
    """The fit to the first case of ``rule`` in ``vocabulary`` (its device renamed ``device`` where given)."""
    from builders import CASES, build

    from perftool.pipeline.scan import analyse_trace
    from perftool.predict.fitting import fit

    cases = yaml.safe_load((CASES / f"{rule}.yaml").read_text())["cases"]
    case = next(c for c in cases if c["vocabulary"] == vocabulary)
    trace = load_trace(write_trace(build(case | ({"device": device} if device else {}))))
    _, scope = analyse_trace(trace, [])
    return fit(trace, scope)


@pytest.mark.parametrize(
    ("device", "model"),
    [
        (None, "H100-SXM5-80GB"),  # the H100 its deviceProperties name
        ("Intel Data Center GPU Max 1550", "generic"),  # a device of no family the emulator has: a GPU's, no model
    ],
)
def test_the_fit_runs_on_the_device_the_trace_names_else_a_generic_gpu(write_trace, device, model):
    config = _fitted_case(write_trace, "PT018", "kineto", device)
    assert (config.device, config.device_model) == ("gpu", model)


def test_a_tpu_s_trace_is_not_fitted_as_a_gpu_s(write_trace):
    """The emulator models no TPU: a TPU's jitted program fitted as a GPU's launches would predict GPU knobs' gains."""
    with pytest.raises(PerftoolError, match="a TPU's trace: the emulator models GPUs, NPUs, HPUs and IPUs, not TPUs"):
        _fitted_case(write_trace, "PT001", "xla-tpu")
