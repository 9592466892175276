"""Event names that mean the same thing whichever tool wrote them (DESIGN.md §3)."""

from __future__ import annotations

import re

from perftool.common.names import COMPILED_CALL as COMPILED_CALL  # JAX's jit and pmap calls
from perftool.trace.model import PROFILER_WINDOW_END as WINDOW_END_NAME
from perftool.trace.model import Kind

# A serving engine's iteration: vLLM's model execution (its worker's annotation: execute_new_N_cached_M, the new and
# cached requests it schedules, since 2025; execute_context_C(...)_generation_G(...) before), SGLang's scheduler step
# named by its batch's forward mode (step[DECODE bs=N], prefill as EXTEND; MIXED, IDLE, a disaggregated decode
# server's PREBUILT, TARGET_VERIFY, SPLIT_PREFILL, DLLM_EXTEND...).
SGLANG_STEP = re.compile(r"^step\[[A-Z][A-Z0-9_]*( bs=\d|\])")
ENGINE_STEP = re.compile(
    rf"^execute_(\d+_)?context_\d+\(.*\)_generation_\d+\(|^execute_new_\d+_cached_\d+$|{SGLANG_STEP.pattern}"
)
STEP = re.compile(rf"^(ProfilerStep#\d+|[Ss]tep \d+)$|{ENGINE_STEP.pattern}")  # the profiler's, a marker thread's
# PyTorch's optimizers record each step they take (Optimizer.step#<class>.step, torch.optim's profiling hook): a
# training iteration ends with its optimizer's step
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#\w+\.step$")
OPTIMIZER_ZERO_GRAD = re.compile(r"^Optimizer\.zero_grad#\w+\.zero_grad$")  # its zero_grad, recorded alike
# the ops that update many tensors in one call: torch.optim's foreach and fused implementations (aten::_foreach_add_,
# aten::_fused_adamw_), where a per-parameter loop makes an op per tensor
BATCHED_UPDATE = re.compile(r"^aten::_(foreach|fused)_")
ATEN_OP = re.compile(r"^aten::")  # an op of PyTorch's own library (not an extension's, not a compiled region)
# an op that gives a tensor another shape: a video model folds a clip's frames into the batch with one (B × T × C × H
# × W viewed as B·T × C × H × W) before a per-frame convolution, so the loader keeps these ops' recorded inputs
RESHAPE = re.compile(r"^aten::(reshape|view|_reshape_alias|_unsafe_view|flatten)$")
# The kind of iteration an engine's step annotation names: SGLang's forward mode (EXTEND, DECODE, MIXED...); whether
# vLLM's runs prefills, decodes or both (its context and generation counts), or takes new requests (V1's)
ENGINE_STEP_MODE = re.compile(
    r"^step\[(?P<mode>[A-Z][A-Z0-9_]*)"
    r"|^execute_(?:\d+_)?context_(?P<context>\d+)\(.*\)_generation_(?P<generation>\d+)\("
    r"|^execute_new_(?P<new>\d+)_cached_\d+$"
)
# The tokens an engine's iteration runs, as its step annotations count them, the sum of the groups that match:
# vLLM's detailed annotation (execute_N_context_...), its default one (execute_context_C(prefill tokens)_generation_G(
# decode tokens)), SGLang's decode (step[DECODE bs=N]: a token a sequence) and its prefill (step[EXTEND bs=B toks=N]);
# it replays the graph captured for the smallest batch of N tokens or more (SGLang's prefill, a piecewise graph's)
ENGINE_STEP_TOKENS = re.compile(
    r"^execute_(\d{1,18})_context_|^execute_context_\d{1,18}\((\d{1,18})\)_generation_\d{1,18}\((\d{1,18})\)$"
    r"|^step\[DECODE bs=(\d{1,18})\b|^step\[(?:EXTEND|PREFILL|MIXED) [^\]]*\btoks=(\d{1,18})\b"
)
# The sequences an engine's iteration attends over, where its step annotation counts them: for its prefills
# (context) and its decodes (generation) each, the sums over their sequences of query tokens, keys, queries squared
# and queries times keys (execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785))
_LENGTHS = r"\(sq(\d{1,18})sk(\d{1,18})sqsq(\d{1,18})sqsk(\d{1,18})\)"  # an int64's digits at most
ENGINE_STEP_LENGTHS = re.compile(rf"^execute_\d+_context_\d+{_LENGTHS}_generation_\d+{_LENGTHS}")
GRAPH_CAPTURE_SIZE = re.compile(r"^capture_(\d{1,18})_")  # an engine's capture of a graph for N (capture_32_DECODE)
STEP_NUMBER_ARG = "step_num"  # a step marker's number in its args (jax.profiler's StepTraceAnnotation)
# A scalar read back by the framework (.item()): a wait for the device where the tensor is the device's, the runtime's
# copy and synchronisation inside it; a host tensor's reads nothing from the device
_READ_BACK_NAMES = r"aten::item|aten::_local_scalar_dense|_local_scalar_dense"
READ_BACK = re.compile(rf"^({_READ_BACK_NAMES})$")
# JAX reading an array's value to the host (float(x), np.asarray(x), x.item(), jax.device_get): the span jax.Array's
# value property records around waiting for the device to produce the array and copying it back
JAX_READ_BACK = r"np\.asarray\(jax\.Array\)"
# The Python tracer's frame of jax.block_until_ready or a jax.Array's own ("$api.py:3041 block_until_ready", a C++
# method's "$<unknown> block_until_ready"): the host waiting for the device, nothing read back
JAX_BLOCK_FRAME = re.compile(r"^\$\S+ block_until_ready$")
# Waits: the host's synchronising calls (the CUDA runtime's and HIP's, the driver's that XLA makes, each with the
# suffixes CUPTI gives a version and the per-thread default stream), a scalar read back (PyTorch's, JAX's), Ascend's
# and Gaudi's calls, an Intel GPU's (SYCL's unified runtime, its older plugin interface, Level Zero);
SYNC = re.compile(
    r"^((cuda|hip)(Stream|Device|Event)Synchronize|cu(Stream|Event|Ctx)Synchronize)(_v2)?(_pt[sd]z)?$"
    r"|^(urQueueFinish|urEventWait|piQueueFinish|piEventsWait|ze(Event|Fence|CommandList)HostSynchronize"
    r"|zeCommandQueueSynchronize)$"
    rf"|^({_READ_BACK_NAMES}|{JAX_READ_BACK}"
    r"|AscendCL@aclrtSynchronize\w*|aclrtSynchronize\w*|synStreamSynchronize|synDeviceSynchronize"
    r"|Stream Wait Event|Stream Sync|Context Sync|Event Sync|event_wait"  # device side: a stream waiting ...
    r"|EVENT_WAIT|REMOTE_EVENT_WAIT|IPC_EVENT_WAIT|DAVID_EVENT_WAIT|CAPTURE_WAIT|MEM_WAIT_VALUE"  # ... Ascend's tasks
    r"|EVENT_RECORD)$"  # and the task recording the event another stream waits for: a signal, no work
)

