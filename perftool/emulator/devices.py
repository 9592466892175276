"""The accelerators perftool knows by model: their hardware figures, and how a trace names them.

A family's profile (:data:`~perftool.emulator.profiles.PROFILES`) holds its reference device and the host
software that drives it. A model here replaces the hardware figures only — memory, peak, bandwidths — so a job
on a V100 is emulated with a V100's memory and links, and the software constants stay the family's (a fit sets
those from the trace). Figures are the vendors' public datasheet figures: dense fp16/bf16 tensor peak, device
memory and its bandwidth; host links are what pinned copies achieve on their PCIe generation (about 75% of the
link), all-reduce bandwidths the order of magnitude nccl-tests / rccl-tests bus bandwidths reach within one
server on the model's links (a fit replaces them with the trace's own).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from perftool.emulator.profiles import PROFILES, DeviceProfile

GB = 1e9
PCIE3, PCIE4, PCIE5 = 12 * GB, 25 * GB, 50 * GB  # pinned copies achieved per direction on an x16 link


@dataclass(frozen=True)
class DeviceModel:
    """One accelerator model: the hardware figures that replace its family's reference device."""

    key: str  # what a config names it by (``device_model``)
    family: str
    model: str  # in words, for reports
    names: re.Pattern  # the names profilers give it (Kineto's deviceProperties name, a process label)
    memory_bytes: float
    peak_tflops: float
    memory_bandwidth: float
    host_link: float  # bytes/s achieved host <-> device, each way
    collective_bandwidth: float
    compute_units: int = 0  # CUs: how a device ROCm names generically is told apart

    def profile(self) -> DeviceProfile:
        """The family's profile with this model's hardware."""
        return replace(
            PROFILES[self.family],
            model=self.model,
            memory_bytes=self.memory_bytes,
            peak_tflops=self.peak_tflops,
            memory_bandwidth=self.memory_bandwidth,
            h2d_bandwidth=self.host_link,
            d2h_bandwidth=self.host_link,
            collective_bandwidth=self.collective_bandwidth,
        )


def _model(key: str, family: str, model: str, names: str, memory_gb: float, tflops: float, tbps: float,
           host_link: float, collective_gbps: float, compute_units: int = 0) -> DeviceModel:  # fmt: skip
    return DeviceModel(key, family, model, re.compile(names, re.IGNORECASE), memory_gb * GB, tflops, tbps * 1e12,
                       host_link, collective_gbps * GB, compute_units)  # fmt: skip


