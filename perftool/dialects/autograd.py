"""PyTorch's autograd profiler before Kineto: ``torch.autograd.profiler.profile(use_cuda=True)``'s
``export_chrome_trace`` (PyTorch 1.7 and earlier; later releases with ``use_kineto=False``).

The file is a bare array of events without categories. Each op is a span on process ``CPU functions``, its thread the
one that ran it; with ``use_cuda``, its time on the device is a span of the same name on process ``CUDA functions``,
its thread the device's index, timed by events the profiler recorded on the stream around the op: an op that calls
others encloses their device spans as it encloses them on the host, so only a span that encloses no other is the
device's own work, the others are drawn over it. A flow (``cpu_to_cuda``) runs from each op to its device span.
"""

from __future__ import annotations

import numpy as np

from perftool.dialects.base import Dialect
from perftool.trace.model import Kind, Phase, Role, Trace

HOST_PROCESS = "CPU functions"
DEVICE_PROCESS = "CUDA functions"


class Autograd(Dialect):
    name = "autograd"
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP}

    def detect(self, trace: Trace) -> bool:
        return any(t.pid == HOST_PROCESS for t in trace.tracks)

    def roles(self, trace: Trace) -> dict[int, Role]:
        named = {HOST_PROCESS: Role.HOST, DEVICE_PROCESS: Role.DEVICE}
        return {t.id: named[t.pid] for t in trace.tracks if isinstance(t.pid, str) and t.pid in named}

    def kinds(self, trace: Trace) -> np.ndarray:
        """The kinds of :class:`Dialect`, and a device span that encloses another of its device's an annotation:
        the calling op's, drawn over the work of the ops it called."""
        kinds = super().kinds(trace)
        kinds[_enclosing_device_spans(trace)] = Kind.ANNOTATION
        return kinds


def _enclosing_device_spans(trace: Trace) -> np.ndarray:
    """The rows of device spans that enclose another of their track's: all but the innermost."""
    spans = np.flatnonzero(trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE))
    return np.setdiff1d(spans, trace.innermost(spans), assume_unique=True)
