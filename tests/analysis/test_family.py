"""What a job is, as far as the emulator's settings go: those its framework and kind give it nothing to set."""

from __future__ import annotations

import json

import pytest
from conftest import complete, process_name, thread_name

from perftool.analysis.family import job_kind, serving_engine, settings_absent
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.rules.catalog import load_catalog


@pytest.mark.parametrize(
    ("family", "framework", "kind", "absent"),
    [
        ("gpu", "pytorch", "training", set()),
        ("npu", "pytorch", "training", {"loop_size"}),
        ("npu", "tensorflow", "training", {"pin_memory", "pin_readback"}),
        ("gpu", "jax", "training", {"pin_memory", "pin_readback"}),
        ("gpu", "tensorflow", "training", {"pin_memory", "pin_readback"}),
        ("gpu", "pytorch", "inference", {"replicas.bucket", "replicas.overlap", "gradient_accumulation",
                                         "offload_optimizer"}),
        ("gpu", "pytorch", "serving", {"prefetch_depth", "pin_memory", "pin_readback", "workload.input_workers",
                                       "replicas.bucket", "replicas.overlap", "gradient_accumulation",
                                       "offload_optimizer"}),
    ],
)  # fmt: skip
def test_the_settings_a_job_has_nothing_to_set(family, framework, kind, absent):
    assert settings_absent(family, framework, kind) == absent


def _xla_kernels(*paths: str) -> dict:
    """A JAX capture's GPU kernels, each naming its op's path in its args as XLA's tracer records it."""
    events = [process_name(1, "/device:GPU:0"), thread_name(1, 16, "Stream #16(Kernel)"),
              process_name(701, "/host:CPU"), thread_name(701, 1, "python")]  # fmt: skip
    for n, path in enumerate(paths):
        args = {"correlation_id": str(n), "name": path, "hlo_module": "jit_train_step"}
        events.append(complete("loop_fusion", n * 100.0, 50, pid=1, tid=16, args=args))
    return {"traceEvents": [*events, {}]}


@pytest.mark.parametrize(
    ("paths", "kind"),
    [
        (["jit(train_step)/jit(main)/dot_general", "jit(train_step)/jit(main)/transpose(jvp(mlp))/dot_general"],
         "training"),
        (["jit(step)/while/body/gradient_tape/dense/MatMul"], "training"),
        (["jit(forward)/jit(main)/dot_general", "jit(forward)/jit(main)/jvp(mlp)/tanh"], "inference"),
    ],
    ids=["jax grad", "tensorflow gradient tape", "forward and a jvp"],
)  # fmt: skip
def test_an_xla_job_trains_where_its_kernels_op_paths_are_a_backward_s(write_trace, paths, kind):
    """XLA's kernels are named by fusion; their op paths, in their args, say which are a backward's: a transposed jvp
    in JAX's name stack (reverse mode; a jvp alone is forward mode), TensorFlow's gradient tape."""
    assert job_kind(load_trace(write_trace(_xla_kernels(*paths)))) == kind


def test_vllm_s_model_runner_annotations_make_a_serving_job(write_trace):
    """vLLM's V1 model runner marks its phases (gpu_model_runner: preprocess, forward, sample): a capture of them is a
    serving engine's, even where no vllm:: op or vLLM frame is recorded."""
    events = [process_name(100, "python"), process_name(0, "GPU 0"), thread_name(0, 7, "stream 7")]
    for n, phase in enumerate(("preprocess", "forward", "sample")):
        events.append(complete(f"gpu_model_runner: {phase}", n * 100.0, 90, pid=100, tid=1, cat="user_annotation"))
    events.append(complete("sm90_xmma_gemm_bf16bf16_bf16f32", 120, 60, pid=0, tid=7, cat="kernel"))
    assert job_kind(load_trace(write_trace({"traceEvents": events}))) == "serving"
    for event in events[3:6]:  # the same phases named otherwise: a forward with no engine
        event["name"] = event["name"].replace("gpu_model_runner", "model")
    assert job_kind(load_trace(write_trace({"traceEvents": events}))) == "inference"


def _served(names: list[str]) -> dict:
    """A forward's kernel, and host events of ``names`` around it (a name starting ``void`` is a kernel of its own)."""
    events = [process_name(100, "python"), process_name(0, "GPU 0"), thread_name(0, 7, "stream 7")]
    events.append(complete("sm90_xmma_gemm_bf16bf16_bf16f32", 120, 60, pid=0, tid=7, cat="kernel"))
    for n, name in enumerate(names):
        kernel = name.startswith("void ")
        events.append(complete(name, 200.0 + n * 100, 90, pid=0 if kernel else 100, tid=7 if kernel else 1,
                               cat="kernel" if kernel else "cpu_op"))  # fmt: skip
    return {"traceEvents": events}


