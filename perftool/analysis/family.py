"""Which device a trace ran on: a name for people, and a family so advice names that family's knobs."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from perftool import hardware
from perftool.common.arrays import distinct
from perftool.common.results import Framework
from perftool.dialects.merged import own_name, own_pid
from perftool.dialects.vocabulary import COMPILED_CALL, DEVICE_PROCESS, ENGINE_STEP, SGLANG_STEP
from perftool.trace.model import Kind, Phase, Role, Trace

FAMILIES = ("npu", "ipu", "hpu", "gpu")
HOST_ONLY = "none (host only)"
_BY_NAME = (
    ("ipu", re.compile(r"^(StreamCopy|PreArrange-|Engine::run|Poplar)|DstStridedCopy|^IPU\b", re.MULTILINE)),
    ("hpu", re.compile(r"HPU\w*Type|synLaunch|^HPU\b|Gaudi", re.MULTILINE)),
    # msprof's names, and in PyTorch's own profiler (torch_npu as its PrivateUse1 device) the NPU's process and
    # torch_npu's operator calls (aclnnMm)
    ("npu", re.compile(r"^AscendCL@|^Ascend Hardware|^aclop|^aclnn[A-Z]|^NPU\b", re.MULTILINE)),
)
_GPU = re.compile(
    r"(?i)^GPU\b|^/device:GPU:|NVIDIA|Tesla|GeForce|Quadro|Radeon|Instinct|\bAMD\b|^(cuda|hip)\w+", re.MULTILINE
)


_TPU_PLANE = re.compile(r"^/device:TPU:\d+")  # an XSpace's plane of one TPU's work


def on_tpu(trace: Trace) -> bool:
    """Whether the trace's device is a TPU (its device tracks on an XSpace's ``/device:TPU:N`` plane)."""
    return any(_TPU_PLANE.match(trace.tracks[i].process_name) for i in device_tracks(trace))


def device_tracks(trace: Trace) -> list[int]:
    """Ids of the device tracks that hold at least one span (counted once per trace)."""

    def counted() -> list[int]:
        device = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)
        return np.flatnonzero(np.bincount(trace.track[device], minlength=len(trace.tracks))).tolist()

    return list(trace.derive("family.device_tracks", counted))


_AMD = re.compile(r"(?i)\bAMD\b|Instinct|Radeon|\bMI\d{3}")
NVIDIA_WORDS = {"cores": "SMs", "core": "SM", "stream": "CUDA stream", "warps": "warps", "graph": "CUDA graph"}
AMD_WORDS = {"cores": "CUs", "core": "CU", "stream": "HIP stream", "warps": "wavefronts", "graph": "HIP graph"}


_HIP_CALL = re.compile(r"^hip[A-Z]")  # HIP's runtime calls (hipLaunchKernel): the GPU they drive is AMD's


def gpu_words(device: str) -> dict[str, str]:
    """How a GPU's maker names its parts, for the device named ``device``: an AMD GPU's compute units (CUs), HIP
    streams and wavefronts; NVIDIA's SMs, CUDA streams and warps otherwise."""
    return AMD_WORDS if _AMD.search(device) else NVIDIA_WORDS


def trace_gpu_words(trace: Trace, device: str) -> dict[str, str]:
    """:func:`gpu_words` of the trace's GPU named ``device``; where the name says no maker (rocmProfileData names a
    GPU ``GPU0``), the runtime the host calls does: HIP's is AMD's."""
    if _AMD.search(device):
        return AMD_WORDS
    hip = trace.derive("family.hip_runtime", lambda: any(map(_HIP_CALL.match, trace.names)))
    return AMD_WORDS if hip else NVIDIA_WORDS


def device_family(trace: Trace) -> str:
    """npu, ipu, hpu or gpu, from the emulator's metadata, the dialect or the names; else ``generic``.

    A trace with no device activity is ``generic``: there is no device whose knobs advice could name. Told once per
    trace.
    """
    return trace.derive("family.device_family", lambda: _device_family(trace))


def _device_family(trace: Trace) -> str:
    if trace.dialect == "emulator":  # the dialect checked that metadata["perftool"] has an "emulator" entry
        emulator = trace.metadata["perftool"]["emulator"]
        if isinstance(emulator, dict) and emulator.get("device") in FAMILIES:
            return emulator["device"]
    by_dialect = {"ascend": "npu", "graphcore": "ipu", "autograd": "gpu"}  # the autograd profiler's use_cuda
    if trace.dialect in by_dialect:
        return by_dialect[trace.dialect]
    names = "\n".join([*trace.names, *(t.process_name for t in trace.tracks)])  # one regex pass per family
    for family, pattern in _BY_NAME:
        if pattern.search(names):
            return family
    tracks = device_tracks(trace)
    if not tracks:
        return "generic"
    described = "\n".join([_device_name(trace, tracks), *trace.names])
    return "gpu" if _GPU.search(described) else "generic"


