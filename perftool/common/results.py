"""The JSON documents ``info``, ``emulate``, ``calibrate``, ``metrics`` and ``knobs`` write, as versioned pydantic
models, and :class:`Document`, what every published document is.

What is written always matches the published schema (``perftool schema NAME``: info, emulate-result,
calibrate-result, metrics, knobs). Other results are their own models, beside the code that makes them: scan
results and a job's info (findings, job-info) in :mod:`perftool.rules.findings`, gate's (gate-result) in
:mod:`perftool.gate.verdict`, diff's (diff-result) in :mod:`perftool.diff.files`, tune's answer and rows
(tune-result, tune-rows) in :mod:`perftool.tune.documents`, the rule catalogue (rules) in
:mod:`perftool.rules.catalog`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, GetJsonSchemaHandler, TypeAdapter
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema


class Document(BaseModel):
    """A versioned document perftool writes, named by its ``schema`` field."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(alias="schema", description="the document's kind and version, e.g. perftool.gate/1")

    def json_text(self, indent: int = 2) -> str:
        """The document as perftool writes it: indented JSON, keys in the model's order, one newline after (pydantic's
        own encoder, as scan's findings are written: the standard library's takes seconds for a diff of 100k names)."""
        return self.model_dump_json(by_alias=True, indent=indent) + "\n"


class Part(BaseModel):
    """A part of a document: its fields exactly, no others."""

    model_config = ConfigDict(extra="forbid")


class InfoTrack(Part):
    id: int
    pid: int | str
    tid: int | str
    process: str
    thread: str
    labels: str
    role: str = Field(
        description="host, host.input, device, link.h2d, link.d2h, compiler, summary, device.other, rank.other or "
        "unknown"
    )
    events: int


class InfoOp(Part):
    name: str
    count: int
    total_us: float
    share: float | None


class InfoTopOps(Part):
    scope: Literal["device", "host"]
    ops: list[InfoOp]


class CollectiveFigures(Part):
    """One collective type's calls in the analysis window (``info``, and each rank of a job)."""

    name: str = Field(description="all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, send_recv, ...")
    count: int
    time_us: float = Field(description="summed durations, µs")
    exposed_us: float = Field(description="of that, time with no device compute beside it, µs")
    bytes: float | None = Field(description="summed message sizes, where the trace's args say")
    group_size: int | None = Field(description="ranks taking part, where known")
    algbw_gbps: float | None = Field(description="algorithm bandwidth: bytes / time, GB/s")
    busbw_gbps: float | None = Field(
        description="bus bandwidth: algbw times the collective's traffic factor for its ranks (algbw where "
        "group_size is null), GB/s"
    )


class GroupFigures(Part):
    """The collectives of one process group in the analysis window."""

    name: str = Field(description="the process group's description or name ('default' when the trace names none)")
    parallelism: str = Field(description="data, tensor, pipeline, expert, context, or unknown")
    count: int
    time_us: float
    exposed_us: float


class RooflineOp(Part):
    """One op with one set of input shapes and dtype over the steady window (None: needs the device's peaks)."""

    name: str
    family: str = Field(
        description="gemm, conv, attention, norm, softmax, elementwise, reduction, embedding, optimizer"
    )
    shapes: str = Field(description="its inputs' shapes as recorded")
    dtype: str = Field(description="the dtype judged: tf32 for an fp32 GEMM whose kernels run TF32")
    calls: int
    flops: float
    bytes: float
    device_us: float = Field(description="device time of the kernels its calls launched")
    achieved_tflops: float | None
    achieved_gbps: float | None
    intensity: float = Field(description="FLOPs per byte moved")
    bound: str = Field(description="compute or memory, by the roofline; empty on an unknown device")
    roofline_us: float | None = Field(description="its time at the roofline")
    of_roofline: float | None = Field(description="roofline time / device time")
    lost_us: float | None = Field(description="device time beyond the roofline time")


class RooflineFamily(Part):
    """The ops of one family over the steady window."""

    family: str
    calls: int
    flops: float
    bytes: float
    device_us: float
    achieved_tflops: float | None
    lost_us: float | None


