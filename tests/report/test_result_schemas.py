"""Every command's JSON has a published schema, and passing documents through their models changes nothing."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import REPO

from perftool.analysis import compute_metrics
from perftool.pipeline.read import load_trace
from perftool.roofline.figures import roofline

SAMPLES = REPO / "sample_traces"
COMMANDS = {  # schema name -> a command writing that document for a bundled sample
    "findings": ("scan", SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz", "--format", "json"),
    "info": ("info", SAMPLES / "gpu_training_kineto.pt.trace.json.gz", "--format", "json"),
    "job-info": ("info", SAMPLES / "jobs" / "npu_exposed_allreduce", "--format", "json"),
    "emulate-result": ("emulate", SAMPLES / "npu" / "healthy.yaml", "--format", "json"),
    "tune-result": ("tune", REPO / "examples" / "tune" / "npu.yaml", "--evaluations", "40", "--format", "json"),
    "calibrate-result": ("calibrate", REPO / "tests" / "data" / "vocab" / "zero_workers.json.gz", "--format", "json"),
    "tune-rows": ("tune", REPO / "examples" / "tune" / "npu.yaml", "--evaluations", "40", "--results", "{out}"),
    "diff-result": (
        "diff",
        REPO / "tests" / "data" / "vocab" / "diff_kineto_before.json.gz",
        REPO / "tests" / "data" / "vocab" / "diff_kineto_after.json.gz",
        "--format",
        "json",
    ),
    "metrics": ("metrics", "--format", "json"),
    "knobs": ("knobs", "--format", "json"),
    "rules": ("rules", "list", "--format", "json"),
    "gate-result": (
        "gate",
        SAMPLES / "baselines" / "npu__healthy.findings.json",
        SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz",
        "--format",
        "json",
    ),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_each_document_validates_against_its_published_schema(run, tmp_path, name):
    schema = json.loads(run("schema", name).stdout)
    out = tmp_path / "out.json"  # for a document written to a file of its own
    result = run(*(str(arg).replace("{out}", str(out)) for arg in COMMANDS[name]))
    document = json.loads(out.read_text() if "{out}" in COMMANDS[name] else result.stdout)
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document["schema"].startswith("perftool.")


def test_each_result_reads_back_from_the_json_written_as_it_was():
    """Every command's result is its model, made by the code that computes it; what --format json writes is that
    model, and reading it back gives the result again: info and emulate, tune's answer, gate and diff."""
    from perftool import api
    from perftool.pipeline.info import info_report
    from perftool.report import emulate_json, info_json, tune_json
    from perftool.report.views import EmulateView, InfoView, TuneView
    from perftool.tune.documents import answer

    trace = load_trace(SAMPLES / "gpu_training_kineto.pt.trace.json.gz")
    metrics = compute_metrics(trace)
    roof = roofline(trace)
    run_ = api.emulate(SAMPLES / "npu" / "healthy.yaml")
    swept = api.tune(REPO / "examples" / "tune" / "npu.yaml", evaluations=40)
    verdict = api.gate(SAMPLES / "baselines" / "npu__healthy.findings.json", SAMPLES / "npu" / "healthy.trace.json.gz")
    change = api.diff(SAMPLES / "npu" / "healthy.trace.json.gz", SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz")
    results = [
        (info_report(trace, metrics, roof), info_json.render(InfoView(trace, metrics, roof))),
        (run_.report(), emulate_json.render(EmulateView(run_, None))),
        (answer(swept, "npu.yaml"), tune_json.render(TuneView(swept, "npu.yaml"))),
        (verdict, verdict.json_text()),
        (change, change.json_text()),
    ]
    for result, written in results:
        assert type(result).model_validate_json(written) == result, type(result).__name__
    assert verdict.checks and change.diffs[0].rows and answer(swept, "npu.yaml").top and run_.report().prediction


@pytest.mark.parametrize("family", ["gpu", "hpu", "ipu", "npu"])
def test_scans_of_the_bundled_samples_keep_their_committed_results(family):
    """The metrics, step times and findings of each emulator sample are what the committed baseline holds."""
    from perftool import api

    baseline = json.loads((SAMPLES / "baselines" / f"{family}__healthy.findings.json").read_text())["traces"][0]
    now = json.loads(api.scan(SAMPLES / family / "healthy.trace.json.gz").model_dump_json(by_alias=True))["traces"][0]
    assert now["metrics"] == baseline["metrics"] and now["step_durations_us"] == baseline["step_durations_us"]
    assert [(f["rule_id"], f["severity"], f["impact"]) for f in now["findings"]] == [
        (f["rule_id"], f["severity"], f["impact"]) for f in baseline["findings"]
    ]


def test_a_document_that_does_not_fit_its_model_is_refused_and_a_gate_s_status_is_its_checks():
    from pydantic import ValidationError

    from perftool.gate.verdict import GateResult

    check = {"id": "timing:step_time", "name": "step time", "verdict": "fail", "baseline": 1, "candidate": 2,
             "change": "+100%", "limit": "+5%"}  # fmt: skip
    document = {"schema": "perftool.gate/1", "status": "pass", "baseline": None, "candidate": "c", "checks": [check]}
    read = GateResult.model_validate(document)
    assert read.status == "fail" and read.failed and read.counts["fail"] == 1 and read.checks[0].baseline == 1.0
    with pytest.raises(ValidationError):
        GateResult.model_validate(document | {"checks": [check | {"verdict": "maybe"}]})
    with pytest.raises(ValidationError):
        GateResult.model_validate(document | {"schema": "perftool.gate/2"})
