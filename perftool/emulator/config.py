"""The emulator's input: a workload, the knobs under test, the device and a seed, read from YAML.

Sizes accept units (``220MB``, ``1.5GiB``) or plain bytes. Every problem is reported as
``FILE:LINE: field.path: reason`` and exit code 2; YAML is only ever read with the safe loader.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

import numpy as np
import yaml
from pydantic import BaseModel, ByteSize, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from perftool.common import limits
from perftool.common.errors import PerftoolError, parameter
from perftool.common.yamlfile import error_reason, field_error, read_yaml, validation_error
from perftool.emulator.devices import BY_KEY, GENERIC, model_profile
from perftool.emulator.profiles import PROFILES, DeviceProfile
from perftool.trace.archives import trace_kind

MAX_BYTES = 1 << 50  # 1 PiB: beyond any device or host memory, and well inside int64 arithmetic
Size = Annotated[ByteSize, Field(gt=0, le=MAX_BYTES)]
OptionalSize = Annotated[ByteSize, Field(ge=0, le=MAX_BYTES)]
MAX_DATASET_SAMPLES = 10**10  # beyond any dataset one job reads in an epoch
MAX_STEPS = 1_000_000  # steps of an epoch the emulator runs
MAX_US = 1e9  # 1,000 s for any one host operation
MAX_REPLAYED = 100_000  # batches a replayed preprocessing sequence may hold
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "int8": 1}
Config = TypeVar("Config", bound="EmulatorConfig")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FallbackOp(_Strict):
    """An op the device cannot run for its dtype, so each call goes device -> host -> device."""

    op: str = Field(min_length=1, description="op name, e.g. digamma")
    dtype: str = Field("bf16", description="dtype the device lacks a kernel for")
    host_us: float = Field(gt=0, le=MAX_US, description="host time of one call, µs")
    tensor_size: Size = Field(description="bytes copied each way per call")
    calls_per_step: int = Field(1, ge=1, le=1_000_000)


class Workload(_Strict):
    """The model and its input pipeline: what the job is, independent of how it is run."""

    name: str = "model"
    weights: Size = Field(description="model weights on the device")
    optimizer_state: OptionalSize = Field(ByteSize(0), description="optimizer state (e.g. Adam moments)")
    activations_per_sample: OptionalSize = Field(ByteSize(0), description="activation memory per sample")
    gflops_per_sample: float = Field(gt=0, le=1e9, description="forward + backward GFLOP per sample")
    sample_size: Size = Field(description="one input sample on the host, as fp32")
    preprocess_us_per_sample: float = Field(0.0, ge=0, le=MAX_US, description="host preprocessing per sample, µs")
    preprocess_jitter: float = Field(0.0, ge=0, le=5, description="coefficient of variation of preprocessing time")
    preprocess_replay: tuple[Annotated[float, Field(gt=0, le=1e4)], ...] | None = Field(
        None,
        min_length=1,
        max_length=MAX_REPLAYED,
        description="relative preprocessing times of successive batches, replayed in turn (from the first again "
        "after the last) in place of preprocess_jitter, scaled to a mean of one: a fit replays the batches its "
        "trace's input workers prepared",
    )
    input_workers: int = Field(
        1,
        ge=0,
        le=256,
        description="preprocessing worker processes (0: the training loop loads each batch itself, as a PyTorch "
        "DataLoader with num_workers=0 does)",
    )
    half_efficiency_batch: float = Field(
        0.0,
        ge=0,
        le=1e6,
        description="batch size at which the device reaches half its sustained efficiency: a step of b samples "
        "computes as long as b + this many would at full efficiency (0: efficiency does not depend on the batch)",
    )
    compute_jitter: float = Field(0.02, ge=0, lt=1, description="coefficient of variation of device step time")
    host_jitter: float = Field(
        0.0, ge=0, lt=1, description="coefficient of variation of the host's own work per step (Python, launching)"
    )
    sync_each_step: bool = Field(
        False,
        description="the training loop waits for each step's device work before going on (a loss.item() or metric "
        "read back every step), so the host cannot run ahead; graph-mode loops wait for each device call anyway",
    )
    ops_per_step: int = Field(300, ge=1, le=10_000_000, description="device ops in one training step")
    launch_idle_us: float = Field(
        0.0,
        ge=0,
        le=MAX_US,
        description="device idle in each step while ops are launched one by one, µs: runs of short ops the host "
        "launches more slowly than the device runs them (device graphs remove it)",
    )
    graph_compile_ms: float = Field(
        2000.0, gt=0, le=MAX_US / 1e3, description="time to compile one graph (a new shape or loop length)"
    )
    readback_per_step: OptionalSize = Field(
        ByteSize(0),
        description="bytes the training loop copies back from the device after each step's work (a result's .cpu(), "
        "outputs to post-process): into pageable memory (pin_readback off) the host waits for the step and the copy, "
        "which runs at the pageable bandwidth; into a pinned buffer it runs at the link's and the host goes on",
    )
    layout_copy_per_sample: OptionalSize = Field(
        ByteSize(0), description="bytes rearranged per sample when operand layouts mismatch"
    )
    steps: int | None = Field(
        None, ge=1, le=MAX_STEPS, description="full-batch training steps in one epoch (or give dataset_samples)"
    )
    dataset_samples: int | None = Field(
        None,
        ge=1,
        le=MAX_DATASET_SAMPLES,
        description="samples in one epoch: the steps and the short last batch follow from each batch size "
        "(in place of steps and last_batch_samples)",
    )
    epochs: int = Field(
        1,
        ge=1,
        le=1_000_000,
        description="epochs the job runs: a graph compiled mid-epoch (a remainder loop, the short last batch) is "
        "compiled once and reused, so the job's figures spread its cost over every epoch",
    )
    last_batch_samples: int = Field(0, ge=0, le=1_000_000, description="samples left over for a final, smaller batch")

    @model_validator(mode="after")
    def _one_epoch_length(self) -> Workload:
        if (self.steps is None) == (self.dataset_samples is None):
            raise ValueError("give the epoch's length as steps or as dataset_samples (one of them)")
        if self.dataset_samples is not None and self.last_batch_samples:
            raise ValueError("last_batch_samples follows from dataset_samples and the batch size: leave it out")
        return self

    def epoch(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per batch size: the full-batch steps in one epoch and the samples left over for a short last batch."""
        batch = np.asarray(batch, dtype=np.int64)
        if self.dataset_samples is None:
            return np.full(batch.shape, self.steps, np.int64), np.full(batch.shape, self.last_batch_samples, np.int64)
        return np.divmod(np.int64(self.dataset_samples), batch)


