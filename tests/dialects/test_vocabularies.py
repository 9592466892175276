"""Small hand-written traces in each real tool's vocabulary trigger the right rule."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable

import pytest
from conftest import REPO, complete, process_name, thread_name

from perftool import load_trace
from perftool.analysis import compute_metrics
from perftool.analysis.host_calls import blocking_copies
from perftool.dialects import vocabulary

STEP = 1000.0


def _findings(run, write_trace, document, *args):
    result = run("scan", write_trace(document), "--format", "json", "--fail-on", "never", *args)
    assert result.exit_code == 0, result.output
    trace = json.loads(result.stdout)["traces"][0]
    return trace, {f["rule_id"]: f for f in trace["findings"]}


def _serious(findings):
    return sorted(rule for rule, f in findings.items() if f["severity"] != "info")


def _kineto_tracks(host: int, gpu: int) -> list[dict]:
    return [
        process_name(host, "python3"),
        thread_name(host, 1, "MainThread"),
        process_name(gpu, "GPU 0"),
        thread_name(gpu, 7, "stream 7"),
    ]


def test_kineto_long_gaps_between_kernels_are_host_work_named_by_op(run, write_trace):
    host, gpu = 4242, 0
    events = _kineto_tracks(host, gpu)
    for i in range(12):
        t = i * STEP
        events += [
            *_step_with_python(host, i, 380),
            complete("cudaLaunchKernel", t + 400, 10, pid=host, tid=1, cat="cuda_runtime"),
            complete("ampere_sgemm_128x64_tn", t + 420, 480, pid=gpu, tid=7, cat="kernel"),
        ]
    trace, findings = _findings(run, write_trace, {"traceEvents": events, "deviceProperties": [{"id": 0}]})
    assert trace["dialect"] == "kineto" and trace["family"] == "gpu"
    assert _serious(findings) == ["PT001"]
    finding = findings["PT001"]
    assert finding["impact"]["share"] > 0.3
    assert "aten::linear" in finding["fix"]["text"] and "CUDA graph" not in finding["fix"]["text"]
    assert finding["fix"]["changes"] == {} and finding["values"]["launch_share"] == 0
    assert finding["gain"]["kind"] == "upper_bound"
    assert finding["evidence"][0]["track"] == "GPU 0 / stream 7"
    assert "aten::linear" in finding["evidence"][0]["name"]


MEMSET = "Memset (Device)"  # how CUPTI names a fill on the device


def _step_with_python(host: int, i: int, python_us: float) -> list[dict]:
    """Kineto step ``i`` on the host's main thread, opening with ``python_us`` of an op."""
    t = i * STEP
    return [
        complete(f"ProfilerStep#{i}", t, STEP - 1, pid=host, tid=1, cat="user_annotation"),
        complete("aten::linear", t + 10, python_us, pid=host, tid=1, cat="cpu_op"),
    ]


def _slow_launches(
    first_launch_us: float, launch_us: float, launcher: str = "cudaLaunchKernel", work: str = "ampere_sgemm_128x64_tn"
) -> dict:
    """Kineto steps where the GPU waits while the host launches three kernels (``work`` on the device, each
    launched by a ``launcher`` call), each launch ``launch_us`` long (the very first ``first_launch_us``), after
    40 µs of Python."""
    host, gpu = 4242, 0
    events = _kineto_tracks(host, gpu)
    for i in range(8):
        events += _step_with_python(host, i, 40)
        at = i * STEP + 50
        for k in range(3):
            took = first_launch_us if i == k == 0 else launch_us
            events += [
                complete(launcher, at, took, pid=host, tid=1, cat="cuda_runtime"),
                complete(work, at + took + 2, 100, pid=gpu, tid=7, cat="gpu_memset" if work == MEMSET else "kernel"),
            ]
            at += took + 102
    return {"traceEvents": events}


@pytest.mark.parametrize(
    ("launcher", "work"),
    [
        ("cudaLaunchKernel", "ampere_sgemm_128x64_tn"),
        ("hipExtLaunchKernel", "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"),
        ("cudaMemsetAsync", MEMSET),
    ],
)
def test_kineto_idle_inside_slow_launch_calls_is_launch_overhead(run, write_trace, launcher, work):
    # the gaps are long (the device waits out whole 150 µs launches), but the host spends them launching (kernels
    # or fills, by any of the runtimes' launchers)
    trace, findings = _findings(run, write_trace, _slow_launches(150, 150, launcher, work))
    finding = findings["PT001"]
    assert finding["values"]["launch_share"] == 0 and finding["values"]["in_launch_calls_share"] > 0.7
    graph = "HIP graph" if launcher.startswith("hip") else "CUDA graph"  # a GPU driven by HIP calls is AMD's
    assert graph in finding["fix"]["text"] and finding["fix"]["changes"] == {"device_graphs": True}


