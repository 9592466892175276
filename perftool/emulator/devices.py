"""The accelerators the emulator knows by model: the device table's hardware figures on a family's software.

A family's profile (:data:`~perftool.emulator.profiles.PROFILES`) holds its reference device and the host
software that drives it. A model (:mod:`perftool.hardware`, one file per device) replaces the hardware figures
only — memory, peak, bandwidths — so a job on a V100 is emulated with a V100's memory and links, and the software
constants stay the family's (a fit sets those from the trace).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from perftool import hardware
from perftool.emulator.profiles import PROFILES, DeviceProfile
from perftool.hardware import DeviceSpec

GB = 1e9
BY_KEY: dict[str, DeviceSpec] = {key: spec for key, spec in hardware.BY_KEY.items() if spec.family in PROFILES}
GENERIC = "generic"  # a device perftool does not know: its family's reference figures, named as such


def profile(spec: DeviceSpec) -> DeviceProfile:
    """The family's profile with this model's hardware."""
    return replace(PROFILES[spec.family], **hardware.emulated(spec))


def model_profile(family: str, key: str | None) -> DeviceProfile:
    """The profile of model ``key`` (None: the family's reference device; :data:`GENERIC`: the same, named as
    a generic device of the family)."""
    if key == GENERIC:
        reference = PROFILES[family]
        return replace(reference, model=f"generic {family.upper()} (unknown model: {reference.model}'s figures)")
    return profile(BY_KEY[key]) if key else PROFILES[family]


def identify(family: str, properties: Mapping[str, Any]) -> DeviceSpec | None:
    """The model a trace's device properties describe, within ``family``; None when none matches."""
    return hardware.identify(properties, family)
