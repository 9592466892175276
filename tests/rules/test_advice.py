"""Advice that holds: a fix that names knob values runs on the device and helps, in the emulator, before it is
printed; a fix that would not is replaced by one that does, or held back and said so."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml
from builders import eager_steps
from conftest import REPO, scanned

from perftool.emulator.config import validate_config
from perftool.emulator.evaluate import evaluate
from perftool.predict.gains import emulated
from perftool.rules.detectors.base import Detection
from perftool.rules.findings import Gain
from perftool.rules.prediction import upper_bound
from perftool.tune.calibration import calibrate

SAMPLES = REPO / "sample_traces"


@pytest.mark.parametrize(
    "sample",
    sorted([*SAMPLES.glob("*/*.trace.json.gz"), *SAMPLES.glob("jobs/*/rank0.trace.json.gz")]),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_fix_with_knob_values_is_predicted_to_help(run, sample):
    document = json.loads(run("scan", sample, "--format", "json", "--fail-on", "never").stdout)
    for finding in document["traces"][0]["findings"]:
        if finding["fix"]["changes"]:
            assert finding["gain"]["kind"] == "predicted", finding["rule_id"]
            assert finding["gain"]["speedup"] >= 1.005, (finding["rule_id"], finding["gain"]["text"])


def test_optimizer_state_that_cannot_stay_on_the_device_is_streamed_less_often(run, tmp_path):
    """Keeping 880 MB of optimizer state on the IPU does not fit beside the model: the fix accumulates instead."""
    document = yaml.safe_load((SAMPLES / "ipu" / "offload_stream_copies.yaml").read_text())
    document["workload"]["optimizer_state"] = "880MB"
    config, trace = tmp_path / "big_state.yaml", tmp_path / "big_state.json"
    config.write_text(yaml.safe_dump(document))
    assert run("emulate", config, "--set", "offload_optimizer=false").exit_code == 2  # out of memory
    run("emulate", config, "--trace", trace)
    found = json.loads(run("scan", trace, "--format", "json", "--fail-on", "never").stdout)["traces"][0]["findings"]
    (offload,) = [f for f in found if f["rule_id"] == "PT005"]
    assert offload["fix"]["changes"] == {"gradient_accumulation": 64}
    assert "does not fit" in offload["fix"]["text"] and "changes the training" in offload["fix"]["text"]
    assert "offload_weight_update_variables=False" not in offload["fix"]["text"]
    assert offload["gain"]["kind"] == "predicted" and offload["gain"]["speedup"] > 2


def _scope(*gains: Gain | None):
    """A scope whose run predicts ``gains`` for the fixes tried, in order."""
    answers = iter(gains)
    return SimpleNamespace(run=SimpleNamespace(what_if=lambda changes: next(answers), ahead=lambda changes: None))


def _gain(speedup: float | None) -> Gain:
    return Gain(kind="predicted", text=f"×{speedup}", speedup=speedup)


def test_the_fix_that_helps_most_is_the_one_printed():
    first = Detection(1.0, {}, [], variant="a", changes={"loop_size": 32})
    first.alternatives = [first.instead("b", {"loop_size": 50}, loop=50), first.instead("c", {"loop_size": 64})]
    chosen, gain, unproven = emulated(_scope(_gain(0.99), _gain(1.4), _gain(1.2)), first, upper_bound(10.0, 0.1))
    assert (chosen.variant, chosen.changes, chosen.values, gain.speedup, unproven) == (
        "b",
        {"loop_size": 50},
        {"loop": 50},
        1.4,
        None,
    )


def test_no_fix_that_helps_is_held_back_and_says_why():
    first = Detection(1.0, {}, [], variant="a", changes={"loop_size": 32})
    chosen, gain, unproven = emulated(_scope(_gain(None)), first, upper_bound(10.0, 0.1))
    assert chosen is first and gain.kind == "upper_bound"
    assert unproven is not None and unproven.startswith("no fix with knob values helps in the emulator")


def _finding(run, tmp_path, rule_id: str, workload: dict, knobs: dict | None = None) -> dict:
    """The one ``rule_id`` finding of a scan of the NPU sample's healthy job emulated with these changes."""
    document = yaml.safe_load((SAMPLES / "npu" / "healthy.yaml").read_text())
    document["workload"] |= workload
    document["knobs"] |= knobs or {}
    config, trace = tmp_path / "job.yaml", tmp_path / "job.json"
    config.write_text(yaml.safe_dump(document))
    run("emulate", config, "--trace", trace)
    found = json.loads(run("scan", trace, "--format", "json", "--fail-on", "never").stdout)["traces"][0]["findings"]
    (finding,) = [f for f in found if f["rule_id"] == rule_id]
    return finding


def test_a_short_last_batch_under_loop_offload_is_dropped_when_padding_would_not_help(run, tmp_path):
    """256 full batches and 5 samples over, NPU_LOOP_SIZE=32: padding makes 257 steps, which 32 does not divide
    (a remainder loop compiles instead) and no loop size above 1 does; dropping the batch is what helps."""
    recompile = _finding(run, tmp_path, "PT003", {"last_batch_samples": 5})
    assert recompile["values"]["cause"].startswith("the short last batch")
    assert recompile["fix"]["changes"] == {"last_batch": "drop"}
    assert "changes the training" in recompile["fix"]["text"] and recompile["gain"]["speedup"] > 1.005