@pytest.mark.parametrize(
    ("names", "engine"),
    [
        (["vllm::unified_attention_with_output"], "vllm"),
        (["vllm/v1/worker/gpu_model_runner.py(2758): _determine_batch_execution_and_padding"], "vllm"),
        (["gpu_model_runner: forward"], "vllm"),
        (["execute_new_4_cached_28"], "vllm"),
        (["sglang/srt/model_executor/cuda_graph_runner.py(1496): replay"], "sglang"),
        (["step[DECODE bs=32]"], "sglang"),
        (["step[PREBUILT bs=8]"], "sglang"),  # a disaggregated decode server's iteration
        (["sglang/srt/managers/scheduler.py(900): run_batch", "vllm/model_executor/layers/linear.py(300): forward"],
         "sglang"),
        (["step[DECODE bs=32]", "void paged_attention_ll4mi_QKV_mfma16_kernel<0, (vllm::Fp8KVCacheDataType)0>()"],
         "sglang"),
        (["execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk3200sqsq32sqsk3200)"], None),
        (["vllm::unified_attention", "autograd::engine::evaluate_function: MmBackward0"], None),
    ],
    ids=["vllm op", "vllm frame", "vllm runner", "vllm iteration", "sglang frame", "sglang iteration",
         "sglang disaggregated decode iteration",
         "sglang running vllm layers", "sglang running a kernel templated on vllm types", "either engine's iteration",
         "training"],
)  # fmt: skip
def test_a_serving_trace_names_its_engine(write_trace, names, engine):
    """The engine is told by its own names: SGLang's wherever they are (it runs vLLM's kernels, and its older
    releases vLLM's layers); vLLM's otherwise. An iteration annotation both engines write names neither, and a job
    with a backward serves nothing."""
    trace = load_trace(write_trace(_served(names)))
    assert serving_engine(trace) == engine
    assert job_kind(trace) == ("training" if any("Backward" in name for name in names) else "serving")


def test_the_real_serving_captures_name_their_engines_and_the_fixes_are_told_in_its_terms():
    from conftest import DATA

    vllm = load_trace(str(DATA / "real" / "b200_vllm_gptoss_eager_tp8_rank0.json.gz"))
    sglang = load_trace(str(DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz"))
    assert (serving_engine(vllm), serving_engine(sglang)) == ("vllm", "sglang")
    assert serving_engine(load_trace(str(DATA / "real" / "mtia_inference.json.gz"))) is None
    found, scope = analyse_trace(vllm, load_catalog())
    assert scope.contexts == ("pytorch", "vllm", "serving", "inference")
    (fix,) = [f.fix.text for f in found.findings if f.rule_id == "PT001"]  # the eager iteration: vLLM's own flags
    assert "Let vLLM compile the model and replay its iterations as CUDA graphs" in fix  # a B200's
    assert "drop --enforce-eager" in fix and "SGLang" not in fix


@pytest.mark.parametrize(
    ("name", "job"),
    [
        ("b200_vllm_gptoss_eager_tp8_rank0.json.gz", "vLLM serving"),
        ("sglang_mi300x_qwen3_8b_decode_window.json.gz", "SGLang serving"),
        ("resnet50_pt18_workers0.json.gz", "training"),
        ("mtia_inference.json.gz", "inference"),
        ("cpu_only_gloo.json.gz", ""),  # no device computes: nothing said of the job
    ],
)
def test_scan_and_info_say_what_the_job_is_as_the_advice_takes_it(run, name, job):
    """The reports say what perftool takes the job for (the advice's terms follow it): in the headline beside the
    device, and in the JSON documents; a serving job by the engine its trace names."""
    from conftest import DATA

    path = str(DATA / "real" / name)
    scanned = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)
    assert scanned["traces"][0]["job_kind"] == job
    assert json.loads(run("info", path, "--format", "json").stdout)["job_kind"] == job
    for command in (["scan", path, "--fail-on", "never"], ["info", path]):
        headline = " ".join(run(*command).stdout.split())
        said = [kind for kind in ("training", "inference", "serving") if f" · {kind}" in headline]
        assert f" · {job}" in headline if job else said == []


@pytest.mark.parametrize(
    ("properties", "device", "told"),
    [
        ({"name": "AMD Radeon Graphics", "numSms": 304, "totalGlobalMem": 206_141_652_992},
         "AMD Instinct MI300X (192 GB)",
         '"AMD Radeon Graphics": its 304 compute units and 192 GiB of memory make it an AMD Instinct MI300X (192 GB)'),
        ({"name": "AMD Radeon Graphics", "numSms": 104}, "AMD Instinct MI250 / MI210 (one GCD, 64 GB)",
         '"AMD Radeon Graphics": its 104 compute units make it an AMD Instinct MI250 / MI210 (one GCD, 64 GB)'),
        ({"name": "AMD Radeon Graphics", "numSms": 304}, "AMD Radeon Graphics", None),  # an MI300X's or an MI325X's
        ({"name": "AMD Radeon Graphics", "numSms": 7}, "AMD Radeon Graphics", None),  # no model of 7 CUs known
        ({"name": "AMD Instinct MI300X VF", "numSms": 304}, "AMD Instinct MI300X VF", None),  # it names its model
    ],
    ids=["units and memory", "units alone", "units of two models", "unknown units", "a model's name"],
)  # fmt: skip
def test_a_device_named_only_by_its_vendor_is_named_as_the_model_its_units_make_it(run, write_trace, properties,
                                                                                   device, told):  # fmt: skip
    """ROCm names a CDNA device it does not know "AMD Radeon Graphics" (an XSpace's plane, "AMD Instinct"): where
    its compute units (and memory) make it one model, reports name that model, and a note says how it was told."""
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        complete("aten::mm", 0, 50, cat="cpu_op", pid=100, tid=100),
        complete("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", 10, 40, cat="kernel", pid=0, tid=7),
    ]
    path = write_trace({"schemaVersion": 1, "deviceProperties": [{"id": 0, **properties}], "traceEvents": events})
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert scanned["device"] == device
    notes = [note for note in scanned["caveats"] if "the trace names the device only" in note]
    assert notes == ([f"the trace names the device only {told}, whose figures the roofline and the fit use"]
                     if told else [])  # fmt: skip
