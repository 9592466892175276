"""Write the small traces in each real profiler's vocabulary that tests/dialects/test_real_vocabularies.py reads.

Each one is hand-made to show one kind of capture users bring (older Kineto, ROCm, a non-CUDA
accelerator, torch_npu, a start-up-dominated benchmark, ...) with a known right verdict. Run it from
the repository root after changing a fixture: ``python tests/data/make_vocabulary_fixtures.py``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent / "vocab"
HOST, GPU = 4242, 0


def x(name, ts, dur, pid, tid, cat="", **args):
    event = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3)}
    return event | ({"args": args} if args else {})


def meta(kind, pid, tid, **args):
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def kineto_processes(device_label="GPU 0", host_label="CPU"):
    return [
        meta("process_name", HOST, 0, name="python3"),
        meta("process_labels", HOST, 0, labels=host_label),
        meta("thread_name", HOST, 1, name="thread 1 (python3)"),
        meta("process_name", GPU, 0, name="python3"),
        meta("process_labels", GPU, 0, labels=device_label),
        meta("process_sort_index", GPU, 0, sort_index=16777216),
        meta("thread_name", GPU, 7, name="stream 7"),
    ]


TORCH_NPU = 1, 2, 3  # pids of torch_npu's Python, CANN and Ascend Hardware processes


def torch_npu_processes():
    """torch_npu's processes: Python and CANN host threads, one Ascend Hardware stream."""
    python, cann, hardware = TORCH_NPU
    return [
        meta("process_name", python, 0, name="Python"),
        meta("thread_name", python, 11, name="Thread 11"),
        meta("process_name", cann, 0, name="CANN"),
        meta("thread_name", cann, 11, name="Thread 11"),
        meta("process_name", hardware, 0, name="Ascend Hardware"),
        meta("thread_name", hardware, 5, name="Stream 5"),
    ]


def flow(ident, launch_ts, kernel_ts, cat="ac2g"):
    return [
        {"ph": "s", "id": ident, "pid": HOST, "tid": 1, "ts": launch_ts, "cat": cat, "name": cat},
        {"ph": "f", "id": ident, "pid": GPU, "tid": 7, "ts": kernel_ts, "cat": cat, "name": cat, "bp": "e"},
    ]


def step_loop(steps: int, period: float, kernel_at: float, kernel_us: float, extra=lambda t: []) -> list[dict]:
    """``steps`` ProfilerSteps of ``period`` µs, each launching one kernel ``kernel_at`` µs in, plus ``extra(t)``."""
    events = []
    for i in range(steps):
        t = i * period
        events += [
            x(f"ProfilerStep#{i}", t, period - 1, HOST, 1, "user_annotation"),
            *extra(t),
            x("cudaLaunchKernel", t + kernel_at - 10, 8, HOST, 1, "cuda_runtime"),
            x("ampere_sgemm_128x64_tn", t + kernel_at, kernel_us, GPU, 7, "kernel"),
        ]
    return events


def legacy_kineto():
    """PyTorch 1.8 categories; each step waits 600 µs in the DataLoader and copies its input from pageable memory."""
    events = kineto_processes(device_label="")
    for i in range(10):
        t = i * 2000.0
        events += [
            x(f"ProfilerStep#{i}", t, 1990, HOST, 1, "Operator"),
            x("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t + 5, 600, HOST, 1, "DataLoader"),
            x("aten::to", t + 610, 200, HOST, 1, "Operator"),
            x("cudaMemcpyAsync", t + 615, 190, HOST, 1, "Runtime"),
            x("Memcpy HtoD (Pageable -> Device)", t + 620, 180, GPU, 7, "Memcpy", bytes=3145728),
            x("aten::linear", t + 820, 40, HOST, 1, "Operator"),
            x("cudaLaunchKernel", t + 825, 8, HOST, 1, "Runtime"),
            x("volta_sgemm_128x64_nn", t + 835, 1150, GPU, 7, "Kernel"),
        ]
    return {"traceEvents": events}


def rocm_launch_bound():
    """ROCm 6 names: hipLaunchKernel launches 12 µs kernels every 24 µs, so the GPU waits on launches."""
    events = kineto_processes()
    ident = 0
    for i in range(6):
        t = i * 1000.0
        events.append(x(f"ProfilerStep#{i}", t, 999, HOST, 1, "user_annotation"))
        for k in range(40):
            at = t + 10 + 24 * k
            events += [
                x("aten::add", at, 22, HOST, 1, "cpu_op"),
                x("hipLaunchKernel", at + 8, 10, HOST, 1, "cuda_runtime"),
                x("void at::native::vectorized_elementwise_kernel<4>", at + 18, 12, GPU, 7, "kernel"),
                *flow(ident := ident + 1, at + 8, at + 18),
            ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "AMD Instinct MI250X"}], "traceEvents": events}


