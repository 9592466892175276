"""PyTorch profiler / Kineto traces, from PyTorch 1.8 to today, for any device Kineto records.

Kineto writes device activity under a process per device (pid = device id, labelled ``GPU 0``,
``MTIA 17``, …, sorted after the host processes) with one thread per stream, and host activity under
the process's own pid (labelled ``CPU``). Categories changed across versions: 1.8–1.10 wrote
``Kernel``, ``Memcpy``, ``Runtime``, ``Operator``…, later ones ``kernel``, ``gpu_memcpy``,
``cuda_runtime``, ``cpu_op``…; other devices add their own (``mtia_ccp_events``, ``mtia_runtime``,
``cuda_profiler_range``). Categories are matched without regard to case.
"""

from __future__ import annotations

import re

import numpy as np

from perftool.dialects.base import Dialect
from perftool.dialects.vocabulary import DEVICE_PROCESS
from perftool.trace.model import Kind, Phase, Role, Trace, Track

_CATEGORY_KINDS = {
    "kernel": Kind.COMPUTE,
    "cuda_profiler_range": Kind.COMPUTE,  # CUPTI range profiler: one range per kernel, replayed
    "gpu_memcpy": Kind.D2D,  # the name says the direction
    "memcpy": Kind.D2D,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cuda_sync": Kind.SYNC,  # a stream waiting on an event or on the host: the device is not working
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "cpu_op": Kind.HOST_OP,
    "operator": Kind.HOST_OP,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.ANNOTATION,
    "dataloader": Kind.INPUT,
}
_DEVICE_CATEGORY = re.compile(r"^(kernel|gpu_\w+|memcpy|memset|cuda_sync|cuda_profiler_range|\w+_ccp_events)$")
_DEVICE_QUEUE = re.compile(r"\b(stream|queue)\b", re.IGNORECASE)  # a device's thread: "Stream 101 Submission Queue"
_HOST_CATEGORY = re.compile(
    r"^(cpu_op|operator|user_annotation|python_function|python|cpu_instant_event|dataloader|runtime|\w+_runtime"
    r"|\w+_driver)$"
)
_RUNTIME_CATEGORY = re.compile(r"^(\w+_runtime|\w+_driver)$")
_DEVICE_EVENT_CATEGORY = re.compile(r"^\w+_ccp_events$")  # an accelerator's own device events
_SUMMARY_PIDS = ("Spans", "Traces")  # the profiler's own spans, not the workload
_TOP_LEVEL_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceName")
DEVICE_SORT_INDEX = 5_000_000  # Kineto sorts device processes from here on (16,777,216 for CUDA devices)
# The host's categories under the names PyTorch's early profiler gave them (1.8 writes Operator and Runtime; 2.x
# cpu_op and cuda_runtime): a capture from a PyTorch older than torch.compile (2.0)
_EARLY_HOST_CATEGORIES = frozenset({"Operator", "Runtime"})
EARLY_PYTORCH = "early pytorch"  # what a fitted config's record of its job says of a capture by that profiler
# what a report says of such a capture
EARLY_CAPTURE = (
    "the capture is from an early PyTorch (its host categories are Operator and Runtime, as 1.8 writes them)"
)


def early_profiler(trace: Trace) -> bool:
    """Whether a Kineto trace's host categories carry the names PyTorch's early profiler gave them."""
    return trace.dialect == Kineto.name and not _EARLY_HOST_CATEGORIES.isdisjoint(trace.cats)


class Kineto(Dialect):
    name = "kineto"
    args_categories = frozenset({"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"})
    launch_categories = frozenset({"kernel", "Kernel"})  # grid, block, registers and shared memory per kernel
    # each launch and its device work carry CUPTI's (or roctracer's) correlation id, the id of the flow between them
    correlated_categories = f"{_DEVICE_CATEGORY.pattern}|{_RUNTIME_CATEGORY.pattern}|runtime"
    devices_by_process = True  # a device's process is numbered as the device

    def detect(self, trace: Trace) -> bool:
        if any(key in trace.metadata for key in _TOP_LEVEL_KEYS):
            return True
        return any(_is_device(c) or _HOST_CATEGORY.match(c.lower()) for c in trace.cats if c.lower() != "runtime")

    def category_kind(self, category: str) -> Kind:
        lower = category.lower()
        if lower in _CATEGORY_KINDS:
            return _CATEGORY_KINDS[lower]
        if _RUNTIME_CATEGORY.match(lower):
            return Kind.RUNTIME
        if _DEVICE_EVENT_CATEGORY.match(lower):
            return Kind.COMPUTE
        return Kind.OTHER

    def roles(self, trace: Trace) -> dict[int, Role]:
        """Device and host tracks from what their events are, then from how Kineto labels processes.

        A track whose events are mostly device activity is a device stream. A track of host-side
        events is a host thread, whatever its process is called (in a container the training process
        is often pid 1, which Kineto also labels "GPU 1"), unless its thread is named as a device's
        queue or stream (an accelerator's submission queue). A track of other events in a device's
        process is device work of a kind not listed.
        """
        any_span, device, host = _spans_per_track(trace)
        roles = {}
        for track in trace.tracks:
            if track.pid in _SUMMARY_PIDS:
                roles[track.id] = Role.SUMMARY
            elif device[track.id] > host[track.id]:
                roles[track.id] = Role.DEVICE
            elif host[track.id]:
                queue = is_device_process(track) and _DEVICE_QUEUE.search(track.thread_name or "")
                roles[track.id] = Role.UNKNOWN if queue else Role.HOST
            elif any_span[track.id] and is_device_process(track):
                roles[track.id] = Role.DEVICE
        return roles


def is_device_process(track: Track) -> bool:
    """Whether the track's process is a device: labelled one (``GPU 0``, ``MTIA 17``), named one (``HPU 0``),
    or sorted as one (Kineto's device sort index)."""
    if track.process_labels:
        return not track.process_labels.strip().upper().startswith("CPU")
    if DEVICE_PROCESS.match(track.process_name):
        return True
    sorted_as_device = track.process_sort_index is not None and track.process_sort_index >= DEVICE_SORT_INDEX
    return sorted_as_device and isinstance(track.pid, int) and track.pid < DEVICE_SORT_INDEX


def _is_device(category: str) -> bool:
    return bool(_DEVICE_CATEGORY.match(category.lower()))


def _spans_per_track(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per track: its spans, those of them in a device category, and those in a host category (in one pass)."""
    # per category, a span's class: 1 neither, 2 device, 3 host, 4 both (0 is kept for what is no span)
    classes = [1 + _is_device(c) + 2 * bool(_HOST_CATEGORY.match(c.lower())) for c in trace.cats]
    span_class = np.where(trace.phase == Phase.COMPLETE, np.array(classes or [1], dtype=np.int64)[trace.cat], 0)
    per_track = np.bincount(trace.track * 5 + span_class, minlength=5 * len(trace.tracks)).reshape(-1, 5)
    return per_track[:, 1:].sum(axis=1), per_track[:, 2] + per_track[:, 4], per_track[:, 3] + per_track[:, 4]