class Knobs(_Strict):
    """The settings perftool tunes. A knob the device family lacks must stay at its default."""

    batch_size: int = Field(32, ge=1, le=1_000_000, description="samples per step (micro-batch)")
    loop_size: int = Field(1, ge=1, description="training steps per device call (iteration offload)")
    prefetch_depth: int = Field(1, ge=1, le=1024, description="batches prepared ahead of the device")
    io_tiles: int = Field(0, ge=0, description="IPU tiles reserved for overlapping IO with compute")
    transfer_dtype: Literal["fp32", "fp16", "int8"] = Field("fp32", description="dtype of input transfers")
    offload_optimizer: bool = Field(False, description="keep optimizer state in remote buffers")
    last_batch: Literal["partial", "pad", "drop"] = Field("partial", description="what to do with a short last batch")
    device_graphs: bool = Field(False, description="replay captured device graphs (HPU Graphs, CUDA graphs)")
    pin_memory: bool = Field(
        True,
        description="input batches in pinned host memory, copied without blocking the host (else each copy from "
        "pageable memory waits for the device to finish its queued work, and the host waits for the copy)",
    )
    pin_readback: bool = Field(
        True,
        description="results read back (workload.readback_per_step) into a pinned buffer, copied without blocking "
        "the host (else the host waits for the step and the copy, which runs at the pageable bandwidth)",
    )
    cpu_fallback_ops: tuple[FallbackOp, ...] = Field((), description="ops that run on the host")
    layout_mismatch: bool = Field(False, description="operand layouts force strided rearrangement copies")
    gradient_accumulation: int = Field(1, ge=1, le=100_000, description="micro-batches per weight update")


class Host(_Strict):
    """The host the training process runs on."""

    cpus: int = Field(
        16,
        ge=1,
        le=4096,
        description="CPU cores for this training process and its input workers (default 16, a typical share of one "
        "accelerator's host): when the busy workers and the training loop need more, each runs that much slower",
    )


