"""Predictions from a fit: its step is the model's expected one, the same fix gets the same figure from scan and
from the fitted config, and every predicted step comes with the interval the fit's error and the steps' spread
give it."""

from __future__ import annotations

import json

import pytest
from conftest import DATA

from perftool.emulator.config import validate_config
from perftool.emulator.evaluate import evaluate
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.predict.fitting import FIT_RUN_STEPS, fit
from perftool.predict.gains import TraceFit
from perftool.predict.interval import Z80, bounds, mean_error
from perftool.predict.sweep import best_settings
from perftool.tune.calibration import calibrate

REAL = DATA / "real"


def test_the_interval_is_the_fit_s_error_and_the_noise_of_a_mean():
    assert mean_error(0.05, 0.0, 6) == pytest.approx(0.05)  # steps that never vary: the fit's error alone
    assert mean_error(0.0, 0.10, 1) == pytest.approx(0.128, abs=5e-4)  # one step: its 80% interval, ±1.28 σ
    assert mean_error(0.0, 0.10, 100) == pytest.approx(0.0128, abs=5e-5)  # a mean of 100 strays a tenth as far
    assert Z80 == pytest.approx(1.2816, abs=1e-4)
    assert bounds(100.0, 0.05) == pytest.approx((95.0, 105.0))


@pytest.mark.parametrize("capture", ["resnet50_pt18_workers0", "resnet50_pt18_workers4", "nccl_a100_rank"])
def test_a_fit_s_long_run_on_another_seed_keeps_its_trace_s_mean_step(capture):
    """The fit solves its own long run (seed 0) for the trace's mean: a long run it did not solve for, on other
    draws of its jitter, lands within 2% of the trace too, as a fit to one short run's draw did not (3% off)."""
    trace = load_trace(str(REAL / f"{capture}.json.gz"))
    _, scope = analyse_trace(trace, [])
    config = fit(trace, scope)
    assert config.epoch[0] >= FIT_RUN_STEPS
    for seed in (1, 2):
        other = evaluate(config.model_copy(update={"seed": seed}))["step_time_mean_us"][0]
        assert other == pytest.approx(scope.metrics["step_time_us.mean"], rel=0.02), seed


def test_scan_s_gain_and_the_calibrated_config_give_the_same_fix_the_same_step(run, tmp_path):
    """Scan's fit and calibrate's are one model: each fix scan prints (input workers for the batches the loop loads
    itself; device graphs for the host's dispatch, about as long as the device's work) run on the config calibrate
    writes gives scan's predicted step within 2%, inside the interval scan prints."""
    capture = REAL / "resnet50_pt18_workers0.json.gz"
    report = json.loads(run("scan", capture, "--format", "json", "--fail-on", "never").stdout)
    found = {f["rule_id"]: f for f in report["traces"][0]["findings"]}
    calibrated = calibrate(str(capture)).config.model_dump(mode="json", exclude_none=True)
    for rule, changes in (("PT002", {"workload.input_workers": 2}), ("PT001", {"device_graphs": True})):
        gain = found[rule]["gain"]
        assert gain["kind"] == "predicted" and found[rule]["fix"]["changes"] == changes
        low, high = gain["step_time_us_after_interval"]
        assert low < gain["step_time_us_after"] < high
        assert f"≈ {gain['step_time_us_after'] / 1e3:.0f} ms" in gain["text"]
        document = json.loads(json.dumps(calibrated))
        for key, value in changes.items():
            section, _, name = key.rpartition(".")
            document[section or "knobs"][name] = value
        step = evaluate(validate_config(document, "the fix"))["step_time_mean_us"][0]
        assert step == pytest.approx(gain["step_time_us_after"], rel=0.02), rule
        assert low <= step <= high


def test_a_sweep_tries_only_the_settings_it_is_given(run):
    """On the 0-worker ResNet-50 fit, every setting the fit judges finds device graphs and pinned memory (tune's own
    answer, ×1.45); limited to the setting a finding's evidence names (input workers), it finds nothing more."""
    trace = load_trace(str(REAL / "resnet50_pt18_workers0.json.gz"))
    _, scope = analyse_trace(trace, [])
    fitted = TraceFit(scope)
    assert fitted.config is not None and fitted.run is not None
    every = best_settings(fitted.config, fitted.run)
    assert every is not None and every[0] == {"device_graphs": True, "pin_memory": True}
    assert every[1].speedup == pytest.approx(1.45, abs=0.02)
    workers = best_settings(fitted.config, fitted.run, frozenset({"workload.input_workers"}))
    assert workers is None or set(workers[0]) == {"workload.input_workers"}


@pytest.mark.parametrize(
    ("capture", "step"),
    [("resnet50_pt18_workers0", "154.687 ms → ≈ 107 ms"), ("resnet50_pt18_workers4", "124.524 ms → ≈ 108 ms")],
)
def test_scan_names_tune_s_best_setting_where_the_trace_has_evidence_for_it(run, capture, step):
    """On the ResNet-50 captures the calibrated config's best setting is device graphs with pinned memory (×1.45 with
    no workers, ×1.15 with 4, above graphs alone): PT001's dispatch evidences the graphs, the fit's pageable input
    copies the pinning, so scan's better line names both, at the step the calibrated config gives them, within 2%.
    With 4 workers the device idles 10.3% of the step and its input copies, with nothing computing beside them, take
    2.6% more: a gain of 13% is within what the trace shows overlapping those copies could give back."""
    capture = REAL / f"{capture}.json.gz"
    (trace,) = json.loads(run("scan", capture, "--format", "json", "--fail-on", "never").stdout)["traces"]
    better = trace["beyond"]
    assert better["text"].startswith(f"device graphs off → on, pinned memory off → on: step {step}")
    document = calibrate(str(capture)).config.model_dump(mode="json", exclude_none=True)
    assert document["knobs"]["pin_memory"] is False  # read from the trace: its input copies are pageable
    document["knobs"] |= {"device_graphs": True, "pin_memory": True}
    step = evaluate(validate_config(document, "the better setting"))["step_time_mean_us"][0]
    assert step == pytest.approx(better["step_time_us_after"], rel=0.02)
    assert better["speedup"] > max(f["gain"]["speedup"] or 0 for f in trace["findings"]) * 1.02


@pytest.mark.parametrize(
    "capture",
    ["ddp_v100_rank1.json.gz", "jax08_mi300x_attention_opbyop.trace.json.gz",
     "sglang_mi300x_qwen3_8b_decode_window.json.gz"],
)  # fmt: skip
def test_scan_names_no_setting_that_no_finding_has_evidence_for(run, capture):
    """Device graphs for a host whose dispatch is well under its device's work (DDP on V100), for JAX, or for an
    engine that replays graphs already: none is named, however much the fit's emulator would gain from it."""
    document = json.loads(run("scan", REAL / capture, "--format", "json", "--fail-on", "never").stdout)
    assert [t["beyond"] for t in document["traces"]] == [None]
