"""Steps inferred where a trace has no step markers, and warm-up told by its look, not its position."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from builders import build, graph_captured
from conftest import DATA, REPO, complete, scanned

from perftool.analysis import detect_steps
from perftool.pipeline.read import load_trace

REAL = DATA / "real"


def _without(document: dict | list, *prefixes: str) -> dict:
    events = document["traceEvents"] if isinstance(document, dict) else document
    kept = [e for e in events if not str(e.get("name", "")).startswith(prefixes)]
    return (document | {"traceEvents": kept}) if isinstance(document, dict) else {"traceEvents": kept}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("removed", "told_by", "cut"),
    [
        (("ProfilerStep#",), "Optimizer.step#SGD.step", 0),
        (("ProfilerStep#", "Optimizer."), "enumerate(DataLoader)", 1),
    ],
)
def test_a_real_capture_without_its_markers_gets_its_steps_back(write_trace, removed, told_by, cut):
    """ResNet-50 (PyTorch 1.8) with its ProfilerStep markers removed: each step ends with the optimizer's step, so the
    inferred steps are the marked ones. Without the optimizer's record too, each starts at the loop's fetch of its
    batch: the marked ones but the last, whose fetch the capture cuts."""
    path = REAL / "resnet50_pt18_workers0.json.gz"
    marked = detect_steps(load_trace(str(path)))
    inferred = detect_steps(load_trace(str(write_trace(_without(json.loads(gzip.open(path).read()), *removed)))))
    assert marked.inferred is None and inferred.inferred is not None
    assert told_by in inferred.inferred
    assert inferred.count == marked.count - cut
    assert np.allclose(inferred.end - inferred.start, (marked.end - marked.start)[: marked.count - cut], rtol=0.01)


def test_graph_launches_without_markers_are_steps_and_the_report_says_they_were_inferred(run, write_trace):
    summary, _ = scanned(run, str(write_trace(_without(graph_captured(pieces=1, python_us=300.0), "ProfilerStep#"))))
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
    step = ["embedding", *[f"layer_{op}" for _ in range(24) for op in range(10)], "loss", "aten::_fused_adamw_"]
    events = [{"name": name, "track": "host", "ts": 10 * i, "dur": 5, "cat": "cpu_op"} for i, name in enumerate(step)]
    case = {"vocabulary": "kineto", "markers": False, "steps": 8, "period": 10 * len(step), "events": events}
    steps = detect_steps(load_trace(str(write_trace(build(case)))))
    assert (
        steps.inferred == f"the host's repeating calls (a repeated sequence of {len(step):,} host calls from embedding)"
    )
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


def _optimizer_loop(steps: dict[str, str], iterations: int = 6, forward_from: int = 0) -> list[dict]:
    """A marker-less PyTorch training loop on one GPU, an iteration every 1 ms: forward and backward (an op launching a
    kernel each), then ``steps`` (name -> the name it encloses, or ""): the optimizer steps it records, each around its
    update op. The first iteration's forward is left out where ``forward_from`` is 1 (the capture began after it)."""
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]
    for i in range(iterations):
        t = 1_000.0 * i
        ops = [("aten::conv2d", 0), ("aten::convolution_backward", 300)][forward_from if i == 0 else 0 :]
        for name, at in ops:
            linked = {"correlation": 2 * i + (at > 0)}  # the launch and its kernel
            events += [
                complete(name, t + at, 250, cat="cpu_op", pid=100, tid=1),
                complete("cudaLaunchKernel", t + at + 10, 5, cat="cuda_runtime", pid=100, tid=1, args=linked),
                complete(f"{name}_kernel", t + at + 20, 200, cat="kernel", pid=0, tid=7, args=linked),
            ]
        at = t + 600
        for name, inner in steps.items():
            events.append(complete(name, at, 150 if inner else 100, cat="user_annotation", pid=100, tid=1))
            if inner:
                events.append(complete(inner, at + 20, 100, cat="user_annotation", pid=100, tid=1))
            events.append(complete("aten::add_", at + 30, 50, cat="cpu_op", pid=100, tid=1))
            at += 160
    return events


