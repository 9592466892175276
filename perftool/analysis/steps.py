"""Training steps and the steady-state window that skips warm-up and compile steps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perftool.trace.model import Kind, Phase, Role, Trace

WARMUP_SLOWDOWN = 1.5  # a leading step this much slower than the typical step is warm-up


@dataclass
class Steps:
    """Step spans in time order; the first ``warmup`` of them are excluded from the steady state."""

    start: np.ndarray
    end: np.ndarray
    warmup: int

    @property
    def count(self) -> int:
        return int(self.start.size)

    @property
    def steady_durations(self) -> np.ndarray:
        return (self.end - self.start)[self.warmup :]

    @property
    def steady_window(self) -> tuple[float, float] | None:
        if self.count == 0:
            return None
        return float(self.start[self.warmup]), float(self.end[-1])


def detect_steps(trace: Trace) -> Steps:
    """Steps from step markers (``ProfilerStep#N``, emulator markers), host tracks preferred.

    Leading steps that overlap a compile event or run slow are warm-up (:func:`warmup_steps`).
    """
    is_step = (trace.kind == Kind.STEP) & (trace.phase == Phase.COMPLETE)
    on_host = is_step & trace.on_roles(Role.HOST)
    rows = np.flatnonzero(on_host if on_host.any() else is_step)
    starts, index = np.unique(trace.ts[rows], return_index=True)
    ends = trace.end[rows][index]
    if starts.size == 0:
        return Steps(starts, ends, 0)
    compile_rows = np.flatnonzero(trace.kind == Kind.COMPILE)
    compiling = _overlaps_any(starts, ends, trace.ts[compile_rows], trace.end[compile_rows])
    return Steps(starts, ends, int(warmup_steps(ends - starts, compiling)))


def warmup_steps(durations: np.ndarray, compiling: np.ndarray, typical: np.ndarray | None = None) -> np.ndarray:
    """How many leading steps are warm-up, along the last axis (one row per run when 2-D).

    Warm-up is the run of leading steps that compile or take more than ``WARMUP_SLOWDOWN`` times
    the typical step (by default the median of the later half); at least one step always stays.
    Only the leading steps matter, so ``durations`` may be a prefix when ``typical`` is given.
    """
    count = durations.shape[-1]
    if typical is None:
        typical = np.median(durations[..., count // 2 :], axis=-1, keepdims=True)
    slow_or_compiling = compiling | (durations > WARMUP_SLOWDOWN * typical)
    return np.where(slow_or_compiling.all(axis=-1), count - 1, np.argmin(slow_or_compiling, axis=-1))


def _overlaps_any(starts: np.ndarray, ends: np.ndarray, other_starts: np.ndarray, other_ends: np.ndarray) -> np.ndarray:
    """For each interval, whether any of the others overlaps it."""
    if other_starts.size == 0:
        return np.zeros(starts.size, dtype=bool)
    order = np.argsort(other_starts)
    sorted_starts, running_end = other_starts[order], np.maximum.accumulate(other_ends[order])
    before_end = np.searchsorted(sorted_starts, ends, side="left")  # others starting before each end
    latest_end = np.where(before_end > 0, running_end[np.maximum(before_end - 1, 0)], -np.inf)
    return latest_end > starts
