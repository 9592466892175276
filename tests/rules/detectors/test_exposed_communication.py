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
