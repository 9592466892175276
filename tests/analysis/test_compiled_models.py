"""torch.compile'd models and device graphs: a first compile and a graph's recording are warm-up, never a recompile
"after warm-up"; a compile between steady steps still is one."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import DATA, complete

from perftool.analysis.host_calls import compiles
from perftool.analysis.steps import detect_steps, startup_end
from perftool.pipeline.read import load_trace
from perftool.report.info_rows import _compiles

KINETO = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
RECOMPILE = DATA / "torch_cpu_compile_recompile.pt.trace.json.gz"  # tests/data/capture_torch_compile_trace.py's
FIRST_CALL = DATA / "torch_cpu_compile_first_call.pt.trace.json.gz"  # tests/data/capture_torch_compile_first_call.py's


def _meta() -> list:
    return [
        {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]


def _warmup_call() -> list:
    """The first call of a compiled model, as PyTorch's profiler records it: Dynamo and Inductor compile, CUDA graph
    trees record the graph (inside a stream capture) and instantiate it, then replay it for the call's result."""
    host = {"pid": 100, "tid": 100}
    return [
        complete("train.py(30): <module>", 0, 40_000, cat="python_function", **host),
        complete("Torch-Compiled Region: 0/0", 100, 30_000, cat="cpu_op", **host),
        complete("_compile.compile_inner (dynamo_timed)", 150, 20_000, cat="user_annotation", **host),
        complete("torch/_inductor/compile_fx.py(1767): run", 20_200, 9_000, cat="python_function", **host),
        complete("CUDAGraphNode.record (dynamo_timed)", 20_300, 8_000, cat="user_annotation", **host),
        complete("cudaStreamBeginCapture", 20_400, 5, cat="cuda_runtime", **host),
        complete("cudaStreamEndCapture", 27_000, 10, cat="cuda_runtime", **host),
        complete("cudaGraphInstantiateWithFlags", 27_100, 900, cat="cuda_runtime", **host),
        complete("cudaGraphLaunch", 28_400, 20, cat="cuda_runtime", **host),
        complete("triton_poi_fused_add_0", 28_500, 1_500, cat="kernel", pid=0, tid=7),
    ]


def _scan(run, write_trace, events: list) -> dict:
    result = run("scan", write_trace(KINETO | {"traceEvents": _meta() + events}), "--format", "json")
    assert result.exit_code == 0, result.output
    (scanned,) = json.loads(result.stdout)["traces"]
    return scanned


def test_a_compiled_model_s_first_call_is_warm_up_not_a_recompile(run, write_trace):
    scanned = _scan(run, write_trace, _warmup_call())
    assert "PT003" not in {f["rule_id"] for f in scanned["findings"]}
    notes = " ".join(scanned["caveats"])
    assert "the capture holds a model's warm-up (torch.compile compiling and device graphs captured)" in notes
    assert "TORCHINDUCTOR_CACHE_DIR" in notes and "mark_dynamic" not in notes  # one compile: no size varied


def test_a_warm_up_that_compiled_a_function_again_is_told_to_mark_the_sizes_that_vary(run, write_trace):
    """Within the warm-up the model's frame is compiled a second time (its region 0/1: a guard failed, a new shape):
    marking the sizes that vary (torch._dynamo.mark_dynamic) keeps new shapes from compiling again."""
    again = [complete("Torch-Compiled Region: 0/1", 29_000, 1_000, cat="cpu_op", pid=100, tid=100),
             complete("_compile.compile_inner (dynamo_timed)", 29_050, 800, cat="user_annotation", pid=100,
                      tid=100)]  # fmt: skip
    notes = " ".join(_scan(run, write_trace, [*_warmup_call(), *again])["caveats"])
    assert "torch.compile compiling" in notes
    assert "as it compiled a function again, mark sizes that vary with torch._dynamo.mark_dynamic" in notes


