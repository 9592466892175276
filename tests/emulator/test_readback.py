"""Results copied back to the host after each step: into pageable memory the host waits for the step and a slow
copy; into a pinned buffer the copy runs at the link's bandwidth and the host goes on."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import REPO

from perftool import api
from perftool.emulator.config import load_config
from perftool.emulator.evaluate import evaluate
from perftool.emulator.full_run import run
from perftool.emulator.plan import build_plan
from perftool.emulator.space import default_space
from perftool.emulator.trace_writer import write_trace

READBACK = 64 << 20  # bytes a step: a 16M-float result read back
PINNED = {"pin_readback": np.array([False, True])}


def config(*overrides: str):
    """The healthy GPU sample (device-bound: the host runs ahead of it) reading ``READBACK`` bytes back a step."""
    sample = REPO / "sample_traces" / "gpu" / "healthy.yaml"
    return load_config(sample, [f"workload.readback_per_step={READBACK}", *overrides])


def test_a_read_back_costs_its_bytes_at_the_bandwidth_of_its_memory():
    """Pinned, the copy adds its time at the link's bandwidth to a device-bound step; pageable, it runs at the
    pageable bandwidth and the host waits for it, so the step loses the pinned copy's time and more."""
    profile = config().profile
    without = evaluate(config("workload.readback_per_step=0"), PINNED)["step_time_mean_us"]
    steps = evaluate(config(), PINNED)["step_time_mean_us"]
    pinned_copy, pageable_copy = READBACK * 1e6 / profile.d2h_bandwidth, READBACK * 1e6 / profile.pageable_d2h_bandwidth
    assert steps[1] - without[1] == pytest.approx(pinned_copy, rel=0.01)
    assert steps[0] - steps[1] > pageable_copy - pinned_copy  # the host's own time is exposed besides
    breakdown = run(config("knobs.pin_readback=false")).breakdown()
    assert breakdown["readback_copy"] == pytest.approx(pageable_copy, rel=1e-6)
    assert run(config()).breakdown()["readback_copy"] == pytest.approx(pinned_copy, rel=1e-6)


def test_the_host_waits_for_a_read_back_into_pageable_memory_only():
    """The host's next step starts once the previous step's read-back is in where the memory is pageable; pinned, it
    runs a step ahead of the device."""
    for pinned, waits in ((False, True), (True, False)):
        recorded = run(config(f"knobs.pin_readback={str(pinned).lower()}")).timeline.recorded
        dev_end, wait_from = recorded["dev_end"][:-1, 0], recorded["wait_from"][1:, 0]
        assert bool(np.all(wait_from >= dev_end)) is waits


def test_an_emulated_read_back_is_written_as_the_profiler_writes_one_and_scan_predicts_pinning_it(tmp_path):
    """The trace holds each step's copy under the family's name with its bytes, and the host's copy call waiting
    for it; scan's blocking-copies finding predicts a pinned read-back's gain, the emulator's own figure (the inputs
    are pinned already)."""
    path = tmp_path / "readback.trace.json.gz"
    pageable = config("knobs.pin_readback=false", "workload.steps=32")
    write_trace(run(pageable), str(path))
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    copies = [e for e in events if e.get("name") == "Memcpy DtoH (Device -> Pageable)"]
    assert len(copies) == 32 and all(e["args"]["bytes"] == READBACK for e in copies)
    calls = [e for e in events if e.get("name") == "cudaMemcpyAsync"]
    assert len(calls) == 32  # each step's read-back; the input copies, pinned, block nothing
    (finding,) = [f for f in api.scan(path).traces[0].findings if f.rule_id == "PT009"]
    assert finding.fix.changes == {"pin_readback": True} and finding.gain.kind == "predicted"
    figures = evaluate(pageable, PINNED)["step_time_mean_us"]
    assert finding.gain.step_time_us_before == pytest.approx(figures[0], rel=0.01)
    assert finding.gain.step_time_us_after == pytest.approx(figures[1], rel=0.01)


@pytest.mark.parametrize(
    ("knobs", "inputs_block", "read_back_blocks"),
    [
        (["knobs.pin_readback=false"], False, True),  # pinned inputs run beside compute; the read-back stalls
        (["knobs.pin_memory=false"], True, False),  # pageable inputs block; the pinned read-back does not
        (["knobs.pin_readback=false", "workload.readback_per_step=0"], False, False),  # nothing to read back
    ],
)
def test_inputs_and_the_read_back_are_pinned_apart(knobs, inputs_block, read_back_blocks):
    """Pinning the inputs and pinning the read-back are two settings: each makes its own copies block (the host
    waiting for the step only where the read-back does), and the sweep tries each where it is off (the read-back's
    where there is one)."""
    plan = build_plan(config(*knobs))
    assert bool(plan.blocking_copy[0]) is inputs_block and bool(plan.overlap[0] > 0) is not inputs_block
    assert bool(plan.blocking_readback[0]) is read_back_blocks and bool(plan.blocking[0]) is read_back_blocks
    swept = default_space(config(*knobs))
    assert ("pin_memory" in swept) is inputs_block and ("pin_readback" in swept) is read_back_blocks


@pytest.mark.parametrize(
    ("knobs", "changes"),
    [
        (["knobs.pin_memory=false", "workload.readback_per_step=0"], {"pin_memory": True}),
        (["knobs.pin_memory=false", "knobs.pin_readback=false"], {"pin_memory": True, "pin_readback": True}),
    ],
)
def test_the_blocking_copies_fix_pins_the_copies_that_block(tmp_path, knobs, changes):
    """PT009 pins what its trace shows pageable: the inputs alone where nothing is read back, both where both
    are (a read-back alone: above)."""
    path = tmp_path / "pageable.trace.json.gz"
    write_trace(run(config(*knobs, "workload.steps=32")), str(path))
    (finding,) = [f for f in api.scan(path).traces[0].findings if f.rule_id == "PT009"]
    assert finding.fix.changes == changes
