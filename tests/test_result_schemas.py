"""Every command's JSON has a published schema, and passing documents through their models changes nothing."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import REPO

from perftool.analysis import compute_metrics
from perftool.report import info_json
from perftool.traces import load_trace

SAMPLES = REPO / "sample_traces"
COMMANDS = {  # schema name -> a command writing that document for a bundled sample
    "findings": ("scan", SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz", "--format", "json"),
    "info": ("info", SAMPLES / "gpu_training_kineto.pt.trace.json.gz", "--format", "json"),
    "emulate-result": ("emulate", SAMPLES / "npu" / "healthy.yaml", "--format", "json"),
    "tune-result": ("tune", REPO / "examples" / "tune" / "npu.yaml", "--evaluations", "40", "--format", "json"),
    "tune-rows": ("tune", REPO / "examples" / "tune" / "npu.yaml", "--evaluations", "40", "--results", "{out}"),
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


def test_the_info_model_keeps_every_key_and_value():
    trace = load_trace(SAMPLES / "gpu_training_kineto.pt.trace.json.gz")
    metrics = compute_metrics(trace)
    built = json.loads(json.dumps(info_json.info_document(trace, metrics)))
    assert json.loads(info_json.render(trace, metrics)) == built


def test_a_document_that_does_not_fit_its_model_is_refused():
    from pydantic import ValidationError

    from perftool.results import GateReport

    with pytest.raises(ValidationError):
        GateReport.model_validate(
            {
                "schema": "perftool.gate/1",
                "status": "maybe",
                "baseline": None,
                "candidate": "c",
                "mismatches": [],
                "counts": {},
                "checks": [],
            }
        )