class SlowRank(_Strict):
    """A replica slower than the others: its device computes, or its input pipeline prepares, more slowly (a
    multiple below 1 makes it faster: what calibrate writes for the ranks a job's slowest one leads)."""

    rank: int = Field(ge=0, description="which replica")
    compute: float = Field(1.0, ge=0.1, le=100, description="its device compute time, as a multiple of the others'")
    preprocess: float = Field(1.0, ge=0.1, le=100, description="its preprocessing time, as a multiple of the others'")


class Replicas(_Strict):
    """Data parallelism: identical replicas (ranks), each with its own batches, whose gradients are
    all-reduced at every weight update (DDP on GPU/HPU/NPU, replication on IPU). Each rank gets its own
    trace; the all-reduce ends on every rank when the last rank's gradients are in."""

    count: int = Field(ge=1, le=1024, description="replicas (ranks)")
    bucket: Size = Field(ByteSize(25_000_000), description="gradient bytes per all-reduce (DDP's bucket_cap_mb)")
    overlap: bool = Field(True, description="reduce each bucket as the backward pass fills it (else after backward)")
    bus_bandwidth: float | None = Field(
        None, gt=0, le=1e4, description="all-reduce bus bandwidth, GB/s  [default: the device's]"
    )
    latency_us: float | None = Field(
        None, ge=0, le=MAX_US, description="cost of one collective, µs  [default: the device's]"
    )
    clock_skew_ms: float = Field(
        0.0, ge=0, le=1e6, description="ranks' clocks differ by up to this much in their traces"
    )
    ranks_per_host: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="ranks on each host, in rank order: each trace records its host (node0, node1, ...), and the "
        "ranks on one host share its clock  [default: no host recorded, each rank on a clock of its own]",
    )
    slow_ranks: tuple[SlowRank, ...] = Field((), description="replicas slower than the others")


class DeviceOverrides(_Strict):
    """Device constants that differ from the family's profile: what a user measured on their own hardware and
    software stack (or what a calibration fitted to a trace). Unset fields keep the profile's value."""

    efficiency: float | None = Field(None, gt=0, le=1, description="share of peak a training step sustains")
    peak_tflops: float | None = Field(None, gt=0, le=1e6, description="dense fp16/bf16 peak, TFLOPS")
    python_us: float | None = Field(None, ge=0, le=MAX_US, description="host Python per return to the loop, µs")
    call_dispatch_us: float | None = Field(None, ge=0, le=MAX_US, description="host cost to launch one device call, µs")
    op_launch_us: float | None = Field(None, ge=0, le=MAX_US, description="host cost per op launched one by one, µs")
    h2d_bandwidth: float | None = Field(None, gt=0, le=1e4, description="host-to-device copies, GB/s")
    d2h_bandwidth: float | None = Field(None, gt=0, le=1e4, description="device-to-host copies, GB/s")
    pageable_d2h_bandwidth: float | None = Field(
        None, gt=0, le=1e4, description="device-to-host copies into pageable memory (read-backs), GB/s"
    )
    memory_bandwidth: float | None = Field(None, gt=0, le=1e5, description="device memory, GB/s")
    collective_bandwidth: float | None = Field(None, gt=0, le=1e4, description="all-reduce bus bandwidth, GB/s")

    def applied(self, profile: DeviceProfile) -> DeviceProfile:
        """``profile`` with these constants in place of its own (bandwidths given in GB/s)."""
        given = self.model_dump(exclude_none=True)
        scaled = {name: value * 1e9 if name.endswith("bandwidth") else value for name, value in given.items()}
        return replace(profile, **scaled)