class RooflineStep(Part):
    """One steady step: its modelled FLOPs over its time."""

    number: int = Field(description="the step's number (the step marker's, else its position)")
    time_us: float
    flops: float = Field(description="FLOPs of the modelled ops whose kernels ran in the step")
    achieved_tflops: float | None
    mfu: float | None = Field(description="flops / time / the window's peak (its dtype's)")


@dataclass(frozen=True, eq=False)
class RooflineSteps(Sequence[RooflineStep]):
    """Each steady step's figures, :class:`RooflineStep`'s fields as columns (NaN where a figure is None).

    A trace may have tens of thousands of steps: a step's model is made only when it is read, and a document writes
    the steps from the columns (as a list of :class:`RooflineStep`, its schema's), without a model each."""

    number: np.ndarray  # int64
    time_us: np.ndarray
    flops: np.ndarray
    achieved_tflops: np.ndarray
    mfu: np.ndarray

    @classmethod
    def of(cls, steps: Sequence[RooflineStep]) -> RooflineSteps:
        """The columns of ``steps``' models."""
        figures = [(s.number, s.time_us, s.flops, s.achieved_tflops, s.mfu) for s in steps]
        number, time_us, flops, achieved, mfu = zip(*figures) if figures else ((),) * 5
        return cls(  # a float64 array holds None as NaN
            np.array(number, dtype=np.int64),
            np.array(time_us, dtype=np.float64),
            np.array(flops, dtype=np.float64),
            np.array(achieved, dtype=np.float64),
            np.array(mfu, dtype=np.float64),
        )

    def rows(self, which: slice = slice(None)) -> list[dict[str, Any]]:
        """The steps (``which`` of them) as plain rows, None for NaN: what the document holds."""
        columns = (self.number, self.time_us, self.flops, self.achieved_tflops, self.mfu)
        return [
            {"number": n, "time_us": t, "flops": f, "achieved_tflops": _figure(a), "mfu": _figure(m)}
            for n, t, f, a, m in zip(*(column[which].tolist() for column in columns))
        ]

    def __len__(self) -> int:
        return int(self.number.size)

    @overload
    def __getitem__(self, index: int) -> RooflineStep: ...

    @overload
    def __getitem__(self, index: slice) -> list[RooflineStep]: ...

    def __getitem__(self, index: int | slice) -> RooflineStep | list[RooflineStep]:
        if isinstance(index, slice):
            return _STEP_MODELS.validate_python(self.rows(index))
        at = range(len(self))[index]  # an IndexError past the end, as a list's
        return RooflineStep.model_validate(self.rows(slice(at, at + 1))[0])

    def __iter__(self) -> Iterator[RooflineStep]:
        return iter(self[:])

    def __eq__(self, other: object) -> bool:
        """Equal to steps with the same figures, as columns or as a list of models."""
        if isinstance(other, RooflineSteps):
            return self.rows() == other.rows()
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """Validated as the columns as they are, or as a list of steps (a document read back); written as that
        list; described as that list in both schemas."""
        from_models = core_schema.no_info_after_validator_function(cls.of, handler.generate_schema(list[RooflineStep]))
        return core_schema.json_or_python_schema(
            json_schema=from_models,
            python_schema=core_schema.union_schema([core_schema.is_instance_schema(cls), from_models]),
            serialization=core_schema.plain_serializer_function_ser_schema(cls.rows),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(schema["json_schema"])


_STEP_MODELS = TypeAdapter(list[RooflineStep])


def _figure(value: float) -> float | None:
    return None if value != value else value  # NaN is the figure's None


class RooflineRegion(Part):
    """The modelled ops inside one annotation (``record_function``, a module's or the optimizer's range), or of one
    name scope (an XLA capture's: its ops' path less the op)."""

    name: str = Field(description="the innermost annotation around the ops, or (XLA) their name scope")
    calls: int
    flops: float
    device_us: float = Field(description="device time of the kernels its ops launched")
    achieved_tflops: float | None
    share_of_peak: float | None = Field(description="achieved over the window's peak")
    lost_us: float | None = Field(description="device time beyond the roofline time")


class MeasuredPipes(Part):
    """One NPU kernel type's pipe use as the core's counters measured it (msprof's ``kernel_details.csv``)."""

    type: str = Field(description="the kernel type (MatMulV2, Conv2D, TransData...)")
    core: str = Field(description="the accelerator core: AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV")
    kernels: int
    device_us: float = Field(description="the kernels' device time over every step msprof lists")
    pipes: dict[str, float] = Field(description="per pipe (aic_mac, aic_mte2, aiv_vec...), its busy share of core time")
    busiest: str = Field(description="the pipe busy the largest share of the core's time")
    bound: str = Field(description="what the busiest pipe says limits the kernels, in words")


class RooflineFigures(Part):
    """How far the steady window runs from the device's peaks (``perftool info``)."""

    device: str = Field(description="the device as the trace names it")
    device_spec: str | None = Field(description="the device table's key for it (or the --device-spec file's)")
    peak_tflops: dict[str, float] = Field(description="the device's dense peaks per dtype")
    memory_bandwidth_gbps: float | None
    window_us: float
    steps: int
    flops: float = Field(description="the modelled ops' FLOPs in the window")
    flops_per_step: float | None
    dtype: str = Field(description="the dtype MFU is measured against: that of most matrix FLOPs")
    mfu: float | None = Field(description="flops / window / peak of dtype; a lower bound when modelled_share < 1")
    achieved_tflops: float | None
    device_us: float = Field(description="device compute time in the window")
    modelled_us: float = Field(description="... of kernels launched by ops with shapes and a model")
    modelled_share: float | None
    lost_us: float | None = Field(description="device time beyond the roofline, all modelled ops")
    ops: list[RooflineOp] = Field(description="per op, shapes and dtype, the most time lost first")
    families: list[RooflineFamily]
    per_step: RooflineSteps = Field(description="each steady step's FLOPs and MFU")
    regions: list[RooflineRegion] = Field(description="per annotation around the ops, the most device time first")
    measured: list[MeasuredPipes] = Field(
        default_factory=list,
        description="per NPU kernel type, the pipes its counters measured busy, the most device time first",
    )
    notes: list[str] = Field(description="what limits these figures, and what would lift it")


# what a report's folders_not_read holds (scan's and info's of a directory)
FOLDERS_NOT_READ = (
    "folders of a directory named that hold traces of their own, not read: a directory's folders are read only where "
    "it holds no trace itself"
)


class InfoReport(Document):
    """``perftool info --format json``."""

    schema_: Literal["perftool.info/1"] = Field("perftool.info/1", alias="schema")
    source: str
    dialect: str
    device: str = Field(description="what the device tracks ran on, or 'none (host only)'")
    job_kind: str = Field(
        "",
        description="what the job is, as the advice takes it: training, inference, or serving (vLLM serving, SGLang "
        "serving where the trace names the engine); empty where the device computes nothing",
    )
    step_clock: Literal["host", "device"]
    caveats: list[str]
    folders_not_read: list[str] = Field(default_factory=list, description=FOLDERS_NOT_READ)
    display_time_unit: str
    metadata: dict[str, Any] = Field(description="the trace's top-level keys other than traceEvents")
    tracks: list[InfoTrack] = Field(
        description="every track, in the order a trace viewer lists them (process and thread sort indexes, then ids)"
    )
    metrics: dict[str, float | None] = Field(description="the shared metrics (`perftool metrics`)")
    step_times_us: list[float]
    step_numbers: list[int] = Field(
        default_factory=list, description="the steady steps' numbers: the step markers' own, else their positions"
    )
    top_ops: InfoTopOps
    collectives: list[CollectiveFigures] = Field(description="per collective type, the most time first")
    process_groups: list[GroupFigures] = Field(description="per process group, the most exposed first")
    categories: dict[str, int]
    roofline: RooflineFigures


class EmulateReport(Document):
    """``perftool emulate --format json``."""

    schema_: Literal["perftool.emulate/1"] = Field("perftool.emulate/1", alias="schema")
    device: str
    config: dict[str, Any] = Field(description="the config as run (`perftool schema config`)")
    prediction: dict[str, Any] = Field(description="step time, throughput, utilisation and the rest, per metric")
    memory_bytes: float
    capacity_bytes: float
    step_breakdown_us: dict[str, float]
    trace: str | None = Field(description="the trace file written (--trace), with its size")


class TraceAndModel(Part):
    trace: float = Field(description="the figure measured on the trace")
    model: float = Field(description="the fitted config's prediction of it")


class CalibrationCheck(Part):
    figure: str = Field(description="a figure of the trace, with the fit's")
    trace: float
    model: float
    error: float = Field(description="relative to the trace's value, or in points of the window (unit)")
    limit: float = Field(description="the largest error that passes")
    unit: Literal["relative", "points"]
    passed: bool
    note: str


class BatchPrediction(Part):
    source: str = Field(description="the capture at another batch size")
    batch_size: int
    step_time_us: TraceAndModel
    step_error: float
    note: str


Framework = Literal["pytorch", "jax", "tensorflow", "unknown"]  # what a trace's ops and processes name


class FittedJob(Part):
    framework: Framework = Field(description="the framework the trace's ops and processes name")
    kind: Literal["training", "inference", "serving"] = Field(
        description="training where the trace shows a backward or an optimizer step; else serving where a serving "
        "engine runs the forward, else inference: what tune sweeps and how it names the knobs follow from it"
    )
    engine: str | None = Field(
        None, description="the serving engine that runs the forward (vllm, sglang), where the trace names one"
    )
    profiler: str | None = Field(
        None,
        description="'early pytorch' where PyTorch's early profiler wrote the capture (host categories Operator and "
        "Runtime): tune names the releases its device graphs need",
    )


class CalibrationRecord(Part):
    source: str = Field(description="the trace fitted (a job's: its slowest rank)")
    job: FittedJob = Field(description="what the trace's job is")
    step_time_us: TraceAndModel = Field(
        description="the steady mean step: the figure the fit solves for (the model's: its expected step, the mean "
        "over a 1,000-step run)"
    )
    step_error: float
    idle: dict[str, TraceAndModel] = Field(description="per idle cause, its share of the window")
    idle_error_points: float
    interval: float = Field(
        description="relative half-width of the 80% interval a prediction from the fit is given with: its held-out "
        "error on the mean step and the spread of a mean of as many steps as the trace's"
    )
    batch_size_from: Literal["given", "trace", "unknown"] = Field(
        "given",
        description="where the batch size comes from: given, read from the trace's input shapes, or unknown (the fit "
        "takes one sample a step, so its throughput is steps per second)",
    )
    fitted: list[CalibrationCheck] = Field(
        default_factory=list,
        description="the figures the fit took from the trace (the step, idle by part, busy by category): agreeing "
        "shows it took them, not that it predicts",
    )
    checks: list[CalibrationCheck] = Field(
        description="the fit on figures it did not use: held-out steps (their mean, their busy share), the spread"
    )
    passed: bool = Field(
        description="every check passed and every fitted figure reproduced: the fit may be predicted from"
    )
    warnings: list[str] = Field(description="each check that failed, and each fitted figure missed, in a line")
    notes: list[str] = Field(description="what the trace does not say, and what to give for it")
    at_batch: BatchPrediction | None = None


class CalibrateReport(Document):
    """``perftool calibrate --format json``."""

    schema_: Literal["perftool.calibrate/1"] = Field("perftool.calibrate/1", alias="schema")
    calibration: CalibrationRecord
    config: dict[str, Any] = Field(
        description="the fitted config with its tune: section, as -o writes it (`perftool schema tune`)"
    )


class Metric(Part):
    name: str
    unit: str = Field(description="us, fraction, bytes, count, or one written out (steps/s)")
    meaning: str


class MetricsReport(Document):
    """``perftool metrics --format json``."""

    schema_: Literal["perftool.metrics/1"] = Field("perftool.metrics/1", alias="schema")
    metrics: list[Metric]


class Knob(Part):
    name: str = Field(description="as tune's space, --set and a fix name it")
    config: str = Field(description="where the emulator config holds it")
    label: str = Field(description="what people read")
    unit: str = Field(description="empty when a plain count")
    accepts: str = Field(description="the values the config takes, in words")
    families: list[str] = Field(description="the device families that have it")
    swept: bool = Field(description="whether tune sweeps it (else only fixes set it)")
    meaning: str


class KnobsReport(Document):
    """``perftool knobs --format json``."""

    schema_: Literal["perftool.knobs/1"] = Field("perftool.knobs/1", alias="schema")
    knobs: list[Knob]
