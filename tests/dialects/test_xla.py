"""JAX / XLA traces as jax.profiler writes them: planes as processes, lines as threads, the trailing ``{}``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, complete, error_line, process_name, scanned, thread_name

from perftool.analysis.family import device_family, device_name, framework
from perftool.analysis.intervals import busy
from perftool.analysis.launches import launch_rows
from perftool.analysis.steps import detect_steps
from perftool.dialects.vocabulary import TF_EAGER_OP
from perftool.pipeline.read import load_trace
from perftool.trace import events
from perftool.trace.model import Kind, Phase, Role
from perftool.trace.profiler_dirs import without_copies, xspace_beside

JAX_OPBYOP = DATA / "real" / "jax08_mi300x_attention_opbyop.trace.json.gz"
JAX_RECOMPILE = DATA / "jax_cpu_train_recompile.trace.json.gz"  # tests/data/capture_jax_trace.py's capture
TF_KERAS_FIT = DATA / "tf_cpu_keras_fit_input_bound.xplane.pb"  # tests/data/capture_tf_trace.py's captures
TF_RETRACE = DATA / "tf_cpu_train_retrace.xplane.pb"
TF_RETRACE_EXPORT = DATA / "tf_cpu_train_retrace.trace.json.gz"  # its XSpace as XProf's trace viewer exports it


@pytest.mark.parametrize("compiled", [True, False], ids=["scanner", "msgspec"])
def test_an_event_list_ending_in_an_empty_object_loads_without_it(write_trace, monkeypatch, compiled):
    if not compiled:
        monkeypatch.setattr(events, "_scan", None)
    document = {"displayTimeUnit": "ns", "traceEvents": [complete("a", 1, 2), complete("b", 5, 1), {}]}
    trace = load_trace(write_trace(document))
    assert len(trace) == 2 and [trace.names[n] for n in trace.name.tolist()] == ["a", "b"]


def test_an_event_with_a_phase_but_no_time_is_still_an_error(write_trace, run):
    path = write_trace({"traceEvents": [complete("a", 1, 2), {"ph": "X", "name": "b", "dur": 3}, {}]})
    result = run("info", path)
    assert result.exit_code == 2 and "event 1: missing or non-finite 'ts'" in result.output


def _tpu_trace() -> dict:
    """A TPU's planes: the ops ran 600 µs of each 1 ms step; the program and step lines span the step."""
    events = [
        process_name(701, "/host:CPU"),
        thread_name(701, 1, "python"),
        process_name(1, "/device:TPU:0"),
        *(
            thread_name(1, tid, line)
            for tid, line in enumerate(("Steps", "XLA Modules", "XLA Ops", "Async XLA Ops"), 1)
        ),
        thread_name(1, 5, "Framework Ops"),
    ]
    for step in range(4):
        t = step * 1000.0
        events += [
            complete(str(step), t, 999, pid=1, tid=1),
            complete("jit_train_step(42)", t + 1, 990, pid=1, tid=2),
            complete("fusion.1", t + 10, 400, pid=1, tid=3),
            complete("all-reduce.2", t + 410, 200, pid=1, tid=3),
            complete("copy-start.3", t + 100, 300, pid=1, tid=4),
            complete("jit(train_step)/dot_general", t + 10, 400, pid=1, tid=5),
            complete("$train.py:40 train_step", t + 1, 900, pid=701, tid=1),
            complete("PjitFunction(train_step)", t + 2, 30, pid=701, tid=1),
        ]
    return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": [*events, {}]}


def test_a_tpu_is_its_ops_and_its_steps_come_from_the_steps_line(write_trace):
    trace = load_trace(write_trace(_tpu_trace()))
    assert trace.dialect == "xla" and framework(trace) == "jax"
    roles = {t.thread_name: t.role for t in trace.tracks}
    assert roles == {
        "python": Role.HOST,
        "Steps": Role.SUMMARY,
        "XLA Modules": Role.SUMMARY,
        "XLA Ops": Role.DEVICE,
        "Async XLA Ops": Role.DEVICE,
        "Framework Ops": Role.SUMMARY,
    }
    kind = {trace.names[n]: Kind(k) for n, k in zip(trace.name.tolist(), trace.kind.tolist())}
    assert kind["0"] == Kind.STEP and kind["all-reduce.2"] == Kind.COMMUNICATION and kind["fusion.1"] == Kind.COMPUTE
    assert kind["copy-start.3"] == Kind.D2D and kind["$train.py:40 train_step"] == Kind.OTHER  # the host's Python
    device = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)
    starts, ends = busy(trace, device, 0.0, 4000.0)
    assert float(np.sum(ends - starts)) == pytest.approx(4 * 600)  # the program line's 990 µs are not work
    assert device_name(trace) == "/device:TPU:0"


def _annotated_gpu_steps(
    first: int, count: int, device_every: float = 1000.0, kernel_us: float = 600.0, details: str | None = None
) -> list[dict]:
    """A jitted step per StepTraceAnnotation("train", step_num=n) on the host, 1 ms apart, its launch 150 µs in;
    its kernel (``kernel_us``, with XLA's ``kernel_details`` where given) runs 300 µs after the step's start on a
    device that starts one every ``device_every`` µs: the host's pace by default, behind it where slower."""
    events = [
        process_name(701, "/host:CPU"),
        thread_name(701, 1, "python"),
        thread_name(701, 2, "tf_pjrt_thread_pool/1"),
        process_name(1, "/device:GPU:0"),
        thread_name(1, 16, "Stream #16(Kernel)"),
    ]
    for n in range(count):
        t = n * 1000.0
        kernel_args = {"correlation_id": str(n)} | ({"kernel_details": details} if details else {})
        events += [
            complete("train", t, 990, pid=701, tid=1, args={"step_num": str(first + n)}),
            complete("PjitFunction(train_step)", t + 5, 200, pid=701, tid=1, args={"module_name": "jit_train_step"}),
            complete("cuLaunchKernel", t + 150, 10, pid=701, tid=2, args={"correlation_id": str(n)}),
            complete("loop_fusion", 300 + n * device_every, kernel_us, pid=1, tid=16, args=kernel_args),
        ]
    return events


