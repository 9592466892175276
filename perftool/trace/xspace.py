"""The raw XSpace a JAX or TensorFlow profile holds (``*.xplane.pb``, what TensorBoard and XProf read), read through
the official ``xprof`` package: its trace viewer turns the planes into the same Chrome trace ``jax.profiler``
writes beside them, which the xla dialect reads. ``xprof`` is an optional extra (``xla``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from perftool.common.errors import TraceError
from perftool.trace.decode import RawEvent, exact_batches
from perftool.trace.workers import stderr_unseen

INSTALL = "pip install xprof (perftool's xla extra)"
GPU_PLANE = "/device:GPU:"  # an XSpace's plane of one GPU's work


# The vendor an XSpace's device plane records, as the name the device table knows a vendor's devices by where the
# name says no model (perftool.hardware.identify tells the model apart by compute units and memory)
_VENDOR_NAMES = {"amd": "AMD Instinct", "nvidia": "NVIDIA GPU"}


def batches(path: str, metadata: dict[str, Any]) -> Iterator[list[RawEvent]]:
    """The events of the XSpace at ``path``, as xprof's trace viewer gives them, in batches; the devices' properties
    the planes record (:func:`device_properties`) in ``metadata``, which the trace viewer's events leave out."""
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        raise TraceError(
            path, f"an XSpace is read through the xprof package, which is not installed: {INSTALL}"
        ) from None
    with stderr_unseen():  # the converter's C++ logging, a line per stage
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data([path], "trace_viewer", {})
        except Exception as exc:  # noqa: BLE001 - whatever the converter raises, the user gets one line
            raise TraceError(
                path, f"xprof could not read this XSpace: {str(exc).splitlines()[0] if str(exc) else exc!r}"
            ) from None
    if not data:
        raise TraceError(path, "xprof could not read this XSpace (a truncated or foreign protobuf?)")
    if properties := device_properties(path):
        metadata.setdefault("deviceProperties", properties)
    yield from exact_batches(path, data.encode() if isinstance(data, str) else data, metadata)


def device_properties(path: str) -> list[dict[str, Any]]:
    """The device the XSpace's GPU planes ran on, as Kineto's ``deviceProperties`` would give it (a vendor's name,
    ``numSms``, ``totalGlobalMem``), where every GPU plane records the same vendor, compute units and memory; none
    where they differ or say nothing."""
    try:  # an xprof without this API reads the events all the same
        from xprof import profile_data

        space = profile_data.ProfileData.from_file(path)
        try:
            recorded = {
                (str(stats.get("device_vendor", "")).lower(), stats.get("core_count"), stats.get("memory_size"))
                for plane in space.planes
                if plane.name.startswith(GPU_PLANE) and (stats := dict(plane.stats))
            }
        finally:
            space.close()
    except Exception:  # noqa: BLE001 - the events are read all the same; only the device stays unnamed
        return []
    if len(recorded) != 1:
        return []
    ((vendor, units, memory),) = recorded
    if vendor not in _VENDOR_NAMES or not str(units).isdigit() or not str(memory).isdigit():
        return []
    return [{"id": 0, "name": _VENDOR_NAMES[vendor], "numSms": int(str(units)), "totalGlobalMem": int(str(memory))}]
