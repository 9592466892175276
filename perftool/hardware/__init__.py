"""The accelerators perftool knows, as data: one YAML file per device in ``specs/``, each figure with its source.

One table serves the roofline (peak FLOP/s per dtype, memory bandwidth) and the emulator's device models (memory,
peak, links). A trace's device is matched by the name its profiler gives it (``NVIDIA A100-SXM4-80GB``, ``Tesla
V100-SXM2-16GB``, ``AMD Instinct MI300X VF``); a user's own file (``--device-spec``) has the same fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perftool.common.yamlfile import read_model

SPECS_DIR = Path(__file__).with_name("specs")
Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]
DTYPES: tuple[Dtype, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8")
SOURCED = ("peak_tflops", "memory_gb", "memory_bandwidth_gbps", "compute_units")  # every file says where these are from
# A device named by its vendor alone is a model only where the memory it reports is within this share of the model's:
# what a device keeps for itself (ECC, the driver's reserve) puts its reported size up to 8% under its model's (a T4's
# 14.8 GiB of 16 GB, an H100's 79.2 GiB of 80 GB), where a partition of a device reports a fraction of it
MEMORY_OFF = 0.15
# Models a vendor-only device fits alike are told apart by the memory bandwidth an XSpace records where it is within
# this share of one's figure: NVIDIA's planes record it from the memory clock and bus width (an A100 SXM4 80GB's
# 2,039 GB/s, a PCIe one's 1,935 GB/s), datasheets round it
BANDWIDTH_OFF = 0.02
# A name that says only whose device it is (ROCm's for a CDNA GCD it does not know, "AMD Radeon Graphics"; a vendor
# an XSpace's device plane records): its compute units and memory tell the model apart
_VENDOR_ONLY = {"AMD": re.compile(r"AMD Radeon Graphics|^AMD Instinct$"), "NVIDIA": re.compile(r"^NVIDIA GPU$")}


class DeviceSpec(BaseModel):
    """One accelerator's hardware figures (dense peaks, without sparsity)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="what a config names it by (device_model)")
    model: str = Field(description="the device in words, for reports")
    vendor: str = ""
    family: Literal["gpu", "npu", "hpu", "ipu", "tpu"]  # a TPU is known to the roofline, not (yet) to the emulator
    names: str = Field("", description="a regular expression for the names profilers give it (case-insensitive)")
    memory_gb: float = Field(gt=0)
    memory_bandwidth_gbps: float = Field(gt=0, description="device memory bandwidth, GB/s")
    compute_units: int = Field(0, ge=0, description="SMs, CUs, AI cores, tiles")
    peak_tflops: dict[Dtype, float] = Field(description="dense peak TFLOP/s per dtype the device runs in hardware")
    interconnect_gbps: float | None = Field(None, ge=0, description="device-to-device link bandwidth, GB/s")
    host_link_gbps: float = Field(0, ge=0, description="host <-> device copies achieved each way, GB/s")
    collective_gbps: float = Field(0, ge=0, description="all-reduce bus bandwidth within a server, GB/s")
    sources: dict[str, str] = Field(default_factory=dict, description="where each figure comes from")

    @field_validator("names")
    @classmethod
    def _compiles(cls, names: str) -> str:
        try:
            re.compile(names)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return names

    @field_validator("peak_tflops")
    @classmethod
    def _positive(cls, peaks: dict[Dtype, float]) -> dict[Dtype, float]:
        if not peaks or any(value <= 0 for value in peaks.values()):
            raise ValueError("give a positive peak for at least one dtype")
        return peaks

    @model_validator(mode="after")
    def _sourced(self) -> DeviceSpec:
        missing = [figure for figure in SOURCED if figure not in self.sources]
        if missing:
            raise ValueError(f"sources: say where {', '.join(missing)} come from")
        return self

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        return re.compile(self.names, re.IGNORECASE) if self.names else None

    @property
    def memory_bandwidth(self) -> float:
        """Bytes/s."""
        return self.memory_bandwidth_gbps * 1e9

    def peak_flops(self, dtype: str) -> float | None:
        """FLOP/s the device peaks at in ``dtype``; None where it has no figure for it."""
        tflops = self.peak_tflops.get(dtype)  # type: ignore[call-overload]
        return None if tflops is None else tflops * 1e12

    @property
    def training_peak_tflops(self) -> float:
        """The peak a training step's matrix maths aims at: fp16/bf16 where the device has it."""
        return max(self.peak_tflops.get("bf16", 0), self.peak_tflops.get("fp16", 0)) or max(self.peak_tflops.values())