def test_kineto_one_slow_first_launch_is_not_launch_overhead(run, write_trace):
    # launches of 5 µs, the first one loading its code for 600 µs: the idle is the host's Python, not launching
    trace, findings = _findings(run, write_trace, _slow_launches(600, 5))
    finding = findings["PT001"]
    assert finding["values"]["in_launch_calls_share"] < 0.2
    assert "CUDA graph" not in finding["fix"]["text"] and finding["fix"]["changes"] == {}


@pytest.mark.parametrize(
    ("device", "graph"), [("NVIDIA H100 80GB HBM3", "CUDA graph"), ("AMD Instinct MI300X", "HIP graph")]
)
def test_kineto_short_gaps_between_short_kernels_are_launch_overhead(run, write_trace, device, graph):
    """Launch overhead on a GPU: its fix replays the step as the maker's graph (PyTorch's torch.cuda.graphs captures
    HIP graphs on ROCm)."""
    host, gpu = 4242, 0
    events = _kineto_tracks(host, gpu)
    for i in range(6):
        t = i * STEP
        events.append(complete(f"ProfilerStep#{i}", t, STEP - 1, pid=host, tid=1, cat="user_annotation"))
        for k in range(40):  # a launch every 24 µs for a 12 µs kernel: the device waits 12 µs per launch
            at = t + 10 + 24 * k
            events += [
                complete("aten::add", at, 22, pid=host, tid=1, cat="cpu_op"),
                complete("cudaLaunchKernel", at + 8, 10, pid=host, tid=1, cat="cuda_runtime"),
                complete("vectorized_elementwise_kernel", at + 18, 12, pid=gpu, tid=7, cat="kernel"),
            ]
    trace, findings = _findings(
        run, write_trace, {"traceEvents": events, "deviceProperties": [{"id": 0, "name": device}]}
    )
    finding = findings["PT001"]
    assert finding["severity"] == "error" and finding["values"]["launch_share"] > 0.9
    assert finding["fix"]["text"].startswith(f"Replay the step as a {graph} (torch.cuda.graphs")
    assert finding["fix"]["changes"] == {"device_graphs": True}
    assert trace["idle"]["launch"] > 0.4 and trace["idle"]["host"] < 0.1


def test_torch_npu_operator_compile_after_warmup_calls_for_jit_compile_off(run, write_trace):
    python, cann, hardware = 1, 2, 3
    events = [
        process_name(python, "Python"),
        process_name(cann, "CANN"),
        thread_name(cann, 1, "Thread 1"),
        process_name(hardware, "Ascend Hardware"),
        thread_name(hardware, 0, "Stream 0"),
    ]
    t = 0.0
    for i in range(12):
        compiles = i in (0, 7)  # the first call compiles (warm-up); step 7 sees a new shape
        length = STEP + (3000 if compiles else 0)
        events.append(complete(f"ProfilerStep#{i}", t, length - 1, pid=python, tid=1))
        start = t
        if compiles:
            events.append(complete("AscendCL@aclopCompileAndExecute", t, 3000, pid=cann, tid=1))
            start += 3000
        events += [
            complete("AscendCL@aclmdlExecute", start, 50, pid=cann, tid=1),
            complete("Conv2D", start + 60, 900, pid=hardware, tid=0),
        ]
        t += length
    trace, findings = _findings(run, write_trace, {"traceEvents": events})
    assert trace["dialect"] == "ascend" and trace["family"] == "npu"
    assert _serious(findings) == ["PT003"]
    finding = findings["PT003"]
    assert finding["values"]["count"] == 1 and "jit_compile=True" in finding["message"]
    assert "set_compile_mode(jit_compile=False)" in finding["fix"]["text"]
    assert "last batch" not in finding["fix"]["text"] and "steps_per_execution" not in finding["fix"]["text"]
    assert finding["evidence"][0]["name"] == "AscendCL@aclopCompileAndExecute"