# An op TensorFlow runs eagerly, dispatched from Python one at a time ("EagerLocalExecute: MatMul"), as JAX dispatches
# a jnp op as a compiled call of its own; a tf.function's graph runs as one such execution, named after the graph
# TensorFlow traced it into ("EagerLocalExecute: __inference_train_step_907")
TF_EAGER_OP = re.compile(r"^EagerLocalExecute: (?!__inference_)")
COMPILE = re.compile(
    r"(aclopCompile|AscendCL@opCompile|^opCompile|XlaCompile|compile_inner|call_user_compiler|\(dynamo_timed\)$"
    r"|compile_fx|GraphCompile|graph_compile|RecipeCompile|recipe_compile"
    r"|^backend_compile(_and_load)?$"  # jax compiling a jitted function (its compiler's annotate_function)
    r"|^tf\.function-graph_building$"  # TensorFlow tracing a tf.function into a new graph
    r"|(?i:graph compil|graph capture))"  # Poplar graph compilation, Graph compile (recipe), CUDA graph capture
)
# Start-up, not steady state: runtime and library initialisation, and annotations a benchmark puts around warm-up.
STARTUP = re.compile(
    r"^(cuInit|cuDevicePrimaryCtxRetain|cuCtxCreate\w*|cudaGetDeviceCount|cudaDeviceGetStreamPriorityRange"
    r"|hipInit|hipGetDeviceCount|hipDeviceGetStreamPriorityRange|cudnnCreate|cublasCreate\w*|cublasLtCreate"
    r"|miopenCreate\w*|rocblas_create_handle|aclInit|AscendCL@aclInit|aclrtSetDevice|AscendCL@aclrtSetDevice"
    r"|synInitialize|synDeviceAcquire\w*)$"
)
# A compile event that records a device graph rather than compiling one: a CUDA graph tree's recording, which
# torch.compile times as it times its compile phases ("CUDAGraphNode.record (dynamo_timed)", "cudagraphify.get_container
# (dynamo_timed)"), and a CUDA graph's capture named as such
GRAPH_RECORDING = re.compile(r"^(CUDAGraph|cudagraphify)|(?i:graph capture)")
# A compiled model's warm-up, whenever it runs: torch.compile's compile-time phases (each timed as "... (dynamo_timed)":
# tracing, Inductor, autotuning, recording CUDA graphs) and a device graph's capture and instantiation.
GRAPH_CAPTURE = re.compile(r"^(cuda|hip|cu)Stream(Begin|End)Capture|^(cuda|hip|cu)GraphInstantiate")  # graphs made
CAPTURE_BEGIN = re.compile(r"^(cuda|hip|cu)StreamBeginCapture")  # a stream starts recording a graph's nodes
CAPTURE_END = re.compile(r"^(cuda|hip|cu)StreamEndCapture")
MODEL_WARMUP = re.compile(r"\(dynamo_timed\)$|^(cuda|hip|cu)StreamEndCapture|^(cuda|hip|cu)GraphInstantiate")
# The first runtime call of a process creates the context, whichever it is: start-up only before any device work.
FIRST_RUNTIME_CALL = re.compile(r"^(cudaFree|cudaMalloc|cudaSetDevice|cudaGetDevice|hipFree|hipMalloc|hipSetDevice)$")
# Allocating device or pinned host memory: the caching allocator growing, in warm-up or when it churns.
ALLOCATION = re.compile(
    r"^(cudaMalloc\w*|cudaHostAlloc|cuMemAlloc\w*|cuMemHostAlloc|hipMalloc\w*|hipHostMalloc|hipExtMallocWithFlags"
    r"|aclrtMalloc\w*|AscendCL@aclrtMalloc\w*|synDeviceMalloc|synHostMalloc"
    r"|urUSM(Device|Host|Shared)Alloc|piextUSM(Device|Host|Shared)Alloc|zeMemAlloc(Device|Host|Shared))$"
)
# Freeing device or pinned memory: with allocations, the allocator's churn where it frees and allocates each step.
DEALLOCATION = re.compile(
    r"^(cudaFree\w*|cuMemFree\w*|hipFree\w*|hipHostFree|aclrtFree\w*|AscendCL@aclrtFree\w*|synDeviceFree|synHostFree"
    r"|urUSMFree|piextUSMFree|zeMemFree)$"
)
WARMUP_ANNOTATION = re.compile(r"(?i)warm[-_ ]?up")
# Kineto's mark of where it wrote the trace, after all of the job's events (by as much as its processing took): no
# end of the job's
PROFILER_WINDOW_END = re.compile(f"^{re.escape(WINDOW_END_NAME)}$")
DEVICE_PROCESS = re.compile(r"^(GPU|HPU|NPU|XPU|MTIA|IPU)\s*\d*\b")  # a process named after its device
INPUT = re.compile(
    r"^enumerate\(DataLoader\)|DataLoaderIter\w*\.__next__|^DataLoader"
    r"|^IteratorGetNext|^IPUInfeedQueue|^tf\.data"  # TensorFlow's input pipeline and the IPU infeed
)
# Threads of the input pipeline's workers, by the names frameworks and profilers give them.
# a word starting "preprocess" (\b: tried once per word, so a name of repeated "preprocess" is not quadratic)
INPUT_WORKER_THREAD = re.compile(r"(?i)(\bpreprocess\w*|dataloader|data loader|input) worker|pt_data_worker")
# The runtime calls that launch device work or copies, whichever profiler wrote them. Kernels, by every launcher of
# the CUDA runtime and driver and of HIP (cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel,
# cuLaunchKernelEx, hipExtLaunchKernel, which RCCL uses, hipModuleLaunchKernel, hipExtLaunchMultiKernelMultiDevice,
# hipDrvLaunchKernelEx; XLA's through the driver), graphs, asynchronous copies and fills; on an Intel GPU, the SYCL
# runtime's enqueues of kernels, copies and fills (the unified runtime's and its older plugin interface's: the calls
# Kineto's XPU profiler links to the device work they start). AscendCL's calls that
# enqueue device work: an aclnn operator (not its GetWorkspaceSize, which sizes it on the host), a compiled op or a
# model executed, a kernel launched, an asynchronous copy or fill, a collective; not its bookkeeping (tensor
# descriptors, attributes, tiling), events, context or synchronisation.
_KERNEL_LAUNCH = (
    r"(cuda|cu|hip)\w*Launch\w*Kernel|cuLaunchGrid|urEnqueue(Cooperative)?KernelLaunch|piEnqueueKernelLaunch"
    r"|piextEnqueue(Cooperative)?KernelLaunch"
)
LAUNCH = re.compile(
    rf"^({_KERNEL_LAUNCH}|(cuda|hip|cu)GraphLaunch|cudaMemcpyAsync|hipMemcpyAsync"
    r"|cuMemcpy\w*Async|hipMemcpy\w+Async|(cuda|cu|hip)Memset\w*Async|Engine::run"
    r"|urEnqueueUSM(Memcpy|Fill)(2D)?$|piextUSMEnqueue(Memcpy|Fill|Memset)(2D)?$"
    r"|AscendCL@(aclnn(?!\w*GetWorkspaceSize$)\w+|aclop(CompileAnd)?Execute\w*|aclmdlExecute\w*|aclrtLaunch\w*"
    r"|aclrtMem(cpy|set)\w*Async|hcom_\w+))"
    r"|synLaunch"  # anywhere in the name: in lazy mode one call builds the step's graph op by op, then launches it
)
KERNEL_LAUNCH = re.compile(rf"^({_KERNEL_LAUNCH})")  # of those, the calls that launch one kernel
# The trace metadata key of the devices a trace holds beside the one analysed: {"analysed": name, "others": {name:
# device time as a share of the analysed one's}, "their_hosts": the host processes left out with them}
OTHER_DEVICES = "perftool.other_devices"
# The trace metadata key of the ranks a trace merging several holds: {"analysed": label, "others": [labels]}
OTHER_RANKS = "perftool.other_ranks"
# A process of one rank in a trace that merges several ranks' traces: SGLang's merged profile (--merge-profiles)
# prefixes each pid with the rank's place in the job ("[TP00] 12345", "[TP01-DP00-PP00-EP00] 3"), perftool's own
# job timeline (scan --format perfetto of a job) names each process by its rank ("rank 3 · python3").
MERGED_RANK_PID = re.compile(r"^\[((?:TP|DP|PP|EP)\d+(?:-(?:TP|DP|PP|EP)\d+)*)\] (.*)$")
MERGED_RANK_PROCESS = re.compile(r"^(rank \d+)(?: \(its own clock: not aligned\))? · ")
# perftool's job timeline numbers each rank's processes from (its rank + 1) times this
MERGED_RANK_PIDS = 10_000_000
FINDINGS_PROCESS = "perftool findings"  # the process an annotated trace (scan --format perfetto) adds
FINDINGS_CATEGORY = "perftool"  # the category of its events, and of its arrows into the trace's own tracks
# torch_npu's task queue: the Python thread enqueues each operator, a second thread dequeues and launches it (off
# where ASCEND_LAUNCH_BLOCKING=1 or TASK_QUEUE_ENABLE=0).
TASK_QUEUE = re.compile(r"^(Enqueue|Dequeue)@")
# A TPU chip's SparseCore, an XSpace plane of its own beside the chip's TensorCore ("/device:TPU:0 SparseCore 0"): a
# coprocessor of the chip (embedding lookups, offloaded collectives), not another device
SPARSE_CORE = re.compile(r" SparseCore \d+$")
# A frame of the Python stack, as the XLA profiler's Python tracer ("$train.py:40 main") and Kineto
# ("train.py(40): main", the file's path as Python has it: spaces in it, backslashes on Windows) name them.
PYTHON_FRAME = re.compile(r"^\$|^[^()]+\.py\(\d+\): ")
# torch.compile's record of a timed phase's metadata beside the phase, an empty record_function named
# "{phase}_data: {key}={value}, ..." ("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/1")
PHASE_METADATA = re.compile(r"^\w+_data: \w+=")
# A call into a torch.compile'd model as PyTorch's profiler records it: the region of frame N's compile M (no numbers
# in older releases), which runs the compiled graph (its kernels launched from inside it).
COMPILED_REGION = re.compile(r"^Torch-Compiled Region(: \d+/\d+)?$")
# A region of a frame torch.compile compiled again (its compile id is the frame's and the frame's compile count: 0/1)
RECOMPILED_REGION = re.compile(r"^Torch-Compiled Region: \d+/[1-9]\d*$")
# A captured device graph replayed with one launch: CUDA and HIP graphs, HPU Graphs.
GRAPH_LAUNCH = re.compile(r"^(cudaGraphLaunch|hipGraphLaunch|cuGraphLaunch)|(?i:graph replay)")
CUDA_GRAPH_LAUNCH = re.compile(r"^cu(da)?GraphLaunch")  # CUDA's, through the runtime or the driver
# A compiled model running: a call into a compiled region, AOTAutograd's function around a compiled graph (forward
# and, in training, backward), a device graph replayed.
MODEL_RUN = re.compile(rf"{COMPILED_REGION.pattern}|^CompiledFunction(Backward)?$|{GRAPH_LAUNCH.pattern}")
# Python that prepares inputs, by the frames' files and functions as Kineto's Python tracer names them
# ("transformers/models/videomae/image_processing_videomae.py(178): _preprocess_image"): preprocessing, Hugging Face
# image processors, feature extractors and tokenizers, torchvision's transforms, video and image decoding, collation.
INPUT_PREPARATION = re.compile(
    r"(?i)preprocess|image_processing|feature_extraction|video_processing|tokeniz|augment|collate"
    r"|torchvision[/\\](transforms|io)[/\\]|read_video|decode_video|video_reader|pyav|decord|\bPIL[/\\]|\bcv\d\.|imageio"
)  # no digit written out (OpenCV's cv2 as cv\d): the pattern is searched in the names' shapes, digits as 0
# ... but not Python that handles the model's outputs after the step ("image_processing_owlv2.py(503):
# post_process_object_detection", diffusers' image_processor postprocess), which runs where the outputs are
POST_PROCESSING = re.compile(r"(?i)post_?process")
# A call of a PyTorch module, as Kineto's Python tracer names it ("nn.Module: CLIPTextModel_0"): what runs inside
# it is the model's (a text encoder preparing its attention mask is no input pipeline)
MODULE_CALL = re.compile(r"^nn\.Module: ")
# A batch loaded by the training process itself (a PyTorch DataLoader with num_workers=0).
IN_PROCESS_LOADING = re.compile(r"_SingleProcessDataLoaderIter")
# Collectives, as NCCL/RCCL/HCCL, c10d and XLA (all-reduce.3, all-gather-start, collective-permute-done) name them;
# expert parallelism's token exchange (DeepEP's dispatch and combine kernels, MoRI's, pplx's all-to-all); and the
# all-reduce kernels of serving engines (vLLM's and SGLang's cross_device_reduce, quick reduce, one- and two-shot).
COMMUNICATION = re.compile(
    r"(?i)(^nccl|ncclKernel|^rccl|^hcom|^hccl|c10d::|all[-_]?reduce|all[-_]?gather|reduce[-_]scatter"
    r"|all[-_]?to[-_]?all|all2all|collective[-_](permute|broadcast)|deep_ep::|mori::moe|pplx::"
    r"|cross_device_reduce|quickreduce|(one|two)_shot_all_reduce)"
)
# SGLang's first speculative-decoding workers (EAGLE, EAGLE-3, MTP's NextN, a standalone draft model, DFlash), as the
# Python tracer names their frames: they run with the overlap scheduler off; their v2 (``*_worker_v2.py``) keep it
SPEC_V1_WORKER = re.compile(r"sglang/srt/speculative/\w*(eagle|standalone|dflash)\w*_worker\.py\(")
# vLLM's attention ops, where its piecewise CUDA graphs are split (its compilation config's splitting ops): each
# runs eagerly, launched by the host, between two pieces' replays, unless a decode is captured in one full graph
PIECEWISE_SPLIT = re.compile(r"^vllm::unified_(mla_)?attention(_with_output)?$")
# A serving engine's own low-latency all-reduce kernels (symmetric-memory multimem, one- and two-shot, vLLM's and
# SGLang's custom all-reduce, quick reduce, FlashInfer's and TensorRT-LLM's fused all-reduce): small messages already
# take the fastest path there is, short of fusing the all-reduce into its neighbours.
ENGINE_ALLREDUCE = re.compile(
    r"(?i)multimem_all_?reduce|(one|two)_shot_all_?reduce|cross_device_reduce|quickreduce|allreduce_fusion"
)
# Collectives a host thread runs itself (gloo, MPI, UCC on the CPU): the thread is blocked while they run.
HOST_COLLECTIVE = re.compile(r"^(gloo|mpi|ucc):")
# Events whose args say what a collective moved: Kineto's record_param_comms and collective kernels (collective
# name, element counts, dtype, group), the backend's own annotations (``Input Dims``), HCCL's ops, and a serving
# engine's all-reduce ops and torch's symmetric-memory ones, whose input (``Input Dims``) is the message they reduce
# (vllm::all_reduce, sglang::inplace_all_reduce, symm_mem::multimem_all_reduce_).
COLLECTIVE_ARGS = re.compile(
    r"^(record_param_comms$|nccl|rccl|gloo:|mpi:|ucc:|hcom_|hccl"
    r"|(vllm|sglang|symm_mem)::\w*all_reduce\w*$)",
    re.IGNORECASE,
)
# A copy's direction as profilers name it; PTI (Intel GPUs) writes M for memory the runtime did not allocate (the
# program's own, pageable) and H for its host allocations (pinned): "Memcpy M2D (...)", "Memcpy D2H (...)".
H2D = re.compile(r"(?i)(HtoD|H2D|\bM2D\b|HostToDevice|host_to_device)")
D2H = re.compile(r"(?i)(DtoH|D2H|\bD2M\b|DeviceToHost|device_to_host)")
D2D = re.compile(r"(?i)(DtoD|D2D|PtoP|DeviceToDevice)")
MEMCPY = re.compile(r"(?i)memcpy|memcopy|^dma_")
MEMSET = re.compile(r"(?i)^memset")
# Copies that block the host: to or from pageable memory, or through a synchronous copy call (the CUDA runtime's,
# with CUPTI's suffix for the per-thread default stream; the driver's, XLA's, with its version's; HIP's).
PAGEABLE = re.compile(r"(?i)pageable|\bMemcpy (M2D|D2M)\b")
BLOCKING_COPY_CALL = re.compile(
    r"^(cudaMemcpy(2D|3D)?(_ptds)?|cuMemcpy(2D|2DUnaligned|3D|[ADH]to[ADH])?(_v2)?|hipMemcpy(2D|WithStream|[DH]to[DH])?"
    r"|aclrtMemcpy|AscendCL@aclrtMemcpy)$"
)