@pytest.mark.parametrize(
    "left_out", [("compile",), ("compile", "Compiled", "dynamo_timed")], ids=["compiled before", "no torch.compile"]
)
def test_a_first_call_that_compiles_nothing_is_told_as_its_graph_s_recording_alone(run, write_trace, left_out):
    """The model compiled before the profiler started (or read its compile from Inductor's cache): its first call in
    the capture records the CUDA graph (torch times that phase as it times a compile's) and compiles nothing; or
    a serving engine captures its graphs itself, nothing timed by torch.compile. The warm-up is the graph's
    recording, and the note gives no advice on compile caches or dynamic shapes."""
    compiling_nothing = [e for e in _warmup_call() if not any(word in e["name"] for word in left_out)]
    scanned = _scan(run, write_trace, compiling_nothing)
    notes = " ".join(scanned["caveats"])
    assert "the capture holds a model's warm-up (device graphs captured)" in notes
    assert "TORCHINDUCTOR_CACHE_DIR" not in notes and "mark_dynamic" not in notes
    recorded = 1 if left_out == ("compile",) else 0  # torch.compile timed the recording; an engine's is no compile
    assert scanned["metrics"]["compile.count"] == scanned["metrics"]["compile.graph_recordings"] == recorded


def test_info_of_a_warm_up_without_steps_counts_its_compiles_and_no_recompile_after_none(run, write_trace):
    """No step markers: there is no warm-up for a compile to be after, so info says how many compiles there were and
    nothing of recompiles (it said "nan after warm-up"); its one copy is one copy."""
    events = [*_warmup_call(), complete("Memcpy DtoH (Device -> Pinned)", 30_100, 100, cat="gpu_memcpy", pid=0, tid=7)]
    markdown = run("info", write_trace(KINETO | {"traceEvents": _meta() + events}), "--format", "markdown").stdout
    (compile_row,) = [line for line in markdown.splitlines() if line.startswith("| compile |")]
    assert "after warm-up" not in compile_row and "nan" not in compile_row
    assert "| 2 (28.000 ms, 1 of them a device graph recording) |" in compile_row  # compile_inner, then the recording
    assert "| device→host | 1 copy · " in markdown


def test_a_python_frame_of_the_compiler_s_file_is_not_a_compile(run, write_trace):
    """``compile_fx.py(1767): run`` runs the compiled graph; only the compiler's own phases are compiles."""
    from perftool.dialects.vocabulary import kind_of_name
    from perftool.trace.model import Kind

    assert kind_of_name("torch/_inductor/compile_fx.py(1767): run") == Kind.OTHER
    for folder in ("/home/Jane Doe/env/lib/", "C:\\Program Files\\Python311\\Lib\\"):  # a space; Windows
        assert kind_of_name(f"{folder}torch/_inductor/compile_fx.py(1767): compile_fx") == Kind.OTHER
    assert kind_of_name("_compile.compile_inner (dynamo_timed)") == Kind.COMPILE


def test_a_compile_between_steady_steps_is_still_a_recompile(run, write_trace):
    events = []
    for step in range(8):
        t = 1_000 * step
        events += [
            complete(f"ProfilerStep#{step}", t, 999, cat="user_annotation", pid=100, tid=100),
            complete("aten::mm", t + 5, 20, cat="cpu_op", pid=100, tid=100),
            complete("sm90_gemm", t + 30, 900, cat="kernel", pid=0, tid=7),
        ]
    events.append(complete("_compile.compile_inner (dynamo_timed)", 5_950, 40, cat="user_annotation", pid=100, tid=100))
    findings = {f["rule_id"]: f for f in _scan(run, write_trace, events)["findings"]}
    assert "PT003" in findings and findings["PT003"]["values"]["count"] == 1