@pytest.mark.parametrize(
    ("last_batch", "cause", "changes"),
    [
        ("partial", "the short last batch", {"last_batch": "pad", "loop_size": 25}),
        ("pad", "a remainder loop", {"loop_size": 25}),
    ],
    ids=["a short last batch", "a padded one"],
)
def test_a_short_last_batch_is_padded_with_a_loop_dividing_the_padded_epoch(run, tmp_path, last_batch, cause, changes):
    """224 full batches and 5 samples over, NPU_LOOP_SIZE=32: 32 divides 224, not the 225 steps padding makes; 25,
    the largest loop under 32 dividing 225, does. Unpadded, the loop dividing the epoch would be 28."""
    recompile = _finding(run, tmp_path, "PT003", {"steps": 224, "last_batch_samples": 5}, {"last_batch": last_batch})
    assert recompile["values"]["cause"].startswith(cause)
    assert recompile["values"]["loop_size"] == (28 if last_batch == "partial" else 25)
    assert recompile["fix"]["changes"] == changes and "NPU_LOOP_SIZE=25" in recompile["fix"]["text"]
    assert recompile["gain"]["speedup"] > 1.05


def test_starved_workers_get_more_workers_not_deeper_prefetching(run, tmp_path):
    """Two workers feed a device that idles 84% of the time: the workers must keep up with the step the device
    needs without waiting (9 ms), not with the stalled one (60 ms); more workers, not prefetch, is the fix."""
    input_bound = _finding(run, tmp_path, "PT002", {"input_workers": 2, "preprocess_us_per_sample": 2000})
    assert input_bound["values"]["demand_ms"] < input_bound["values"]["step_ms"] / 5
    assert input_bound["fix"]["changes"] == {"workload.input_workers": 16}
    assert "16 workers (now 2)" in input_bound["fix"]["text"] and input_bound["gain"]["speedup"] > 5


@pytest.mark.parametrize("overlap, helps", [(True, True), (False, False)])
def test_a_bucket_size_for_ddp_is_emulated_before_it_is_printed(run, tmp_path, overlap, helps):
    """One 500 MB bucket holds all 100 MB of gradients, so the all-reduce waits for the whole backward pass: six
    buckets a step overlap it. Where nothing is reduced during backward, smaller buckets only add latency, and
    the finding is held at info and says the emulator found no fix with knob values that helps."""
    document = yaml.safe_load((SAMPLES / "jobs" / "gpu_ddp_straggler" / "job.yaml").read_text())
    document["replicas"] = {"count": 4, "bucket": "500MB", "bus_bandwidth": 40, "overlap": overlap}
    config, traces = tmp_path / "one_bucket.yaml", tmp_path / "ranks"
    config.write_text(yaml.safe_dump(document))
    run("emulate", config, "--trace", traces)
    scanned = run("scan", traces / "rank0.trace.json.gz", "--format", "json", "--fail-on", "never")
    (exposed,) = [f for f in json.loads(scanned.stdout)["traces"][0]["findings"] if f["rule_id"] == "PT011"]
    assert exposed["fix"]["changes"] == {"replicas.bucket": 17_000_000} and "bucket_cap_mb=17" in exposed["fix"]["text"]
    if helps:
        assert exposed["gain"]["kind"] == "predicted" and exposed["gain"]["speedup"] > 1.1
        assert "gradient bucket 500 MB → 17 MB" in exposed["gain"]["text"]
    else:
        assert exposed["severity"] == "info" and exposed["gain"]["kind"] == "upper_bound"
        capped = "no fix with knob values helps in the emulator: gradient bucket 500 MB → 17 MB"
        assert exposed["capped"].startswith(capped)


@pytest.mark.parametrize(("op_us", "graphs"), [(150, False), (170, True)])
def test_device_graphs_are_advised_where_the_host_s_dispatch_paces_the_step(run, write_trace, op_us, graphs):
    """After 2 ms of Python that runs no op, the host dispatches 20 ops against 4 ms of device work a step: at
    3.0 ms (0.75 of the device's work) the host's time is not what a graph removes, and PT001 names the host work;
    at 3.4 ms (0.85, past PT001's dispatch_paces of 0.8) dispatch sets the pace, and PT001's fix is device graphs,
    predicted on the fit, with the two figures that show it."""
    _, found = scanned(run, str(write_trace(eager_steps(op_us=op_us, python_us=2000))))
    fix = found["PT001"]["fix"]
    assert fix["changes"] == ({"device_graphs": True} if graphs else {})
    if graphs:
        assert "which takes 3.400 ms a step against 4.000 ms of device work" in fix["text"]
        assert found["PT001"]["gain"]["kind"] == "predicted"
    else:
        assert "Device graphs alone do not remove it" in fix["text"]


def test_scan_s_graphs_fix_and_the_calibrated_config_give_the_same_step(run, write_trace):
    """One model behind scan and tune: the step scan predicts for device graphs is the calibrated config's with
    graphs on, within 2%; and the fit keeps the host's Python that runs no op (2 ms) as Python, which graphs leave,
    so the graphs' step is the device's work (4 ms), not the host's Python alone."""
    path = str(write_trace(eager_steps(op_us=170, python_us=2000)))
    _, found = scanned(run, path)
    after = found["PT001"]["gain"]["step_time_us_after"]
    document = calibrate(path).config.model_dump(mode="json", exclude_none=True)
    assert document["device_overrides"]["python_us"] >= 2000  # all of it (with the untraced gaps the fit bridges)
    document["knobs"]["device_graphs"] = True
    step = evaluate(validate_config(document, "the fix"))["step_time_mean_us"][0]
    assert step == pytest.approx(after, rel=0.02) and step == pytest.approx(4000, rel=0.05)