def test_steps_jax_profiler_s_step_trace_annotation_marks_are_the_steps_with_their_numbers(write_trace, run):
    """StepTraceAnnotation's event is named as the user named it ("train"); its args hold step_num (its _r flag stays
    in the host tracer). Those are the steps, numbered as the user numbered them, not steps inferred from the
    repeating calls."""
    trace = load_trace(write_trace({"traceEvents": [*_annotated_gpu_steps(100, 6), {}]}))
    assert {Kind(k) for k in trace.kind[trace.name == trace.names.index("train")].tolist()} == {Kind.STEP}
    steps = detect_steps(trace)
    assert steps.count == 6 and steps.inferred is None and steps.numbers().tolist() == list(range(100, 106))
    shown = json.loads(
        run("info", write_trace({"traceEvents": _annotated_gpu_steps(100, 6)}), "--format", "json").stdout
    )
    assert shown["step_numbers"][:2] == [100, 101] and "inferred" not in " ".join(shown["caveats"])


def test_a_real_jax_capture_s_step_annotations_are_its_steps_and_its_recompile_is_the_call_that_compiled(run):
    """jaxlib's own export of a jitted loop whose step 5 takes a shorter batch: 8 annotated steps, numbered 0-7, the
    first the warm-up; in step 5 three calls miss jit's cache (the two arrays made of the batch, the training step)
    and each compiles again. The compile is the call that missed, named by its function, counted once (not again
    for the backend_compile_and_load inside it)."""
    trace = load_trace(str(JAX_RECOMPILE))
    steps = detect_steps(trace)
    assert steps.inferred is None and steps.numbers().tolist() == list(range(8))
    compiles = [trace.names[n] for n in trace.name[trace.kind == Kind.COMPILE].tolist()]
    assert sorted(set(compiles)) == ["PjitFunction(convert_element_type)", "PjitFunction(train_step)"]
    assert len(compiles) == 6  # each of the three, first in step 0 and again in step 5
    scanned = json.loads(run("scan", str(JAX_RECOMPILE), "--format", "json", "--fail-on", "never").stdout)
    (finding,) = scanned["traces"][0]["findings"]
    assert finding["rule_id"] == "PT003" and finding["values"]["count"] == 3
    assert finding["values"]["names"] == "PjitFunction(convert_element_type), PjitFunction(train_step)"
    assert "jax.jit compiles once" in finding["fix"]["text"]
    text = run("scan", str(JAX_RECOMPILE), "--fail-on", "never").output
    assert "PjitFunction(train_step)" in text  # the table names the function, not "PjitFunction"


def test_a_real_keras_fit_profiled_by_tensorboard_s_callback_is_tensorflow_s_its_batches_the_steps(run):
    """TensorFlow's own XSpace of model.fit, profiled by the TensorBoard callback (batches 3 to 6), its tf.data map
    calling Python for each element: a TensorFlow job (its iterator's and tf.data's names), the four profiled
    batches its steps, numbered as the callback numbers them (from 0: 2 to 5), and the input pipeline nearly all of
    each."""
    trace = load_trace(str(TF_KERAS_FIT))
    assert trace.dialect == "xla" and framework(trace) == "tensorflow"
    steps = detect_steps(trace)
    assert steps.inferred is None and steps.numbers().tolist() == [2, 3, 4, 5]
    shown = json.loads(run("info", str(TF_KERAS_FIT), "--format", "json").stdout)
    assert shown["metrics"]["input.fraction"] > 0.9


@pytest.mark.parametrize("capture", [TF_RETRACE, TF_RETRACE_EXPORT], ids=["xspace", "json export"])
def test_a_real_tf_function_traced_again_for_new_shapes_is_a_compile_named_by_its_function(run, capture):
    """TensorFlow's XSpace of a custom loop whose tf.function (no input signature) gets a batch of a new size at each
    of its last three steps, and XProf's JSON of it: each of those calls traced the function anew (its args:
    tf_function_call traced-nonXla), building a new graph inside it. Each call is one compile, named by its function,
    the graph building inside it not counted again; PT003 tells the fix in TensorFlow's terms."""
    trace = load_trace(str(capture))
    assert framework(trace) == "tensorflow" and detect_steps(trace).numbers().tolist() == list(range(8))
    compiles = np.flatnonzero(trace.kind == Kind.COMPILE)
    assert [trace.names[n] for n in trace.name[compiles].tolist()] == ["train_step"] * 3
    building = trace.name == trace.names.index("tf.function-graph_building")
    assert building.sum() == 3 and not (trace.kind[building] == Kind.COMPILE).any()
    # the step's graph runs as one execution; only the batch's two constants are made eagerly, each step
    eager = [trace.names[n] for n in trace.name[trace.name_matches(TF_EAGER_OP)].tolist()]
    assert eager == ["EagerLocalExecute: _EagerConst"] * 16
    _, findings = scanned(run, str(capture))
    assert list(findings) == ["PT003"] and findings["PT003"]["values"]["count"] == 3
    assert findings["PT003"]["values"]["names"] == "train_step"
    assert "give tf.function an input_signature" in findings["PT003"]["fix"]["text"]