def test_a_real_torch_compile_recompile_is_one_compile_of_a_steady_step_not_start_up(run):
    """torch 2.14 on the CPU: step 0 compiles the model, step 7's batch of another size fails a guard and compiles it
    again (compile id 0/1), 154 ms of nested timed phases (compile_inner holds compile_attempt_0, which holds
    bytecode_tracing...) and their metadata records ("entire_frame_compile_data: ..., compile_id=0/1"). One
    compilation after warm-up, counted once and timed once; start-up ends with the first step, not with the
    recompile, so the steps before it stay steady."""
    trace = load_trace(str(RECOMPILE))
    steps = detect_steps(trace)
    assert steps.warmup == 2 and steps.count == 12  # the compile's step, and the next (its first backward run)
    assert startup_end(trace) is None or startup_end(trace) <= steps.start[1]
    assert len(compiles(trace)) == 2  # the first compile and the recompile, each once
    scanned = json.loads(run("scan", str(RECOMPILE), "--format", "json", "--fail-on", "never").stdout)
    (finding,) = scanned["traces"][0]["findings"]
    assert finding["rule_id"] == "PT003" and finding["values"]["count"] == 1
    assert finding["values"]["names"] == "_compile.compile_inner (dynamo_timed)"
    assert 100 < finding["values"]["compile_ms"] < 250  # the recompile's own time, not its phases' summed
    assert "the step stalled" in finding["message"] and "device" not in finding["message"]  # no device captured
    assert "TORCH_LOGS=recompiles" in finding["fix"]["text"]


def test_nested_compile_phases_are_one_compile_and_their_metadata_records_are_none(write_trace):
    """A compile event inside another on its thread is a phase of it; "<phase>_data: key=value" is torch.compile's
    metadata record beside a phase, no compile, though its value names one ("fn_name=_compile.compile_inner")."""
    from perftool.dialects.vocabulary import kind_of_name
    from perftool.trace.model import Kind

    assert kind_of_name("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/1") == Kind.OTHER
    host = {"pid": 100, "tid": 100, "cat": "cpu_op"}
    events = [
        complete("_compile.compile_inner (dynamo_timed)", 0, 1_000, **host),
        complete("compile_attempt_0 (dynamo_timed)", 10, 900, **host),
        complete("bytecode_tracing (dynamo_timed)", 20, 300, **host),
        complete("OutputGraph.call_user_compiler (dynamo_timed)", 400, 400, **host),
        complete("_compile.compile_inner (dynamo_timed)", 5_000, 100, pid=100, tid=101, cat="cpu_op"),
    ]
    trace = load_trace(write_trace(KINETO | {"traceEvents": _meta() + events}))
    assert [trace.names[n] for n in trace.name[compiles(trace)].tolist()] == [
        "_compile.compile_inner (dynamo_timed)",
        "_compile.compile_inner (dynamo_timed)",
    ]
    assert np.all(np.diff(trace.ts[compiles(trace)]) > 0)


def test_a_second_run_written_before_the_first_is_a_second_run(run, write_trace):
    """A trace's events need not be in time order (threads flush their buffers apart): a later run of the region the
    warm-up call ran, written first in the file, is still a second run."""
    again = complete("Torch-Compiled Region: 0/0", 30_600, 50, cat="cpu_op", pid=100, tid=100)
    scanned = _scan(run, write_trace, [again, *_warmup_call(), *_eager_tail(30_700)])
    assert scanned["unjudged"] is None


def test_a_blocking_copy_without_an_input_pipeline_gets_no_dataloader_advice(run, write_trace):
    """After its first call, the model runs again (a second call of its compiled region) and a copy blocks."""
    events = _warmup_call() + [
        complete("aten::to", 41_000, 5_000, cat="cpu_op", pid=100, tid=100),
        complete("cudaMemcpy", 41_010, 4_900, cat="cuda_runtime", pid=100, tid=100),
        complete("triton_poi_fused_add_0", 41_100, 4_700, cat="kernel", pid=0, tid=7),
        complete("Torch-Compiled Region: 0/0", 45_900, 400, cat="cpu_op", pid=100, tid=100),
        complete("aten::add", 46_000, 200, cat="cpu_op", pid=100, tid=100),
        complete("triton_poi_fused_add_0", 46_300, 100, cat="kernel", pid=0, tid=7),
    ]
    findings = {f["rule_id"]: f for f in _scan(run, write_trace, events)["findings"]}
    fix = findings["PT009"]["fix"]["text"]
    assert "DataLoader" not in fix and "read them less often" in fix


