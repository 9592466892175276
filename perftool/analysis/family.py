"""Which device family a trace comes from, so advice names that family's knobs."""

from __future__ import annotations

import re

from perftool.trace.model import Trace

FAMILIES = ("npu", "ipu", "hpu", "gpu")
_BY_NAME = (
    ("ipu", re.compile(r"^(StreamCopy|PreArrange-|Engine::run|Poplar)|DstStridedCopy|^IPU\b", re.MULTILINE)),
    ("hpu", re.compile(r"HPU\w*Type|synLaunch|^HPU\b|Gaudi", re.MULTILINE)),
    ("npu", re.compile(r"^AscendCL@|^Ascend Hardware|^aclop", re.MULTILINE)),
)


def device_family(trace: Trace) -> str:
    """npu, ipu, hpu or gpu, from the emulator's metadata, the dialect or the names; else ``generic``."""
    if trace.dialect == "emulator":  # the dialect checked that metadata["perftool"] has an "emulator" entry
        emulator = trace.metadata["perftool"]["emulator"]
        if isinstance(emulator, dict) and emulator.get("device") in FAMILIES:
            return emulator["device"]
    by_dialect = {"ascend": "npu", "graphcore": "ipu"}
    if trace.dialect in by_dialect:
        return by_dialect[trace.dialect]
    names = "\n".join([*trace.names, *(t.process_name for t in trace.tracks)])  # one regex pass per family
    for family, pattern in _BY_NAME:
        if pattern.search(names):
            return family
    return "gpu" if trace.dialect == "kineto" else "generic"