@pytest.mark.parametrize(
    ("host_call", "op", "told", "not_told"),
    [("TFE_Py_ExecuteCancelable", "gradient_tape/dense/MatMul",
      "in Keras, the TensorBoard callback's profile_batch=(10, 15)", "jax"),
     ("TFE_Py_ExecuteCancelable", "dense/MatMul", 'tf.profiler.experimental.Trace("predict"', "profile_batch"),
     ("PjitFunction(train_step)", "transpose(jvp(dense))/dot_general",
      'jax.profiler.StepTraceAnnotation("train", step_num=step)', "tf.profiler"),
     ("PjitFunction(forward)", "dense/dot_general", 'jax.profiler.StepTraceAnnotation("predict", step_num=step)',
      "tf.profiler")],
    ids=["tensorflow", "tensorflow inference", "jax", "jax inference"],
)  # fmt: skip
def test_a_short_xla_capture_is_told_how_its_framework_marks_steps(write_trace, run, host_call, op, told, not_told):
    """Two marked steps are too few to judge: a TensorFlow job is told Keras's and tf.profiler's ways to mark more (a
    TensorFlow job that trains nothing, tf.profiler's alone: Keras's TensorBoard callback profiles training batches
    only), a JAX job StepTraceAnnotation, neither the other framework's; a job that trains nothing marks each call
    of its model as a prediction."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python"), process_name(1, "/device:GPU:0"),
              thread_name(1, 16, "Stream #16(Kernel)")]  # fmt: skip
    for n in range(2):
        events += [complete("train", n * 1000.0, 990, pid=701, tid=1, args={"step_num": str(n), "_r": "1"}),
                   complete(host_call, n * 1000.0 + 5, 900, pid=701, tid=1),
                   complete("fusion", n * 1000.0 + 100, 300, pid=1, tid=16, args={"name": op})]  # fmt: skip
    trace, _ = scanned(run, str(write_trace({"traceEvents": [*events, {}]})))
    assert [c for c in trace["caveats"] if told in c]
    assert not [c for c in trace["caveats"] if not_told in c]


@pytest.mark.parametrize(
    ("args", "compiled"),
    [({"tracing_count": "3", "tf_function_call": "traced-xla"}, [("train_step", 2005.0)]),
     ({"tf_function_call": "notTraced-xla", "tracing_count": "2"}, [])],
    ids=["traced", "not traced"],
)  # fmt: skip
def test_a_tf_function_call_is_a_compile_where_its_args_say_it_traced(write_trace, args, compiled):
    """The call's args say whether it traced, in any order; a function it calls while it is traced is traced inside
    it, not counted again. A graph built outside any call that says so (in a trace without the call's args) is the
    compile itself."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python")]
    for n in range(4):
        t = n * 1000.0
        said = args if n == 2 else {"tf_function_call": "notTraced-xla", "tracing_count": "2"}
        events += [complete("train", t, 990, pid=701, tid=1, args={"step_num": str(n), "_r": "1"}),
                   complete("train_step", t + 5, 900, pid=701, tid=1, args=said),
                   complete("loss_fn", t + 20, 100, pid=701, tid=1, args=said)]  # fmt: skip
    events.append(complete("tf.function-graph_building", 4100, 50, pid=701, tid=1))
    trace = load_trace(write_trace({"traceEvents": [*events, {}]}))
    rows = np.flatnonzero(trace.kind == Kind.COMPILE).tolist()
    found = [(trace.names[trace.name[n]], trace.ts[n]) for n in rows]
    assert found == [*compiled, ("tf.function-graph_building", 4100)]