def emulated(spec: DeviceSpec) -> dict[str, Any]:
    """The emulator's hardware figures of a device (the fields of its device profile they replace)."""
    return {
        "model": spec.model,
        "memory_bytes": spec.memory_gb * 1e9,
        "peak_tflops": spec.training_peak_tflops,
        "memory_bandwidth": spec.memory_bandwidth,
        "h2d_bandwidth": spec.host_link_gbps * 1e9,
        "d2h_bandwidth": spec.host_link_gbps * 1e9,
        "collective_bandwidth": spec.collective_gbps * 1e9,
    }


def load_spec(path: str | Path) -> DeviceSpec:
    """A device file (bundled or the user's); errors name the file and the line of the field."""
    spec, _ = read_model(path, "device spec", DeviceSpec, "a device spec must be a mapping of its figures")
    return spec


SPECS: tuple[DeviceSpec, ...] = tuple(load_spec(path) for path in sorted(SPECS_DIR.glob("*.yaml")))
BY_KEY: dict[str, DeviceSpec] = {spec.key: spec for spec in SPECS}


def identify(properties: Mapping[str, Any], family: str | None = None) -> DeviceSpec | None:
    """The device a trace's properties (Kineto's ``deviceProperties`` entry: ``name``, ``numSms``,
    ``totalGlobalMem``) describe, within ``family`` when given; None when none matches, or several fit alike
    (:func:`fitting_models`)."""
    models = fitting_models(properties, family)
    return models[0] if len(models) == 1 else None


def fitting_models(properties: Mapping[str, Any], family: str | None = None) -> list[DeviceSpec]:
    """The models a trace's device properties fit best, within ``family`` when given: the one its name matches
    best (the longest match, ``V100-SXM2-32GB`` over ``V100``, unless the memory size says otherwise); for a name
    that says only the vendor, every model of the vendor whose compute units and memory fit alike (an H100 SXM and
    an H800, whose traces differ in nothing), fewer where the memory bandwidth an XSpace records
    (``memoryBandwidth``, bytes/s) is within :data:`BANDWIDTH_OFF` of some of theirs only, and none where the memory
    is not within :data:`MEMORY_OFF` of the nearest model's."""
    name = str(properties.get("name") or "")
    candidates = [s for s in SPECS if family is None or s.family == family]
    matched = {s.key: m.end() - m.start() for s in candidates if name and s.pattern and (m := s.pattern.search(name))}
    vendor = vendor_only(name) if not matched else None
    if vendor is not None:
        units = properties.get("numSms")
        matched = {s.key: 0 for s in candidates if s.vendor == vendor and s.compute_units == units}
    if not matched:
        return []
    memory = properties.get("totalGlobalMem")
    sized = isinstance(memory, int | float) and memory > 0
    ranked = sorted(matched, key=lambda key: (_fits(key, memory, sized), -matched[key]))
    if vendor is None:
        return [BY_KEY[ranked[0]]]
    nearest = _fits(ranked[0], memory, sized)
    if sized and nearest > MEMORY_OFF * _reported(ranked[0]):
        return []  # the units are a model's, the memory is not: another model, or the device partitioned
    alike = [BY_KEY[key] for key in ranked if _fits(key, memory, sized) == nearest]
    return _by_bandwidth(alike, properties.get("memoryBandwidth"))


