"""Dialects: how each source's conventions map onto track roles and event kinds.

Detection tries the registered dialects in order; a trace none recognises loads with the generic
dialect, whose tracks keep the role ``unknown``.
"""

from __future__ import annotations

import numpy as np

from perftool.common.arrays import distinct
from perftool.common.errors import PerftoolError
from perftool.dialects.ascend import Ascend
from perftool.dialects.autograd import Autograd
from perftool.dialects.base import Dialect, Generic, device_work_per_track
from perftool.dialects.emulator import Emulator
from perftool.dialects.graphcore import Graphcore
from perftool.dialects.kineto import Kineto
from perftool.dialects.merged import other_ranks
from perftool.dialects.op_families import MODELLED_NAMES
from perftool.dialects.rpd import Rpd
from perftool.dialects.vocabulary import (
    COLLECTIVE_ARGS,
    FINDINGS_CATEGORY,
    FINDINGS_PROCESS,
    INPUT_WORKER_THREAD,
    OTHER_DEVICES,
    READ_BACK,
    RESHAPE,
    SPARSE_CORE,
)
from perftool.dialects.xla import Xla
from perftool.trace.flows import paired_flows
from perftool.trace.kept_args import KeepArgs
from perftool.trace.model import Kind, Phase, Role, Trace, looked_up, rows_at

REGISTERED: tuple[Dialect, ...] = (Emulator(), Ascend(), Graphcore(), Xla(), Rpd(), Autograd(), Kineto())
GENERIC = Generic()


def names() -> list[str]:
    return [d.name for d in REGISTERED] + [GENERIC.name]


def kept_args(launches: bool = True) -> KeepArgs:
    """The events whose ``args`` some dialect or analysis reads: the loader keeps args for these only (what
    collectives moved; the input shapes of ops the roofline models; with ``launches``, the launch configuration of
    long kernels, which only rules read), and the correlation ids of launches and their work, which pair them where
    a trace's flows were left out; the input shapes of reshapes, which tell a batch from frames folded into it."""
    inputs = f"{MODELLED_NAMES.pattern}|{RESHAPE.pattern}"
    return KeepArgs(
        frozenset().union(*(d.args_categories for d in REGISTERED)),
        f"(?i:{COLLECTIVE_ARGS.pattern})|{inputs}",
        inputs,
        frozenset().union(*(d.launch_categories for d in REGISTERED)) if launches else frozenset(),
        correlated="|".join(d.correlated_categories for d in REGISTERED if d.correlated_categories),
    )


def _input_workers(trace: Trace, roles: dict[int, Role]) -> dict[int, Role]:
    """Host threads named as the input pipeline's workers are input workers, whatever the dialect said."""
    return {
        t.id: Role.INPUT
        for t in trace.tracks
        if INPUT_WORKER_THREAD.search(t.thread_name) and roles.get(t.id, t.role) in (Role.HOST, Role.UNKNOWN)
    }


def apply(trace: Trace, forced: str | None = None) -> Trace:
    """Assign roles and kinds with the named dialect, or the first that recognises the trace."""
    if forced is not None:
        by_name = {d.name: d for d in (*REGISTERED, GENERIC)}
        if forced not in by_name:
            raise PerftoolError(f"unknown dialect '{forced}' (choose from {', '.join(names())})")
        dialect = by_name[forced]
    else:
        dialect = next((d for d in REGISTERED if d.detect(trace)), GENERIC)
    roles = dialect.roles(trace)
    trace.with_roles(roles | _input_workers(trace, roles) | _findings_tracks(trace))
    trace.kind = dialect.kinds(trace)
    trace.kind[_host_reads(trace)] = Kind.HOST_OP
    trace.with_roles(other_ranks(trace))  # after the kinds: a device's time is its work, not spans drawn over it
    if dialect.devices_by_process:
        trace.with_roles(_other_devices(trace))
        trace.other_devices_work = _driven_beside(trace)
    # not even a step line's steps, nor another rank's host steps: those of its own
    trace.kind[trace.on_roles(Role.OTHER_DEVICE, Role.OTHER_RANK)] = Kind.OTHER
    # A span the capture never closed says where something began, not how long it ran: a marker, not work.
    trace.kind[rows_at(trace.unclosed, trace.skipped)] = Kind.ANNOTATION
    _leave_out_findings(trace)
    trace.dialect = dialect.name
    return trace


def _host_reads(trace: Trace) -> np.ndarray:
    """The rows of scalar reads (:data:`READ_BACK`) that wait for no device: where the trace records the runtime's
    calls, a read with none starting inside it on its thread (its thread id, whatever the process: torch_npu records
    the CANN calls of a Python thread in a process of their own) read a host tensor. A device tensor's read copies
    and synchronises inside it."""
    found = [np.zeros(0, dtype=np.int64)]
    named = trace.name_matches(READ_BACK)
    if not named.any():
        return found[0]
    complete = (trace.phase == Phase.COMPLETE) & trace.on_roles(Role.HOST)
    reads = np.flatnonzero(complete & named)
    calls = np.flatnonzero(complete & trace.of_kinds(Kind.RUNTIME, Kind.SYNC) & ~named)
    if calls.size == 0:
        return found[0]
    thread_of = np.unique([str(t.tid) for t in trace.tracks], return_inverse=True)[1]  # per track, its thread's code
    read_threads, call_threads = thread_of[trace.track[reads]], thread_of[trace.track[calls]]
    for thread in distinct(read_threads).tolist():
        mine = reads[read_threads == thread]
        starts = np.r_[np.sort(trace.ts[calls[call_threads == thread]]), np.inf]  # none after the last
        first = starts[np.searchsorted(starts, trace.ts[mine], side="left")]  # the first call from the read's start
        found.append(mine[first >= trace.end[mine]])
    return np.concatenate(found)


