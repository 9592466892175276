"""The names each device family's own profilers use, so emulated traces read like real ones.

Compute is split into named ops (forward ops take the first half of a step, backward ops the
second; a CPU fallback sits between them). Shares within each half add up to one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Vocabulary:
    host_process: str
    device_process: str
    compute_thread: str
    python: str  # Python training-loop work each time control returns to it
    dispatch: str  # launching one compiled device call
    op_launches: str  # launching a step's ops one by one (no device graph)
    data_wait: str  # the training loop waiting for its next batch
    data_load: str  # the training loop loading its next batch itself (no input workers)
    compile: str
    preprocess: str
    h2d: str  # input batch, host -> device
    h2d_pageable: str  # ... from pageable memory
    copy_call: str  # the host's call that copies a batch from pageable memory, blocking until it is done
    fallback_d2h: str
    fallback_h2d: str
    readback: str  # results copied back to the host after each step, into pinned memory ...
    readback_pageable: str  # ... and into pageable memory
    forward: tuple[tuple[str, float], ...]
    backward: tuple[tuple[str, float], ...]
    update: str
    strided: tuple[str, ...]  # layout-rearranging copies, sharing the time equally
    remote_buffer_copy: str = ""  # offloaded optimizer state, IPU only
    fallback_op: str = "{op}"  # host op of a CPU fallback; {op} and {dtype} are filled in
    all_reduce: str = "allreduce"  # the gradient all-reduce across replicas, as the collective library names it
    comm_thread: str = "Communication"
    backend: str = ""  # the collective library, as distributedInfo names it
    data_parallel: str = ""  # the annotation a data-parallel wrapper records around each forward (PyTorch's DDP)
    sync: str = ""  # the host waiting for the device's work when the loop reads a value back every step (eager hosts)


VOCABULARIES: dict[str, Vocabulary] = {
    "npu": Vocabulary(
        host_process="Host (TF adapter)",
        device_process="Ascend Hardware",
        compute_thread="Stream 0",
        python="Python train step",
        dispatch="AscendCL@aclmdlExecute",
        op_launches="AscendCL@aclopExecute",
        data_wait="IteratorGetNext",
        data_load="IteratorGetNext",
        compile="AscendCL@aclopCompile",
        preprocess="tf.data preprocess",
        h2d="MEMCPY_ASYNC H2D",
        h2d_pageable="MEMCPY_ASYNC H2D",
        copy_call="AscendCL@aclrtMemcpy",
        fallback_d2h="MEMCPY_ASYNC D2H",
        fallback_h2d="MEMCPY_ASYNC H2D",
        readback="MEMCPY_ASYNC D2H",
        readback_pageable="MEMCPY_ASYNC D2H",
        forward=(("Conv2D", 0.5), ("BNTrainingReduce", 0.2), ("MatMulV2", 0.3)),
        backward=(("Conv2DBackpropInput", 0.45), ("Conv2DBackpropFilter", 0.45), ("BNTrainingUpdateGrad", 0.1)),
        update="ApplyMomentumD",
        strided=("TransData",),
        all_reduce="hcom_allReduce_",
        comm_thread="Stream 1 (HCCL)",
        backend="hccl",
    ),
    "ipu": Vocabulary(
        host_process="Host (Poplar)",
        device_process="IPU 0",
        compute_thread="Execution",
        python="Python train step",
        dispatch="Engine::run",
        op_launches="Engine::run",
        data_wait="IPUInfeedQueue dequeue",
        data_load="IPUInfeedQueue dequeue",
        compile="Poplar graph compilation",
        preprocess="tf.data preprocess",
        h2d="StreamCopyMid",
        h2d_pageable="StreamCopyMid",
        copy_call="StreamCopyBegin",
        fallback_d2h="StreamCopyMid",
        fallback_h2d="StreamCopyMid",
        readback="StreamCopyMid",
        readback_pageable="StreamCopyMid",
        forward=(("layer/Conv/fwd", 0.6), ("layer/MatMul/fwd", 0.3), ("Exchange", 0.1)),
        backward=(("layer/Conv/bwd", 0.6), ("layer/MatMul/bwd", 0.3), ("Exchange", 0.1)),
        update="WeightUpdate/Adam",
        strided=("PreArrange-0", "DstStridedCopy"),
        remote_buffer_copy="StreamCopyMidRemoteBuffer",
        all_reduce="GCL AllReduce (replicas)",
        comm_thread="Replica sync",
        backend="gcl",
    ),
    "hpu": Vocabulary(
        host_process="Host (PyTorch, lazy mode)",
        device_process="HPU 0",
        compute_thread="Compute (MME/TPC)",
        python="Python train step",
        dispatch="synLaunch (HPU graph replay)",
        op_launches="lazy mode graph build + synLaunch",
        sync="synStreamSynchronize",
        data_wait="DataLoader.__next__",
        data_load="enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        compile="Graph compile (recipe)",
        preprocess="DataLoader worker: preprocess",
        h2d="memcpy H2D",
        h2d_pageable="memcpy H2D (pageable)",
        copy_call="hpu copy (pageable, blocking)",
        fallback_d2h="memcpy D2H",
        fallback_h2d="memcpy H2D",
        readback="memcpy D2H",
        readback_pageable="memcpy D2H (pageable)",
        forward=(("matmul_bf16", 0.6), ("softmax_fwd_bf16", 0.2), ("layernorm_fwd_bf16", 0.2)),
        backward=(("matmul_bf16_bwd", 0.7), ("softmax_bwd_bf16", 0.15), ("layernorm_bwd_bf16", 0.15)),
        update="optimizer_adamw_bf16",
        strided=("transpose_bf16",),
        fallback_op="CPU fallback {op} : self=HPU{dtype}Type",
        all_reduce="hccl_allreduce",
        comm_thread="Collective (HCCL)",
        backend="hccl",
        data_parallel="DistributedDataParallel.forward",
    ),
    "gpu": Vocabulary(
        host_process="Host (PyTorch)",
        device_process="GPU 0",
        compute_thread="stream 7",
        python="Python train step",
        dispatch="cudaGraphLaunch",
        op_launches="cudaLaunchKernel",
        sync="cudaStreamSynchronize",
        data_wait="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
        data_load="enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        compile="CUDA graph capture",
        preprocess="DataLoader worker: preprocess",
        h2d="Memcpy HtoD (Pinned -> Device)",
        h2d_pageable="Memcpy HtoD (Pageable -> Device)",
        copy_call="cudaMemcpyAsync",
        fallback_d2h="Memcpy DtoH (Device -> Pinned)",
        fallback_h2d="Memcpy HtoD (Pinned -> Device)",
        readback="Memcpy DtoH (Device -> Pinned)",
        readback_pageable="Memcpy DtoH (Device -> Pageable)",
        forward=(
            ("ampere_bf16_s16816gemm_bf16_128x128", 0.6),
            ("vectorized_elementwise_kernel", 0.2),
            ("softmax_warp_forward", 0.2),
        ),
        backward=(
            ("ampere_bf16_s16816gemm_bf16_128x256", 0.7),
            ("elementwise_kernel", 0.15),
            ("softmax_warp_backward", 0.15),
        ),
        update="multi_tensor_apply_kernel (FusedAdam)",
        strided=("transpose_kernel",),
        fallback_op="aten::{op} (CPU fallback, {dtype})",
        all_reduce="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        comm_thread="stream 13 (NCCL)",
        backend="nccl",
        data_parallel="DistributedDataParallel.forward",
    ),
}

HPU_DTYPE_NAMES = {"bf16": "BFloat16", "fp16": "Half", "fp32": "Float", "int64": "Long", "int32": "Int"}
