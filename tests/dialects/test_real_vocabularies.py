"""Each kind of real capture gets the verdict an expert would give (fixtures: tests/data/vocab, made by
tests/data/make_vocabulary_fixtures.py in each profiler's own vocabulary)."""

from __future__ import annotations

import gzip
import importlib.util
import json

import numpy as np
import pytest
from builders import graph_captured
from conftest import DATA, error_line, scanned

from perftool.analysis import compute_metrics, detect_steps
from perftool.analysis.family import device_family, device_name
from perftool.pipeline.read import load_trace
from perftool.trace import Kind, Role

VOCAB = DATA / "vocab"


def serious(finding: dict) -> str:
    """The severity a large loss earns: an error where its fix's gain is predicted, a warning on a bound alone."""
    return "warning" if finding["gain"]["kind"] == "upper_bound" else "error"


def fixture(name: str) -> str:
    return str(VOCAB / f"{name}.json.gz")


def scan(run, name: str, *args: str) -> tuple[dict, dict]:
    """The scan summary and findings by rule id for a fixture's name or a trace's path."""
    return scanned(run, name if name.endswith((".json", ".gz")) else fixture(name), *args)


def test_fixtures_are_what_the_generator_writes(tmp_path, monkeypatch):
    """The committed fixtures match their generator, so a test reads what its fixture's docstring says."""
    spec = importlib.util.spec_from_file_location(
        "make_vocabulary_fixtures", VOCAB.parent / "make_vocabulary_fixtures.py"
    )
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    monkeypatch.setattr(make, "HERE", tmp_path)
    make.main()
    for name in make.FIXTURES:
        assert (tmp_path / f"{name}.json.gz").read_bytes() == (VOCAB / f"{name}.json.gz").read_bytes(), name


def test_legacy_kineto_categories_are_a_device_trace_and_find_the_input_wait(run):
    trace = load_trace(fixture("legacy_kineto_pt18"))
    assert {t.role for t in trace.tracks if t.pid == 0} == {Role.DEVICE}
    assert device_name(trace) == "device 0" and device_family(trace) == "gpu"
    assert set(trace.kind[trace.cat == trace.cats.index("Kernel")].tolist()) == {Kind.COMPUTE}
    assert set(trace.kind[trace.cat == trace.cats.index("Runtime")].tolist()) == {Kind.RUNTIME}
    summary, findings = scan(run, "legacy_kineto_pt18")
    assert findings["PT002"]["severity"] == serious(findings["PT002"]) and findings["PT002"]["impact"][
        "share"
    ] == pytest.approx(0.3, abs=0.005)
    # the pageable input copy is counted once, by exposed-transfers (its fix pins memory)
    assert findings["PT007"]["severity"] == "warning" and "pin_memory=True" in findings["PT007"]["fix"]["text"]
    assert "PT009" not in findings
    assert "now" not in findings["PT002"]["fix"]["text"]  # the prefetch depth in use is not in the trace


@pytest.mark.parametrize(
    ("trace", "early"),
    [(VOCAB / "legacy_kineto_pt18.json.gz", True), (DATA / "real" / "resnet50_pt18_workers0.json.gz", True),
     (DATA / "real" / "ddp_v100_rank1.json.gz", False), (DATA / "cuda_launch_bound.pt.trace.json.gz", False)],
    ids=["pt18 vocabulary", "pt18 capture", "cpu_op capture", "2.x capture"],
)  # fmt: skip
def test_a_capture_from_an_early_pytorch_says_which_fixes_need_a_newer_one(run, trace, early):
    """PyTorch 1.8's profiler names the host's categories Operator and Runtime (2.x: cpu_op, cuda_runtime): fixes
    naming torch.compile or scaled_dot_product_attention need 2.0 and torch.cuda.graph 1.10, which such a job may
    lack; said once, in the notes, and only of such a capture."""
    caveats = json.loads(run("info", str(trace), "--format", "json").stdout)["caveats"]
    said = [c for c in caveats if c.startswith("the capture is from an early PyTorch")]
    assert said == ([
        "the capture is from an early PyTorch (its host categories are Operator and Runtime, as 1.8 writes them): a "
        "fix that names torch.compile, scaled_dot_product_attention or TORCH_LOGS needs 2.0 or later, "
        "torch.cuda.graph 1.10 or later"
    ] if early else [])  # fmt: skip