def test_a_compile_outside_a_compiled_call_stays_the_compile(write_trace):
    """jit(f).lower(x).compile() compiles with no PjitFunction around it; a cache miss's nested twin events (jaxlib
    records the call twice) give one compile, the outer."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python")]
    events += [
        complete("backend_compile_and_load", 0, 50, pid=701, tid=1),
        complete("PjitFunction(step)", 100, 80, pid=701, tid=1),
        complete("PjitFunction(step)", 100.1, 79.8, pid=701, tid=1),
        complete("backend_compile_and_load", 120, 40, pid=701, tid=1),
        complete("PjitFunction(step)", 200, 5, pid=701, tid=1),
        {},
    ]
    trace = load_trace(write_trace({"traceEvents": events}))
    assert np.flatnonzero(trace.kind == Kind.COMPILE).tolist() == [0, 1]


def test_launches_are_paired_by_their_correlation_id_and_a_host_ahead_has_steps_timed_on_the_device(write_trace):
    """jax.profiler's trace has no flows: a launch call and the kernel it started each carry the tracer's
    correlation_id. A jitted step's host annotation returns as soon as it is dispatched (990 µs a step here) while its
    kernel runs 1.4 ms: paired, the steps are timed where the device runs them, 1.5 ms each."""
    events = _annotated_gpu_steps(0, 6, device_every=1500.0, kernel_us=1400.0)
    trace = load_trace(write_trace({"traceEvents": [*events, {}]}))
    sources, spans = launch_rows(trace)
    assert [trace.ts[s] for s in sources] == [n * 1000.0 + 150 for n in range(6)]
    assert [trace.ts[s] for s in spans] == [300 + n * 1500.0 for n in range(6)]
    steps = detect_steps(trace)
    assert steps.clock == "device" and (steps.end - steps.start)[1:].tolist() == [1500.0] * 5


def test_xla_kernels_launched_on_few_blocks_are_small_grids_with_jax_s_fix(write_trace, run):
    """XLA writes each kernel's launch as one string (kernel_details); a jitted step whose one long kernel runs 4
    blocks on a 132-SM device (the XSpace's core_count, as deviceProperties) leaves most SMs idle: PT019, with the
    fix in JAX's terms, not torch.compile's."""
    details = "regs:64 static_shared:0 dynamic_shared:0 grid:4,1,1 block:256,1,1 occ_pct:50"
    events = _annotated_gpu_steps(0, 6, kernel_us=650.0, details=details)
    document = {"traceEvents": [*events, {}], "deviceProperties": [{"id": 0, "name": "NVIDIA GPU", "numSms": 132}]}
    scanned = json.loads(run("scan", write_trace(document), "--format", "json", "--fail-on", "never").stdout)
    findings = {f["rule_id"]: f for f in scanned["traces"][0]["findings"]}
    assert findings["PT019"]["values"]["blocks"] == 4 and findings["PT019"]["values"]["sms"] == 132
    assert "jax.jit" in findings["PT019"]["fix"]["text"] and "torch" not in findings["PT019"]["fix"]["text"]


def test_a_tpu_s_steps_line_wins_over_the_host_s_step_annotations(write_trace):
    """On a TPU the device's Steps line times the steps where they run; the host's annotations, which dispatch runs
    ahead of, are left as they are."""
    events = _tpu_trace()["traceEvents"][:-1]
    events += [complete("train", n * 1000.0, 950, pid=701, tid=1, args={"step_num": str(n)}) for n in range(4)]
    trace = load_trace(write_trace({"traceEvents": events}))
    assert Kind.STEP not in trace.kind[trace.name == trace.names.index("train")].tolist()
    assert detect_steps(trace).count == 4


def test_a_tpu_trace_has_its_steps_and_its_exposed_all_reduce(write_trace, run):
    result = run("scan", write_trace(_tpu_trace()), "--format", "json", "--fail-on", "never")
    (scanned,) = json.loads(result.stdout)["traces"]
    assert scanned["steps"] == 4 and scanned["step_time_us"] == pytest.approx(999, rel=0.01)
    findings = {f["rule_id"]: f for f in scanned["findings"]}
    fix = findings["PT011"]["fix"]["text"]
    assert "latency-hiding scheduler" in fix and "xla_gpu" not in fix  # libtpu's flags, not a GPU's
    assert "LIBTPU_INIT_ARGS='--xla_tpu_enable_async_collective_fusion=true" in fix


def test_a_jax_gpu_trace_s_exposed_all_reduce_names_the_gpu_s_flag(write_trace, run):
    """The same job on a GPU: XLA's latency-hiding scheduler is turned on by a GPU flag, libtpu's are no use."""
    document = _tpu_trace()
    for event in document["traceEvents"]:
        if event.get("args", {}).get("name") == "/device:TPU:0":
            event["args"]["name"] = "/device:GPU:0"
        elif event.get("pid") == 1 and event.get("tid") == 3 and event.get("name") == "thread_name":
            event["args"]["name"] = "Stream #13(Kernel)"
    (scanned,) = json.loads(run("scan", write_trace(document), "--format", "json", "--fail-on", "never").stdout)[
        "traces"
    ]
    fix = next(f["fix"]["text"] for f in scanned["findings"] if f["rule_id"] == "PT011")
    assert "XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true" in fix and "LIBTPU" not in fix


@pytest.mark.parametrize(
    ("plane", "stream", "flag"),
    [("/device:TPU:0", "XLA Ops", None), ("/device:GPU:0", "Stream #13(Kernel)", "xla_gpu_all_reduce")],
)
def test_small_collectives_are_combined_by_xla_with_a_gpu_s_flag_only_on_a_gpu(write_trace, run, plane, stream, flag):
    """Many small all-reduces a step: XLA's combiner merges them; a GPU raises its threshold with a flag, a TPU's
    combiner is libtpu's, so no GPU flag is given there."""
    events = [process_name(1, plane), thread_name(1, 1, "Steps"), thread_name(1, 3, stream)]
    for step in range(4):
        t = step * 1000.0
        events.append(complete(str(step), t, 999, pid=1, tid=1))
        events += [complete(f"all-reduce.{i}", t + 10 + i * 12, 5, pid=1, tid=3) for i in range(70)]
    (scanned,) = json.loads(run("scan", write_trace({"traceEvents": events}), "--format", "json", "--fail-on",
                                "never").stdout)["traces"]  # fmt: skip
    fix = next(f["fix"]["text"] for f in scanned["findings"] if f["rule_id"] == "PT012")
    assert fix.startswith("Send fewer, larger messages: let XLA combine small collectives into large ones")
    assert ("XLA_FLAGS=--xla_gpu_all_reduce_combine_threshold_bytes" in fix) == (flag is not None)


def _scan_jitted_loop(write_trace, run, frame: str) -> dict:
    """The scan of 8 steps of 1 ms on a TPU: a 550 µs fusion from 10 µs in, while the loop's thread calls its jitted
    step (30 µs) inside its loop's frame, then runs ``frame`` for 390 µs from 600 µs in."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python"), process_name(1, "/device:TPU:0"),
              thread_name(1, 1, "Steps"), thread_name(1, 3, "XLA Ops")]  # fmt: skip
    for step in range(8):
        t = step * 1000.0
        events += [
            complete(str(step), t, 999, pid=1, tid=1),
            complete("fusion.1", t + 10, 550, pid=1, tid=3),
            complete("$train.py:30 train", t, 990, pid=701, tid=1),  # the loop: around the calls, not its own work
            complete("PjitFunction(train_step)", t + 2, 30, pid=701, tid=1),
            complete(frame, t + 600, 390, pid=701, tid=1),
        ]
    (scanned,) = json.loads(run("scan", write_trace({"traceEvents": events}), "--format", "json", "--fail-on",
                                "never").stdout)["traces"]  # fmt: skip
    return scanned


def test_python_the_host_runs_between_jitted_steps_is_its_own_work_the_device_waits_for(write_trace, run):
    """The Python tracer's frames are the host's own work, as Kineto's are: where the loop loads its batch in Python
    between jitted steps (no compiled call inside), the TPU's idle time is the host's, and PT001 names that Python."""
    scanned = _scan_jitted_loop(write_trace, run, "$train.py:40 load_batch")
    host = next(f for f in scanned["findings"] if f["rule_id"] == "PT001")
    assert host["values"]["host_names"] == "$train.py:40 load_batch, PjitFunction(train_step)"
    assert host["values"]["compiled_names"] == "PjitFunction(train_step)"
    # of the 450 µs a step the TPU idles, 440 µs the host is in Python (the loop's frame, then load_batch) or its call
    assert host["values"]["host_share"] == pytest.approx(0.44, abs=0.005)


def test_python_preparing_the_batch_between_jitted_steps_is_the_loop_loading_its_input(write_trace, run):
    """Where that Python preprocesses the batch (its function says so, as the Python tracer names it), the TPU waits
    for input the loop prepares itself: PT002 names that Python, in JAX's terms (an input pipeline's workers)."""
    scanned = _scan_jitted_loop(write_trace, run, "$input_pipeline.py:40 preprocess_batch")
    inputs = next(f for f in scanned["findings"] if f["rule_id"] == "PT002")
    assert inputs["values"]["preparing_names"] == "$input_pipeline.py:40 preprocess_batch"
    assert "Grain's worker processes" in inputs["fix"]["text"] and "DataLoader" not in inputs["fix"]["text"]
    # of the 450 µs a step the TPU idles, the 390 µs in the batch's preparation are the input's
    assert inputs["values"]["input_share"] == pytest.approx(0.39, abs=0.005)
    assert all(f["rule_id"] != "PT001" or f["values"]["host_share"] < 0.06 for f in scanned["findings"])


def test_jax_waiting_for_the_device_is_a_sync_and_the_rest_of_its_python_the_host_s_work(write_trace):
    """JAX's waits for the device are syncs: the span a jax.Array records reading its value back (float(x),
    np.asarray(x)) and the Python tracer's frames of block_until_ready; its other frames are the host running Python,
    as is a frame whose function only ends in the word."""
    names = ["np.asarray(jax.Array)", "$api.py:3041 block_until_ready", "$<unknown> block_until_ready",
             "$train.py:40 load_batch", "$train.py:9 wait_block_until_ready", "PjitFunction(train_step)"]  # fmt: skip
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python"), process_name(1, "/device:GPU:0"),
              thread_name(1, 16, "Stream #16(Kernel)"), complete("loop_fusion", 0, 500, pid=1, tid=16)]  # fmt: skip
    events += [complete(name, 10 * i, 5, pid=701, tid=1) for i, name in enumerate(names)]
    trace = load_trace(write_trace({"traceEvents": events}))
    kinds = {trace.names[n]: Kind(k) for n, k in zip(trace.name.tolist(), trace.kind.tolist())}
    assert [kinds[name] for name in names] == [Kind.SYNC, Kind.SYNC, Kind.SYNC, Kind.OTHER, Kind.OTHER, Kind.HOST_OP]


def test_a_tpu_trace_is_no_fit_s_and_its_gains_stay_bounds(write_trace, run):
    """The emulator models GPUs, NPUs, HPUs and IPUs: calibrate refuses a TPU's trace in one line (it fitted it as a
    GPU, and failed), and scan's gains stay bounds, none from an emulator fitted to it."""
    path = write_trace(_tpu_trace())
    error_line(run("calibrate", path), str(path), "a TPU's trace: the emulator models GPUs, NPUs, HPUs and IPUs")
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert scanned["findings"] and not any("emulator" in json.dumps(f["gain"]) for f in scanned["findings"])