def test_a_capture_whose_one_step_is_the_warm_up_says_no_steady_step_is_left(run, write_trace):
    """A serving engine profiled while it captures its graphs: its one ProfilerStep holds the warm-up. The notes say
    no steady step is left, not "1 steady step", and no rule judges the warm-up's tail (40 launches with the device
    idle would be host-bound in a step)."""
    step = complete("ProfilerStep#134", 0, 40_000, cat="user_annotation", pid=100, tid=100)
    after = [complete("cudaLaunchKernel", 31_000 + 50 * i, 5, cat="cuda_runtime", pid=100, tid=100) for i in range(40)]
    scanned = _scan(run, write_trace, [step, *_warmup_call(), *after])
    notes = " ".join(scanned["caveats"])
    assert "the step the capture marks is that warm-up: no steady step is left" in notes
    assert "only 1 steady step" not in notes
    assert scanned["findings"] == []
    assert (
        scanned["unjudged"] == "the one step the capture marks is a model's warm-up (torch.compile compiling and "
        "device graphs captured)"
    )


def test_a_serving_engine_s_warm_up_is_told_the_engine_s_way_to_profile_past_it(run, write_trace):
    """SGLang capturing its graphs at start-up, profiled: the engine is started and profiled by its own profiler, so
    the note names that (not a torch.profiler schedule), and no compile-cache or dynamic-shape setting the engine
    makes for itself."""
    step = complete("ProfilerStep#134", 0, 40_000, cat="user_annotation", pid=100, tid=100)
    runner = complete("sglang/srt/model_executor/cuda_graph_runner.py(400): capture", 50, 39_000,
                      cat="python_function", pid=100, tid=100)  # fmt: skip
    scanned = _scan(run, write_trace, [step, runner, *_warmup_call()])
    assert scanned["job_kind"] == "SGLang serving"
    (note,) = [c for c in scanned["caveats"] if c.startswith("the capture holds a model's warm-up")]
    assert "SGLang's profiler" in note and "POST /start_profile" in note
    assert "profiler schedule" not in note and "TORCHINDUCTOR_CACHE_DIR" not in note


def test_a_capture_of_the_warm_up_alone_is_not_calibrated(run, write_trace):
    """The same capture of the graphs being made: calibrate has no steady step to fit either, and says what the
    capture is and how to profile steps instead, in one line."""
    step = complete("ProfilerStep#134", 0, 40_000, cat="user_annotation", pid=100, tid=100)
    after = [complete("cudaLaunchKernel", 31_000 + 50 * i, 5, cat="cuda_runtime", pid=100, tid=100) for i in range(40)]
    result = run("calibrate", write_trace(KINETO | {"traceEvents": _meta() + [step, *_warmup_call(), *after]}))
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    said = (
        "the one step the capture marks is a model's warm-up (torch.compile compiling and device graphs captured), no "
        "steady state to fit a step to: capture several steps past warm-up: torch.profiler.profile("
    )
    assert said in result.stderr


def test_a_marked_step_that_holds_the_compile_says_what_is_left_of_it_after_start_up(run, write_trace):
    """The one step marked runs the first call, its compile and graph recording inside it: start-up ends in the
    step (at the end of the graph's recording, 28.3 ms), and what the note says is left is the step after it
    (ProfilerStep#0 ends at 50 ms: 21.7 ms), not the whole step."""
    step = complete("ProfilerStep#0", 0, 50_000, cat="user_annotation", pid=100, tid=100)
    after = [complete("cudaLaunchKernel", 41_000 + 50 * i, 5, cat="cuda_runtime", pid=100, tid=100) for i in range(40)]
    notes = " ".join(_scan(run, write_trace, [step, *_warmup_call(), *after])["caveats"])
    assert "takes 28.300 ms of the 50.000 ms captured; it is left out, leaving 21.700 ms" in notes