def accelerator():
    """An accelerator that is not a GPU: its own process label, sort index and device categories."""
    device = 3
    events = [
        meta("process_name", HOST, 0, name="service"),
        meta("process_labels", HOST, 0, labels="CPU"),
        meta("thread_name", HOST, 1, name="thread 1 (service)"),
        meta("process_name", device, 0, name="MTIA 3"),
        meta("process_labels", device, 0, labels="MTIA 3"),
        meta("process_sort_index", device, 0, sort_index=5000003),
        meta("thread_name", device, 101, name="Stream 101"),
        meta("thread_name", device, 100, name="Stream 101 Submission Queue"),
    ]
    for i in range(8):
        t = i * 1000.0
        events += [
            x(f"ProfilerStep#{i}", t, 999, HOST, 1, "user_annotation"),
            x("aten::cat", t + 5, 300, HOST, 1, "cpu_op"),
            x("runFunction - job_prep_and_submit_for_execution", t + 310, 20, HOST, 1, "mtia_runtime"),
            x("synchronizeStream", t + 312, 3, device, 100, "mtia_runtime"),
            x("dma_request", t + 335, 40, device, 101, "mtia_ccp_events", direction="HOST_TO_DEVICE"),
            x("pe_exe", t + 380, 600, device, 101, "mtia_ccp_events"),
            x("event_wait", t + 985, 10, device, 101, "mtia_ccp_events"),
        ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 3, "name": "ACCEL-X"}], "traceEvents": events}


def startup_dominated():
    """A benchmark capture: 20 s of context creation, warm-up annotations, then a short measured region; no steps."""
    events = kineto_processes() + [
        x("aten::empty", 0, 20_000_100, HOST, 1, "cpu_op"),
        x("cudaDeviceGetStreamPriorityRange", 50, 20_000_000, HOST, 1, "cuda_runtime"),
    ]
    t = 20_000_200.0
    for phase in ("warmup", "warmup", "measure", "measure"):
        events.append(x(f"[param|model|{phase}|forward]", t, 900, HOST, 1, "user_annotation"))
        for k in range(3):
            events += [
                x("aten::conv2d", t + 10 + 300 * k, 250, HOST, 1, "cpu_op"),
                x("cudaLaunchKernel", t + 250 + 300 * k, 8, HOST, 1, "cuda_runtime"),
                x("cudnn_convolution_kernel", t + 262 + 300 * k, 30, GPU, 7, "kernel"),
            ]
        t += 1000
    return {"schemaVersion": 1, "traceEvents": events}


def host_ahead(truncate_last=False):
    """The host finishes each step in 600 µs while the device needs 1000 µs for its work: the device sets the pace."""
    events = kineto_processes()
    device_free = 0.0
    steps = 8
    for i in range(steps):
        t = i * 600.0
        last = truncate_last and i == steps - 1
        events.append(x(f"ProfilerStep#{i}", t, 90 if last else 599, HOST, 1, "user_annotation"))
        if last:
            break
        for k in range(4):
            launch = t + 20 + 100 * k
            start = max(device_free, launch + 10)
            events += [
                x("cudaLaunchKernel", launch, 8, HOST, 1, "cuda_runtime"),
                x("ampere_sgemm_128x64_tn", start, 250, GPU, 7, "kernel"),
                *flow(i * 10 + k + 1, launch, start),
            ]
            device_free = start + 250
    return {"schemaVersion": 1, "traceEvents": events}