def _other_devices(trace: Trace) -> dict[int, Role]:
    """Where a trace holds several devices with work, each a process (a JAX process's TPUs or GPUs, a PyTorch process
    driving two GPUs), the tracks of all but one: the device with the most device time (of equals, the first in the
    trace) is analysed, as a trace of one device; the others' tracks are shown, not analysed, and said in the
    trace's metadata (:data:`OTHER_DEVICES`), with the host processes that launch only on them (:func:`_launching`).
    Taken together, their steps would repeat once per device and their busy time would hide each device's idle under
    the others' work."""
    if len({t.pid for t in trace.tracks if t.role == Role.DEVICE}) < 2:  # one device's process (most traces)
        return {}
    per_track = device_work_per_track(trace)
    per_device: dict[int | str, float] = {}  # in the tracks' order: by process
    for track in trace.tracks:
        if track.role == Role.DEVICE and per_track[track.id] > 0:
            per_device[track.pid] = per_device.get(track.pid, 0.0) + float(per_track[track.id])
    if len(per_device) < 2:
        return {}
    order = {pid: -position for position, pid in enumerate(per_device)}
    analysed = max(per_device, key=lambda pid: (per_device[pid], order[pid]))
    named = {t.pid: t.process_labels or t.process_name or f"device {t.pid}" for t in trace.tracks}
    launching = _launching(trace)  # where no host launches on the analysed device, every host stays its own
    drives_analysed = any(analysed in reached for reached in launching.values())
    their_hosts = {host for host, reached in launching.items() if analysed not in reached} if drives_analysed else set()
    hosts = {t.pid for t in trace.tracks if t.role == Role.HOST} - set(per_device)  # a device's process is none
    trace.metadata[OTHER_DEVICES] = {
        "analysed": named[analysed],
        "others": {named[pid]: time / per_device[analysed] for pid, time in per_device.items() if pid != analysed},
        "their_hosts": len(their_hosts),
        # whether the analysed device's host drives the others too: its launches reach them, or (no flow says) the
        # trace's one host process (beside the devices' own) drives every device
        "one_host": any(analysed in reached and len(reached) > 1 for reached in launching.values())
        if launching
        else len(hosts) == 1,
    }
    beside = (Role.HOST, Role.INPUT, Role.COMPILER)  # a host thread in a device's process stays the host's
    return {
        t.id: Role.OTHER_DEVICE
        for t in trace.tracks
        if t.pid in per_device and t.pid != analysed and t.role not in beside or t.pid in their_hosts
    }


def _driven_beside(trace: Trace) -> np.ndarray:
    """The rows of the other devices' work (a TPU's SparseCores, its coprocessors, left out) where the analysed
    device's host drives them too: while they compute, the analysed device may wait for their results (a model split
    over them in turn). None where each device has a host of its own."""
    if not trace.metadata.get(OTHER_DEVICES, {}).get("one_host"):
        return np.empty(0, np.int64)
    theirs = np.zeros(len(trace.tracks), dtype=bool)
    for track in trace.tracks:
        theirs[track.id] = track.role == Role.OTHER_DEVICE and not SPARSE_CORE.search(
            track.process_labels or track.process_name or ""
        )
    work = looked_up(theirs, trace.track) & trace.device_work(Role.OTHER_DEVICE)
    return np.flatnonzero(work)


def _launching(trace: Trace) -> dict[int | str, set[int | str]]:
    """Per host process whose threads launch device work by flows (paired as viewers pair them: a launch's start on
    the host, its end where the work starts on a device stream), the device processes its launches reach. Where
    several processes each drive their own device in one trace (rocmProfileData writes every process of a job into
    one file), a host process whose launches reach only the devices not analysed is theirs."""
    has_id = trace.flow_id != -1
    host_end = (trace.phase == Phase.FLOW_START) | (trace.phase == Phase.FLOW_END)  # ROCm's Kineto writes two ends
    sources = np.flatnonzero(host_end & has_id & trace.on_roles(Role.HOST))
    targets = np.flatnonzero((trace.phase == Phase.FLOW_END) & has_id & trace.on_roles(Role.DEVICE))
    if sources.size == 0 or targets.size == 0:
        return {}
    sources, targets = paired_flows(trace, sources, targets)
    launching: dict[int | str, set[int | str]] = {}
    for host, device in np.unique(np.stack([trace.track[sources], trace.track[targets]]), axis=1).T.tolist():
        launching.setdefault(trace.tracks[host].pid, set()).add(trace.tracks[device].pid)
    return launching


def _findings_tracks(trace: Trace) -> dict[int, Role]:
    """The tracks of the findings perftool drew on a trace it annotated: derived from the trace, never analysed."""
    return {t.id: Role.SUMMARY for t in trace.tracks if t.process_name == FINDINGS_PROCESS}


def _leave_out_findings(trace: Trace) -> None:
    """perftool's own annotations (``scan --format perfetto``) are of no kind an analysis reads (not even an
    annotation, whose name may say warm-up), and their arrows link nothing: a scan of the annotated trace finds what
    the original gave."""
    if FINDINGS_CATEGORY not in trace.cats:
        return
    ours = trace.cat == trace.cats.index(FINDINGS_CATEGORY)
    trace.kind[ours] = Kind.OTHER
    trace.flow_id = np.where(ours, -1, trace.flow_id)
