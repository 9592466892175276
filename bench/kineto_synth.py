"""Generate a Kineto-like trace of a given size, laid out as the PyTorch profiler writes one.

Each training step has a ``ProfilerStep#N`` annotation, an input copy (``cudaMemcpyAsync`` and a
``Memcpy HtoD`` on the copy stream), forward/backward ``cpu_op`` events each launching kernels
through ``cudaLaunchKernel`` with ``ac2g`` flow events to the kernel on a compute stream, an NCCL
kernel on a communication stream, memory counters, and a ``cudaStreamSynchronize`` + ``aten::item``
at the end. Field order and ``args`` follow real Kineto output. Deterministic for a seed.

    python bench/kineto_synth.py OUT.json --mb 500 [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import io
import random
from collections.abc import Iterator

HOST_PID, HOST_TID, BWD_TID, GPU_PID = 91023, 91023, 91188, 0
COMPUTE_STREAM, COPY_STREAM, COMM_STREAM = 7, 20, 24
_FLOAT3 = '"Input type": ["float", "float", "float"]'
# (op, its kernel, kernel µs, its recorded inputs: the shapes of a 64 x 512 hidden layer, as record_shapes writes them)
OPS = [
    ("aten::linear", "ampere_sgemm_128x64_tn", 38.0, f'"Input Dims": [[64, 512], [512, 512], [512]], {_FLOAT3}'),
    (
        "aten::layer_norm",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
        6.0,
        '"Input Dims": [[64, 512], [], [512], [512], [], []], '
        '"Input type": ["float", "", "float", "float", "Scalar", "Scalar"]',
    ),
    (
        "aten::gelu",
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
        4.5,
        '"Input Dims": [[64, 512], []], "Input type": ["float", ""]',
    ),
    (
        "aten::softmax",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false>",
        5.0,
        '"Input Dims": [[64, 512], [], []], "Input type": ["float", "Scalar", ""]',
    ),
    (
        "aten::add",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
        2.0,
        '"Input Dims": [[64, 512], [64, 512], []], "Input type": ["float", "float", "Scalar"]',
    ),
    (
        "aten::mm",
        "ampere_sgemm_64x64_nn",
        30.0,
        '"Input Dims": [[64, 512], [512, 512]], "Input type": ["float", "float"]',
    ),
]
_OTHER_INPUTS = f'"Input Dims": [[64, 512], [512, 512], [512]], {_FLOAT3}'


def _metadata() -> list[str]:
    events = [
        f'{{"name": "process_name", "ph": "M", "ts": 0, "pid": {HOST_PID}, "tid": 0, "args": {{"name": "python"}}}}',
        f'{{"name": "process_labels", "ph": "M", "ts": 0, "pid": {HOST_PID}, "tid": 0, "args": {{"labels": "CPU"}}}}',
        f'{{"name": "process_sort_index", "ph": "M", "ts": 0, "pid": {HOST_PID}, "tid": 0, "args": {{"sort_index": {HOST_PID}}}}}',
        f'{{"name": "thread_name", "ph": "M", "ts": 0, "pid": {HOST_PID}, "tid": {HOST_TID}, "args": {{"name": "thread {HOST_TID} (python)"}}}}',
        f'{{"name": "thread_name", "ph": "M", "ts": 0, "pid": {HOST_PID}, "tid": {BWD_TID}, "args": {{"name": "thread {BWD_TID} (pt_autograd_0)"}}}}',
        f'{{"name": "process_name", "ph": "M", "ts": 0, "pid": {GPU_PID}, "tid": 0, "args": {{"name": "python"}}}}',
        f'{{"name": "process_labels", "ph": "M", "ts": 0, "pid": {GPU_PID}, "tid": 0, "args": {{"labels": "GPU 0"}}}}',
        f'{{"name": "process_sort_index", "ph": "M", "ts": 0, "pid": {GPU_PID}, "tid": 0, "args": {{"sort_index": 5000000}}}}',
    ]
    for stream in (COMPUTE_STREAM, COPY_STREAM, COMM_STREAM):
        events.append(
            f'{{"name": "thread_name", "ph": "M", "ts": 0, "pid": {GPU_PID}, "tid": {stream}, '
            f'"args": {{"name": "stream {stream}"}}}}'
        )
    return events


class _Step:
    """Writes the events of one step; a small timing model keeps host and device consistent."""

    def __init__(self, rng: random.Random, ids: list[int]) -> None:
        self.rng = rng
        self.ids = ids  # [external id, correlation id]
        self.out: list[str] = []

    def _next_id(self, which: int) -> int:
        self.ids[which] += 1
        return self.ids[which]

    def cpu_op(self, name: str, ts: float, dur: float, tid: int, inputs: str = _OTHER_INPUTS) -> int:
        ext = self._next_id(0)
        self.out.append(
            f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": {HOST_PID}, "tid": {tid}, "ts": {ts:.3f}, '
            f'"dur": {dur:.3f}, "args": {{"External id": {ext}, "Record function id": 0, "Ev Idx": {ext % 4096}, '
            f"{inputs}}}}}"
        )
        return ext

    def launch(self, ext: int, api: str, ts: float, tid: int) -> tuple[int, float]:
        corr = self._next_id(1)
        dur = 3.0 + self.rng.random() * 2.0
        self.out.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "{api}", "pid": {HOST_PID}, "tid": {tid}, "ts": {ts:.3f}, '
            f'"dur": {dur:.3f}, "args": {{"External id": {ext}, "cbid": 211, "correlation": {corr}}}}}'
        )
        self.out.append(
            f'{{"ph": "s", "id": {corr}, "pid": {HOST_PID}, "tid": {tid}, "ts": {ts:.3f}, '
            f'"cat": "ac2g", "name": "ac2g"}}'
        )
        return corr, dur

    def kernel(self, name: str, corr: int, ext: int, ts: float, dur: float, stream: int) -> None:
        self.out.append(
            f'{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": {GPU_PID}, "tid": {stream}, "ts": {ts:.3f}, '
            f'"dur": {dur:.3f}, "args": {{"External id": {ext}, "queued": 0, "device": 0, "context": 1, '
            f'"stream": {stream}, "correlation": {corr}, "registers per thread": 122, "shared memory": 49152, '
            f'"blocks per SM": 1.2, "warps per SM": 9.6, "grid": [8, 16, 1], "block": [256, 1, 1], '
            f'"est. achieved occupancy %": 25}}}}'
        )
        self.out.append(
            f'{{"ph": "f", "id": {corr}, "pid": {GPU_PID}, "tid": {stream}, "ts": {ts:.3f}, '
            f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}'
        )

    def memcpy(self, corr: int, ext: int, ts: float, nbytes: int) -> float:
        dur = nbytes / 12e3  # 12 GB/s pageable copy
        self.out.append(
            f'{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": {GPU_PID}, '
            f'"tid": {COPY_STREAM}, "ts": {ts:.3f}, "dur": {dur:.3f}, "args": {{"External id": {ext}, '
            f'"device": 0, "context": 1, "stream": {COPY_STREAM}, "correlation": {corr}, "bytes": {nbytes}, '
            f'"memory bandwidth (GB/s)": 12.0}}}}'
        )
        return dur


def steps(seed: int = 0, clock_us: float = 1000.0) -> Iterator[str]:
    """Yield the serialized events step by step, forever, from ``clock_us`` on; the caller stops when big enough."""
    rng = random.Random(seed)
    ids = [0, 0]
    host_t, gpu_t, alloc = clock_us, clock_us, 2.0e9
    number = 0
    while True:
        step = _Step(rng, ids)
        start = host_t
        loader = 150.0 + rng.random() * 40.0
        step.cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", host_t, loader, HOST_TID)
        host_t += loader
        ext = step.cpu_op("aten::copy_", host_t, 20.0, HOST_TID)
        corr, api = step.launch(ext, "cudaMemcpyAsync", host_t + 2.0, HOST_TID)
        copy_start = max(gpu_t, host_t + 6.0)
        gpu_t = copy_start + step.memcpy(corr, ext, copy_start, 1 << 20)
        host_t += 24.0
        for phase_tid in (HOST_TID, BWD_TID):
            for _ in range(12):
                op, kernel, kernel_us, inputs = OPS[rng.randrange(len(OPS))]
                cpu_dur = 18.0 + rng.random() * 10.0
                name = op if phase_tid == HOST_TID else op + "_backward"
                ext = step.cpu_op(name, host_t, cpu_dur, phase_tid, inputs)
                corr, api = step.launch(ext, "cudaLaunchKernel", host_t + cpu_dur - 8.0, phase_tid)
                k_start = max(gpu_t, host_t + cpu_dur - 8.0 + api)
                k_dur = kernel_us * (0.9 + rng.random() * 0.2)
                step.kernel(kernel, corr, ext, k_start, k_dur, COMPUTE_STREAM)
                gpu_t = k_start + k_dur
                host_t += cpu_dur + 1.0
        ext = step.cpu_op("c10d::allreduce_", host_t, 12.0, HOST_TID)
        corr, api = step.launch(ext, "cudaLaunchKernel", host_t + 4.0, HOST_TID)
        k_start = max(gpu_t, host_t + 4.0 + api)
        step.kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            corr,
            ext,
            k_start,
            60.0,
            COMM_STREAM,
        )
        gpu_t = k_start + 60.0
        host_t += 14.0
        alloc += rng.choice((-1, 1)) * 1.0e6
        step.out.append(
            f'{{"ph": "C", "name": "GPU Memory", "pid": {GPU_PID}, "tid": 0, "ts": {host_t:.3f}, '
            f'"args": {{"Allocated": {alloc:.0f}, "Reserved": {alloc * 1.25:.0f}}}}}'
        )
        sync_end = max(host_t + 5.0, gpu_t + 2.0)
        step.cpu_op("aten::item", host_t, sync_end - host_t + 3.0, HOST_TID)
        step.out.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": {HOST_PID}, '
            f'"tid": {HOST_TID}, "ts": {host_t + 1.0:.3f}, "dur": {sync_end - host_t - 1.0:.3f}, '
            f'"args": {{"cbid": 131, "correlation": {step._next_id(1)}}}}}'
        )
        host_t = sync_end + 4.0
        step.out.insert(
            0,
            f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{number}", "pid": {HOST_PID}, '
            f'"tid": {HOST_TID}, "ts": {start:.3f}, "dur": {host_t - start:.3f}, '
            f'"args": {{"External id": {step._next_id(0)}, "Record function id": 0}}}}',
        )
        number += 1
        yield ",\n  ".join(step.out)


def write_trace(
    path: str,
    megabytes: float,
    seed: int = 0,
    compress: bool = False,
    rank: tuple[int, int] | None = None,
    steps_wanted: int | None = None,
) -> int:
    """Write a trace of about ``megabytes`` MB (or of ``steps_wanted`` steps); return the number of bytes of JSON
    written. ``rank`` (rank, world size) writes one rank of a job: its distributedInfo, and a clock of its own."""
    target = int(megabytes * 1e6)
    raw = open(path, "wb")
    stream = gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) if compress else raw  # reproducible
    written = 0
    with raw, stream, io.TextIOWrapper(stream, encoding="utf-8") as out:
        head = (
            '{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", '
            '"totalGlobalMem": 85024112640, "computeMajor": 9, "computeMinor": 0, "numSms": 132}],\n'
            + (
                f'  "distributedInfo": {{"backend": "nccl", "rank": {rank[0]}, "world_size": {rank[1]}}},\n'
                if rank
                else ""
            )
            + '  "record_shapes": 1,\n  "traceEvents": [\n  '
            + ",\n  ".join(_metadata())
        )
        out.write(head)
        written += len(head)
        for number, chunk in enumerate(steps(seed, 1000.0 + (rank[0] * 1_234_567.0 if rank else 0.0)), 1):
            piece = ",\n  " + chunk
            out.write(piece)
            written += len(piece)
            if (written >= target) if steps_wanted is None else number == steps_wanted:
                break
        tail = (
            '\n  ],\n  "traceName": "synthetic.pt.trace.json",\n  "displayTimeUnit": "ms",\n'
            '  "baseTimeNanoseconds": 1700000000000000000\n}\n'
        )
        out.write(tail)
        written += len(tail)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--mb", type=float, default=50.0, help="approximate size in MB (default 50)")
    parser.add_argument("--steps", type=int, help="write this many steps instead (the bundled sample has 48)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gzip", action="store_true", help="gzip the output")
    args = parser.parse_args()
    size = write_trace(args.out, args.mb, args.seed, args.gzip, steps_wanted=args.steps)
    print(f"wrote {args.out}: {size / 1e6:.1f} MB of JSON")


if __name__ == "__main__":
    main()
