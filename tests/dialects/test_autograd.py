"""PyTorch's autograd profiler before Kineto, as its ``export_chrome_trace`` writes a ``use_cuda`` profile: a bare
array without categories, ops on process ``CPU functions``, each op's device time on process ``CUDA functions`` (the
device's index as its thread) under the op's own name, nested as the ops nest, and a ``cpu_to_cuda`` flow from each op
to its device span."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perftool.analysis.family import device_family, device_name, framework
from perftool.analysis.launches import launch_rows
from perftool.analysis.metrics import compute_metrics
from perftool.analysis.steps import detect_steps
from perftool.pipeline.read import load_trace
from perftool.trace.model import Kind, Phase, Role

STEPS = 6
STEP_US = 2_000.0


def _op(events: list, flow: int, name: str, ts: float, dur: float, device_ts: float, device_dur: float) -> None:
    """An op as the profiler writes it: its span on the host thread, its flow to the device and its device span."""
    events += [
        {"name": name, "ph": "X", "ts": ts, "dur": dur, "tid": 1, "pid": "CPU functions", "args": {}},
        {"name": name, "ph": "s", "ts": ts, "tid": 1, "pid": "CPU functions", "id": flow, "cat": "cpu_to_cuda",
         "args": {}},
        {"name": name, "ph": "f", "ts": device_ts, "tid": 0, "pid": "CUDA functions", "id": flow, "cat": "cpu_to_cuda",
         "args": {}},
        {"name": name, "ph": "X", "ts": device_ts, "dur": device_dur, "tid": 0, "pid": "CUDA functions", "args": {}},
    ]  # fmt: skip


def _profile(cuda: bool = True, ops: str = "aten::") -> list:
    """A training loop's steps: each calls conv2d, which calls convolution (their device spans nested as the calls
    are), then relu; then the host prepares the next batch for 1.5 ms with nothing traced. Ops are named with their
    namespace (``aten::conv2d``, PyTorch 1.6 and 1.7) or without (``conv2d``, before)."""
    events: list = []
    for step in range(STEPS):
        t = step * STEP_US
        _op(events, 3 * step, f"{ops}conv2d", t, 100, t + 50, 300)
        _op(events, 3 * step + 1, f"{ops}convolution", t + 10, 80, t + 60, 280)
        _op(events, 3 * step + 2, f"{ops}relu", t + 120, 20, t + 360, 40)
    if not cuda:
        events = [e for e in events if e["pid"] == "CPU functions" and e["ph"] == "X"]
    return events


@pytest.mark.parametrize("order", ["as written", "reversed"])
@pytest.mark.parametrize("ops", ["aten::", ""], ids=["aten names", "bare names"])
def test_a_legacy_autograd_profile_has_a_host_and_a_device(write_trace, ops, order):
    """Whatever the ops' names and the events' order in the file (a trace's need not be in time order)."""
    events = _profile(ops=ops)
    trace = load_trace(write_trace(events if order == "as written" else events[::-1]))
    assert trace.dialect == "autograd" and framework(trace) == "pytorch"
    roles = {t.pid: t.role for t in trace.tracks}
    assert roles == {"CPU functions": Role.HOST, "CUDA functions": Role.DEVICE}
    assert device_family(trace) == "gpu" and device_name(trace) == "CUDA functions"
    device = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)  # not the flows' ends
    outer = device & (trace.name == trace.names.index(f"{ops}conv2d"))
    assert set(trace.kind[outer].tolist()) == {Kind.ANNOTATION}  # drawn over the op it called
    assert set(trace.kind[device & ~outer].tolist()) == {Kind.COMPUTE}
    assert set(trace.kind[trace.on_roles(Role.HOST)].tolist()) == {Kind.HOST_OP}
    sources, spans = launch_rows(trace)
    assert sources.size == spans.size == 3 * STEPS  # each op's flow reaches its device span


def test_a_legacy_autograd_profile_is_judged_on_its_device_s_work(write_trace, run):
    """The device works 320 µs of each 2 ms step: the spans no other encloses (convolution's 280, relu's 40), not
    conv2d's 300 drawn over convolution's as well: idle while the host prepares the next batch, which scan says."""
    trace = load_trace(write_trace(_profile()))
    steps = detect_steps(trace)
    metrics = compute_metrics(trace, steps)
    assert steps.steady >= 3
    assert metrics["device.busy_us"] == pytest.approx(320 * steps.steady)
    compute = trace.kind == Kind.COMPUTE
    assert float(np.sum(trace.dur[compute])) == pytest.approx(STEPS * 320)
    (scanned,) = json.loads(run("scan", write_trace(_profile()), "--format", "json").stdout)["traces"]
    assert scanned["device"] == "CUDA functions" and scanned["family"] == "gpu"
    assert "PT001" in {f["rule_id"] for f in scanned["findings"]}


def test_a_legacy_autograd_profile_of_the_host_alone_reads_as_the_host(write_trace):
    trace = load_trace(write_trace(_profile(cuda=False)))
    assert trace.dialect == "autograd" and {t.role for t in trace.tracks} == {Role.HOST}
