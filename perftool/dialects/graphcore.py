"""Graphcore-style IPU traces: ``IPU N`` processes run the program; stream copies move data to and from the host.

Recognised by the names the Poplar runtime uses (``StreamCopyBegin/Mid/End``, ``PreArrange-N``,
``DstStridedCopy``, ``Engine::run``). Stream copies into the IPU count as host-to-device copies;
``StreamCopyMidRemoteBuffer`` (remote buffers) stays a copy the offload rule reads by name.
"""

from __future__ import annotations

import re

from perftool.dialects.base import Dialect, device_thread_role
from perftool.trace.model import Kind, Role, Trace

_MARKERS = re.compile(r"^StreamCopy(Begin|Mid|End)|^PreArrange-\d|DstStridedCopy|^Engine::run")
_PROCESS_ROLES = (
    (re.compile(r"^IPU"), Role.DEVICE),
    (re.compile(r"(?i)host|poplar|python|popart|poptorch"), Role.HOST),
)


class Graphcore(Dialect):
    name = "graphcore"
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP, Role.H2D: Kind.H2D, Role.D2H: Kind.D2H}

    def detect(self, trace: Trace) -> bool:
        return any(_MARKERS.search(name) for name in trace.names)

    def roles(self, trace: Trace) -> dict[int, Role]:
        roles = {}
        for track in trace.tracks:
            role = next((role for pattern, role in _PROCESS_ROLES if pattern.search(track.process_name)), None)
            if role is not None:
                roles[track.id] = device_thread_role(track.thread_name) if role == Role.DEVICE else role
        return roles

    def name_kind(self, name: str) -> Kind:
        if name.startswith("StreamCopy"):
            return Kind.H2D
        if name == "Engine::run":
            return Kind.RUNTIME
        return super().name_kind(name)