def test_gpu_streams_are_the_device_and_the_runtime_threads_launch(tmp_path):
    trace = load_trace(JAX_OPBYOP)
    assert trace.dialect == "xla" and framework(trace) == "jax"
    assert device_family(trace) == "gpu" and device_name(trace) == "AMD Instinct MI300X (192 GB)"  # from the XSpace
    by_thread = {t.thread_name: t for t in trace.tracks}
    assert by_thread["Stream #16(Kernel)"].role == by_thread["Stream #17(Kernel)"].role == Role.DEVICE
    assert by_thread["python"].role == by_thread["Host Threads/2356"].role == Role.HOST
    launches = trace.name == trace.names.index("hipModuleLaunchKernel")
    copies = trace.name == trace.names.index("hipMemcpyHtoDAsync")
    assert set(trace.kind[launches | copies].tolist()) == {Kind.RUNTIME}
    device = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)
    starts, ends = busy(trace, device, float(trace.ts[device].min()), float(trace.end[device].max()))
    assert float(np.sum(ends - starts)) == pytest.approx(3900, rel=0.05)  # 3.9 ms of kernels, as HTA-style sums say


def test_a_stream_line_is_the_device_whatever_kinds_of_work_its_name_joins(write_trace):
    """XLA's GPU collectors name a stream's line by the kinds of work it ran joined by commas, or by its number alone
    where they knew none: each is the device's work; one of copies alone holds copies."""
    lines = {16: "Stream #16(Kernel,MemcpyD2D)", 17: "Stream #17", 18: "Stream #18(MemcpyD2D,MemcpyOther)"}
    events = [process_name(1, "/device:GPU:0"), *(thread_name(1, tid, name) for tid, name in lines.items())]
    events += [
        complete("loop_fusion", 0, 100, pid=1, tid=16),
        complete("MemcpyD2D", 100, 10, pid=1, tid=16),
        complete("input_reduce_fusion", 0, 50, pid=1, tid=17),
        complete("copy-start", 0, 30, pid=1, tid=18),
        {},
    ]
    trace = load_trace(write_trace({"traceEvents": events}))
    assert {t.thread_name: t.role for t in trace.tracks} == dict.fromkeys(lines.values(), Role.DEVICE)
    kinds = {trace.names[n]: Kind(k) for n, k in zip(trace.name.tolist(), trace.kind.tolist())}
    assert kinds == {
        "loop_fusion": Kind.COMPUTE,
        "MemcpyD2D": Kind.D2D,
        "input_reduce_fusion": Kind.COMPUTE,
        "copy-start": Kind.D2D,
    }