def test_a_marked_step_whose_device_work_ends_within_start_up_leaves_nothing_after_it(run, write_trace):
    """A serving engine's graph capture: the step's only kernel runs before the graph is recorded (the step is timed
    on the device: 80-90 µs), and start-up ends at the recording's end (28.3 ms): nothing of it is left, not a
    negative stretch."""
    host = {"pid": 100, "tid": 100}
    step = complete("ProfilerStep#134", 0, 40_000, cat="user_annotation", **host)
    early = [complete("cudaLaunchKernel", 60, 5, cat="cuda_runtime", **host),
             complete("fill_kernel", 80, 10, cat="kernel", pid=0, tid=7),
             {"ph": "s", "id": 1, "pid": 100, "tid": 100, "ts": 60, "cat": "ac2g", "name": "ac2g"},
             {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 80, "cat": "ac2g", "name": "ac2g", "bp": "e"}]  # fmt: skip
    replay = ("cudaGraphLaunch", "triton_poi_fused_add_0")
    recording = [event for event in _warmup_call() if event["name"] not in replay]
    notes = " ".join(_scan(run, write_trace, [step, *early, *recording])["caveats"])
    assert "takes 28.300 ms of the 40.000 ms captured; it is left out, leaving nothing" in notes
    assert "no steady step is left" in notes


def test_a_capture_that_is_only_warm_up_leads_with_that_not_with_a_share_of_its_step(run, write_trace):
    """The report's first line and header say there is no steady state to judge; no idle share of the warm-up's
    tail stands first, and no 'mean step' or 'device idle' of it is given as a steady state's."""
    step = complete("ProfilerStep#134", 0, 40_000, cat="user_annotation", pid=100, tid=100)
    after = [complete("cudaLaunchKernel", 31_000 + 50 * i, 5, cat="cuda_runtime", pid=100, tid=100) for i in range(40)]
    path = write_trace(KINETO | {"traceEvents": _meta() + [step, *_warmup_call(), *after]})
    text = run("scan", path).stdout
    lead, header = text.split("\nperftool scan ")
    assert " ".join(lead.split()).startswith("No steady state to judge: the one step the capture marks is a model's")
    header = " ".join(header.split("\nnote:")[0].split())
    assert header.endswith("· no steady step (the capture is a model's warm-up)")
    assert "\ndevice idle" not in text and "mean step" not in text
    assert "  Not judged: the capture holds no steady step (see the notes)." in text
    markdown = run("scan", path, "--format", "markdown").stdout
    assert "**No steady state to judge:" in markdown and "mean step" not in markdown
    assert "\nNot judged: the capture holds no steady step (see the notes).\n" in markdown
    assert (
        "<p>Not judged: the capture holds no steady step (see the notes).</p>"
        in run("scan", path, "--format", "html").stdout
    )


def _eager_tail(start: float, calls: int = 40) -> list:
    """Eager work after the compiled model's call (a pipeline's decoder, its post-processing): launches and kernels
    on the host's thread and the device, none of them the compiled model's."""
    host = {"pid": 100, "tid": 100}
    tail = []
    for i in range(calls):
        t = start + 200 * i
        tail += [complete("aten::conv2d", t, 120, cat="cpu_op", **host),
                 complete("cudaLaunchKernel", t + 20, 5, cat="cuda_runtime", **host),
                 complete("conv_kernel", t + 60, 50, cat="kernel", pid=0, tid=7)]  # fmt: skip
    return tail


def test_a_first_call_without_step_markers_whose_model_never_runs_again_is_not_judged(run, write_trace):
    """No step markers: the capture is one call of a compiled model (its compile, its graph recorded and replayed)
    and the eager work that follows it in the same call; the model never runs again, so the tail is no steady
    state, and no rule judges its gaps (they read as host-bound before)."""
    scanned = _scan(run, write_trace, [*_warmup_call(), *_eager_tail(30_500)])
    assert scanned["unjudged"] == (
        "the capture is a model's first call, its warm-up (torch.compile compiling and device graphs captured) and"
        " what follows it"
    )
    notes = " ".join(scanned["caveats"])
    assert "the model does not run again after it, so what is left is the rest of its first call" in notes
    assert "no step markers" not in notes and scanned["findings"] == []