_PYTORCH = re.compile(r"^(aten::|ProfilerStep#|torch_npu|autograd::|Optimizer\.)", re.MULTILINE)
_JAX = re.compile(COMPILED_CALL.pattern, re.MULTILINE)
# TensorFlow's ops and input pipeline, and its eager runtime's calls from Python (TFE_Py_FastPathExecute_C,
# TFE_Py_ExecuteCancelable, EagerLocalExecute: MatMul), which every TensorFlow 2 job makes
_TENSORFLOW = re.compile(
    r"^(IteratorGetNext|_XlaRun|XlaCompile|tf\.|TF |.*TF adapter|TFE_Py_|EagerLocalExecute: )", re.MULTILINE
)


def framework(trace: Trace) -> Framework:
    """``pytorch``, ``jax`` or ``tensorflow`` from the names the framework's ops and processes carry, else
    ``unknown``. An XSpace's trace (the ``xla`` dialect) is JAX's unless TensorFlow's ops are in it."""
    names = "\n".join([*trace.names, *(t.process_name for t in trace.tracks)])
    if trace.dialect == "autograd" or _PYTORCH.search(names):
        return "pytorch"
    if _TENSORFLOW.search(names):
        return "tensorflow"
    return "jax" if trace.dialect == "xla" or _JAX.search(names) else "unknown"


# What a job cannot set, by its framework or what it is (job_kind): a serving engine schedules requests and copies
# their inputs and results itself and trains nothing; jax.device_put stages its copies through pinned memory itself,
# and TensorFlow offers no setting that pins its inputs' host memory (its runtime chooses the buffers it copies from);
# neither has a setting for the host buffers a result is read back into
_ABSENT_BY_JOB = {
    "serving": frozenset({"prefetch_depth", "pin_memory", "pin_readback", "workload.input_workers",
                          "replicas.bucket", "replicas.overlap", "gradient_accumulation", "offload_optimizer"}),
    "inference": frozenset({"replicas.bucket", "replicas.overlap", "gradient_accumulation", "offload_optimizer"}),
    "jax": frozenset({"pin_memory", "pin_readback"}),
    "tensorflow": frozenset({"pin_memory", "pin_readback"}),
}  # fmt: skip


def settings_absent(family: str, framework: str, kind: str) -> frozenset[str]:
    """The emulator's settings (knobs, ``workload.input_workers``, ``replicas.*``) that a job of ``framework`` and
    ``kind`` (:func:`job_kind`) on ``family`` devices has nothing to set: a loop size where it runs none
    (:func:`offers_loop_size`); a serving engine's input pipeline; gradients where it trains nothing; pinned memory in
    JAX and TensorFlow."""
    absent = _ABSENT_BY_JOB.get(kind, frozenset()) | _ABSENT_BY_JOB.get(framework, frozenset())
    return absent | ({"loop_size"} if not offers_loop_size(family, framework) else frozenset())


def offers_loop_size(family: str, framework: str) -> bool:
    """Whether a job in ``framework`` on ``family`` devices can run several steps per device call (a loop size):
    TensorFlow's NPU adapter (NPU_LOOP_SIZE) and MindSpore's data sink do on Ascend, PopTorch's and TensorFlow's
    device_iterations on IPUs; PyTorch on Ascend (torch_npu) dispatches every step from Python and has no such knob."""
    return not (family == "npu" and framework == "pytorch")


# a backward pass or an optimizer's step: PyTorch's autograd, JAX's transposed jvp, CANN's gradient operators
# (Conv2DBackpropInput, ReluGrad, BNTrainingUpdateGrad, ApplyAdamD), backward kernels (softmax_bwd_bf16,
# flash_bwd_kernel, cuDNN's dgrad and wgrad)
_TRAINING = re.compile(
    r"Backward|backward|^autograd::engine|^Optimizer\.|AccumulateGrad|zero_grad|transpose\(jvp\(|^jvp\(|Backprop"
    r"|[a-z0-9]Grad(V\d+)?$|^Apply(Adam|Momentum|GradientDescent)|bwd|dgrad|wgrad",
    re.MULTILINE,
)
# Each serving engine's own names: SGLang's code's frames (sglang/srt/...), its kernel shape profiler's ops
# (sglang_profiler::...) and its scheduler's iterations (step[DECODE bs=N]); vLLM's ops (vllm::unified_attention), its
# code's frames, its model runner's annotations (gpu_model_runner: forward) and its iterations (execute_new_N_cached_M).
# SGLang first: it runs vLLM's kernels and, in older releases, vLLM's layers, never the other way round.
ENGINES = {
    "sglang": re.compile(rf"sglang|{SGLANG_STEP.pattern}", re.MULTILINE),
    "vllm": re.compile(r"^vllm::|^vllm/|/vllm/|^gpu_model_runner: |^execute_new_\d+_cached_\d+$", re.MULTILINE),
}
ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}  # each engine as its makers write it
# a serving engine's names, or an iteration annotation either engine writes (execute_C_context_...)
_SERVING = re.compile("|".join([*(engine.pattern for engine in ENGINES.values()), ENGINE_STEP.pattern]), re.MULTILINE)