def blocking_copy():
    """Each step reads its result back into pageable memory: the host blocks in the copy, then the GPU waits."""
    events = kineto_processes()
    for i in range(8):
        t = i * 3000.0
        events += [
            x(f"ProfilerStep#{i}", t, 2999, HOST, 1, "user_annotation"),
            x("cudaLaunchKernel", t + 5, 8, HOST, 1, "cuda_runtime"),
            x("ampere_sgemm_128x64_tn", t + 20, 1000, GPU, 7, "kernel"),
            x("aten::to", t + 20, 1700, HOST, 1, "cpu_op"),
            x("cudaMemcpyAsync", t + 25, 1690, HOST, 1, "cuda_runtime"),
            x("Memcpy DtoH (Device -> Pageable)", t + 1020, 690, GPU, 7, "gpu_memcpy", bytes=67108864),
            x("aten::add", t + 1720, 1200, HOST, 1, "cpu_op"),
            x("cudaLaunchKernel", t + 2900, 8, HOST, 1, "cuda_runtime"),
            x("ampere_sgemm_128x64_tn", t + 2910, 80, GPU, 7, "kernel"),
        ]
    return {"schemaVersion": 1, "traceEvents": events}


def zero_workers():
    """num_workers=0: the training loop loads each batch itself (PyTorch's single-process iterator)."""
    loading = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    events = step_loop(8, 2000.0, 820, 1150, lambda t: [x(loading, t + 5, 800, HOST, 1, "user_annotation")])
    return {"schemaVersion": 1, "traceEvents": kineto_processes() + events}


def torch_npu():
    """torch_npu: AI_CPU tasks are a fifth of the device's work, and an operator compiles after warm-up."""
    python, cann, hardware = TORCH_NPU
    events = torch_npu_processes()
    t = 0.0
    for i in range(10):
        compiles = i in (0, 6)
        length = 1000.0 + (2000 if compiles else 0)
        events += [
            x(f"ProfilerStep#{i}", t, length - 1, python, 11),
            x("aten::index_put_", t + 5, 40, python, 11),
        ]
        start = t + 50
        if compiles:
            events.append(x("AscendCL@aclopCompileAndExecute", start, 2000, cann, 11))
            start += 2000
        events += [
            x("AscendCL@aclnnMatmul", start, 10, cann, 11),
            x("MatMulV2", start + 20, 700, hardware, 5, **{"Task Type": "AI_CORE", "Stream Id": 5}),
            x("IndexPut", start + 725, 200, hardware, 5, **{"Task Type": "AI_CPU", "Stream Id": 5}),
        ]
        t += length
    return {"traceEvents": events}


def kineto_job(device: str, world_size: int):
    """A healthy Kineto step loop on ``device`` in a job of ``world_size`` ranks (for gate's hardware check)."""
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": device}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": world_size},
        "traceEvents": kineto_processes() + step_loop(6, 1000.0, 20, 970),
    }


def unclosed_begin():
    """A healthy loop whose outer host span was never closed (the capture stopped inside it)."""
    opened = {"ph": "B", "name": "train_epoch", "pid": HOST, "tid": 1, "ts": 0, "cat": "cpu_op"}
    return {"schemaVersion": 1, "traceEvents": [*kineto_processes(), opened, *step_loop(8, 1000.0, 20, 820)]}


# One training step's work in a diff pair: (host op, device kernel, kernel µs) in launch order.
BEFORE_OPS = [
    ("aten::linear", "ampere_sgemm_128x64_tn", 400.0),
    ("aten::gelu", "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)", 100.0),
    ("aten::dropout", "void at::native::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4>(float*)", 50.0),
    ("aten::add_", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)", 30.0),
]
# The candidate: the GEMM slows, dropout is gone, index_put_ is new, and a rebuild changed the elementwise
# kernels' vector width (the same kernels, which the diff must match).
AFTER_OPS = [
    ("aten::linear", "ampere_sgemm_128x64_tn", 550.0),
    ("aten::gelu", "void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl>(int)", 100.0),
    ("aten::index_put_", "void at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(int)", 120.0),
    ("aten::add_", "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<float> >(int)", 30.0),
]