def kind_of_name(name: str) -> Kind:
    """The kind a name implies by itself, or OTHER when the name alone does not say (a Python frame's and a phase's
    metadata never: they name the code, ``torch/_inductor/compile_fx.py(1767): run``, or the phase, not what runs)."""
    if PYTHON_FRAME.match(name) or PHASE_METADATA.match(name):
        return Kind.OTHER
    if STEP.match(name):
        return Kind.STEP
    if SYNC.match(name):
        return Kind.SYNC
    if COMPILE.search(name):
        return Kind.COMPILE
    if INPUT.search(name):
        return Kind.INPUT
    if MEMCPY.search(name):
        if H2D.search(name):
            return Kind.H2D
        if D2H.search(name):
            return Kind.D2H
        return Kind.D2D
    if MEMSET.search(name):
        return Kind.MEMSET
    if LAUNCH.match(name):
        return Kind.RUNTIME
    if COMMUNICATION.search(name):
        return Kind.COMMUNICATION
    return Kind.OTHER


# Names detectors look for on top of the kinds above (DESIGN.md §3).
CPU_FALLBACK = re.compile(r"CPU fallback", re.IGNORECASE)  # the op ran on the host CPU
AI_CPU = re.compile(r"(?i)\bAI_?CPU\b|aicpu")  # Ascend ops on the NPU's own AI CPU cores: device work, slow path
STRIDED_COPY = re.compile(r"DstStridedCopy|SrcStridedCopy|PreArrange|^TransData|StridedCopy")
REMOTE_BUFFER_COPY = re.compile(r"RemoteBuffer|^StreamCopy(Begin|Mid|End)RemoteBuffer")
# How gradients are synchronised, as the framework names its own work.
DDP = re.compile(r"DistributedDataParallel|ddp\.reducer|distributed::reducer")
FSDP = re.compile(r"FullyShardedDataParallel|^FSDP::|^fsdp::|FSDP\.(forward|backward)")
# DDP's forward, as its record_function names it, and the calls that copy rank 0's buffers to every rank at its start
# (broadcast_buffers=True): its buffers flattened into one tensor, broadcast (the c10d op, and the process group's own
# record, "nccl:broadcast"), unflattened back
DDP_FORWARD = re.compile(r"^DistributedDataParallel\.forward$")
BROADCAST = re.compile(r"^c10d::broadcast_$|^\w+:broadcast$")
BUFFER_SYNC = re.compile(rf"^aten::(un)?flatten_dense_tensors$|{BROADCAST.pattern}")
# DDP's reducer copying each gradient out of its bucket once the bucket is reduced (gradient_as_bucket_view=False)
BUCKET_TO_GRAD = re.compile(r"ddp\.reducer::copy_bucket_to_grad$")
# ... and walking the autograd graph at the end of each forward for the parameters it will not reach
# (find_unused_parameters=True)
UNUSED_PARAMETER_SEARCH = re.compile(r"ddp\.reducer::search_unused_parameters$")
