"""Device profiles: the hardware and host-software constants the emulator's physics runs on.

The hardware figures (memory, peak, bandwidths, links) are each family's reference device from the device table
(:mod:`perftool.hardware`, a file per device with the source of each figure); the software constants are
order-of-magnitude measurements of the stack, named in the comment beside them. They set the scale of the
emulated times; the shape of the results (what saturates, where an optimum sits) comes from the model, not from
tuning these numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perftool.dialects.kineto import EARLY_PYTORCH
from perftool.hardware import BY_KEY, emulated

KB, MB, GB = 1e3, 1e6, 1e9
TILE_BYTES = 624 * KB  # IPU Mk2 memory per tile (reference 002, §4.4.2)


@dataclass(frozen=True)
class DeviceProfile:
    """One accelerator and the host software that drives it."""

    family: str  # npu | ipu | hpu | gpu
    model: str
    memory_bytes: float  # device memory available to the job (IPU: all tiles' SRAM)
    peak_tflops: float  # dense fp16/bf16 peak
    efficiency: float  # share of peak a training step sustains
    memory_bandwidth: float  # bytes/s, device memory (optimizer update is bound by it)
    h2d_bandwidth: float  # bytes/s achieved host -> device
    d2h_bandwidth: float  # bytes/s achieved device -> host
    strided_copy_bandwidth: float  # bytes/s of layout-rearranging copies (strided, TransData)
    python_us: float  # host Python each time control returns to the training loop
    call_dispatch_us: float  # host cost to launch one compiled device call (graph / loop)
    op_launch_us: float  # host cost per op when ops are launched one by one (no device graph)
    host_blocks_per_call: bool  # the host waits for each device call before the next (graph-mode loops)
    host_feeds_data: bool  # the training loop pulls batches itself (PyTorch DataLoader) vs an infeed thread
    compiles_graphs: bool  # every new shape or loop length is a graph compile
    async_h2d: bool  # input copies run on DMA engines beside compute (IPU: only through IO tiles)
    collective_bandwidth: float = 0.0  # bytes/s bus bandwidth of an all-reduce across replicas (nccl-tests' busbw)
    collective_latency_us: float = 0.0  # fixed cost of one collective, µs
    tiles: int = 0  # IPU tiles (0: not an IPU)
    remote_buffer_bandwidth: float = 0.0  # bytes/s to optimizer state offloaded to streaming memory
    # bytes/s device -> host into pageable memory: staged through a pinned buffer and, for a tensor made afresh each
    # step (a result's .cpu()), faulting its pages in on the way; 1.7 GB/s for a 64 MB read-back each step on an H100
    # host (tests/data/cuda_input_bound_pageable), far below the link's pinned figure (d2h_bandwidth)
    pageable_d2h_bandwidth: float = 2 * GB
    knobs: frozenset[str] = field(default_factory=frozenset)  # knobs this family has
    knob_names: dict[str, str] = field(default_factory=dict)  # what the family's own docs call them

    def describe(self) -> dict[str, Any]:
        """The constants as plain JSON values (written into the trace's metadata)."""
        values = asdict(self)
        values["knobs"] = sorted(self.knobs)
        return values


# how a PyTorch job reads its results back without blocking: into a buffer pinned once, read a step later
READBACK_INTO_PINNED = (
    "results copied into a pinned buffer (torch.empty(shape, pin_memory=True).copy_(t, non_blocking=True)), read "
    "after a later step's work is queued"
)
_COMMON_KNOBS = frozenset({"batch_size", "prefetch_depth", "transfer_dtype", "last_batch", "gradient_accumulation"})

# Collectives across data-parallel replicas (one server's fast links): bus bandwidths of the order
# all-reduce benchmarks reach on each — Ascend HCCS, IPU-Links, Gaudi 2's on-chip RoCE ports, A100
# NVLink — and a latency of tens of microseconds per collective.
PROFILES: dict[str, DeviceProfile] = {
    # Ascend 910: 32 GB HBM2 at ~1.2 TB/s, 256 TFLOPS fp16 (Huawei datasheet); PCIe 4.0 x16 host link
    # (~24 GB/s achieved of 32). A TF2 loop that returns to Python each step pays a tf.function call
    # and Python step bookkeeping (~1.5 ms) plus a graph launch through AscendCL (~0.5 ms); iteration
    # offload (reference 000) pays them once per NPU_LOOP_SIZE steps. TransData format conversion
    # runs well below HBM bandwidth.
    "npu": DeviceProfile(
        family="npu",
        **emulated(BY_KEY["Ascend-910"]),
        efficiency=0.35,
        strided_copy_bandwidth=150 * GB,
        python_us=1500.0,
        call_dispatch_us=500.0,
        op_launch_us=0.0,
        host_blocks_per_call=True,
        host_feeds_data=False,
        compiles_graphs=True,
        async_h2d=True,
        collective_latency_us=30.0,
        knobs=_COMMON_KNOBS | {"loop_size", "layout_mismatch"},
        knob_names={"loop_size": "NPU_LOOP_SIZE / npu.set_npu_loop_size", "prefetch_depth": "dataset.prefetch"},
    ),
    # Graphcore GC200 (Mk2): 1472 tiles x 624 kB = ~900 MB In-Processor Memory at 47.5 TB/s,
    # 250 TFLOPS fp16 (Graphcore datasheet). IPU-M2000 host links are 2 x 100 GbE shared by four IPUs
    # (~6 GB/s each); streaming memory (remote buffers) behind the gateway ~20 GB/s per IPU.
    # Transfers overlap compute only through IO tiles (reference 002, §4.4.2). Strided copies
    # (DstStridedCopy vertices, PreArrange steps) move a few bytes per tile per cycle: ~1% of the
    # exchange's bandwidth (the reference's example spends 10x the op's cycles rearranging).
    "ipu": DeviceProfile(
        family="ipu",
        **emulated(BY_KEY["GC200"]),
        efficiency=0.4,
        strided_copy_bandwidth=500 * GB,
        python_us=1500.0,
        call_dispatch_us=300.0,
        op_launch_us=0.0,
        host_blocks_per_call=True,
        host_feeds_data=False,
        compiles_graphs=True,
        async_h2d=False,
        collective_latency_us=15.0,
        tiles=1472,
        remote_buffer_bandwidth=20 * GB,
        knobs=_COMMON_KNOBS | {"loop_size", "io_tiles", "offload_optimizer", "layout_mismatch"},
        knob_names={
            "loop_size": "device_iterations / steps_per_execution",
            "prefetch_depth": "IPUInfeedQueue(prefetch_depth=...) / defaultPrefetchBufferingDepth",
            "io_tiles": "num_io_tiles",
            "offload_optimizer": "offload_weight_update_variables",
        },
    ),
    # Intel Gaudi 2: 96 GB HBM2e at 2.46 TB/s, 432 TFLOPS bf16 (Intel product brief); PCIe Gen4 x16.
    # In lazy mode the host builds the graph op by op every step (~25 us an op); HPU Graphs replay a
    # captured step with one launch (reference 003). New shapes compile a new recipe (reference 004).
    "hpu": DeviceProfile(
        family="hpu",
        **emulated(BY_KEY["Gaudi2"]),
        efficiency=0.4,
        strided_copy_bandwidth=300 * GB,
        python_us=800.0,
        call_dispatch_us=150.0,
        op_launch_us=25.0,
        host_blocks_per_call=False,
        host_feeds_data=True,
        compiles_graphs=True,
        async_h2d=True,
        collective_latency_us=30.0,
        knobs=_COMMON_KNOBS | {"device_graphs", "cpu_fallback_ops", "pin_memory", "pin_readback"},
        knob_names={
            "device_graphs": "HPU Graphs (htcore.hpu.wrap_in_hpu_graph)",
            "prefetch_depth": "DataLoader prefetch_factor",
            "pin_memory": "DataLoader(pin_memory=True) and .to('hpu', non_blocking=True)",
            "pin_readback": READBACK_INTO_PINNED,
        },
    ),
    # NVIDIA A100 SXM 80 GB (hardware/specs/a100-sxm4-80gb.yaml). cudaLaunchKernel costs ~5 us of host time per
    # kernel; a CUDA graph replays a captured step with one launch.
    "gpu": DeviceProfile(
        family="gpu",
        **emulated(BY_KEY["A100-SXM4-80GB"]),
        efficiency=0.45,
        strided_copy_bandwidth=400 * GB,
        python_us=500.0,
        call_dispatch_us=20.0,
        op_launch_us=5.0,
        host_blocks_per_call=False,
        host_feeds_data=True,
        compiles_graphs=False,
        async_h2d=True,
        collective_latency_us=25.0,
        knobs=_COMMON_KNOBS | {"device_graphs", "cpu_fallback_ops", "pin_memory", "pin_readback"},
        knob_names={
            "device_graphs": "CUDA/HIP graphs (torch.cuda.graph, torch.compile mode='reduce-overhead')",
            "prefetch_depth": "DataLoader prefetch_factor",
            "pin_memory": "DataLoader(pin_memory=True) and .to('cuda', non_blocking=True)",
            "pin_readback": READBACK_INTO_PINNED,
        },
    ),
}

# What a job's own framework or engine calls a knob, before its device family's name (by the profiler of its capture,
# by framework on the family, by framework, by serving engine, then by what the job is): a fitted config records the
# job it was fitted to (its calibration's ``job``)
JOB_KNOB_NAMES: dict[str, dict[str, str]] = {
    "pytorch on npu": {"prefetch_depth": "DataLoader prefetch_factor"},  # the family's names are TensorFlow's
    "jax": {
        "device_graphs": "the whole step under one jax.jit: one executable, its kernels replayed as XLA's command "
        "buffers (CUDA/HIP graphs)",
        "prefetch_depth": "flax.jax_utils.prefetch_to_device(size) / tf.data prefetch",
    },
    "tensorflow on gpu": {  # on NPUs and IPUs the family's own names are TensorFlow's
        "device_graphs": "the whole step compiled by XLA (tf.function(jit_compile=True)): its kernels replayed as "
        "XLA's command buffers (CUDA/HIP graphs)",
        "prefetch_depth": "tf.data Dataset.prefetch(buffer_size)",
        "workload.input_workers": "tf.data's parallel calls: Dataset.map(num_parallel_calls=...)",
    },
    EARLY_PYTORCH: {  # a capture by PyTorch's early profiler
        "device_graphs": "CUDA/HIP graphs (torch.cuda.graph from PyTorch 1.10, torch.compile mode='reduce-overhead' "
        "from 2.0: the capture is from an early PyTorch)",
    },
    "vllm": {"device_graphs": "vLLM's captured graphs, the device's own (on unless --enforce-eager)"},
    "sglang": {"device_graphs": "SGLang's captured graphs, the device's own (on unless --disable-cuda-graph)"},
    "serving": {
        "device_graphs": "the engine's CUDA/HIP graphs: vLLM without --enforce-eager, SGLang without "
        "--disable-cuda-graph",
    },
    "inference": {  # a pipeline's inputs are its own tensors as often as a DataLoader's batches
        "pin_memory": "the inputs in pinned host memory (DataLoader(pin_memory=True), or tensor.pin_memory()) and "
        ".to(device, non_blocking=True)",
    },
}


def knob_name(profile: DeviceProfile, knob: str, job: dict[str, Any]) -> str | None:
    """What ``job`` (a calibration's record of it: ``framework``, ``kind``, ``engine``, the ``profiler`` where its
    capture's was an early one) calls ``knob``, else what ``profile``'s family does; None where neither names it."""
    framework = job.get("framework")
    for context in (
        job.get("profiler"),
        f"{framework} on {profile.family}",
        framework,
        job.get("engine"),
        job.get("kind"),
    ):
        if isinstance(context, str) and knob in JOB_KNOB_NAMES.get(context, {}):
            return JOB_KNOB_NAMES[context][knob]
    return profile.knob_names.get(knob)