def test_rocm_launches_of_short_kernels_are_launch_overhead(run):
    summary, findings = scan(run, "rocm_launch_bound")
    assert summary["device"] == "AMD Instinct MI250X" and summary["family"] == "gpu"
    assert summary["step_clock"] == "device"
    finding = findings["PT001"]
    assert finding["values"]["launch_share"] > 0.9
    # the launching thread's own calls are named, the op that launches each kernel rather than the launch inside it
    assert "runs aten::add " in finding["message"] and "hipLaunchKernel" not in finding["values"]["host_names"]
    assert finding["fix"]["changes"] == {"device_graphs": True}


def test_an_accelerator_that_is_not_a_gpu_is_a_device_not_host_only(run):
    trace = load_trace(fixture("accelerator"))
    roles = {t.thread_name: t.role for t in trace.tracks if t.pid == 3}
    assert roles == {"Stream 101": Role.DEVICE, "Stream 101 Submission Queue": Role.UNKNOWN}
    assert device_family(trace) == "generic" and device_name(trace) == "MTIA 3 (ACCEL-X)"
    metrics = compute_metrics(trace).values
    assert metrics["device.busy_fraction"] == pytest.approx(0.64, abs=0.01)  # event_wait is a wait, not work
    info = run("info", fixture("accelerator"))
    assert "host-only" not in info.stdout and "device gpu" not in info.stdout
    assert "device MTIA 3 (ACCEL-X)" in info.stdout
    summary, findings = scan(run, "accelerator")
    assert "aten::cat" in findings["PT001"]["fix"]["text"] and "CUDA" not in findings["PT001"]["fix"]["text"]


def test_a_host_only_trace_is_not_labelled_with_a_device(run):
    cpu_only = str(VOCAB.parent / "torch_cpu_train.pt.trace.json.gz")
    summary, _ = scan(run, cpu_only)
    assert summary["device"] == "none (host only)" and summary["family"] == "generic"
    info = json.loads(run("info", cpu_only, "--format", "json").stdout)
    assert info["device"] == "none (host only)"
    assert "device gpu" not in run("scan", cpu_only).stdout


def test_startup_is_left_out_and_nothing_is_ranked_without_steps(run):
    steps = detect_steps(load_trace(fixture("startup_dominated")))
    assert steps.count == 0 and steps.window[0] == pytest.approx(20_002_100.0)  # after the warm-up annotations
    summary, findings = scan(run, "startup_dominated")
    assert findings and {f["severity"] for f in findings.values()} == {"info"}
    assert all(f["capped"] == "no step markers" for f in findings.values())
    assert any("start-up" in caveat for caveat in summary["caveats"])
    assert any("torch.profiler.schedule" in caveat for caveat in summary["caveats"])
    assert summary["window_us"] < 3000  # the 20 s of context creation are not the window


def test_step_time_comes_from_the_device_when_the_host_runs_ahead(run):
    summary, _ = scan(run, "host_ahead")
    assert summary["step_clock"] == "device"
    assert summary["step_time_us"] == pytest.approx(1000.0, rel=0.01)  # the host's markers say 600 µs
    assert summary["metrics"]["throughput.steps_per_s"] == pytest.approx(1000.0, rel=0.01)


def test_a_truncated_last_step_is_dropped_and_said(run):
    steps = detect_steps(load_trace(fixture("truncated_last_step")))
    assert steps.truncated == 1 and steps.count == 7
    summary, _ = scan(run, "truncated_last_step")
    assert summary["step_time_us"] == pytest.approx(1000.0, rel=0.01)
    assert min(summary["step_durations_us"]) > 900
    assert any("cut off" in caveat for caveat in summary["caveats"])


def _first_steps(count: int, slower: float = 1.0) -> dict:
    """The zero-workers capture cut after its first ``count`` steps, the first of them ``slower`` times as long
    (its loading stretched)."""
    document = json.loads(gzip.open(fixture("zero_workers")).read())
    steps = [e for e in document["traceEvents"] if e["name"].startswith("ProfilerStep#")]
    last_kept = steps[count - 1]["ts"] + steps[count - 1]["dur"]
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("ph") == "M" or e["ts"] < last_kept]
    first = steps[0]
    extra = (slower - 1) * first["dur"]
    for event in document["traceEvents"]:
        if event.get("ph") == "M":
            continue
        if event["ts"] >= first["ts"] + first["dur"]:
            event["ts"] += extra
        elif event is first or event["name"].startswith("enumerate(DataLoader)"):
            event["dur"] += extra
    return document