# what marks an XLA device op's path (its args' ``name`` or ``tf_op``) as a backward's: JAX's name stack transposes a
# jvp for reverse-mode differentiation (jit(train_step)/transpose(jvp(model))/dot_general); TensorFlow names gradients
XLA_BACKWARD = (b"transpose(jvp(", b"gradients/", b"gradient_tape/")
XLA_ARGS_LOOKED_AT = 20_000  # device ops whose args are read for it, spread over the trace: a backward has many


def _xla_backward(trace: Trace) -> bool:
    """Whether an XLA trace's device ops include a backward's (:data:`XLA_BACKWARD`): the kernels name their op path
    in their args, not in their names."""
    return trace.dialect == "xla" and device_args_hold(trace, XLA_BACKWARD, XLA_ARGS_LOOKED_AT)


def device_args_hold(trace: Trace, marks: tuple[bytes, ...], looked_at: int) -> bool:
    """Whether the args of the device's work hold any of ``marks``: up to ``looked_at`` of its events with args are
    read, evenly spread over the trace (what the marks say of a job holds all through it)."""
    rows = np.flatnonzero(trace.on_roles(Role.DEVICE) & (trace.args_ref >= 0))
    refs = set(trace.args_ref[rows[:: max(1, rows.size // looked_at)]].tolist())
    return any(mark in trace.kept_args[ref] for ref in refs for mark in marks)


def job_kind(trace: Trace) -> str:
    """``training`` where the trace shows a backward pass or an optimizer's step, by its names or (XLA) its ops' paths
    (and for the emulator's runs); else ``serving`` where a serving engine (vLLM, SGLang) runs the forward, else
    ``inference`` where the device computes (a forward with no backward). A trace whose device computes nothing (a
    host-only capture of collectives) says nothing of its job: it is taken as training, the job perftool is for.
    Found once per trace."""
    return str(trace.derive("family.job_kind", lambda: _job_kind(trace)))


def _job_kind(trace: Trace) -> str:
    if trace.dialect == "emulator":
        return "training"
    names = "\n".join(trace.names)
    if _TRAINING.search(names) or trace.derive("family.xla_backward", lambda: _xla_backward(trace)):
        return "training"
    if _SERVING.search(names):
        return "serving"
    return "inference" if (trace.kind == Kind.COMPUTE).any() else "training"


def serving_engine(trace: Trace) -> str | None:
    """The serving engine (``sglang``, ``vllm``) whose names a serving job's trace (:func:`job_kind`) holds, so that
    advice names that engine's settings; None for another job, or where only an iteration annotation both engines
    write says it serves. Found once per trace."""
    return trace.derive("family.serving_engine", lambda: _serving_engine(trace))


def _serving_engine(trace: Trace) -> str | None:
    if job_kind(trace) != "serving":
        return None
    names = "\n".join(trace.names)
    return next((engine for engine, marks in ENGINES.items() if marks.search(names)), None)


def job_said(trace: Trace) -> str:
    """What the job is, as the advice takes it, in words: ``training``, ``inference``, or a serving engine's
    (``vLLM serving``, ``SGLang serving``; ``serving`` where the trace names no engine); empty where the device
    computes nothing, which says nothing of the job."""
    if not (trace.kind == Kind.COMPUTE).any() and trace.dialect != "emulator":
        return ""
    kind = job_kind(trace)
    engine = serving_engine(trace) if kind == "serving" else None
    return _ENGINE_SERVING.format(ENGINE_NAMES[engine]) if engine else kind


def engine_said(job: str) -> str | None:
    """The serving engine (``vllm``, ``sglang``) that :func:`job_said`'s words ``job`` name; None where they name
    none."""
    return next((engine for engine, name in ENGINE_NAMES.items() if job == _ENGINE_SERVING.format(name)), None)


_ENGINE_SERVING = "{} serving"  # how job_said words a serving engine's job


def device_name(trace: Trace) -> str:
    """The device(s) the trace's device tracks ran on, in words; :data:`HOST_ONLY` when none ran.

    Kineto traces name each device in ``deviceProperties`` (by id, the device process's pid); other
    traces name them in the device process's labels or name.
    """
    tracks = device_tracks(trace)
    return _device_name(trace, _of_computing_devices(trace, tracks)) if tracks else HOST_ONLY


def _of_computing_devices(trace: Trace, tracks: list[int]) -> list[int]:
    """Of device ``tracks``, those of the processes where the device computes: a process holding only collectives
    (msprof's HCCL process, a view of the same NPU's communication beside its Ascend Hardware streams) is no device
    of its own. All of them where no process computes, or there is one process."""
    if len({trace.tracks[i].pid for i in tracks}) < 2:
        return tracks

    def computing() -> frozenset[int]:
        work = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.COMMUNICATION)
        return frozenset(trace.tracks[i].pid for i in distinct(trace.track[work]).tolist())

    pids = trace.derive("family.computing_devices", computing)
    return [i for i in tracks if trace.tracks[i].pid in pids] or tracks


def device_properties(trace: Trace) -> dict[str, Any]:
    """What the trace says about the device its busiest device track ran on: Kineto's ``deviceProperties`` entry
    for it (name, memory, SMs), else its name in words; empty for a host-only trace. Found once per trace (the
    roofline, the fit and two rules ask)."""
    return dict(trace.derive("family.device_properties", lambda: _device_properties(trace)))


def _device_properties(trace: Trace) -> dict[str, Any]:
    tracks = device_tracks(trace)
    if not tracks:
        return {}
    device = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)
    busiest = tracks[int(np.argmax(np.bincount(trace.track[device], weights=trace.dur[device])[tracks]))]
    pid = own_pid(trace.tracks[busiest])
    properties = trace.metadata.get("deviceProperties")
    if isinstance(properties, list):
        entry = next((p for p in properties if isinstance(p, dict) and p.get("id") == pid), None)
        if entry is None and len(properties) == 1 and isinstance(properties[0], dict):
            entry = properties[0]  # one device: its entry whatever the track's id
        if entry:
            return dict(entry)
    return {"name": _device_name(trace, [busiest])}


def _device_name(trace: Trace, tracks: list[int]) -> str:
    properties = trace.metadata.get("deviceProperties")
    by_id = {}
    if isinstance(properties, list):
        by_id = {p.get("id"): _model_name(p) for p in properties if isinstance(p, dict) and p.get("name")}
    processes = {trace.tracks[i].pid: trace.tracks[i] for i in tracks}
    if len(by_id) == 1:  # one device listed: its name whatever the track's id (ROCm numbers the visible devices)
        by_id = dict.fromkeys(map(own_pid, processes.values()), next(iter(by_id.values())))
    # Kineto names a device's process after the host program ("python3") unless it names the device: its pid is the
    # device id
    kineto = trace.dialect == "kineto"
    unnamed = "device {}" if kineto else "pid {}"
    names = Counter(
        _named(
            by_id.get(own_pid(track)),
            track.process_labels
            or (own_name(track) if not kineto or DEVICE_PROCESS.match(own_name(track)) else "")
            or (pid if isinstance(pid, str) else unnamed.format(pid)),  # a process named by its pid ("CUDA functions")
        )
        for pid, track in processes.items()
    )
    return ", ".join(name if count == 1 else f"{count} × {name}" for name, count in sorted(names.items()))


def told_models(properties: dict[str, Any]) -> list[hardware.DeviceSpec]:
    """The models a device's compute units and memory fit (Kineto's ``deviceProperties`` entry), where its name gives
    only its vendor (an XSpace's "AMD Instinct", ROCm's "AMD Radeon Graphics"): one, several alike, or none; none
    where its name says more."""
    vendor_only = hardware.vendor_only(str(properties.get("name") or ""))
    return hardware.fitting_models(properties) if vendor_only else []


def told_model(properties: dict[str, Any]) -> hardware.DeviceSpec | None:
    """The one model :func:`told_models` finds; None where it finds none or several."""
    models = told_models(properties)
    return models[0] if len(models) == 1 else None


def _model_name(properties: dict[str, Any]) -> str:
    """A device's name as its profiler gives it, or the model it is where that name gives only the vendor."""
    model = told_model(properties)
    return model.model if model is not None else str(properties.get("name"))


_PLAIN_PROCESSES = ("GPU", "PYTHON", "DEVICE ", "/DEVICE:")  # a device process named by index (an XSpace's plane)


def _named(model: str | None, process: str) -> str:
    """The model from the device's properties, after the process label where that adds something (MTIA 17)."""
    if not model:
        return process
    plain = process.upper().startswith(_PLAIN_PROCESSES)  # an index or the program: the model says more
    return model if plain or process in model else f"{process} ({model})"
