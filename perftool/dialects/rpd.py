"""rocmProfileData (RPD) traces as its converter to Chrome JSON writes them (``rpd2tracing.py``; SGLang profiling
with its RPD activity writes ``rpd-{time}-TP-0.trace.json.gz``, every process of the job in one file).

Each GPU is a process ``GPU{n}`` whose threads are its queues, running the ops: kernels by name, copies and fills by
their type (``CopyHostToDevice``, ``FillBuffer``), a graph's replay drawn again as one span over its kernels
(``Graph {id}``). Each traced process's HIP calls are a thread ``Hip {tid}`` (with the user's roctx ranges on it), and
its HSA calls, one level under them, a thread ``HSA {tid}`` beside it; ranges pushed from Python (its Python tracer's
frames, SGLang's ``rpd profile range`` around the whole profile) are on the HIP thread too. Flows ``api_op`` run from
each call to the op it started; times and ids are written as strings, which the loader reads as numbers.
"""

from __future__ import annotations

import re

import numpy as np

from perftool.dialects.base import Dialect, device_thread_role
from perftool.trace.model import Kind, Role, Trace

_GPU_PROCESS = re.compile(r"^GPU\d+$")
_HIP_THREAD = re.compile(r"^Hip \d+$")
_HSA_THREAD = re.compile(r"^HSA \d+$")  # the HSA runtime's calls made inside the HIP calls of the thread beside
_COPY = {"CopyHostToDevice": Kind.H2D, "CopyDeviceToHost": Kind.D2H, "CopyDeviceToDevice": Kind.D2D}
_COPY_TYPE = re.compile(rf"^({'|'.join(_COPY)})(2D)?$")  # a copy's type, of a 2D copy too
_FILL = "FillBuffer"
_NOT_WORK = re.compile(r"^(Graph \d+|Barrier|Marker)$")  # a replay drawn over its kernels; ops that wait or mark
# The range SGLang pushes around its whole profile (rpdTracerControl.rangePush): a mark of the capture, no host work
_PROFILE_RANGE = "rpd profile range"


class Rpd(Dialect):
    name = "rpd"
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP}
    devices_by_process = True  # a process per GPU

    def detect(self, trace: Trace) -> bool:
        threads = any(_HIP_THREAD.match(t.thread_name) for t in trace.tracks)
        return threads and any(_GPU_PROCESS.match(t.process_name) for t in trace.tracks)

    def roles(self, trace: Trace) -> dict[int, Role]:
        roles = {}
        for track in trace.tracks:
            if _GPU_PROCESS.match(track.process_name):
                roles[track.id] = device_thread_role(track.thread_name)
            elif _HSA_THREAD.match(track.thread_name):
                roles[track.id] = Role.SUMMARY  # a second view of the host's runtime calls: never counted twice
            else:
                roles[track.id] = Role.HOST
        return roles

    def name_kind(self, name: str) -> Kind:
        if copy := _COPY_TYPE.match(name):
            return _COPY[copy.group(1)]
        if name == _FILL:
            return Kind.MEMSET
        if name == _PROFILE_RANGE:
            return Kind.ANNOTATION
        return super().name_kind(name)

    def kinds(self, trace: Trace) -> np.ndarray:
        """The kinds of :class:`Dialect`, and on a GPU's queues the spans that are no work of their own (a graph's
        replay over its kernels, barriers and markers) as annotations, which no busy figure counts."""
        kinds = super().kinds(trace)
        kinds[trace.on_roles(Role.DEVICE) & trace.name_matches(_NOT_WORK)] = Kind.ANNOTATION
        return kinds
