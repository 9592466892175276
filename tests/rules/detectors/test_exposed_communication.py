"""PT011's evidence: the collectives its cost is made of (exposed in the window), never others the trace holds."""

from __future__ import annotations

import json

from builders import NCCL, STEP_US, kineto_job, span

from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import scan_trace
from perftool.rules.catalog import load_catalog

STEPS = 4  # fewer exposed all-reduces than the five occurrences a finding lists


def test_only_collectives_exposed_in_the_window_are_evidence(tmp_path):
    """A long all-reduce after the last step and one hidden behind a step's kernel cost nothing: the evidence is the
    steps' own exposed all-reduces, however long the others are."""
    trace = kineto_job(STEPS)
    trace["traceEvents"] += [
        span(NCCL, 0, 13, STEPS * STEP_US + 100, 5000, "kernel"),  # outside every step
        span(NCCL, 0, 14, 3 * STEP_US + 100, 300, "kernel"),  # under step 3's kernel (0-600 µs)
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    (finding,) = [f for f in scan_trace(load_trace(str(path)), load_catalog()).findings if f.rule_id == "PT011"]
    evidence = [(e.ts_us, e.dur_us) for e in finding.evidence]
    assert len(evidence) == STEPS  # each step's, and no more
    assert all(dur == 300 and (ts - 500) % STEP_US == 0 for ts, dur in evidence)  # each step's all-reduce at 500 µs


def test_a_device_idle_most_of_the_step_is_told_what_its_idle_time_is(tmp_path):
    """Steps of 1 ms: 300 µs of compute, a 300 µs all-reduce alone, then 400 µs idle, the host in an op for the first
    300 µs of it. The fix says what to remove first by the idle line's own causes, not by findings the scan may not
    have: host Python/dispatch 30% of the step, unexplained 10%."""
    events = kineto_job(STEPS)["traceEvents"][:4]
    for i in range(STEPS):
        t = i * STEP_US
        events += [
            span(f"ProfilerStep#{i}", 100, 1, t, STEP_US - 1, "user_annotation"),
            span("sgemm_128x64", 0, 7, t, 300, "kernel"),
            span(NCCL, 0, 13, t + 300, 300, "kernel"),
            span("aten::nonzero", 100, 1, t + 600, 300, "cpu_op"),
        ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (finding,) = [f for f in scan_trace(load_trace(str(path)), load_catalog()).findings if f.rule_id == "PT011"]
    assert finding.values["idle_causes"] == "host Python/dispatch 30%, unexplained 10%"
    assert "remove that idle time first (host Python/dispatch 30%, unexplained 10%); then" in finding.fix.text