_AMD_GENERIC = re.compile(r"AMD Radeon Graphics|^AMD Instinct$")  # ROCm's name for a GCD it does not name
MODELS: tuple[DeviceModel, ...] = (
    # NVIDIA: V100 (NVLink 2, PCIe 3), A100 (NVLink 3, PCIe 4), H100 / H200 (NVLink 4, PCIe 5)
    _model("V100-SXM2-16GB", "gpu", "NVIDIA V100 SXM2 (16 GB)", r"V100-SXM2-16GB", 16, 125, 0.9, PCIE3, 130),
    _model("V100-SXM2-32GB", "gpu", "NVIDIA V100 SXM2 (32 GB)", r"V100-SXM2-32GB", 32, 125, 0.9, PCIE3, 130),
    _model("V100-PCIE", "gpu", "NVIDIA V100 PCIe (32 GB)", r"V100", 32, 112, 0.9, PCIE3, 10),
    _model(
        "A100-SXM4-40GB", "gpu", "NVIDIA A100 SXM4 (40 GB)", r"A100-SXM4-40GB|A100-PG509", 40, 312, 1.555, PCIE4, 230
    ),  # fmt: skip
    _model("A100-SXM4-80GB", "gpu", "NVIDIA A100 SXM (80 GB)", r"A100[- ]SXM|A100$", 80, 312, 2.0, PCIE4, 200),
    _model("A100-PCIE-40GB", "gpu", "NVIDIA A100 PCIe (40 GB)", r"A100-PCIE-40GB", 40, 312, 1.555, PCIE4, 20),
    _model("A100-PCIE-80GB", "gpu", "NVIDIA A100 PCIe (80 GB)", r"A100.*PCIE", 80, 312, 1.935, PCIE4, 20),
    _model(
        "H100-SXM5-80GB",
        "gpu",
        "NVIDIA H100 SXM5 (80 GB)",
        r"H100 80GB HBM3|H100-SXM|H100 SXM",
        80,
        989,
        3.35,
        PCIE5,
        450,
    ),  # fmt: skip
    _model("H100-PCIE-80GB", "gpu", "NVIDIA H100 PCIe (80 GB)", r"H100 PCIe", 80, 756, 2.0, PCIE5, 40),
    _model("H100-NVL-94GB", "gpu", "NVIDIA H100 NVL (94 GB)", r"H100 NVL", 94, 835, 3.9, PCIE5, 300),
    _model("H200-141GB", "gpu", "NVIDIA H200 (141 GB)", r"H200", 141, 989, 4.8, PCIE5, 450),
    # AMD Instinct: one GCD of an MI250 / MI250X is what ROCm shows as a device; MI210 is one CDNA2 GCD too
    _model("MI250X-GCD", "gpu", "AMD Instinct MI250X (one GCD, 64 GB)", r"MI250X", 64, 191.5, 1.6384, PCIE4, 100, 110),
    _model(
        "MI250-GCD",
        "gpu",
        "AMD Instinct MI250 / MI210 (one GCD, 64 GB)",
        r"MI250(?!X)|MI210",
        64,
        181,
        1.6384,
        PCIE4,
        100,
        104,
    ),  # fmt: skip
    _model("MI300X", "gpu", "AMD Instinct MI300X (192 GB)", r"MI300X", 192, 1307, 5.3, PCIE5, 300, 304),
    # Graphcore: 1472 tiles of 624 kB In-Processor Memory; IPU-M2000 host links (2 x 100 GbE for four IPUs)
    _model(
        "GC200", "ipu", "Graphcore GC200 (Mk2, 1472 tiles)", r"GC200|\bIPU\b", 1472 * 624e3 / GB, 250, 47.5, 6 * GB, 40
    ),  # fmt: skip
    # Huawei Ascend (PCIe 4 host link; HCCS between the NPUs of a server)
    _model("Ascend-910", "npu", "Ascend 910 (32 GB HBM2)", r"Ascend ?910(?!B)A?\b", 32, 256, 1.2, 24 * GB, 25),
    _model("Ascend-910B", "npu", "Ascend 910B (64 GB HBM2e)", r"Ascend ?910B", 64, 320, 1.6, 24 * GB, 50),
    # Intel Gaudi
    _model("Gaudi2", "hpu", "Intel Gaudi 2 (96 GB HBM2e)", r"Gaudi ?2|HL-225", 96, 432, 2.46, 24 * GB, 200),
    _model("Gaudi3", "hpu", "Intel Gaudi 3 (128 GB HBM2e)", r"Gaudi ?3|HL-325", 128, 1835, 3.7, PCIE5, 400),
)
BY_KEY = {model.key: model for model in MODELS}
GENERIC = "generic"  # a device perftool does not know: its family's reference figures, named as such


def model_profile(family: str, key: str | None) -> DeviceProfile:
    """The profile of model ``key`` (None: the family's reference device; :data:`GENERIC`: the same, named as
    a generic device of the family)."""
    if key == GENERIC:
        reference = PROFILES[family]
        return replace(reference, model=f"generic {family.upper()} (unknown model: {reference.model}'s figures)")
    return BY_KEY[key].profile() if key else PROFILES[family]


def identify(family: str, properties: Mapping[str, Any]) -> DeviceModel | None:
    """The model a trace's device properties (Kineto's ``deviceProperties`` entry: ``name``, ``numSms``,
    ``totalGlobalMem``) describe, within ``family``; None when none matches.

    A generic AMD name is told apart by its compute units; of several models that match, the nearest memory size
    wins (a V100's name with 16 GB is the 16 GB one)."""
    name = str(properties.get("name") or "")
    matching = [m for m in MODELS if m.family == family and name and m.names.search(name)]
    if not matching and _AMD_GENERIC.search(name):
        units = properties.get("numSms")
        matching = [m for m in MODELS if m.family == family and m.compute_units and m.compute_units == units]
    memory = properties.get("totalGlobalMem")
    if isinstance(memory, int | float) and memory > 0 and len(matching) > 1:
        return min(matching, key=lambda m: abs(m.memory_bytes - memory))
    return matching[0] if matching else None