class EmulatorConfig(_Strict):
    """One emulated training run."""

    device: Literal["npu", "ipu", "hpu", "gpu"]
    device_model: str | None = Field(
        None,
        description="the accelerator model, for its memory, peak and links: "
        + ", ".join(BY_KEY)
        + f", or {GENERIC} (a device perftool does not know: the family's figures, its speed fitted to a trace); "
        "none: the family's reference device (Ascend 910, GC200, Gaudi 2, A100 SXM 80 GB)",
    )
    workload: Workload
    knobs: Knobs = Knobs()
    host: Host = Host()
    replicas: Replicas | None = Field(None, description="data-parallel replicas: a job of one trace per rank")
    device_overrides: DeviceOverrides | None = Field(
        None, description="device constants measured on your own hardware, in place of the family's"
    )
    seed: int = Field(0, ge=0, lt=2**63)
    tune: dict[str, Any] | None = Field(
        None,
        exclude=True,
        description="search space for perftool tune (see `perftool schema tune`); emulate ignores it",
    )
    calibration: dict[str, Any] | None = Field(
        None,
        exclude=True,
        description="how perftool calibrate fitted this config to a trace, and how closely; emulate ignores it",
    )

    @field_validator("device_model")
    @classmethod
    def _known_model(cls, model: str | None) -> str | None:
        if model is not None and model != GENERIC and model not in BY_KEY:
            raise ValueError(f"unknown device model {model!r}: give one of {', '.join(BY_KEY)}, or {GENERIC}")
        return model

    @property
    def profile(self) -> DeviceProfile:
        """The family's device profile (with its model's hardware where one is named), with this config's overrides."""
        base = model_profile(self.device, self.device_model)
        return self.device_overrides.applied(base) if self.device_overrides is not None else base

    @property
    def epoch(self) -> tuple[int, int]:
        """Full-batch steps in one epoch at this config's batch size, and the samples of its short last batch."""
        steps, last = self.workload.epoch(np.array([self.knobs.batch_size]))
        return int(steps[0]), int(last[0])


def training_change(name: str, value: Any) -> str | None:
    """What setting knob ``name`` to ``value`` changes in the training itself, not only in its speed (None: nothing).

    The batch size and gradient accumulation change the effective batch; dropping the last batch skips samples;
    int8 transfers quantise the inputs."""
    if name == "batch_size":
        return "the batch size (scale the learning rate with it)"
    if name == "gradient_accumulation":
        return "the micro-batches per weight update (the effective batch)"
    if name == "last_batch" and value == "drop":
        return "which samples are seen (the short last batch is skipped)"
    if name == "transfer_dtype" and value == "int8":
        return "the inputs' precision (int8)"
    return None


def load_config(path: str | Path, overrides: Sequence[str] = (), model: type[Config] = EmulatorConfig) -> Config:  # type: ignore[assignment]  # the default is the bound
    """Read, override (``knob=value`` or ``section.field=value``) and validate a config file as ``model``."""
    return validate_config(*read_config(path, overrides), model)


_NOT_A_CONFIG = "not a config (a YAML file of the device, the workload and the knobs)"


def read_config(
    path: str | Path, overrides: Sequence[str] = ()
) -> tuple[dict[str, Any], str, yaml.Node | None, dict[tuple[str, ...], str]]:
    """The config's mapping with ``overrides`` applied, its source name, node tree and overridden paths. A trace given
    in its place is refused with the way from a trace to a config."""
    path = str(path)
    fit = f"perftool calibrate {shlex.quote(path)} -o fit.yaml"
    if os.path.isdir(path):
        raise PerftoolError(
            f"{path}: a directory, {_NOT_A_CONFIG}: where it holds a profiler's output or a job's traces, {fit} fits "
            "a config to them; give fit.yaml instead"
        )
    if (kind := trace_kind(path)) is not None:
        raise PerftoolError(
            f"{path}: {kind}, {_NOT_A_CONFIG}: fit one to the trace with {fit}, and give fit.yaml instead"
        )
    document, root = read_yaml(path, "config")
    if not isinstance(document, dict):
        raise PerftoolError(f"{path}: a config must be a YAML mapping with device, workload and knobs")
    overridden = {apply_override(document, item, path, root): item for item in overrides}
    return document, path, root, overridden


def validate_config(
    document: dict[str, Any],
    source: str = "<config>",
    root: yaml.Node | None = None,
    overridden: dict[tuple[str, ...], str] | None = None,
    model: type[Config] = EmulatorConfig,  # type: ignore[assignment]
) -> Config:
    """A validated config from a plain mapping; errors name the field path and the line or ``--set``."""
    try:
        config = model.model_validate(document)
    except ValidationError as exc:
        raise validation_error(source, root, exc, overridden=overridden) from None
    problem = _device_problem(config)
    if problem:
        raise field_error(source, root, *problem, overridden)
    return config