def test_ascend_wait_tasks_are_idle_not_device_work(write_trace):
    """A stream's EVENT_WAIT task (msprof names a task without an op by its task type) spans the time it waits
    for another stream: the device is idle then, not busy, and the host did not synchronise."""
    python, hardware = 1, 3
    events = [process_name(python, "Python"), process_name(hardware, "Ascend Hardware")]
    events += [thread_name(hardware, 0, "Stream 0"), thread_name(hardware, 1, "Stream 1")]
    for i in range(8):
        t = i * STEP
        events += [
            complete(f"ProfilerStep#{i}", t, STEP - 1, pid=python, tid=1),
            complete("MatMulV3", t, 300, pid=hardware, tid=0),
            complete("EVENT_WAIT", t + 300, 500, pid=hardware, tid=0, args={"Task Type": "EVENT_WAIT"}),
            complete("Add", t + 800, 100, pid=hardware, tid=0),
        ]
    metrics = compute_metrics(load_trace(write_trace({"traceEvents": events}))).values
    assert metrics["device.busy_fraction"] == pytest.approx(400 / STEP, abs=0.01)
    assert metrics["sync.count"] == 0  # a stream's wait is no host-device synchronisation


def test_gaudi_cpu_fallback_text(run, write_trace):
    host, hpu = 10, 0
    events = [
        process_name(host, "python3"),
        thread_name(host, 1, "MainThread"),
        process_name(hpu, "HPU 0"),
        thread_name(hpu, 1, "TPC"),
    ]
    for i in range(10):
        t = i * STEP
        events += [
            complete(f"ProfilerStep#{i}", t, STEP - 1, pid=host, tid=1, cat="user_annotation"),
            complete("matmul_bf16", t, 500, pid=hpu, tid=1, cat="kernel"),
            complete("Memcpy DtoH (Device -> Pinned)", t + 500, 50, pid=hpu, tid=1, cat="gpu_memcpy"),
            complete("CPU fallback digamma : self=HPUBFloat16Type", t + 550, 300, pid=host, tid=1, cat="cpu_op"),
            complete("Memcpy HtoD (Pinned -> Device)", t + 850, 50, pid=hpu, tid=1, cat="gpu_memcpy"),
            complete("matmul_bf16_bwd", t + 900, 99, pid=hpu, tid=1, cat="kernel"),
        ]
    trace, findings = _findings(run, write_trace, {"traceEvents": events, "deviceProperties": []})
    assert trace["family"] == "hpu"
    assert _serious(findings) == ["PT004"]
    finding = findings["PT004"]
    assert finding["values"]["ops"] == "digamma" and finding["values"]["dtype"] == "BFloat16"
    assert finding["values"]["calls_per_step"] == 1.0
    assert "Keep digamma on the HPU" in finding["fix"]["text"]


def test_graphcore_stream_and_strided_copies(run, write_trace):
    host, ipu = 1, 2
    events = [
        process_name(host, "Host (Poplar)"),
        thread_name(host, 1, "main"),
        process_name(ipu, "IPU 0"),
        thread_name(ipu, 1, "Execution"),
    ]
    for i in range(16):
        t = i * STEP
        events += [
            complete(f"ProfilerStep#{i}", t, STEP, pid=host, tid=1),
            complete("Engine::run", t, 5, pid=host, tid=1),
            complete("StreamCopyMid", t + 5, 150, pid=ipu, tid=1),
            complete("PreArrange-0", t + 155, 150, pid=ipu, tid=1),
            complete("DstStridedCopy", t + 305, 100, pid=ipu, tid=1),
            complete("layer/MatMul/fwd", t + 405, 350, pid=ipu, tid=1),
        ]
        if i % 4 == 3:
            events.append(complete("StreamCopyMidRemoteBuffer", t + 755, 240, pid=ipu, tid=1))
    trace, findings = _findings(run, write_trace, {"traceEvents": events})
    assert trace["dialect"] == "graphcore" and trace["family"] == "ipu"
    assert _serious(findings) == ["PT005", "PT006", "PT007"]
    assert findings["PT006"]["values"]["names"] == "PreArrange-0, DstStridedCopy"
    assert findings["PT006"]["values"]["compute_ratio"] > 0.7
    assert "num_io_tiles" in findings["PT007"]["fix"]["text"]
    assert "offload_weight_update_variables=False" in findings["PT005"]["fix"]["text"]


