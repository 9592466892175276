"""Traces the tests build, shared by the tests of more than one module: a Kineto job with an all-reduce each step,
each rule's cases (tests/rule_cases) in their vocabulary, a step replayed as CUDA graphs, eager steps, a sample
stripped of the config the emulator records in it, the folder SGLang profiles a job into, a JAX capture's
XSpace; and bytes mutated, as the fuzz tests of the compiled readers mutate real traces."""

from __future__ import annotations

import copy
import gzip
import json
from itertools import count
from pathlib import Path

from conftest import REPO
from xspace_synth import event, line, plane, space, stat

from perftool.trace import xspace


def meta(kind: str, pid, tid, **args) -> dict:
    """A metadata event (``M``): a process's or thread's name, labels or sort index."""
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


STEP_US = 1000.0
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def span(name, pid, tid, ts, dur, cat="", args=None) -> dict:
    """A complete event (``X``), with its args where given."""
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "cat": cat} | (
        {"args": args} if args else {}
    )


def kineto_job(steps: int = 4, kernel_args: dict | None = None, host_args: dict | None = None, world: int = 4):
    """Steps of 1 ms: a 600 µs kernel on stream 7, then an all-reduce on stream 13 from 500 µs to 800 µs."""
    events = [
        meta("process_labels", 100, 0, labels="CPU"),
        meta("process_labels", 0, 0, labels="GPU 0"),
        meta("thread_name", 0, 7, name="stream 7"),
        meta("thread_name", 0, 13, name="stream 13"),
    ]
    for i in range(steps):
        t = i * STEP_US
        events += [
            span(f"ProfilerStep#{i}", 100, 1, t, STEP_US - 1, "user_annotation"),
            span("record_param_comms", 100, 1, t + 2, 20, "cpu_op", host_args),
            span("sgemm_128x64", 0, 7, t, 600, "kernel"),
            span(NCCL, 0, 13, t + 500, 300, "kernel", kernel_args),
        ]
    return {"traceEvents": events, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": world}}


ARGS = {
    "Collective name": "allreduce",
    "In msg nelems": 25_000_000,
    "Out msg nelems": 25_000_000,
    "dtype": "Float",
    "Group size": 4,
    "Process Group Name": "3",
    "Process Group Description": "dp_replicate",
}


CASES = REPO / "tests" / "rule_cases"  # each rule's cases, PTnnn.yaml (their format: its README.md)


KINETO_PROCESSES = [  # a Kineto trace's host and GPU processes, and the GPU's compute stream
    meta("process_name", 100, 0, name="python3"),
    meta("process_labels", 100, 0, labels="CPU"),
    meta("process_name", 0, 0, name="python3"),
    meta("process_labels", 0, 0, labels="GPU 0"),
    meta("thread_name", 0, 7, name="stream 7"),
]
VOCABULARIES = {  # vocabulary -> (track alias -> (pid, tid)), metadata naming them, the step markers' track
    "kineto": (
        {"host": (100, 1), "device": (0, 7), "comm": (0, 13), "autograd": (100, 2)},  # autograd: a second host thread
        [*KINETO_PROCESSES, meta("thread_name", 0, 13, name="stream 13")],
        "host",
    ),
    "kineto-2gpu": (  # one PyTorch process driving two GPUs (Kineto writes a process per device)
        {"host": (100, 1), "device": (0, 7), "gpu1": (1, 7)},
        [
            *KINETO_PROCESSES,
            meta("process_name", 1, 0, name="python3"),
            meta("process_labels", 1, 0, labels="GPU 1"),
            meta("thread_name", 1, 7, name="stream 7"),
        ],
        "host",
    ),
    "kineto-workers": (  # Kineto with two input workers' threads traced in the training process
        {"host": (100, 1), "device": (0, 7), "worker0": (100, 2), "worker1": (100, 3)},
        [
            *KINETO_PROCESSES,
            meta("thread_name", 100, 2, name="dataloader worker 0"),
            meta("thread_name", 100, 3, name="dataloader worker 1"),
        ],
        "host",
    ),
    "kineto-legacy": (
        {"host": (100, 1), "device": (0, 7)},
        [
            meta("process_name", 100, 0, name="python"),
            meta("thread_name", 0, 7, name="stream 7"),
        ],
        "host",
    ),
    "kineto-npu": (  # PyTorch's own profiler with torch_npu as its PrivateUse1 device (Kineto through mspti)
        {"host": (100, 1), "device": (0, 47)},
        [
            meta("process_name", 100, 0, name="python"),
            meta("process_labels", 100, 0, labels="CPU"),
            meta("process_name", 0, 0, name="NPU"),
            meta("process_labels", 0, 0, labels="Ascend NPU"),
            meta("process_sort_index", 0, 0, sort_index=16777216),
            meta("thread_name", 47, 47, name="NPU stream 47"),  # named under pid 47, as mspti's exporter writes it
        ],
        "host",
    ),
    "ascend": (
        {
            "python": (1, 11),
            "cann": (2, 11),
            "npu": (3, 5),
            "npu_comm": (3, 8),
            "hccl": (4, 1),
            "hccl_ops": (4, 0),
            "plane1": (4, 2),
            "plane2": (4, 3),
            "plane3": (4, 4),
            "hccl_ops_b": (4, 10),
            "plane_b1": (4, 12),
        },
        [
            meta("process_name", 1, 0, name="Python"),
            meta("process_name", 2, 0, name="CANN"),
            meta("process_name", 3, 0, name="Ascend Hardware"),
            meta("thread_name", 3, 5, name="Stream 5"),
            meta("thread_name", 3, 8, name="Stream 8"),
            meta("process_name", 4, 0, name="HCCL"),
            meta("thread_name", 4, 0, name="Group 0 Communication"),
            meta("thread_name", 4, 1, name="Plane 0"),
            meta("thread_name", 4, 2, name="Plane 1"),
            meta("thread_name", 4, 3, name="Plane 2"),
            meta("thread_name", 4, 4, name="Plane 3"),
            meta("thread_name", 4, 10, name="Group 1 Communication"),  # a second communicator: its planes after it
            meta("thread_name", 4, 12, name="Plane 1"),
        ],
        "python",
    ),
    "graphcore": (
        {"host": (1, 1), "ipu": (2, 1)},
        [
            meta("process_name", 1, 0, name="Host (Poplar)"),
            meta("process_name", 2, 0, name="IPU 0"),
            meta("thread_name", 2, 1, name="Execution"),
        ],
        "host",
    ),
    "xla-gpu": (  # jax.profiler on a GPU: planes as processes, a line per stream and kind of work
        {"python": (701, 1), "launcher": (701, 2), "device": (1, 16), "h2d": (1, 17), "comm": (1, 20)},
        [
            meta("process_name", 701, 0, name="/host:CPU"),
            meta("thread_name", 701, 1, name="python"),
            meta("thread_name", 701, 2, name="Host Threads/2356"),
            meta("process_name", 1, 0, name="/device:GPU:0"),
            meta("thread_name", 1, 16, name="Stream #16(Kernel)"),
            meta("thread_name", 1, 17, name="Stream #17(MemcpyH2D)"),
            meta("thread_name", 1, 20, name="Stream #20(Kernel)"),  # the stream XLA runs its collectives on
        ],
        "python",
    ),
    "xla-tpu": (  # jax.profiler on a TPU: the ops, the programs they belong to and the steps, each a line
        {"python": (701, 1), "steps": (1, 1), "modules": (1, 2), "ops": (1, 3), "async": (1, 4), "framework": (1, 5)},
        [
            meta("process_name", 701, 0, name="/host:CPU"),
            meta("thread_name", 701, 1, name="python"),
            meta("process_name", 1, 0, name="/device:TPU:0"),
            meta("thread_name", 1, 1, name="Steps"),
            meta("thread_name", 1, 2, name="XLA Modules"),
            meta("thread_name", 1, 3, name="XLA Ops"),
            meta("thread_name", 1, 4, name="Async XLA Ops"),
            meta("thread_name", 1, 5, name="Framework Ops"),  # the JAX ops each XLA op came from
        ],
        "steps",
    ),
    "gaudi": (
        {"host": (10, 1), "device": (0, 1)},
        [
            meta("process_name", 10, 0, name="python3"),
            meta("process_name", 0, 0, name="HPU 0"),
            meta("thread_name", 0, 1, name="TPC"),
        ],
        "host",
    ),
}


MARKER = {"xla-tpu": "{step}"}  # how a vocabulary names its step markers, where not ProfilerStep#N (a TPU's by number)


def _event(spec: dict, at: float, tracks: dict) -> dict:
    pid, tid = tracks[spec["track"]]
    event = {
        "ph": "X",
        "name": spec["name"],
        "cat": spec.get("cat", ""),
        "pid": pid,
        "tid": tid,
        "ts": at + spec["ts"],
        "dur": spec["dur"],
    }
    return event | ({"args": spec["args"]} if "args" in spec else {})


def _events(specs: list, at: float, tracks: dict, flows: count) -> list:
    """The events of ``specs`` at ``at``; two that name the same ``flow`` are joined by a launch flow (Kineto's
    ``ac2g``) from the first (a launch on the host) to the second (the kernel it started)."""
    events = [_event(spec, at, tracks) for spec in specs]
    ends: dict[str, list] = {}
    for spec, made in zip(specs, events):
        if "flow" in spec:
            ends.setdefault(spec["flow"], []).append(made)
    for launch, kernel in ends.values():
        flow = {"name": "ac2g", "cat": "ac2g", "id": next(flows)}
        events.append(flow | {"ph": "s", "pid": launch["pid"], "tid": launch["tid"], "ts": launch["ts"]})
        events.append(flow | {"ph": "f", "bp": "e", "pid": kernel["pid"], "tid": kernel["tid"], "ts": kernel["ts"]})
    return events


def build(case: dict) -> dict:
    """The case's trace: its steps, each with the case's events (repeated, and every n-th step's extras)."""
    vocabulary = "kineto-legacy" if case.get("legacy") else case["vocabulary"]
    tracks, events, step_track = VOCABULARIES[vocabulary]
    events = list(events)
    repeat = case.get("repeat", {"count": 1, "every": 0})
    step_cat = {
        "kineto": "user_annotation",
        "kineto-workers": "user_annotation",
        "kineto-npu": "user_annotation",
        "kineto-legacy": "Operator",
        "gaudi": "user_annotation",
    }.get(vocabulary, "")
    flows = count(1)
    for i in range(case["steps"]):
        t = i * case["period"]
        if case.get("markers", True):
            name = case.get("marker", MARKER.get(vocabulary, "ProfilerStep#{step}")).format(step=i)
            marker = {"name": name, "track": step_track, "ts": 0, "dur": case["period"] - 1}
            events.append(_event(marker | {"cat": step_cat}, t, tracks))
        if i == 0:
            events += _events(case.get("first", []), t, tracks, flows)
        for k in range(repeat["count"]):
            events += _events(case["events"], t + k * repeat["every"], tracks, flows)
        for n, extra in case.get("every", {}).items():
            if i % int(n) == int(n) - 1:
                events += _events(extra, t, tracks, flows)
    document: dict = {"traceEvents": events}
    if "device" in case:  # Kineto's record of the GPUs the process sees: the name picks the device's figures
        properties = {"name": case["device"]} | case.get("device_properties", {})  # its SMs where given
        document["deviceProperties"] = [{"id": i} | properties for i in range(case.get("devices", 1))]
    return document


def graph_captured(pieces: int, python_us: float) -> dict:
    """A PyTorch 2.x capture replaying each step as ``pieces`` CUDA graphs (``CUDAGraph::replay`` →
    ``cudaGraphLaunch``), 40 kernels in all, each linked to its launch by an ``ac2g`` flow as Kineto writes them,
    after ``python_us`` of Python per step and 60 µs of it between pieces."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]
    flow = 1000
    period = python_us + pieces * 100 + 40 * 20 + 100
    for step in range(8):
        t = step * period
        events += [
            {"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation", "pid": 100, "tid": 100, "ts": t,
             "dur": period - 1},
            {"ph": "X", "name": "train_step", "cat": "python_function", "pid": 100, "tid": 100, "ts": t + 1,
             "dur": python_us},
        ]  # fmt: skip
        host, device = t + python_us + 5, t + python_us + 30
        for _ in range(pieces):
            flow += 1
            events += [
                {"ph": "X", "name": "CUDAGraph::replay", "cat": "cpu_op", "pid": 100, "tid": 100, "ts": host,
                 "dur": 25},
                {"ph": "X", "name": "cudaGraphLaunch", "cat": "cuda_runtime", "pid": 100, "tid": 100, "ts": host + 2,
                 "dur": 20, "args": {"correlation": flow}},
            ]  # fmt: skip
            device = max(device, host + 25)
            for _kernel in range(40 // pieces):
                events += [
                    {"ph": "X", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "cat": "kernel", "pid": 0, "tid": 7,
                     "ts": device, "dur": 19, "args": {"correlation": flow}},
                    {"ph": "s", "id": flow, "pid": 100, "tid": 100, "ts": host + 2, "cat": "ac2g", "name": "ac2g"},
                    {"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": device, "cat": "ac2g", "name": "ac2g",
                     "bp": "e"},
                ]  # fmt: skip
                device += 20
            host += 60 + 25
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": events}


def eager_steps(op_us: float, python_us: float = 0.0, ops: int = 20, kernel_us: float = 200.0, steps: int = 8) -> dict:
    """An eager training loop on a GPU: each step the host runs ``python_us`` of Python that runs no op (a frame of
    its own), then dispatches ``ops`` aten ops of ``op_us`` each, every one launching a kernel of ``kernel_us`` at
    its end (the last is the optimizer's step); kernels run in launch order, each once the last is done. Host
    dispatch per step is ``ops × op_us`` against ``ops × kernel_us`` of device work."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    host, device, t, free = (100, 1), (0, 7), 0.0, 0.0
    for step in range(steps):
        begin = t
        if python_us:
            events.append(span("update_metrics (train.py:10)", *host, t, python_us, "python_function"))
            t += python_us
        for op in range(ops):
            name = "Optimizer.step#SGD.step" if op == ops - 1 else "aten::linear"
            events += [span(name, *host, t, op_us, "cpu_op"),
                       span("cudaLaunchKernel", *host, t + op_us - 6, 5, "cuda_runtime")]  # fmt: skip
            free = max(t + op_us, free)
            events.append(span("sm90_gemm", *device, free, kernel_us, "kernel"))
            free += kernel_us
            t += op_us
        t = max(t, free)  # the host reads the loss back at the step's end (no sync event: a step boundary)
        events.append(span(f"ProfilerStep#{step}", *host, begin, t - begin - 1, "user_annotation"))
    return {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}


def stripped(sample: str, directory: Path) -> Path:
    """A copy of a bundled sample's trace (``sample``: ``gpu/healthy``, say) without the config the emulator records
    in it, as a real profiler's trace has none."""
    document = json.loads(gzip.decompress((REPO / "sample_traces" / f"{sample}.trace.json.gz").read_bytes()))
    document.pop("perftool")
    path = directory / f"{sample.replace('/', '_')}.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    return path


SGLANG_STEPS = 6
SGLANG_PROFILE_ID = "1764000000.123"  # SGLang's default profile id: the time the profile started
SGLANG_MODELS = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H200"}  # apart, so that a device's entry found by id shows
SGLANG_SMS = {0: 132, 1: 140}


def sglang_rank(rank: int, kernel_us: float, start_us: float = 0.0) -> dict:
    """One TP rank's Kineto trace as SGLang exports it: its host process (the OS's pid) launching one kernel a step
    on its GPU (pid: the device's number), each launch a flow numbered from 1 as CUPTI numbers a process's calls, and
    the job in ``distributedInfo``."""
    host, gpu = 4000 + rank, rank
    events = [
        meta("process_name", host, 0, name="python3"),
        meta("thread_name", host, 1, name="scheduler"),
        meta("process_labels", gpu, 0, labels=f"GPU {gpu}"),
        meta("thread_name", gpu, 7, name="stream 7"),
    ]
    for step in range(SGLANG_STEPS):
        t = start_us + step * STEP_US + 3 * rank
        events += [
            span(f"ProfilerStep#{step}", host, 1, t, STEP_US - 1, "user_annotation"),
            span("cudaLaunchKernel", host, 1, t + 10, 5, "cuda_runtime"),
            {"ph": "s", "id": step + 1, "pid": host, "tid": 1, "ts": t + 10, "cat": "ac2g", "name": "ac2g"},
            span("gemm_kernel", gpu, 7, t + 100, kernel_us, "kernel"),
            {"ph": "f", "id": step + 1, "pid": gpu, "tid": 7, "ts": t + 100, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": d, "name": SGLANG_MODELS[d], "numSms": SGLANG_SMS[d]} for d in SGLANG_MODELS],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
        "traceEvents": events,
    }


def sglang_merged(ranks: dict[int, dict]) -> dict:
    """SGLang's merge of its ranks' traces (``--merge-profiles``): every event's pid prefixed by its rank's label, the
    first file's other keys, every file's ``deviceProperties``."""
    merged: dict = {"traceEvents": []}
    for rank, trace in ranks.items():
        trace = copy.deepcopy(trace)
        merged["traceEvents"] += [{**event, "pid": f"[TP{rank:02d}] {event['pid']}"} for event in trace["traceEvents"]]
        merged.update({key: value for key, value in trace.items() if key not in merged and key != "deviceProperties"})
        merged.setdefault("deviceProperties", []).extend(trace["deviceProperties"])
    return merged


def sglang_profile(directory: Path, merged: bool = False, stages: tuple[str, ...] = ()) -> Path:
    """The folder SGLang profiles a TP-2 job into: each rank's trace (``{id}-TP-{rank}.trace.json.gz``), the merge
    of them where asked for, or with ``stages`` (--profile-by-stage) each rank's capture of each stage in turn
    (``{id}-TP-{rank}-{stage}.trace.json.gz``)."""
    directory.mkdir()
    for position, stage in enumerate(stages or ("",)):
        ranks = {
            rank: sglang_rank(rank, kernel_us, position * 50_000.0) for rank, kernel_us in ((0, 400.0), (1, 600.0))
        }
        for rank, trace in ranks.items():
            name = f"{SGLANG_PROFILE_ID}-TP-{rank}" + (f"-{stage}" if stage else "")
            (directory / f"{name}.trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
        if merged:
            document = gzip.compress(json.dumps(sglang_merged(ranks)).encode())
            (directory / f"merged-{SGLANG_PROFILE_ID}.trace.json.gz").write_bytes(document)
    return directory


def xla_space(
    kernels: list[tuple[str, str, int]],
    protos: dict[str, bytes],
    with_ids: bool = True,
    host_call: str = "PjitFunction(step)",
) -> bytes:
    """A capture of 4 steps on one MI300X, each running ``kernels`` ((module, op, program id): 40 µs each, 5 µs apart,
    after 2 ms of host Python in ``host_call``: jax's jitted call, unless told another framework's), and a metadata
    plane holding ``protos`` (``MODULE(ID)`` → HloProto)."""
    stats = {1: "hlo_module", 2: "hlo_op", 3: "correlation_id", 4: xspace.PROGRAM_ID, 5: "device_vendor",
             6: "core_count", 7: "memory_size"}  # fmt: skip
    stream, python = [], []
    for step in range(4):
        at = step * 3_000_000_000
        python.append(event(1, at, 2_000_000_000))
        for k, (module, op, program) in enumerate(kernels):
            ids = (stat(4, program),) if with_ids else ()
            stream.append(event(10 + k, at + 2_000_000_000 + k * 45_000_000, 40_000_000, stat(1, module), stat(2, op),
                                stat(3, step * 100 + k), *ids))  # fmt: skip
    names = {10 + k: f"{op}.kd" for k, (_, op, _) in enumerate(kernels)}
    mi300x = (stat(5, "AMD"), stat(6, 304), stat(7, 206_141_652_992))  # as its plane records the device
    device = plane(0, "/device:GPU:0", lines=[line(16, "Stream #16(Kernel)", 0, *stream)], event_names=names,
                   stat_names=stats, stats=mi300x)  # fmt: skip
    host = plane(1, "/host:CPU", lines=[line(7, "python", 0, *python)], event_names={1: host_call})
    held = {i + 1: (name, "", [stat(1, proto)]) for i, (name, proto) in enumerate(protos.items())}
    metadata = plane(2, xspace.METADATA_PLANE, stat_names={1: xspace.HLO_STAT}, event_names=held)
    return space(device, host, metadata)


def mutated(data: bytes, mutations: list[tuple[str, float, int, bytes]]) -> bytes:
    """``data`` with each mutation applied in turn, at its place (a share of the length): ``flip`` the byte there to
    the one given, ``insert`` the byte, ``delete`` from one to eight bytes (by the byte given), ``truncate``, or
    ``splice`` in the bytes given."""
    changed = bytearray(data)
    for kind, where, byte, splice in mutations:
        at = int(where * len(changed))
        if kind == "flip" and changed:
            changed[min(at, len(changed) - 1)] = byte
        elif kind == "insert":
            changed[at:at] = bytes([byte])
        elif kind == "delete":
            del changed[at : at + 1 + byte % 8]
        elif kind == "truncate":
            del changed[at:]
        elif kind == "splice":
            changed[at:at] = splice
    return bytes(changed)