def test_a_training_loop_without_markers_takes_its_optimizer_s_steps_as_its_iterations(write_trace, run):
    """Each iteration ends where the optimizer's step ends (0.7 ms into it here), and starts where the one before
    ended; the first starts at the loop's first call (on the device's clock the last ends with its last kernel)."""
    path = write_trace({"traceEvents": _optimizer_loop({"Optimizer.step#SGD.step": ""})})
    steps = detect_steps(load_trace(str(path)))
    assert steps.inferred == "the optimizer's steps (Optimizer.step#SGD.step)"
    assert steps.count == 6 and steps.start[0] == pytest.approx(0.0)
    assert np.allclose(steps.end[:-1], 700.0 + 1_000.0 * np.arange(5))
    said = " ".join(run("scan", str(path)).output.split())
    assert "no step markers: 6 steps inferred from the optimizer's steps (Optimizer.step#SGD.step)" in said


def test_an_iteration_the_capture_began_inside_is_no_step(write_trace):
    """The capture starts after the first iteration's forward: that iteration runs 2 ops to the others' 3, so it is
    left out, not taken as a short step; ops another process runs meanwhile (an input worker's) are not its own."""
    events = _optimizer_loop({"Optimizer.step#SGD.step": ""}, forward_from=1)
    events += [complete("aten::to", 300.0 + 10 * i, 5, cat="cpu_op", pid=200, tid=2) for i in range(30)]
    steps = detect_steps(load_trace(str(write_trace({"traceEvents": events}))))
    assert steps.count == 5 and steps.start[0] == pytest.approx(700.0)


def test_a_loop_stepping_two_optimizers_ends_each_iteration_at_the_one_stepped_last(write_trace):
    """A GAN's discriminator and generator, each with its own optimizer class: one iteration each, not two."""
    events = _optimizer_loop({"Optimizer.step#Adam.step": "", "Optimizer.step#SGD.step": ""})
    steps = detect_steps(load_trace(str(write_trace({"traceEvents": events}))))
    assert steps.count == 6 and np.allclose(steps.end[:-1], 860.0 + 1_000.0 * np.arange(5))


def test_an_optimizer_stepping_another_inside_its_step_closes_one_iteration(write_trace):
    """ZeroRedundancyOptimizer steps its local optimizer inside its own step: the outermost step is the one."""
    events = _optimizer_loop({"Optimizer.step#ZeroRedundancyOptimizer.step": "Optimizer.step#Adam.step"})
    steps = detect_steps(load_trace(str(write_trace({"traceEvents": events}))))
    assert steps.count == 6 and np.allclose(steps.end[:-1], 750.0 + 1_000.0 * np.arange(5))


@pytest.mark.parametrize(
    ("iterations", "optimizers", "within"),
    [(6, ["AdamW"], "ProfilerStep#1"), (2, ["AdamW"], None), (2, ["Adam", "SGD"], None)],
)
def test_a_step_marker_holding_several_optimizer_steps_is_split_into_them(write_trace, iterations, optimizers, within):
    """Six iterations in one ProfilerStep are six steps; two iterations are too few to call a loop, however many
    optimizers each steps."""
    events = _optimizer_loop({f"Optimizer.step#{name}.step": "" for name in optimizers}, iterations)
    events.append(complete("ProfilerStep#1", 0, 1_000 * iterations, cat="user_annotation", pid=100, tid=1))
    steps = detect_steps(load_trace(str(write_trace({"traceEvents": events}))))
    assert steps.within == within and steps.count == (iterations if within else 1)


def test_a_real_training_capture_without_markers_is_stepped_by_its_optimizer():
    """ResNet-18 on one MI300X with the caching allocator off records no ProfilerStep, only torch.optim's
    ``Optimizer.step#SGD.step``: its five iterations (two of about 118 ms, three of about 1.05 s once every op frees
    its memory) are the steps, each ending as its optimizer step ends, the first starting at the loop's first call."""
    path = REAL / "mi300_resnet18_nopool.json.gz"
    events = json.loads(gzip.open(path).read())["traceEvents"]
    host = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    optimizer_ends = sorted(e["ts"] + e["dur"] for e in host if e["name"] == "Optimizer.step#SGD.step")
    loop_tid = next(e["tid"] for e in host if e["name"] == "Optimizer.step#SGD.step")
    first_call = min(e["ts"] for e in events if e.get("ph") == "X" and e.get("tid") == loop_tid)
    iterations = np.diff([first_call, *optimizer_ends])
    steps = detect_steps(load_trace(str(path)))
    assert steps.inferred == "the optimizer's steps (Optimizer.step#SGD.step)"
    assert np.allclose(steps.end - steps.start, iterations, rtol=0.01)