def test_two_steady_steps_that_agree_are_a_steady_state(run, write_trace):
    _, findings = scan(run, str(write_trace(_first_steps(2))))
    assert findings["PT002"]["severity"] == "warning" and findings["PT002"]["capped"] is None


def test_two_steps_that_disagree_or_one_step_hold_findings_at_info(run, write_trace):
    summary, findings = scan(run, str(write_trace(_first_steps(2, slower=1.3))))
    assert summary["steps"] == 2
    assert findings["PT002"]["severity"] == "info"
    assert findings["PT002"]["capped"] == "2 steady steps, 3 needed"
    _, findings = scan(run, str(write_trace(_first_steps(1))))
    assert findings["PT002"]["severity"] == "info"  # one wait for one batch: nothing recurs
    assert findings["PT002"]["capped"] == "1 steady step, 3 needed"


def test_a_blocking_pageable_copy_is_its_own_cause_not_host_dispatch(run):
    summary, findings = scan(run, "blocking_copy")
    assert summary["idle"]["blocking_copy"] == pytest.approx(0.40, abs=0.01)
    assert summary["idle"]["host"] < 0.01
    assert "PT001" not in findings or findings["PT001"]["severity"] == "info"
    finding = findings["PT009"]
    assert finding["values"]["directions"] == "device→host"
    assert "non_blocking=True" in finding["fix"]["text"] and "CUDA graph" not in finding["fix"]["text"]
    assert finding["evidence"][0]["name"] == "Memcpy DtoH (Device -> Pageable)"


def test_zero_dataloader_workers_call_for_workers_not_prefetching(run):
    _, findings = scan(run, "zero_workers")
    fix = findings["PT002"]["fix"]["text"]
    assert "num_workers=2" in fix and "prefetch_factor" not in fix
    assert findings["PT002"]["fix"]["changes"] == {"workload.input_workers": 2}  # what a fit to the trace would try


def test_torch_npu_ai_cpu_tasks_are_device_work_and_compiles_call_for_jit_off(run):
    trace = load_trace(fixture("torch_npu_aicpu"))
    assert trace.dialect == "ascend"
    summary, findings = scan(run, "torch_npu_aicpu")
    assert "PT004" not in findings  # AI CPU tasks run on the NPU, not the host
    ai_cpu = findings["PT010"]
    assert ai_cpu["values"]["busy_share"] == pytest.approx(200 / 900, abs=0.01)
    assert "IndexPut" in ai_cpu["message"] and ai_cpu["severity"] == "warning"
    compile_fix = findings["PT003"]["fix"]["text"]
    assert "set_compile_mode(jit_compile=False)" in compile_fix
    for finding in findings.values():  # PyTorch advice, never TensorFlow's
        assert "steps_per_execution" not in finding["fix"]["text"]
        assert "dataset.prefetch" not in finding["fix"]["text"]


def test_gate_refuses_to_compare_different_hardware(run):
    result = run("gate", fixture("job_a100_8"), fixture("job_v100_2"))
    line = error_line(result, "NVIDIA A100 → Tesla V100-SXM2-16GB", "world size 8 → 2")
    assert "--allow-mismatch" in line
    allowed = run("gate", fixture("job_a100_8"), fixture("job_v100_2"), "--allow-mismatch", "--format", "json")
    assert allowed.exit_code == 0, allowed.output


def test_an_unclosed_span_invents_no_finding(run):
    trace = load_trace(fixture("unclosed_begin"))
    assert trace.unclosed.size == 1
    assert trace.kind[trace.name == trace.names.index("train_epoch")].tolist() == [Kind.ANNOTATION]
    summary, findings = scan(run, "unclosed_begin")
    assert findings == {}  # the never-closed span would otherwise cover every device gap as "host"
    assert summary["idle"]["host"] < 0.01
    assert any("never closed" in caveat for caveat in summary["caveats"])


def test_real_cuda_capture_input_bound_with_pageable_copies(run):
    """Captured with PyTorch 2.11 on an H100 (tests/data/capture_cuda_traces.py): num_workers=0, pageable copies."""
    summary, findings = scan(run, str(VOCAB.parent / "cuda_input_bound_pageable.pt.trace.json.gz"))
    assert summary["device"] == "NVIDIA H100 80GB HBM3" and summary["step_clock"] == "device"
    assert summary["steps"] == 6 and not summary["caveats"]
    top = summary["findings"][0]
    assert top["rule_id"] == "PT009" and top["severity"] == serious(top)
    assert top["evidence"][0]["name"] == "Memcpy DtoH (Device -> Pageable)"
    loader_fix = findings["PT002"]["fix"]["text"]
    assert "num_workers=" in loader_fix and "prefetch_factor" not in loader_fix
    assert "PT001" not in findings or findings["PT001"]["severity"] == "info"


