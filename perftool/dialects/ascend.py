"""Ascend msprof / torch_npu traces: processes named by layer, device tasks on ``Stream N`` threads."""

from __future__ import annotations

import re

import numpy as np

from perftool.common.arrays import distinct
from perftool.dialects.base import Dialect
from perftool.dialects.vocabulary import AI_CPU
from perftool.trace.model import Kind, Role, Trace, Track

_HCCL = re.compile(r"^(HCCL|Communication)")  # the collectives' process: "HCCL", "Communication" in newer CANN
_PROCESS_ROLES = (
    (re.compile(r"^Ascend Hardware"), Role.DEVICE),
    (_HCCL, Role.DEVICE),
    (re.compile(r"^Overlap Analysis"), Role.SUMMARY),
    (re.compile(r"^Step Trace"), Role.SUMMARY),
    (re.compile(r"(?i)^(CANN|AscendCL|Runtime|GE|Python|CPU|pytorch|host)"), Role.HOST),
)
# the tasks HCCL runs on the device's streams: a stream that carries one is a communication stream, whose tasks
# (the rank waiting for its peers in Notify_Wait, copying and reducing their data) are communication, not compute
_HCCL_TASK = re.compile(r"(?i)^(notify[_ ]?(wait|record)|hcom_|hccl|reduce[_ ]?inline)")
_MARKERS = ("Ascend Hardware", "CANN", "Overlap Analysis", "AscendCL")
# Single-operator execution under online compilation: the call looks the operator up, compiles it where it is not
# compiled yet (the opCompile inside it), then runs it. It is called for every such op of every step.
_COMPILE_AND_EXECUTE = re.compile(r"^(AscendCL@)?aclopCompileAndExecute(V2)?$")
_OP_COMPILE = re.compile(r"^(AscendCL@)?opCompile$")
OP_CACHE_HIT_US = 1000.0  # an opCompile this short found its operator compiled already: compiling one takes longer
# msprof's own summary of the device: what ran (these two threads) and what did not ("Free", and the
# part of communication overlapping nothing, which "Communication" already holds).
_OVERLAP_DEVICE_THREADS = {"Computing": Kind.COMPUTE, "Communication": Kind.COMMUNICATION}


class Ascend(Dialect):
    name = "ascend"
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP}
    args_categories = frozenset({""})  # msprof writes device tasks without a category; their args say "Task Type"

    def detect(self, trace: Trace) -> bool:
        if any(t.process_name.startswith(_MARKERS) for t in trace.tracks):
            return True
        return any(n.startswith("AscendCL@") for n in trace.names)

    def roles(self, trace: Trace) -> dict[int, Role]:
        """Roles by process; without ``Ascend Hardware``/``HCCL`` streams, the device is read from msprof's
        ``Overlap Analysis`` (its ``Computing`` and ``Communication`` threads), which summarises them."""
        roles = {}
        for track in trace.tracks:
            for pattern, role in _PROCESS_ROLES:
                if pattern.search(track.process_name):
                    roles[track.id] = role
                    break
        if Role.DEVICE not in roles.values():
            roles |= {t.id: Role.DEVICE for t in _overlap_device_threads(trace)}
        return roles

    def kinds(self, trace: Trace) -> np.ndarray:
        kind = super().kinds(trace)
        hccl = [t.id for t in trace.tracks if _HCCL.search(t.process_name) and t.role == Role.DEVICE]
        kind[np.isin(trace.track, hccl)] = Kind.COMMUNICATION  # HCCL's ops and their sub-tasks (Notify_Wait, Memcpy)
        on_comm_stream = np.isin(trace.track, _communication_streams(trace))
        kind[on_comm_stream & (kind != Kind.SYNC)] = Kind.COMMUNICATION  # its stream syncs (EVENT_WAIT) stay syncs
        for track in _overlap_device_threads(trace):
            if track.role == Role.DEVICE:
                kind[trace.track == track.id] = _OVERLAP_DEVICE_THREADS[track.thread_name]
        kind[_not_compiling(trace)] = Kind.RUNTIME
        _copy_directions(trace, kind)
        return kind

    def name_kind(self, name: str) -> Kind:
        kind = super().name_kind(name)
        if kind == Kind.OTHER and name.startswith("AscendCL@"):
            return Kind.RUNTIME
        return kind


