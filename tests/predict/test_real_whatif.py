"""Predictions checked against real captures they were not fitted to: a real before/after pair (ResNet-50 on one
GPU, PyTorch 1.8, DataLoader workers 0 and 4), both ways, and the calibration checks on every real capture."""

from __future__ import annotations

import json

import pytest
import yaml
from oracles.whatif import REAL, real_pair

from perftool.api import tune
from perftool.emulator.evaluate import evaluate
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import scan_trace
from perftool.predict.interval import bounds
from perftool.rules.prediction import HELPS
from perftool.tune.calibration import _longer, calibrate

BEFORE, AFTER = REAL / "resnet50_pt18_workers0.json.gz", REAL / "resnet50_pt18_workers4.json.gz"


@pytest.mark.slow
def test_calibrating_the_before_capture_predicts_the_after_capture():
    """Workers 0 → 4: the fit loads in the training process, copies from pageable memory and launches op by op;
    with four workers it predicts the after capture's mean step within 10%, inside the interval calibrate gives
    its predictions, from nothing of the after capture."""
    fitted = calibrate(str(BEFORE))
    assert fitted.warnings == [], fitted.warnings
    config = fitted.config
    assert config.workload.input_workers == 0 and not config.knobs.pin_memory and not config.knobs.device_graphs
    after, interval, truth = real_pair("resnet50_pt18_workers0", "resnet50_pt18_workers4", 4)
    assert abs(after["step_time_mean_us"] - truth) / truth < 0.10, (after["step_time_mean_us"], truth)
    low, high = bounds(after["step_time_mean_us"], interval)
    assert low <= truth <= high, (low, truth, high)


@pytest.mark.slow
def test_the_after_capture_says_it_cannot_predict_fewer_workers():
    """Workers 4 → 0: the after capture cannot show how long a batch takes to load (its workers keep up), so the
    fit says a what-if with fewer workers needs it given, and takes none from elsewhere."""
    fitted = calibrate(str(AFTER))
    assert any("preprocess_us_per_sample" in note for note in fitted.notes)
    assert fitted.config.workload.preprocess_us_per_sample == 0


@pytest.mark.parametrize(
    "name", ["resnet50_pt18_workers0", "resnet50_pt18_workers4", "nccl_a100_rank", "ddp_v100_rank1"]
)
@pytest.mark.slow
def test_real_captures_with_three_steady_steps_pass_every_check(name):
    """Held-out steps (their mean step and busy share) and the spread, none of them a figure the fit took; and the
    figures it took (its expected step over 1,000 steps, where the time goes) reproduced."""
    fitted = calibrate(str(REAL / f"{name}.json.gz"))
    figures = {check.figure.split(" of step")[0] for check in fitted.checks}
    assert {"mean step", "device busy", "step-to-step spread"} <= figures
    assert [check.problem(fitted=True) for check in fitted.fitted if not check.passed] == []
    assert [check.problem() for check in fitted.checks if not check.passed] == []


def test_a_one_step_capture_is_fitted_but_fails_its_check(run):
    """Nothing is held out of one steady step: calibrate says so and exits 1, the config written all the same."""
    result = run("calibrate", REAL / "rocm_mi250_minitoy.json.gz")
    assert result.exit_code == 1
    assert "only 1 steady step: nothing is held out" in result.stderr
    said = " ".join(result.stdout.split())  # the interval says what its fit error is: assumed, not measured
    assert "given ± 5.0% (80%: with no step held out, the 5% error the check allows, an assumption; and the " \
        "spread of the mean of 1 step like the trace's)" in said  # fmt: skip


