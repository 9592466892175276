"""Ascend msprof / torch_npu traces: processes named by layer, device tasks on ``Stream N`` threads."""

from __future__ import annotations

import re

from perftool.dialects.base import Dialect
from perftool.trace.model import Kind, Role, Trace

_PROCESS_ROLES = (
    (re.compile(r"^Ascend Hardware"), Role.DEVICE),
    (re.compile(r"^HCCL"), Role.DEVICE),
    (re.compile(r"^Overlap Analysis"), Role.SUMMARY),
    (re.compile(r"^Step Trace"), Role.SUMMARY),
    (re.compile(r"(?i)^(CANN|AscendCL|Runtime|GE|Python|CPU|pytorch|host)"), Role.HOST),
)
_MARKERS = ("Ascend Hardware", "CANN", "Overlap Analysis", "AscendCL")


class Ascend(Dialect):
    name = "ascend"
    description = "Ascend msprof / torch_npu trace"
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP}

    def detect(self, trace: Trace) -> bool:
        if any(t.process_name.startswith(_MARKERS) for t in trace.tracks):
            return True
        return any(n.startswith("AscendCL@") for n in trace.names)

    def roles(self, trace: Trace) -> dict[int, Role]:
        roles = {}
        for track in trace.tracks:
            for pattern, role in _PROCESS_ROLES:
                if pattern.search(track.process_name):
                    roles[track.id] = role
                    break
        return roles

    def name_kind(self, name: str) -> Kind:
        kind = super().name_kind(name)
        if kind == Kind.OTHER and name.startswith("AscendCL@"):
            return Kind.RUNTIME
        return kind