def _communication_streams(trace: Trace) -> list[int]:
    """The device streams HCCL runs its tasks on (those carrying a ``Notify_Wait``, an ``hcom_`` op, …)."""
    streams = [t.id for t in trace.tracks if t.role == Role.DEVICE and not _HCCL.search(t.process_name)]
    if not streams:
        return []
    hccl_names = np.array([bool(_HCCL_TASK.search(name)) for name in trace.names] or [False])
    return distinct(trace.track[hccl_names[trace.name] & np.isin(trace.track, streams)]).tolist()


def _copy_directions(trace: Trace, kind: np.ndarray) -> None:
    """Each device copy's direction from its args, in ``kind``: msprof names every copy task ``MEMCPY_ASYNC`` and
    says which way it copied in ``memcpy direction`` (``host to device``, ``host to device ex``, ``device to host``,
    ``device to device``)."""
    rows = np.flatnonzero((kind == Kind.D2D) & trace.on_roles(Role.DEVICE) & (trace.args_ref >= 0))
    rows = rows[[_COPY_DIRECTION in trace.kept_args[ref] for ref in trace.args_ref[rows].tolist()]]
    for row, args in zip(rows.tolist(), trace.args_of(rows)):
        direction = str((args or {}).get("memcpy direction", ""))
        kind[row] = next((copy for words, copy in _DIRECTIONS if direction.startswith(words)), kind[row])


def _not_compiling(trace: Trace) -> np.ndarray:
    """Per event: an operator-compile call that compiled nothing. An opCompile shorter than :data:`OP_CACHE_HIT_US`
    found the operator in the compile cache; an aclopCompileAndExecute holding an opCompile ran its operator, and
    any compile is the opCompile's (counted once, not twice). One without an opCompile in it (a profiler level that
    does not record one) stays a compile."""
    op_compile = trace.name_matches(_OP_COMPILE)
    found = op_compile & (trace.dur < OP_CACHE_HIT_US)
    executing = np.flatnonzero(trace.name_matches(_COMPILE_AND_EXECUTE))
    inner = np.flatnonzero(op_compile)
    if executing.size == 0 or inner.size == 0:
        return found
    for track in distinct(trace.track[executing]).tolist():
        outer = executing[trace.track[executing] == track]
        starts = np.sort(trace.ts[inner[trace.track[inner] == track]])
        first = np.searchsorted(starts, trace.ts[outer])  # the first opCompile starting in the call, if any
        found[outer] = np.r_[starts, np.inf][first] <= trace.end[outer]
    return found


def _overlap_device_threads(trace: Trace) -> list[Track]:
    return [
        t
        for t in trace.tracks
        if t.process_name.startswith("Overlap Analysis") and t.thread_name in _OVERLAP_DEVICE_THREADS
    ]


def ai_cpu_tasks(trace: Trace) -> np.ndarray:
    """Per event: a device task run on the NPU's AI CPU (``Task Type: AI_CPU`` in its args, or it or its
    stream so named)."""
    on_device = trace.on_roles(Role.DEVICE)
    ai_cpu_streams = [t.id for t in trace.tracks if t.role == Role.DEVICE and AI_CPU.search(t.thread_name)]
    found = (trace.name_matches(AI_CPU) | np.isin(trace.track, ai_cpu_streams)) & on_device
    if trace.dialect != Ascend.name:  # only msprof writes the task type into a device task's args
        return found
    rows = np.flatnonzero((trace.args_ref >= 0) & on_device & ~found)
    for row in rows[[_TASK_TYPE in trace.kept_args[ref] for ref in trace.args_ref[rows].tolist()]].tolist():
        found[row] = (trace.args(row) or {}).get("Task Type") == "AI_CPU"
    return found


_TASK_TYPE = b"AI_CPU"
_COPY_DIRECTION = b"memcpy direction"
_DIRECTIONS = (("host to device", Kind.H2D), ("device to host", Kind.D2H), ("device to device", Kind.D2D))