def roofline_model(properties: Mapping[str, Any]) -> DeviceSpec | None:
    """The device whose peaks the roofline uses: the one model the properties fit (:func:`fitting_models`), or the
    figures several share (:func:`shared_figures`); where they fit none, the peaks the capture records
    (:func:`recorded_model`); None otherwise."""
    models = fitting_models(properties)
    if not models:
        return recorded_model(properties)
    return models[0] if len(models) == 1 else shared_figures(models)


def recorded_model(properties: Mapping[str, Any]) -> DeviceSpec | None:
    """A TPU the table does not know (a generation newer than it), with the peaks its capture records: each chip's
    plane in an XSpace records the peak FLOP/s and HBM bandwidth XProf's roofline takes for it (``peakTflops``,
    ``memoryBandwidth`` in bytes/s), the FLOP/s taken as its bf16 peak, as XProf takes it for every op. None where
    the properties record no peaks. Its memory size is not recorded: 0, which nothing but the emulator reads, and
    the emulator models no TPU."""
    flops, bandwidth = properties.get("peakTflops"), properties.get("memoryBandwidth")
    if not (isinstance(flops, int | float) and flops > 0 and isinstance(bandwidth, int | float) and bandwidth > 0):
        return None
    name = str(properties.get("name") or "TPU")
    recorded = "the capture's TensorCore planes (XProf's peak_teraflops_per_second, peak_hbm_bw_gigabytes_per_second)"
    return DeviceSpec.model_construct(
        key=name,
        model=f"{name} (the peaks its capture records)",
        vendor="Google",
        family="tpu",
        memory_gb=0.0,
        memory_bandwidth_gbps=float(bandwidth) / 1e9,
        peak_tflops={"bf16": float(flops)},
        sources=dict.fromkeys(("peak_tflops", "memory_bandwidth_gbps"), recorded),
    )


def shared_figures(models: list[DeviceSpec]) -> DeviceSpec | None:
    """Where ``models`` (two or more a device fits alike: an H100 SXM and an H800) have the same peaks and memory
    bandwidth, those figures, named for every one of them; None where they differ or there are fewer than two."""
    figures = {(tuple(sorted(m.peak_tflops.items())), m.memory_bandwidth_gbps) for m in models}
    if len(models) < 2 or len(figures) > 1:
        return None
    named = {"key": " or ".join(m.key for m in models), "model": " or ".join(m.model for m in models)}
    return models[0].model_copy(update=named)


def _by_bandwidth(models: list[DeviceSpec], recorded: Any) -> list[DeviceSpec]:
    """Of ``models``, which fit alike otherwise, those whose memory bandwidth is within :data:`BANDWIDTH_OFF` of the
    ``recorded`` one (bytes/s); all of them where it is not recorded or near none (an XSpace's AMD planes record
    half the peak: their formula counts HBM3's transfers per clock as two)."""
    if len(models) < 2 or not isinstance(recorded, int | float) or recorded <= 0:
        return models
    near = [m for m in models if abs(m.memory_bandwidth - recorded) <= BANDWIDTH_OFF * m.memory_bandwidth]
    return near or models


def vendor_only(name: str) -> str | None:
    """The vendor a device's name gives where it gives nothing more ("AMD Instinct", "AMD Radeon Graphics"); None
    where it names a model, or no vendor perftool knows."""
    return next((vendor for vendor, said in _VENDOR_ONLY.items() if said.search(name)), None)


def _fits(key: str, memory: Any, sized: bool) -> float:
    """How far a device's memory is from what the trace says, bytes (0 where it says nothing)."""
    return abs(_reported(key) - memory) if sized else 0.0


def _reported(key: str) -> float:
    """A device's memory in bytes as a trace reports it: a vendor's GB of device memory are binary (an 80 GB H100
    reports 79.2 GiB, a 288 GB MI355X 288.0 GiB)."""
    return BY_KEY[key].memory_gb * 2**30
