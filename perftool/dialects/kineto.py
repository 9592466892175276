"""PyTorch profiler / Kineto traces: GPU streams as pid=device, tid=stream; categories name the kind."""

from __future__ import annotations

import numpy as np

from perftool.dialects.base import Dialect
from perftool.trace.model import Kind, Phase, Role, Trace

_DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
_HOST_CATEGORIES = ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function",
                    "cpu_instant_event")  # fmt: skip
_SUMMARY_PIDS = ("Spans", "Traces")  # the profiler's own spans, not the workload
_TOP_LEVEL_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceName")


class Kineto(Dialect):
    name = "kineto"
    description = "PyTorch profiler (Kineto) trace"
    args_categories = frozenset({"gpu_memcpy", "gpu_memset"})
    category_kinds = {
        "kernel": Kind.COMPUTE,
        "gpu_memcpy": Kind.D2D,
        "gpu_memset": Kind.MEMSET,
        "cuda_runtime": Kind.RUNTIME,
        "cuda_driver": Kind.RUNTIME,
        "cpu_op": Kind.HOST_OP,
        "user_annotation": Kind.ANNOTATION,
        "gpu_user_annotation": Kind.ANNOTATION,
    }

    def detect(self, trace: Trace) -> bool:
        if any(key in trace.metadata for key in _TOP_LEVEL_KEYS):
            return True
        return any(c in trace.cats for c in ("cpu_op", "kernel", "cuda_runtime", "python_function"))

    def roles(self, trace: Trace) -> dict[int, Role]:
        spans = trace.phase == Phase.COMPLETE
        device = _count_per_track(trace, spans & np.isin(trace.cat, _ids(trace, _DEVICE_CATEGORIES)))
        host = _count_per_track(trace, spans & np.isin(trace.cat, _ids(trace, _HOST_CATEGORIES)))
        roles = {}
        for track in trace.tracks:
            if track.pid in _SUMMARY_PIDS:
                roles[track.id] = Role.SUMMARY
            elif device[track.id] > host[track.id]:
                roles[track.id] = Role.DEVICE
            elif host[track.id]:
                roles[track.id] = Role.HOST
        return roles


def _ids(trace: Trace, categories: tuple[str, ...]) -> list[int]:
    return [i for i, c in enumerate(trace.cats) if c in categories]


def _count_per_track(trace: Trace, mask: np.ndarray) -> np.ndarray:
    return np.bincount(trace.track[mask], minlength=len(trace.tracks))