@pytest.mark.parametrize(
    ("op", "call"),
    [
        ("aten::item", "cudaStreamSynchronize"),
        ("aten::nonzero", "cudaStreamSynchronize"),
        ("aten::nonzero", "hipEventSynchronize"),
        ("aten::nonzero", "cudaDeviceSynchronize_ptsz"),
        ("PjitFunction(step)", "cuStreamSynchronize"),
        ("PjitFunction(step)", "cuCtxSynchronize"),
        ("aten::item", "hipMemcpyWithStream"),
        ("aten::_local_scalar_dense", "hipMemcpyWithStream"),
    ],
)
def test_sync_every_step_drains_the_queue(run, write_trace, op, call):
    """A wait for the device every step, told by the op reading a scalar back or by the runtime's synchronising
    call alone (an op that syncs without saying so: CUDA's, HIP's, the driver's, a per-thread stream's). HIP reads
    the scalar with a synchronous copy where CUDA copies and synchronises the stream: the op's wait all the same,
    not a blocking copy."""
    document = _reading_back_every_step(
        op, call, lambda t: [complete("aten::add", t + 640, 300, pid=7, tid=1, cat="cpu_op")]
    )
    trace, findings = _findings(run, write_trace, document)
    assert "PT008" in _serious(findings) and "PT001" not in findings and "PT009" not in findings
    assert findings["PT008"]["values"]["per_step"] == 1.0
    assert trace["idle"]["sync"] > 0.3 and trace["idle"]["blocking_copy"] == 0


@pytest.mark.parametrize(("drain", "severity"), [(10, None), (30, "info"), (70, "warning")])
def test_a_sync_every_step_is_reported_from_two_percent_of_the_step(run, write_trace, drain, severity):
    """An aten::item every step after which the device idles ``drain`` µs of each 1 ms step before the host's next
    launch reaches it: 1% is not worth a finding, 3% is one at info, 7% at warning."""

    def next_launch(t: float) -> list[dict]:
        return [
            complete("cudaLaunchKernel", t + 630, 5, pid=7, tid=1, cat="cuda_runtime"),
            complete("volta_gemm", t + 620 + drain, 395 - drain, pid=0, tid=7, cat="kernel"),
        ]

    document = _reading_back_every_step("aten::item", "cudaStreamSynchronize", next_launch)
    trace, findings = _findings(run, write_trace, document)
    assert trace["idle"]["sync"] == pytest.approx(drain / STEP, rel=0.05)
    assert findings.get("PT008", {}).get("severity") == severity


def _reading_back_every_step(op: str, call: str, then: Callable[[float], list[dict]]) -> dict:
    """Ten steps, each launching a 600 µs kernel and waiting for it in ``op`` (host 7) and ``call`` inside it, then
    doing what ``then`` gives for the step starting at its argument."""
    host, gpu = 7, 0
    events = [process_name(host, "python3"), process_name(gpu, "GPU 0")]
    for i in range(10):
        t = i * STEP
        events += [
            complete(f"ProfilerStep#{i}", t, STEP - 1, pid=host, tid=1, cat="user_annotation"),
            complete("cudaLaunchKernel", t, 10, pid=host, tid=1, cat="cuda_runtime"),
            complete("volta_gemm", t + 20, 600, pid=gpu, tid=7, cat="kernel"),
            complete(op, t + 20, 610, pid=host, tid=1, cat="cpu_op"),
            complete(call, t + 30, 595, pid=host, tid=1, cat="cuda_runtime"),
            *then(t),
        ]
    return {"traceEvents": events, "deviceProperties": []}


def test_a_copy_call_blocks_the_host_by_whichever_runtime_makes_it(write_trace):
    """The synchronous copy calls of the CUDA runtime (a per-thread stream's too), the driver (XLA's, versioned) and
    HIP block the host; their asynchronous forms do not."""
    blocking = [
        "cudaMemcpy",
        "cudaMemcpy2D_ptds",
        "cuMemcpyDtoH_v2",
        "cuMemcpyHtoD",
        "cuMemcpy2D_v2",
        "cuMemcpyHtoA_v2",
    ]
    blocking += ["hipMemcpyDtoH", "hipMemcpy"]
    not_blocking = ["cudaMemcpyAsync", "cuMemcpyDtoHAsync_v2", "cuMemcpy3DAsync_v2", "hipMemcpyHtoDAsync"]
    events = [process_name(7, "python3"), process_name(0, "GPU 0")]
    for at, name in enumerate(blocking + not_blocking):
        events.append(complete(name, 100 * at, 50, pid=7, tid=1, cat="cuda_runtime"))
    trace = load_trace(str(write_trace({"traceEvents": events})))
    found = [trace.names[n] for n in trace.name[blocking_copies(trace)].tolist()]
    assert found == blocking