def test_real_cuda_capture_of_tiny_ops_is_launch_bound(run):
    """Captured with PyTorch 2.11 on an H100: hundreds of tiny elementwise kernels per step."""
    summary, findings = scan(run, str(VOCAB.parent / "cuda_launch_bound.pt.trace.json.gz"))
    finding = findings["PT001"]
    assert finding["severity"] == "error" and finding["values"]["launch_share"] > 0.5
    assert finding["values"]["op_median_us"] < 5
    assert "CUDA graph" in finding["fix"]["text"] and finding["fix"]["changes"] == {"device_graphs": True}


def test_a_slow_first_runtime_call_is_start_up_only_before_device_work(write_trace):
    """cudaFree(0) creating the context is start-up; a slow cudaFree between steps is not."""

    def trace_with(free_at: float) -> dict:
        events = [
            {"ph": "X", "name": "cudaFree", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": free_at, "dur": 5e6},
        ]
        for i in range(6):
            t = 6e6 + i * 1000.0
            events += [
                {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": t, "dur": 8},
                {"ph": "X", "name": "sgemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": t + 10, "dur": 900},
            ]
        return {"schemaVersion": 1, "traceEvents": events}

    at_start = detect_steps(load_trace(write_trace(trace_with(0.0))))
    assert at_start.startup_end == pytest.approx(5e6)
    assert at_start.window[0] == pytest.approx(6e6 + 10)  # after start-up, from the device's first work on
    mid_run = detect_steps(load_trace(write_trace(trace_with(6e6 + 2500.0))))
    assert mid_run.startup_end is None


def test_msprof_overlap_analysis_stands_for_the_device_when_no_streams_are_traced(write_trace):
    """A torch_npu capture without task-level data: msprof's Overlap Analysis is all that shows the device."""
    meta = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
        for pid, name in ((1, "Python"), (4, "Overlap Analysis"))
    ] + [
        {"ph": "M", "name": "thread_name", "pid": 4, "tid": tid, "args": {"name": name}}
        for tid, name in ((0, "Computing"), (1, "Communication"), (2, "Communication(Not Overlapped)"), (3, "Free"))
    ]
    events = []
    for i in range(5):
        t = i * 1000.0
        events += [
            {"ph": "X", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": t, "dur": 999},
            {"ph": "X", "name": "Computing", "pid": 4, "tid": 0, "ts": t, "dur": 600},
            {"ph": "X", "name": "Communication", "pid": 4, "tid": 1, "ts": t + 500, "dur": 300},
            {"ph": "X", "name": "Communication(Not Overlapped)", "pid": 4, "tid": 2, "ts": t + 600, "dur": 200},
            {"ph": "X", "name": "Free", "pid": 4, "tid": 3, "ts": t + 800, "dur": 200},
        ]
    trace = load_trace(write_trace({"traceEvents": meta + events}))
    roles = {t.thread_name: t.role for t in trace.tracks if t.pid == 4}
    assert roles["Computing"] == roles["Communication"] == Role.DEVICE
    assert roles["Free"] == roles["Communication(Not Overlapped)"] == Role.SUMMARY
    assert set(trace.kind[trace.name == trace.names.index("Communication")].tolist()) == {Kind.COMMUNICATION}
    metrics = compute_metrics(trace).values
    assert metrics["device.busy_fraction"] == pytest.approx(0.8, abs=0.01)
    assert metrics["device.compute_fraction"] == pytest.approx(0.6, abs=0.01)


def test_a_device_process_known_only_by_its_name_is_a_device(write_trace):
    """No labels, no sort index, categories perftool does not know: the process name says it is a device."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "HPU 0"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
    ]
    for i in range(4):
        events += [
            {
                "ph": "X",
                "name": f"ProfilerStep#{i}",
                "cat": "user_annotation",
                "pid": 1,
                "tid": 1,
                "ts": i * 1e3,
                "dur": 999,
            },
            {"ph": "X", "name": "matmul_bf16", "cat": "hpu_op", "pid": 9, "tid": 3, "ts": i * 1e3 + 10, "dur": 900},
        ]
    trace = load_trace(write_trace({"schemaVersion": 1, "traceEvents": events}))
    assert [t.role for t in trace.tracks if t.pid == 9] == [Role.DEVICE]
    assert device_family(trace) == "hpu" and device_name(trace) == "HPU 0"


def test_tasks_on_an_ai_cpu_stream_are_ai_cpu_tasks(write_trace):
    from perftool.dialects.ascend import ai_cpu_tasks

    events = [
        {"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "thread_name", "pid": 3, "tid": 9, "args": {"name": "AI_CPU"}},
        {"ph": "X", "name": "IndexPut", "pid": 3, "tid": 9, "ts": 1, "dur": 5},
        {"ph": "X", "name": "MatMulV2", "pid": 3, "tid": 5, "ts": 1, "dur": 5},
    ]
    trace = load_trace(write_trace({"traceEvents": events}))
    found = ai_cpu_tasks(trace)
    assert [trace.names[trace.name[row]] for row in np.flatnonzero(found)] == ["IndexPut"]


def test_host_threads_in_a_process_labelled_as_a_gpu_are_host(run, write_trace):
    """In a container the training process is pid 1, which Kineto also labels "GPU 1": its threads of cpu_op and
    runtime events are the host all the same, so the device's idle time is the host's (here in hipFree), not
    unexplained, and the allocator's churn is named as the cause. A thread named as a device's queue stays out of the
    host (see the MTIA capture)."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": {"labels": "GPU 1"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (python)"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 7"}},
    ]
    for i in range(6):
        t = i * 10_000.0
        events += [
            {"ph": "X", "name": f"ProfilerStep#{i}", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": t,
             "dur": 9_990},
            {"ph": "X", "name": "aten::empty", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": t + 10, "dur": 8_000},
            {"ph": "X", "name": "hipFree", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": t + 20, "dur": 7_900},
            {"ph": "X", "name": "hipLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": t + 8_100,
             "dur": 10},
            {"ph": "X", "name": "Cijk_Ailk_Bljk_SB_MT64x64x8", "cat": "kernel", "pid": 1, "tid": 7, "ts": t + 8_200,
             "dur": 1_500},
        ]  # fmt: skip
    path = write_trace({"schemaVersion": 1, "traceEvents": events})
    trace = load_trace(path)
    roles = {t.tid: t.role for t in trace.tracks if t.pid == 1}
    assert roles[1] == Role.HOST and roles[7] == Role.DEVICE
    summary, findings = scan(run, str(path))
    assert findings["PT001"]["fix"]["text"].startswith("Stop allocating and freeing memory every step")
    assert "of this idle time in hipFree (" in findings["PT001"]["fix"]["text"]
    idle = summary["idle"]
    # the first hipFree, before any device work, is start-up
    assert idle["host"] + idle.get("startup", 0.0) > 0.7 and idle.get("other", 0.0) < 0.05


def test_a_step_replayed_as_one_cuda_graph_gets_no_graph_advice(run, write_trace):
    """The device waits while the host runs Python before the step's one graph launch: that host work is the
    finding, never "use CUDA graphs", and each kernel of the graph belongs to the op that replays it."""
    path = str(write_trace(graph_captured(pieces=1, python_us=600)))
    _, found = scan(run, path)
    host = found["PT001"]
    assert host["fix"]["changes"] == {} and "train_step" in host["fix"]["text"]
    assert (
        "already replays" not in host["fix"]["text"] and "Device graphs alone do not remove it" in host["fix"]["text"]
    )
    (diff,) = json.loads(run("diff", path, path, "--by", "op", "--format", "json").stdout)["diffs"]
    assert diff["level"] == "op" and diff["unmatched"]["baseline"]["events"] == 0
    (replay,) = diff["rows"]  # all 40 kernels, 760 µs of the step, under the op that replays them
    assert replay["key"] == "CUDAGraph::replay" and replay["baseline_paced_us_per_step"] == pytest.approx(760.0)


def test_a_step_replayed_in_many_graph_pieces_is_told_to_capture_larger_graphs(run, write_trace):
    """Ten graph launches a step with host work between them: the device waits between replays, and the fix is
    larger graphs, not the graphs already in use."""
    _, found = scan(run, str(write_trace(graph_captured(pieces=10, python_us=100))))
    host = found["PT001"]
    assert host["fix"]["changes"] == {} and "already replays device graphs (10.0 graph launches" in host["fix"]["text"]
    assert host["values"]["graph_launches_per_step"] == pytest.approx(10.0)


def test_pytorch_18_string_thread_ids_link_ops_to_their_kernels(run):
    """PyTorch 1.8 writes an op's thread id as a string and its flows' as a number: both are one track, so each
    kernel is linked to its op, steps are timed on the device, and diff compares the ResNet-50 pair per op."""
    real = DATA / "real"
    before, after = real / "resnet50_pt18_workers0.json.gz", real / "resnet50_pt18_workers4.json.gz"
    trace = load_trace(str(before))
    assert len({(t.pid, t.tid) for t in trace.tracks}) == len({(str(t.pid), str(t.tid)) for t in trace.tracks})
    assert detect_steps(trace).clock == "device"
    result = run("diff", before, after, "--by", "op", "--format", "json")
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)["diffs"][0]
    assert (diff["level"], diff["why"]) == ("op", "")
    assert "CudnnConvolutionBackward" in {row["key"] for row in diff["rows"]}


def test_report_text_reads_without_repeated_words_or_empty_figures(run):
    """Texts a newcomer met on real captures: a device named 'device 0' shown as 'device device 0', a batch
    prepared 'on 0 traced workers' by a loop with no workers, and info findings of a cost that reads 0.0%."""
    from perftool.common.names import as_device

    assert as_device("device 0") == "device 0" and as_device("NVIDIA A100") == "device NVIDIA A100"
    header = run("scan", fixture("legacy_kineto_pt18"), "--fail-on", "never").stdout
    info = run("info", fixture("legacy_kineto_pt18")).stdout
    assert "device device" not in header + info and "· device 0" in " ".join((header + info).split())
    real = DATA / "real"
    summary, findings = scan(run, str(real / "resnet50_pt18_workers0.json.gz"))
    message = " ".join(findings["PT002"]["message"].split())
    assert "by the main process itself, against" in message and "traced workers" not in message
    for name in ("ddp_v100_rank1", "mi300_resnet_actckpt_ddp8_rank0"):  # a sync each step that costs nothing
        summary, findings = scan(run, str(real / f"{name}.json.gz"))
        assert all(f["impact"]["share"] >= 0.0005 or f["severity"] != "info" for f in findings.values()), name


def test_a_bound_beyond_a_finding_s_cost_says_what_it_adds(run):
    """A late batch stalls the device beyond the wait itself (its copy, the dispatch after it): the bound on the fix
    counts that too, and says so rather than printing a gain twice the cost without a word."""
    _, found = scan(run, "zero_workers")
    wait = found["PT002"]
    bound = wait["gain"]["up_to_share"]
    assert wait["gain"]["kind"] == "upper_bound" and bound > wait["impact"]["share"]
    assert wait["gain"]["text"].endswith(f"({bound:.1%}, with the idle the cause leads to beyond its own cost)")
    _, real = scan(run, str(DATA / "real" / "ddp_v100_rank1.json.gz"))
    grids = real["PT019"]  # its bound is its cost: nothing to add
    assert grids["gain"]["up_to_share"] == grids["impact"]["share"] and grids["gain"]["text"].endswith("(2.2%)")


def test_rocm_kernels_written_a_nanosecond_apart_leave_no_idle_gaps_between_them():
    """On a ROCm capture the device's idle gaps are those its decimal times show longer than a nanosecond (read
    exactly, as written); the kernels written back to back 1 ns apart (most of them) leave none."""
    from decimal import Decimal

    path = DATA / "real" / "mi300_resnet_actckpt_ddp8_rank0.json.gz"
    trace = load_trace(str(path))
    steps = detect_steps(trace)
    lo, hi = steps.window
    device = [
        (event["ts"], event["ts"] + event["dur"])
        for event in json.loads(gzip.open(path).read(), parse_float=Decimal)["traceEvents"]
        if event.get("ph") == "X" and event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    gaps, nanosecond, reach, window_end = 0, 0, Decimal(lo), Decimal(hi)  # stretches no device event covers
    for start, end in sorted((start, end) for start, end in device if end > reach and start < window_end):
        gaps += start - reach > Decimal("0.001")
        nanosecond += Decimal(0) < start - reach <= Decimal("0.001")
        reach = max(reach, end)
    gaps += window_end - reach > Decimal("0.001")
    assert 0 < 10 * gaps < nanosecond  # most are a nanosecond
    assert compute_metrics(trace, steps)["device.idle_gaps.count"] == gaps