def test_a_first_call_whose_compiled_region_runs_after_its_compile_is_not_judged_either(run, write_trace):
    """Releases that compile before they enter the compiled region (torch 2.13 on a CPU, as captured): the compile's
    phases stand alone, and the region's first run, the call's result, follows them, after start-up; it is the first
    call's all the same, and the model does not run again."""
    host = {"pid": 100, "tid": 100}
    first_call = [
        complete("_compile.compile_inner (dynamo_timed)", 100, 20_000, cat="user_annotation", **host),
        complete("Torch-Compiled Region: 0/0", 20_200, 300, cat="cpu_op", **host),
        complete("CompiledFunction", 20_250, 200, cat="cpu_op", **host),
        complete("cudaLaunchKernel", 20_300, 5, cat="cuda_runtime", **host),
        complete("triton_poi_fused_add_0", 20_320, 100, cat="kernel", pid=0, tid=7),
    ]
    scanned = _scan(run, write_trace, [*first_call, *_eager_tail(20_600)])
    assert (scanned["unjudged"] or "").startswith("the capture is a model's first call")


@pytest.mark.parametrize(
    "call", ["Torch-Compiled Region: 0/0", "Torch-Compiled Region", "CompiledFunction", "cudaGraphLaunch"]
)
def test_a_model_that_runs_again_after_its_first_call_leaves_a_tail_to_judge(run, write_trace, call):
    """The same first call, then the model runs twice more (a compiled region called, as PyTorch's profiler names it
    now and before it numbered the regions, AOTAutograd's function, a graph replayed; the first of a name's runs may
    be the first call's own, where the compile comes before the region): the rest is the run's, judged at info for
    want of step markers."""
    cat = "cuda_runtime" if call.startswith("cuda") else "cpu_op"
    again = [complete(call, 30_600 + 100 * i, 50, cat=cat, pid=100, tid=100) for i in range(2)]
    scanned = _scan(run, write_trace, [*_warmup_call(), *again, *_eager_tail(30_800)])
    assert scanned["unjudged"] is None
    assert "no step markers: figures cover the trace after start-up" in " ".join(scanned["caveats"])


def test_a_compiled_model_profiled_past_its_warm_up_keeps_its_steps(run, write_trace):
    """The same warm-up followed by five steps: the steps stand, and nothing says the capture is only warm-up."""
    steps = []
    for n in range(5):
        t = 41_000 + n * 3_000
        steps += [complete(f"ProfilerStep#{n}", t, 2_900, cat="user_annotation", pid=100, tid=100),
                  complete("cudaGraphLaunch", t + 100, 20, cat="cuda_runtime", pid=100, tid=100),
                  complete("triton_poi_fused_add_0", t + 200, 2_500, cat="kernel", pid=0, tid=7)]  # fmt: skip
    scanned = _scan(run, write_trace, [*_warmup_call(), *steps])
    assert scanned["steps"] >= 3 and "no steady step is left" not in " ".join(scanned["caveats"])
    assert scanned["unjudged"] is None


def test_a_real_compiled_model_s_first_call_alone_is_not_judged(run):
    """A real capture (torch 2.13, CPU) of a compiled model's first training step alone, no step marker: the compile
    of its forward and backward, the compiled regions' first runs after it, the optimizer; nothing of it is a steady
    state, and the report leads with that."""
    (scanned,) = json.loads(run("scan", str(FIRST_CALL), "--format", "json").stdout)["traces"]
    assert (
        scanned["unjudged"]
        == "the capture is a model's first call, its warm-up (torch.compile compiling) and what follows it"
    )
    assert scanned["findings"] == []


@pytest.mark.parametrize(
    ("compiled", "recorded", "said"),
    [(1, 1, "1 (2.000 ms, a device graph recording)"), (2, 2, "2 (2.000 ms, all device graph recordings)"),
     (5, 2, "5 (2.000 ms, 2 of them device graph recordings)"), (3, 0, "3 (2.000 ms)"), (0, 0, "none")],
)  # fmt: skip
def test_info_s_compile_row_says_how_many_compiles_only_recorded_a_device_graph(compiled, recorded, said):
    metrics = {"compile.count": compiled, "compile.graph_recordings": recorded, "compile.time_us": 2_000.0,
               "recompilations.count": float("nan")}  # fmt: skip
    assert _compiles(metrics, "ms") == said