def test_a_fit_that_fails_its_held_out_check_exits_1_naming_the_figure(run, tmp_path, write_trace):
    """Steps that double halfway: a fit to either half cannot predict the other."""
    events = []
    for step in range(8):
        start, length = step * 20_000.0, 10_000.0 if step < 4 else 20_000.0
        events += [
            {"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": start,
             "dur": length},
            {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": start, "dur": length * 0.9},
        ]  # fmt: skip
    path = write_trace({"traceEvents": events})
    output = tmp_path / "fit.yaml"
    result = run("calibrate", path, "-o", output)
    assert result.exit_code == 1, result.output
    assert "perftool: error:" in result.stderr and "the fit fails its check" in result.stderr and output.exists()
    held_out = [line for line in result.stdout.splitlines() if "mean step of steps" in line]
    assert held_out and held_out[0].rstrip(" │").endswith("FAIL"), result.stdout


@pytest.mark.slow
def test_a_fit_that_loads_in_the_loop_tunes_as_written(run, tmp_path):
    """The fitted config sweeps pinned memory (its copies are pageable) and explains a loop with no workers."""
    fitted = tmp_path / "job.yaml"
    run("calibrate", BEFORE, "-o", fitted)
    result = run("tune", fitted, "--format", "json")
    assert result.exit_code == 0, result.output
    assert "pin_memory" in result.stdout and "loads each batch itself" in result.stdout


@pytest.mark.slow
def test_tune_of_the_zero_worker_fit_sweeps_workers_and_predicts_the_other_capture(run, tmp_path):
    """The fitted config's tune: section sweeps input workers from 0 (loading in the loop); tuned on workers alone,
    the best is a worker count whose mean step is within 10% of what the 4-worker capture measures."""
    fitted = tmp_path / "job.yaml"
    run("calibrate", BEFORE, "-o", fitted)
    document = yaml.safe_load(fitted.read_text())
    workers = document["tune"]["space"]["workload.input_workers"]
    assert workers["range"][0] == 0
    document["tune"]["space"] = {"workload.input_workers": workers}
    fitted.write_text(yaml.safe_dump(document))
    result = run("tune", fitted, "--format", "json")
    assert result.exit_code == 0, result.output
    tuned = json.loads(result.stdout)
    assert tuned["baseline"]["knobs"] == {"workload.input_workers": 0}
    assert tuned["best"]["knobs"]["workload.input_workers"] >= 1
    after = scan_trace(load_trace(str(AFTER)), []).step_time_us
    assert tuned["best"]["figures"]["step_time_mean_us"] == pytest.approx(after, rel=0.10)


@pytest.mark.slow
def test_scan_of_the_zero_worker_capture_predicts_the_other_capture(run):
    """scan's gain on the real 0-worker capture comes from a fit to it: workers 0 → 2 predicts within 10% of the step
    the 4-worker capture of the same job measures (a loop that keeps up with 2 workers gains nothing from more)."""
    result = run("scan", REAL / "resnet50_pt18_workers0.json.gz", "--format", "json", "--fail-on", "never")
    finding = next(f for f in json.loads(result.stdout)["traces"][0]["findings"] if f["rule_id"] == "PT002")
    assert finding["fix"]["changes"] == {"workload.input_workers": 2} and finding["gain"]["kind"] == "predicted"
    measured = load_trace(str(REAL / "resnet50_pt18_workers4.json.gz"))
    after = scan_trace(measured, []).step_time_us
    assert finding["gain"]["step_time_us_after"] == pytest.approx(after, rel=0.10)


@pytest.mark.parametrize("path", sorted(REAL.glob("*.json.gz")), ids=lambda p: p.name)
@pytest.mark.slow
def test_no_prediction_on_a_real_capture_wins_back_more_than_it_measured_lost(run, path):
    """A fit's prediction that wins back more than the finding measured lost, and more than all the device's idle
    time, contradicts the trace: the bound is printed instead (the V100 DDP rank's CUDA-graph fix, which a fit puts
    at 5.1 ms a step where the device idles 4.6 ms)."""
    document = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)
    for trace in document["traces"]:
        for finding in trace["findings"]:
            gain = finding["gain"]
            if gain["kind"] == "predicted":
                measured = max(finding["impact"]["share"], sum(trace["idle"].values()))
                assert 1 - 1 / gain["speedup"] <= 1.1 * measured, (finding["rule_id"], gain["text"])


@pytest.mark.parametrize(
    "capture",
    ["real/resnet50_pt18_workers0", "real/resnet50_pt18_workers4", "real/nccl_a100_rank", "real/ddp_v100_rank1",
     "cuda_launch_bound.pt.trace"],
)  # fmt: skip
@pytest.mark.slow
def test_tune_on_a_fitted_capture_recommends_only_gains_that_last(capture, tmp_path):
    """What tune recommends on a fitted real capture keeps its gain over 1,000 steps without jitter: no gain that
    comes only from how a short run starts (a compile pre-filling the prefetch buffer)."""
    fitted = calibrate(str(REAL.parent / f"{capture}.json.gz"))
    written = tmp_path / "fit.yaml"
    written.write_text(yaml.safe_dump(fitted.document(), sort_keys=False))
    result = tune(str(written))
    assert result.speedup() >= HELPS  # each capture has something to win
    still = {"compute_jitter": 0.0, "preprocess_jitter": 0.0, "host_jitter": 0.0}  # only drift tells runs apart
    before, after = (
        float(evaluate(_longer(config, 1000, still))["throughput"][0])
        for config in (fitted.config, result.best_config())
    )
    short_share, long_share = 1 - 1 / result.speedup(), 1 - before / after
    # most of the gain stays (the V100 rank's trace-length run holds a slower first steady step: 4.0% → 2.8%)
    assert long_share >= max(short_share / 2, 1 - 1 / HELPS), (result.knobs(result.best), short_share, long_share)


def test_tune_on_a_fit_that_failed_its_checks_says_so_before_its_results(run, tmp_path):
    written = tmp_path / "fit.yaml"
    assert run("calibrate", REAL / "rocm_mi250_minitoy.json.gz", "-o", written).exit_code == 1  # one steady step
    text = run("tune", written).output
    assert text.index("WARNING: this config's calibration failed its checks (only 1 steady step") < text.index("Top")
    document = json.loads(run("tune", written, "--format", "json").stdout)
    assert document["failed_calibration"] and "nothing is held out" in document["failed_calibration"][0]
    passing = tmp_path / "passing.yaml"
    assert run("calibrate", REAL / "nccl_a100_rank.json.gz", "-o", passing).exit_code == 0
    assert "WARNING" not in run("tune", passing).output
    assert json.loads(run("tune", passing, "--format", "json").stdout)["failed_calibration"] == []