def test_the_real_jax_capture_s_three_runs_are_three_steps_the_first_warm_up(run):
    """The block ran 3 times: 27 compiled calls each, the first followed by 20.7 ms with nothing traced. The last
    run is as long as the others (5.1 ms against 3.6 ms), not cut off: the first run, stretched by that gap, is not
    what a typical step is."""
    steps = detect_steps(load_trace(JAX_OPBYOP))
    assert (steps.count, steps.warmup, steps.truncated) == (3, 1, 0)
    assert (steps.end - steps.start)[1:] / 1e3 == pytest.approx([3.625, 5.063], abs=0.01)
    notes = " ".join(json.loads(run("info", str(JAX_OPBYOP), "--format", "json").stdout)["caveats"])
    assert "3 steps inferred" in notes and "cut off" not in notes
    assert "jax.profiler.StepTraceAnnotation" in notes and "ProfilerStep" not in notes  # how JAX marks a step


def test_a_real_jax_capture_run_op_by_op_is_host_bound_with_jit_advice(run):
    result = run("scan", str(JAX_OPBYOP), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    (scanned,) = json.loads(result.stdout)["traces"]
    assert scanned["device"] == "AMD Instinct MI300X (192 GB)" and scanned["family"] == "gpu"  # from the XSpace
    told = '"AMD Instinct": its 304 compute units and 192 GiB of memory make it an AMD Instinct MI300X (192 GB)'
    assert any(told in note for note in scanned["caveats"])
    host = next(f for f in scanned["findings"] if f["rule_id"] == "PT001")
    assert host["severity"] in ("warning", "error")
    # 81 calls over the capture's 3 runs (each recorded twice, nested): 27 a step, those the device idles through or not
    assert host["values"]["compiled_calls_per_step"] == 27
    # two that disagree, so it recurs; the idle while Python runs between the calls (jnp's wrappers) is the host's too
    assert host["capped"] == "2 steady steps, 3 needed, but it fills 71% of the window"
    assert "PjitFunction(" in host["values"]["host_names"] and "$" not in host["values"]["host_names"]
    assert "jax.jit" in host["fix"]["text"] and "torch" not in host["fix"]["text"]
    # the compiled functions it calls, not the Python frames between them the host is in too
    assert (
        "27 compiled functions per step (PjitFunction(add), PjitFunction(matmul), PjitFunction(multiply) and 10 more)"
        in host["fix"]["text"]
    )


def test_a_trace_from_an_unknown_producer_without_a_device_says_so(write_trace, run):
    path = write_trace({"traceEvents": [complete("work", 1, 2, pid="main"), complete("more", 4, 2, pid="io")]})
    result = run("scan", path)
    assert result.exit_code == 0
    said = " ".join(result.output.split())
    assert "no device found, and perftool does not know what wrote this trace (processes: pid main, pid io)" in said
    assert "PyTorch's profiler (Kineto, and the autograd profiler before it), torch_npu/msprof" in said
    assert "--dialect NAME reads it as one of them (emulator, ascend, graphcore, xla, rpd, autograd, kineto)" in said


def test_a_kineto_capture_of_the_host_alone_says_so_and_names_its_processes(run):
    result = run("scan", str(DATA / "real" / "cpu_only_gloo.json.gz"))
    said = " ".join(result.output.split())
    assert "no device activity: a capture of the host alone (processes: pyper:trainer:8:2)" in said


def test_a_capture_naming_devices_it_holds_no_work_of_says_to_capture_them(write_trace, run):
    document = {
        "deviceProperties": [{"id": i, "name": "NVIDIA A100-SXM4-80GB"} for i in range(8)],
        "traceEvents": [complete("aten::linear", 1, 50, cat="cpu_op"), complete("aten::relu", 60, 5, cat="cpu_op")],
    }
    said = " ".join(run("scan", write_trace(document)).output.split())
    assert "the trace names 8 devices (NVIDIA A100-SXM4-80GB) but holds none of their work" in said
    assert "ProfilerActivity.CUDA" in said


XSPACE = DATA / "real" / "jax08_mi300x_attention_opbyop.xplane.pb"


def test_an_xspace_s_device_planes_name_the_device_its_json_export_does_not(tmp_path, run):
    """The trace viewer's events leave out what a device plane records (vendor, compute units, memory): read from
    the planes, they tell the roofline the MI300X the capture ran on; its JSON export, alone, leaves it unknown."""
    from_xspace = load_trace(XSPACE).metadata["deviceProperties"]
    assert from_xspace == [{"id": 0, "name": "AMD Instinct", "numSms": 304, "totalGlobalMem": 206_141_652_992,
                            "memoryBandwidth": 2_662_400_000_000}]  # fmt: skip
    alone = shutil.copy(JAX_OPBYOP, tmp_path / JAX_OPBYOP.name)
    specs = [json.loads(run("info", str(path), "--format", "json").stdout)["roofline"]["device_spec"] for path in
             (XSPACE, alone, JAX_OPBYOP)]  # fmt: skip
    assert specs == ["MI300X", None, "MI300X"]  # the JSON beside its XSpace (as in tests/data/real) takes its device
    named = [device_name(load_trace(path)) for path in (XSPACE, alone)]
    assert named == ["AMD Instinct MI300X (192 GB)", "/device:GPU:0"]  # the model its units and memory make it


def test_a_tpu_capture_without_steps_or_host_has_its_program_s_executions_as_steps(write_trace):
    """The host's trace left out (host_tracer_level=0) and no Steps line: the program run most, 3 times or more,
    is the loop's step; a program run once (an initialisation) is not."""
    events = [
        process_name(1, "/device:TPU:0"),
        thread_name(1, 2, "XLA Modules"),
        thread_name(1, 3, "XLA Ops"),
        complete("jit_init(7)", 0, 5_000, pid=1, tid=2),
        complete("fusion.0", 10, 4_900, pid=1, tid=3),
    ]
    for step in range(5):
        t = 10_000 + step * 1_000.0
        events += [complete("jit_train_step(42)", t, 900, pid=1, tid=2), complete("fusion.1", t + 5, 880, pid=1, tid=3)]
    steps = detect_steps(load_trace(write_trace({"traceEvents": events})))
    assert steps.count == 5 and steps.start[0] == pytest.approx(10_000)


def _log_directory(root, runs: dict[str, list]) -> None:
    """A jax.profiler log directory: ``root/plugins/profile/RUN/`` holding each run's files, copied from these."""
    for run_name, files in runs.items():
        folder = root / "plugins" / "profile" / run_name
        folder.mkdir(parents=True)
        for source in files:
            if source.name == "perfetto_trace.json.gz":  # jax.profiler.trace(..., create_perfetto_trace=True)
                shutil.copy(JAX_OPBYOP, folder / source.name)
                continue
            suffix = ".xplane.pb" if source.name.endswith(".xplane.pb") else ".trace.json.gz"
            shutil.copy(source, folder / f"host{suffix}")


@pytest.mark.parametrize(
    "files",
    [[JAX_OPBYOP], [JAX_OPBYOP, XSPACE], [JAX_OPBYOP, XSPACE, Path("perfetto_trace.json.gz")]],
    ids=["its JSON", "its JSON and XSpace", "its JSON, XSpace and Perfetto copy"],
)
def test_a_log_directory_as_jax_profiler_writes_it_reads_as_its_run(tmp_path, run, files):
    """Named as jax.profiler.trace(log_dir) wrote it, the run's host is read once: where a JSON trace, the XSpace
    and the Perfetto copy of one host lie side by side, they are one host, not two or three ranks."""
    _log_directory(tmp_path, {"2026_11_29_00_00_00": files})
    result = run("scan", str(tmp_path), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (scanned,) = report["traces"]
    assert report["job"] is None and scanned["path"].endswith("plugins/profile/2026_11_29_00_00_00/host.trace.json.gz")
    info = run("info", str(tmp_path), "--format", "json")
    assert info.exit_code == 0 and json.loads(info.stdout)["source"] == scanned["path"], info.output


def test_a_host_s_json_takes_its_device_from_the_xspace_beside_it(tmp_path, run):
    """The JSON export leaves out what the planes record of the device; where the host's XSpace lies beside it (as
    jax.profiler writes a run), the device is named from there: the roofline has the MI300X's peaks."""
    _log_directory(tmp_path, {"2026_11_29_00_00_00": [JAX_OPBYOP, XSPACE]})
    shown = json.loads(run("info", str(tmp_path), "--format", "json").stdout)
    assert shown["source"].endswith("host.trace.json.gz") and shown["roofline"]["device_spec"] == "MI300X"


@pytest.mark.parametrize("beside", [True, False], ids=["its XSpace beside", "alone"])
def test_a_json_export_cut_at_its_cap_is_read_from_its_xspace_or_said_to_be_cut(tmp_path, run, monkeypatch, beside):
    """jax.profiler's export keeps the earliest events up to its cap: an export holding as many is cut. Its XSpace,
    where it lies beside it, is read instead (every event); alone, a note says what is missing and where it is.
    The export here holds 4,092 events, its XSpace 4,092 too: the cap set at that count for the test."""
    import perftool.pipeline.read as reading

    files = [JAX_OPBYOP, XSPACE] if beside else [JAX_OPBYOP]
    _log_directory(tmp_path, {"2026_11_29_00_00_00": files})
    monkeypatch.setattr(reading, "JAX_EXPORT_MAX_EVENTS", 4_092)
    shown = json.loads(run("info", str(tmp_path), "--format", "json").stdout)
    notes = " ".join(shown["caveats"])
    if beside:
        assert shown["source"].endswith("host.xplane.pb")
        assert "read from host.xplane.pb, the XSpace host.trace.json.gz was made from: the export holds 4,092" in notes
    else:
        assert shown["source"].endswith("host.trace.json.gz")
        assert "host.trace.json.gz holds 4,092 events, as many as jax.profiler's JSON export keeps" in notes
        assert "scan host.xplane.pb, the XSpace it was made from" in notes
    for cap in (4_091, 4_093):  # more events than a cap (another exporter's), or fewer: not cut
        monkeypatch.setattr(reading, "JAX_EXPORT_MAX_EVENTS", cap)
        shown = json.loads(run("info", str(tmp_path), "--format", "json").stdout)
        assert shown["source"].endswith("host.trace.json.gz") and "export keeps" not in " ".join(shown["caveats"])


def test_hosts_whose_names_hold_dots_are_told_apart(tmp_path):
    """A run's files are named by host, and a host's name may hold dots: each host's XSpace is its own, and one
    beside another host's JSON is still read."""
    files = [tmp_path / name for name in ("a.b.trace.json.gz", "a.b.xplane.pb", "a.c.xplane.pb")]
    assert [f.name for f in without_copies(files)] == ["a.b.trace.json.gz", "a.c.xplane.pb"]
    for file in files:
        file.touch()
    assert xspace_beside(str(files[0])) == str(files[1]) and xspace_beside(str(tmp_path / "a.json.gz")) is None


def test_a_run_of_its_xspace_alone_is_read(tmp_path, run):
    _log_directory(tmp_path, {"2026_11_29_00_00_00": [XSPACE]})
    result = run("scan", str(tmp_path), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    (scanned,) = json.loads(result.stdout)["traces"]
    assert scanned["path"].endswith("host.xplane.pb") and scanned["dialect"] == "xla"


def test_xprof_s_trace_viewer_cache_alone_is_refused_naming_the_xspace_to_read(tmp_path, run):
    """XProf keeps what it showed of a run as HOST.SSTABLE (a LevelDB table) beside the run's compiled modules
    (*.hlo_proto.pb); perftool reads neither, and says to give it the XSpace the cache was made from, whether named
    as a log directory, the folder of its runs, a run's folder or the file."""
    folder = tmp_path / "plugins" / "profile" / "2026_11_29_00_00_00"
    folder.mkdir(parents=True)
    (folder / "node-1.SSTABLE").write_bytes(b"\x00" * 64)
    (folder / "jit_step(3).hlo_proto.pb").write_bytes(b"\x08\x01")
    for named in (tmp_path, folder.parent, folder):
        result = run("scan", str(named))
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert "node-1.SSTABLE is XProf's trace-viewer cache" in result.output
        assert result.output.rstrip().endswith("scan the node-1.xplane.pb it was made from")
    result = run("info", str(folder / "node-1.SSTABLE"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "node-1.SSTABLE: XProf's trace-viewer cache, which perftool does not read" in result.output


def test_a_log_directory_of_several_runs_reads_its_latest_and_names_the_others(tmp_path, run):
    """jax.profiler adds a run each time it traces into a log directory: the directory reads as its latest run, named
    by the time it started, whatever order the folders were made in; the trace says which run it is and which it
    left out, and a run named outright says where it stands among the others."""
    runs = ["2026_11_29_00_00_00", "2026_11_28_23_00_00", "2026_11_29_01_00_00", "2026_11_28_22_00_00",
            "2026_11_28_21_00_00"]  # fmt: skip
    _log_directory(tmp_path, {name: [JAX_OPBYOP] for name in runs})
    for named in (tmp_path, tmp_path / "plugins", tmp_path / "plugins" / "profile"):  # the log directory, or on the way
        result = run("scan", str(named), "--format", "json", "--fail-on", "never")
        assert result.exit_code == 0, result.output
        (scanned,) = json.loads(result.stdout)["traces"]
        assert scanned["path"].endswith("plugins/profile/2026_11_29_01_00_00/host.trace.json.gz")
        assert (
            "the log directory holds 5 jax.profiler runs and this trace is the latest, 2026_11_29_01_00_00; the 4"
            " earlier runs (2026_11_29_00_00_00, 2026_11_28_23_00_00, 2026_11_28_22_00_00 and 1 more) are left out:"
            " give a run's folder (plugins/profile/RUN) to read another" in scanned["caveats"]
        )
    middle = tmp_path / "plugins" / "profile" / "2026_11_28_23_00_00"
    info = json.loads(run("info", str(middle), "--format", "json").stdout)
    assert info["source"].endswith("2026_11_28_23_00_00/host.trace.json.gz")
    assert (
        "this trace is one, 2026_11_28_23_00_00; the 2 later runs (2026_11_29_00_00_00, 2026_11_29_01_00_00) and the"
        " 2 earlier runs (2026_11_28_22_00_00, 2026_11_28_21_00_00) are left out" in " ".join(info["caveats"])
    )


def test_a_log_directory_s_runs_named_otherwise_are_taken_in_the_order_they_were_written(tmp_path, run):
    _log_directory(tmp_path, {"b_first": [JAX_OPBYOP], "a_second": [JAX_OPBYOP]})
    for age, name in enumerate(("a_second", "b_first")):
        os.utime(tmp_path / "plugins" / "profile" / name, (1_000_000 - age * 10, 1_000_000 - age * 10))
    (scanned,) = json.loads(run("scan", str(tmp_path), "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert "/a_second/" in scanned["path"]
    assert "is the latest, a_second; the 1 earlier run (b_first) is left out" in " ".join(scanned["caveats"])