@pytest.mark.parametrize(
    ("op", "tid", "blocks"),
    [
        ("aten::copy_", 1, True),
        ("aten::item", 1, False),
        ("aten::_local_scalar_dense", 1, False),
        ("aten::item", 2, True),
    ],
)
def test_a_synchronous_copy_inside_a_scalar_s_read_is_that_read_s_wait(write_trace, op, tid, blocks):
    """hipMemcpyWithStream in a tensor's copy (.to(), .cpu()) blocks the host as a copy; in aten::item's read of a
    scalar it is that op's wait; another thread's read does not hold this thread's copy, nor a later read of its own."""
    events = [
        process_name(7, "python3"),
        complete(op, 100, 80, pid=7, tid=tid, cat="cpu_op"),
        complete("hipMemcpyWithStream", 110, 60, pid=7, tid=1, cat="cuda_runtime"),
        complete("aten::item", 500, 80, pid=7, tid=1, cat="cpu_op"),
    ]
    trace = load_trace(str(write_trace({"traceEvents": events})))
    assert [trace.names[n] for n in trace.name[blocking_copies(trace)].tolist()] == (["hipMemcpyWithStream"] * blocks)


SAMPLE_TRACES = sorted((REPO / "sample_traces").glob("*/*.trace.json.gz"))


@pytest.mark.parametrize("sample", SAMPLE_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_sample_reads_the_same_by_its_names_alone(run, write_trace, sample):
    """Without perftool's own record of roles and kinds (the ``perftool`` key) and without categories, the
    emulator's traces are read by the names each family's tools use: the same findings, at the same severity."""
    document = json.loads(gzip.decompress(sample.read_bytes()))
    with_metadata, found = _findings(run, write_trace, document)
    del document["perftool"]
    for event in document["traceEvents"]:
        event.pop("cat", None)
    names_only, found_by_names = _findings(run, write_trace, document)
    assert names_only["dialect"] != "emulator" and names_only["family"] == with_metadata["family"]
    assert found_by_names.keys() == found.keys()
    for rule, finding in found_by_names.items():  # a bound alone never makes an error, where the record predicted one
        bounded = finding["gain"]["kind"] == "upper_bound" and found[rule]["severity"] == "error"
        assert finding["severity"] == ("warning" if bounded else found[rule]["severity"]), rule


@pytest.mark.parametrize(
    ("frame", "prepares"),
    [
        ("transformers/models/videomae/image_processing_videomae.py(178): _preprocess_image", True),
        ("transformers/pipelines/video_classification.py(174): read_video_pyav", True),
        ("torchvision/transforms/functional.py(470): resize", True),
        ("<built-in method cvtColor of PyCapsule object at 0x7f>", False),
        ("<built-in function cv2.resize>", True),
        ("PIL/Image.py(3431): open", True),
        ("C:\\Python311\\Lib\\site-packages\\PIL\\Image.py(3431): open", True),  # as Python names it on Windows
        ("C:\\envs\\ml\\torchvision\\transforms\\functional.py(150): to_tensor", True),
        ("transformers/tokenization_utils_base.py(2883): __call__", True),
        ("torch/utils/data/_utils/collate.py(141): default_collate", True),
        ("diffusers/pipelines/pipeline_utils.py(1135): _execution_device", False),
        ("torch/_dynamo/eval_frame.py(403): __call__", False),
        ("vllm/v1/worker/gpu_input_batch.py(309): add_request", False),
    ],
)
def test_python_that_prepares_inputs_is_told_by_its_frames_files_and_functions(write_trace, frame, prepares):
    """Read from a trace's names as the host-bound rule reads them (searched once per name's shape, digits as 0)."""
    trace = load_trace(write_trace({"traceEvents": [complete(frame, 0, 10, cat="python_function")]}))
    assert trace.name_matches(vocabulary.INPUT_PREPARATION).tolist() == [prepares]