def kineto_diff(ops: list[tuple[str, str, float]]):
    """A device-bound Kineto loop of 8 steps; each host op launches its kernel through a flow (ac2g), the first
    two ops inside a ``## forward ##`` annotation and the others inside ``## backward ##``."""
    events = kineto_processes()
    period = sum(us for _, _, us in ops) + 40.0
    ident = 0
    for i in range(8):
        t = i * period
        events += [
            x(f"ProfilerStep#{i}", t, period - 1, HOST, 1, "user_annotation"),
            x("## forward ##", t + 1, 8.5, HOST, 1, "user_annotation"),  # record_function ranges: ops 0-1, 2-3
            x("## backward ##", t + 10, 8.5, HOST, 1, "user_annotation"),
        ]
        device_at = t + 20
        for offset, (op, kernel, us) in enumerate(ops):
            host_at = t + 2 + offset * 4
            ident += 1
            events += [
                x(op, host_at, 3.5, HOST, 1, "cpu_op"),
                x("cudaLaunchKernel", host_at + 1, 2, HOST, 1, "cuda_runtime", correlation=ident),
                x(kernel, device_at, us, GPU, 7, "kernel", correlation=ident),
                *flow(ident, host_at + 1, device_at),
            ]
            device_at += us + 5
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}], "traceEvents": events}


def torch_npu_diff(slower: bool):
    """torch_npu steps on an Ascend stream: in the candidate MatMulV2 slows, DropOutDoMask is gone and the
    new IndexPutV2 runs."""
    python, cann, hardware = TORCH_NPU
    events = torch_npu_processes()
    tasks = [("MatMulV2", 900.0 if slower else 600.0), ("Add", 80.0)]
    tasks.insert(1, ("IndexPutV2", 150.0) if slower else ("DropOutDoMask", 60.0))
    period = sum(us for _, us in tasks) + 100.0
    for i in range(8):
        t = i * period
        events += [x(f"ProfilerStep#{i}", t, period - 1, python, 11), x("aten::linear", t + 5, 30, python, 11)]
        at = t + 50
        for number, (task, us) in enumerate(tasks):
            events += [
                x(f"AscendCL@aclnn{task}", at - 20, 10, cann, 11),
                x(f"{task}_{number}", at, us, hardware, 5, **{"Task Type": "AI_CORE", "Stream Id": 5}),
            ]
            at += us + 5
    return {"traceEvents": events}


FIXTURES = {
    "legacy_kineto_pt18": legacy_kineto,
    "rocm_launch_bound": rocm_launch_bound,
    "accelerator": accelerator,
    "startup_dominated": startup_dominated,
    "host_ahead": host_ahead,
    "truncated_last_step": lambda: host_ahead(truncate_last=True),
    "blocking_copy": blocking_copy,
    "zero_workers": zero_workers,
    "torch_npu_aicpu": torch_npu,
    "job_a100_8": lambda: kineto_job("NVIDIA A100", 8),
    "job_v100_2": lambda: kineto_job("Tesla V100-SXM2-16GB", 2),
    "unclosed_begin": unclosed_begin,
    "diff_kineto_before": lambda: kineto_diff(BEFORE_OPS),
    "diff_kineto_after": lambda: kineto_diff(AFTER_OPS),
    "diff_torch_npu_before": lambda: torch_npu_diff(slower=False),
    "diff_torch_npu_after": lambda: torch_npu_diff(slower=True),
}


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for name, build in FIXTURES.items():
        with gzip.GzipFile(HERE / f"{name}.json.gz", "wb", mtime=0) as out:
            out.write(json.dumps(build(), separators=(",", ":")).encode())


if __name__ == "__main__":
    main()