@dataclass(frozen=True)
class Tunable:
    """A setting tune sweeps and a finding's fix may set: its name as fixes, ``--set`` and tune's space give it (a
    knob, or ``section.field``), how people read it, the unit of its values (empty for a choice or a switch), and
    whether tune sweeps it. Where the config holds it, its meaning and the values it accepts come from the config's
    model, so they are never written twice."""

    name: str
    label: str
    unit: str = ""
    swept: bool = True

    @property
    def field(self) -> FieldInfo:
        section, field = section_of(self.name)
        return _SECTIONS[section].model_fields[field]

    @property
    def meaning(self) -> str:
        return self.field.description or ""

    @property
    def families(self) -> list[str]:
        """The device families whose emulator has it (a knob the family lacks must stay at its default)."""
        return [
            family for family, profile in sorted(PROFILES.items()) if "." in self.name or self.name in profile.knobs
        ]

    @property
    def accepts(self) -> str:
        """The values the config takes, in words: ``1 to 1024``, ``0 or more``, ``fp32, fp16, int8``, ``true or
        false``."""
        annotation = self.field.annotation
        if annotation is bool:
            return "true or false"
        if get_origin(annotation) is Literal:
            return ", ".join(map(str, get_args(annotation)))
        if get_origin(annotation) is tuple:
            return "a list (perftool schema config)"
        bounds = {
            kind: getattr(rule, kind)
            for rule in self.field.metadata
            for kind in ("gt", "ge", "le")
            if hasattr(rule, kind)
        }
        shown = limits.size_text if self.unit == "bytes" else "{:,}".format
        low = shown(bounds["ge"]) if "ge" in bounds else f"more than {shown(bounds['gt'])}" if "gt" in bounds else ""
        high = shown(bounds["le"]) if "le" in bounds else ""
        if low and high:
            return f"{low} to {high}" if "ge" in bounds else f"{low}, up to {high}"
        return f"{low} or more" if "ge" in bounds else low or "any"


_SECTIONS: dict[str, type[BaseModel]] = {"knobs": Knobs, "workload": Workload, "replicas": Replicas}
TUNABLES: dict[str, Tunable] = {  # every setting tune sweeps and fixes set, in the order tune lists them
    tunable.name: tunable
    for tunable in (
        Tunable("batch_size", "batch size", "samples"),
        Tunable("loop_size", "loop size", "steps per device call"),
        Tunable("prefetch_depth", "prefetch depth", "batches"),
        Tunable("io_tiles", "IO tiles", "tiles"),
        Tunable("transfer_dtype", "transfer dtype"),
        Tunable("offload_optimizer", "optimizer offloading"),
        Tunable("last_batch", "last batch"),
        Tunable("device_graphs", "device graphs"),
        Tunable("pin_memory", "pinned memory"),
        Tunable("pin_readback", "pinned read-back"),
        Tunable("cpu_fallback_ops", "cpu fallback ops", swept=False),
        Tunable("layout_mismatch", "layout mismatch"),
        Tunable("gradient_accumulation", "gradient accumulation", "micro-batches"),
        Tunable("workload.input_workers", "input workers", "processes"),
        Tunable("replicas.bucket", "gradient bucket", "bytes"),
        Tunable("replicas.overlap", "reduce during backward"),
        Tunable("workload.sync_each_step", "read back every step", swept=False),
    )
}
SECTION_SETTINGS = tuple(name for name, tunable in TUNABLES.items() if "." in name and tunable.swept)  # swept like
# knobs: how the job is fed and reduces its gradients, not what it trains


def section_of(name: str) -> tuple[str, str]:
    """The config section a setting lives in (``knobs`` for a bare knob name: ``workload.input_workers`` is in
    ``workload``) and its field there."""
    section, _, field = name.rpartition(".")
    return section or "knobs", field


def setting(config: EmulatorConfig, name: str) -> Any:
    """The value of knob ``name``, or of a section's setting (``workload.input_workers``; None where the config has
    no such section)."""
    section, field = section_of(name)
    part = getattr(config, section)
    return getattr(part, field) if part is not None else None


def with_settings(config: Config, values: dict[str, Any]) -> Config:
    """``config`` with knobs and :data:`SECTION_SETTINGS` set to ``values`` (already checked by :func:`knob_value`)."""
    updates: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        section, field = section_of(name)
        updates.setdefault(section, {})[field] = value
    return config.model_copy(
        update={section: getattr(config, section).model_copy(update=fields) for section, fields in updates.items()}
    )


