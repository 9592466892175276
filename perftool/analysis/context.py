"""One trace analysed: its events, steps and metrics over the analysis window, and what is measured from them once
(the device's idle time by cause, the union of its compute). The rules' detectors read it (as their scope) and so
does the emulator's fit to the trace. Immutable: whatever reads it sees the same analysis."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.family import framework, job_kind, serving_engine
from perftool.analysis.idle import IdleTime, attribute_idle
from perftool.analysis.metrics import Metrics
from perftool.analysis.steps import Steps
from perftool.common.arrays import least_per_group
from perftool.common.results import Framework
from perftool.trace.model import Role, Trace

# The device families whose own fixes are told in TensorFlow's terms, as their vendors document their devices for it:
# Ascend's (NPU_LOOP_SIZE, dataset.prefetch: its TensorFlow adapter) and Graphcore's (steps_per_execution,
# IPUInfeedQueue); a TensorFlow job there is told them, not the fixes written for TensorFlow on other devices
FAMILIES_IN_TENSORFLOW_TERMS = frozenset({"npu", "ipu"})


@dataclass(frozen=True)
class TraceAnalysis:
    """A trace, its steps and metrics, and the device family it is advised for."""

    trace: Trace
    steps: Steps
    metrics: Metrics
    family: str  # npu | ipu | hpu | gpu | generic
    # the idle attribution where it was computed already (a helper thread's result), else computed when first read
    idle_from: Callable[[], IdleTime | None] | None = field(default=None, kw_only=True, repr=False, compare=False)

    @cached_property
    def framework(self) -> Framework:
        """The framework the trace's job ran on (:func:`perftool.analysis.family.framework`), for fixes in its terms."""
        return framework(self.trace)

    @cached_property
    def contexts(self) -> tuple[str, ...]:
        """What fixes are told in terms of before the device family's: the framework (TensorFlow's not on the families
        whose own fixes are TensorFlow's), then what the job is where it trains nothing (the serving engine where its
        names say which, ``serving``, then ``inference``; :func:`perftool.analysis.family.job_kind`)."""
        kind = job_kind(self.trace)
        engine = serving_engine(self.trace)
        serving = (*([engine] if engine else []), "serving", "inference")
        own = self.framework == "tensorflow" and self.family in FAMILIES_IN_TENSORFLOW_TERMS
        return (*(() if own else (self.framework,)), *{"serving": serving, "inference": ("inference",)}.get(kind, ()))

    @property
    def lo(self) -> float:
        return self.steps.window[0]

    @property
    def hi(self) -> float:
        return self.steps.window[1]  # the very bounds the metrics used, so their cached masks and intervals serve

    @property
    def window(self) -> float:
        return self.metrics["window.duration_us"]

    @property
    def steady_steps(self) -> int:
        return self.steps.steady

    @property
    def step_time(self) -> float:
        """Mean steady step time, µs; the window when the trace has no steps."""
        return self.window / self.steady_steps if self.steady_steps else self.window

    @cached_property
    def idle(self) -> IdleTime | None:
        if self.idle_from is not None:
            return self.idle_from()
        return attribute_idle(self.trace, self.lo, self.hi, self.metrics.busy)

    @property
    def in_window(self) -> np.ndarray:
        """Per event: a span overlapping the analysis window."""
        return self.trace.spans_in(self.lo, self.hi)

    def busy(self, mask: np.ndarray) -> intervals.Intervals:
        """The union of the spans selected by ``mask``, clipped to the window."""
        return intervals.busy(self.trace, mask, self.lo, self.hi)

    @cached_property
    def compute(self) -> intervals.Intervals:
        return self.metrics.busy["compute"]

    def stalls_from(self, starts: np.ndarray) -> float:
        """The stretches without compute that any of ``starts`` (times on the trace's clock) falls in, each from the
        first of them in it to its end, µs: after a late batch, its copy and the host's dispatch keep the device
        from computing too, and removing the wait removes them; what the stretch held before the wait, the wait
        did not cause."""
        gaps = intervals.gaps(self.compute, self.lo, self.hi)
        if starts.size == 0 or gaps[0].size == 0:
            return 0.0
        touched = np.searchsorted(gaps[0], starts, side="right") - 1
        inside = touched >= 0
        first = least_per_group(touched[inside], starts[inside], gaps[0].size)  # per stretch, the first start in it
        chosen = np.isfinite(first)
        return float(np.sum(np.maximum(gaps[1][chosen] - np.maximum(first[chosen], gaps[0][chosen]), 0.0)))

    def named_on_device(self, pattern: re.Pattern) -> tuple[np.ndarray, np.ndarray]:
        """Device events whose name matches ``pattern``: the mask over all events, and the rows in the window."""
        mask = self.trace.name_matches(pattern) & self.trace.on_roles(Role.DEVICE)
        return mask, np.flatnonzero(mask & self.in_window)

    def per_step(self, value: float) -> float:
        """``value`` per steady step; the whole window's where the trace has no steps (the window stands as one step,
        as in :attr:`step_time`, and reports say "in the trace")."""
        return value / self.steady_steps if self.steady_steps else value
