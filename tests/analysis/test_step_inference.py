"""Steps inferred where a trace has no step markers, and warm-up told by its look, not its position."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from builders import build, graph_captured
from conftest import DATA, REPO, scanned

from perftool.analysis import detect_steps
from perftool.pipeline.read import load_trace

REAL = DATA / "real"


def _without_markers(document: dict | list) -> dict:
    events = document["traceEvents"] if isinstance(document, dict) else document
    kept = [e for e in events if not str(e.get("name", "")).startswith("ProfilerStep#")]
    return (document | {"traceEvents": kept}) if isinstance(document, dict) else {"traceEvents": kept}


@pytest.mark.slow
def test_a_real_capture_without_its_markers_gets_its_steps_back(write_trace):
    """ResNet-50 (PyTorch 1.8) with its ProfilerStep markers removed: each step starts at the loop's fetch of its
    batch, so the inferred steps are the marked ones (the last, whose fetch the capture cuts, left out)."""
    path = REAL / "resnet50_pt18_workers0.json.gz"
    marked = detect_steps(load_trace(str(path)))
    inferred = detect_steps(load_trace(str(write_trace(_without_markers(json.loads(gzip.open(path).read()))))))
    assert marked.inferred is None and inferred.inferred is not None
    assert "enumerate(DataLoader)" in inferred.inferred
    assert inferred.count == marked.count - 1
    assert np.allclose(inferred.end - inferred.start, (marked.end - marked.start)[:-1], rtol=0.01)


def test_graph_launches_without_markers_are_steps_and_the_report_says_they_were_inferred(run, write_trace):
    summary, _ = scanned(run, str(write_trace(_without_markers(graph_captured(pieces=1, python_us=300.0)))))
    assert summary["steps"] >= 6
    assert any("steps inferred from the host's repeating calls" in caveat for caveat in summary["caveats"])
    assert not any("findings stay at info" in caveat for caveat in summary["caveats"])


def test_ascend_model_executions_are_steps(write_trace):
    """torch_npu in graph mode: one ``aclmdlExecute`` a step on the CANN thread, between Python the loop runs."""
    case = {
        "vocabulary": "ascend",
        "markers": False,
        "steps": 6,
        "period": 10_000,
        "events": [
            {"name": "train_step", "track": "python", "ts": 10, "dur": 2_000},
            {"name": "AscendCL@aclmdlExecute", "track": "cann", "ts": 2_100, "dur": 7_800},
            {"name": "MatMulV2", "track": "npu", "ts": 2_200, "dur": 7_500},
        ],
    }
    steps = detect_steps(load_trace(str(write_trace(build(case)))))
    assert steps.inferred is not None and "aclmdlExecute" in steps.inferred
    assert steps.count == 6
    assert np.allclose(np.diff(steps.start), 10_000.0)


def test_a_model_of_identical_layers_repeats_by_step_not_by_layer(write_trace):
    """Without markers, 24 identical layers repeat too (95% of the calls a layer apart agree), but less exactly than
    the step (all of them)."""
    step = ["embedding", *[f"layer_{op}" for _ in range(24) for op in range(10)], "loss", "Optimizer.step#AdamW.step"]
    events = [{"name": name, "track": "host", "ts": 10 * i, "dur": 5, "cat": "cpu_op"} for i, name in enumerate(step)]
    case = {"vocabulary": "kineto", "markers": False, "steps": 8, "period": 10 * len(step), "events": events}
    steps = detect_steps(load_trace(str(write_trace(build(case)))))
    assert steps.inferred == f"a repeated sequence of {len(step):,} host calls from embedding"
    assert steps.count == 8 and np.allclose(steps.end - steps.start, 10 * len(step), rtol=0.01)


@pytest.mark.parametrize("name", ["alexnet_benchmark_startup", "mtia_inference"])
def test_captures_with_nothing_repeating_after_start_up_infer_no_steps(name):
    """A capture that is all start-up (the AlexNet benchmark) or an inference service with no loop to repeat."""
    steps = detect_steps(load_trace(str(REAL / f"{name}.json.gz")))
    assert steps.count == 0 and steps.inferred is None


def test_a_capture_without_steps_says_its_idle_stretches_over_the_trace(run):
    """No steps to divide by: the host-bound finding counts its idle stretches over the trace and gives their mean
    length (73.567 ms lost in 33 stretches of the AlexNet capture's tail: 2.229 ms each), not 'per step'."""
    _, findings = scanned(run, str(REAL / "alexnet_benchmark_startup.json.gz"))
    host = findings["PT001"]
    assert host["impact"]["lost_us"] == pytest.approx(73_567) and host["impact"]["per_step_us"] is None
    assert "(33 idle stretches of 2.229 ms on average; 0% of it in short gaps" in host["message"]
    assert host["values"]["stretches_per_step"] == 33 and "per step" not in host["message"]


def test_idle_stretches_rarer_than_steps_are_counted_over_the_steps(run):
    """The IPU sample idles 3 times in its 255 steady steps (once per device call of 64 steps, by the loop that
    returns to Python): the finding says so, not "0.01176 idle stretches per step"."""
    _, findings = scanned(run, str(REPO / "sample_traces" / "ipu" / "healthy.trace.json.gz"))
    host = findings["PT001"]
    assert host["values"]["stretches_per_step"] == pytest.approx(3 / 255)
    assert (
        "(3 idle stretches of 1.800 ms each in 255 steps, against 888.7 µs of device work per step;" in host["message"]
    )


def test_a_lone_step_of_first_calls_stays_at_info(run):
    """The MI250 toy's one step spends most of its idle in one 6.6 ms launch that loads code: nothing recurs."""
    _, findings = scanned(run, str(REAL / "rocm_mi250_minitoy.json.gz"))
    assert {finding["severity"] for finding in findings.values()} == {"info"}
    assert findings["PT001"]["capped"] == "1 steady step, 3 needed"