def knob_value(config: EmulatorConfig, name: str, value: Any) -> tuple[Any, str | None]:
    """``value`` as knob ``name`` (or a setting in :data:`SECTION_SETTINGS`) takes it, and why the config cannot
    take it (``None`` when it can). Where the dataset sets the epoch, how the value fits the epoch depends on the
    batch size it is swept with: the plan prunes each configuration that does not fit."""
    section_name, field = section_of(name)
    section = getattr(config, section_name)
    if section is None:
        return value, f"the config has no {section_name}: section"
    try:
        checked = type(section).model_validate({**section.model_dump(), field: value})
    except ValidationError as exc:
        return value, error_reason(exc.errors()[0])
    taken = getattr(checked, field)
    epoch_swept = config.workload.dataset_samples is not None
    problem = _device_problem(with_settings(config, {name: taken}), check_epoch=not epoch_swept)
    return taken, problem[1] if problem else None


def _device_problem(config: EmulatorConfig, check_epoch: bool = True) -> tuple[tuple, str] | None:
    """Constraints between fields: knobs the family lacks, sizes that cannot work together (the epoch's length
    with the batch and loop sizes too, unless ``check_epoch`` is off)."""
    profile, knobs, workload = config.profile, config.knobs, config.workload
    defaults = Knobs()
    if config.device_model in BY_KEY and BY_KEY[config.device_model].family != config.device:
        return ("device_model",), f"{config.device_model} is no '{config.device}' device"
    for name in Knobs.model_fields:
        if name not in profile.knobs and getattr(knobs, name) != getattr(defaults, name):
            return ("knobs", name), f"device '{config.device}' has no {name} knob"
    problem = _epoch_problem(config) if check_epoch else None
    if problem:
        return problem
    if workload.input_workers == 0 and not profile.host_feeds_data:
        return ("workload", "input_workers"), (
            f"device '{config.device}' is fed by an input thread of its framework: give 1 or more workers"
        )
    if profile.tiles and knobs.io_tiles >= profile.tiles:
        return ("knobs", "io_tiles"), f"{knobs.io_tiles} leaves no compute tiles ({profile.model} has {profile.tiles})"
    if workload.last_batch_samples >= knobs.batch_size:
        return ("workload", "last_batch_samples"), f"must be smaller than knobs.batch_size ({knobs.batch_size})"
    if knobs.layout_mismatch and workload.layout_copy_per_sample == 0:
        return ("knobs", "layout_mismatch"), "needs workload.layout_copy_per_sample (bytes rearranged per sample)"
    replicas = config.replicas
    for index, slow in enumerate(replicas.slow_ranks if replicas else ()):
        if replicas is not None and slow.rank >= replicas.count:
            return (
                "replicas",
                "slow_ranks",
                index,
                "rank",
            ), f"{slow.rank} is not a replica (count is {replicas.count})"
    return None


def _epoch_problem(config: EmulatorConfig) -> tuple[tuple, str] | None:
    """Why the epoch cannot run at the config's batch and loop sizes (None when it can)."""
    steps, _ = config.epoch
    knobs = config.knobs
    if steps == 0:
        samples = config.workload.dataset_samples
        return ("knobs", "batch_size"), f"{knobs.batch_size} is more than the dataset's {samples} samples"
    if steps > MAX_STEPS:
        return ("knobs", "batch_size"), f"{knobs.batch_size} makes an epoch of {steps:,} steps, more than {MAX_STEPS:,}"
    if knobs.loop_size > steps:
        return ("knobs", "loop_size"), f"{knobs.loop_size} is more than the {steps} steps of an epoch"
    return None


def apply_override(document: dict[str, Any], item: str, source: str, root: yaml.Node | None) -> tuple[str, ...]:
    """``loop_size=32`` sets a knob; ``workload.steps=400`` sets any field by its path. Returns the path."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise PerftoolError(f"{parameter('overrides')} {item!r}: expected NAME=VALUE, e.g. loop_size=32")
    parts = key.strip().split(".")
    if len(parts) == 1 and parts[0] in Knobs.model_fields:
        parts = ["knobs", parts[0]]
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise PerftoolError(f"{parameter('overrides')} {item!r}: value is not valid YAML") from None
    target = document
    for depth, part in enumerate(parts[:-1], start=1):
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise field_error(
                source,
                root,
                tuple(parts[:depth]),
                f"not a section, so {parameter('overrides')} {item!r} cannot set a field in it",
            )
    target[parts[-1]] = value
    return tuple(parts)
