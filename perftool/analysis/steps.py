"""Training steps, start-up, and the steady-state window the analysis measures.

Steps come from step markers (``ProfilerStep#N``, emulator markers). A last step much shorter than
the others was cut off by the end of the capture and is dropped. Where flows link each host launch
to the device work it started, a step is timed on the device: it ends when the last device work
its host step launched ends, so step time and throughput are the device's, not those of a host
running ahead. Leading steps that compile or run slow are warm-up. A trace without steps is
measured after its start-up (runtime initialisation, warm-up annotations).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perftool.analysis.intervals import overlaps_any
from perftool.analysis.launches import Launches, launches
from perftool.dialects.vocabulary import FIRST_RUNTIME_CALL, STARTUP, WARMUP_ANNOTATION
from perftool.trace.model import Kind, Phase, Role, Trace

_DIGITS = "0123456789"  # a step marker's number ends its name: ProfilerStep#12, step 12
WARMUP_SLOWDOWN = 1.5  # a leading step this much slower than the typical step is warm-up
TRUNCATED_SHARE = 0.5  # a last step shorter than this share of the typical step was cut off
# An initialisation call this long (µs) created a context or loaded libraries; short ones are routine.
STARTUP_CALL_US = 1000.0


@dataclass
class Steps:
    """Step spans in time order; the first ``warmup`` of them are excluded from the steady state.

    ``clock`` says whether the spans are the device's (``device``) or the host's step markers
    (``host``); ``truncated`` counts the cut-off steps dropped at the end. ``first``/``last`` bound
    the trace, and ``startup_end`` is where its start-up ends (None when none was found).
    """

    start: np.ndarray
    end: np.ndarray
    warmup: int
    first: float = 0.0
    last: float = 0.0
    startup_end: float | None = None
    truncated: int = 0
    clock: str = "host"
    number: np.ndarray | None = None  # each step's own number (ProfilerStep#N), where the markers give one

    def numbers(self) -> np.ndarray:
        """Each step's number: the marker's own where it gives one, else its position."""
        return self.number if self.number is not None else np.arange(self.count)

    @property
    def count(self) -> int:
        return int(self.start.size)

    def to_pandas(self):
        """One row per step: ``start``, ``end``, ``duration`` (µs, on the clock ``clock`` names), ``warmup``."""
        import pandas

        return pandas.DataFrame(
            {
                "start": self.start,
                "end": self.end,
                "duration": self.end - self.start,
                "warmup": np.arange(self.count) < self.warmup,
            }
        )

    @property
    def steady(self) -> int:
        return self.count - self.warmup

    @property
    def steady_durations(self) -> np.ndarray:
        return (self.end - self.start)[self.warmup :]

    @property
    def steady_window(self) -> tuple[float, float] | None:
        if self.count == 0:
            return None
        return float(self.start[self.warmup]), float(self.end[-1])

    @property
    def window(self) -> tuple[float, float]:
        """The steady steps; without steps, the trace after its start-up (or the whole trace)."""
        if self.steady_window is not None:
            return self.steady_window
        after_startup = self.startup_end if self.startup_end is not None and self.startup_end < self.last else None
        return (after_startup if after_startup is not None else self.first), self.last


def detect_steps(trace: Trace, launched: Launches | None = None) -> Steps:
    """Steps from step markers, host tracks preferred, timed on the device where flows allow (``launched``: the
    trace's launches, where the caller has them already).

    Leading steps that overlap a compile event or start-up, or run slow, are warm-up (:func:`warmup_steps`).
    """
    first, last = (float(trace.ts.min()), float(trace.end.max())) if len(trace) else (0.0, 0.0)
    startup = startup_end(trace)
    is_step = (trace.kind == Kind.STEP) & (trace.phase == Phase.COMPLETE)
    on_host = is_step & trace.on_roles(Role.HOST)
    rows = np.flatnonzero(on_host if on_host.any() else is_step)
    starts, index = np.unique(trace.ts[rows], return_index=True)
    ends = trace.end[rows][index]
    number = _step_numbers(trace, rows[index])
    truncated = _truncated_last(ends - starts)
    starts, ends = starts[: starts.size - truncated], ends[: ends.size - truncated]
    number = number[: starts.size] if number is not None else None
    if starts.size == 0:
        return Steps(starts, ends, 0, first, last, startup, truncated)
    clock = "host"
    if on_host.any() and launched is None:
        launched = launches(trace)
    on_device = device_steps(launched, starts, ends) if launched is not None else None
    if on_device is not None:
        starts, ends, clock = *on_device, "device"
    compile_rows = np.flatnonzero(trace.kind == Kind.COMPILE)
    compiling = overlaps_any(starts, ends, trace.ts[compile_rows], trace.end[compile_rows])
    if startup is not None:
        compiling |= starts < startup
    warmup = int(warmup_steps(ends - starts, compiling))
    return Steps(starts, ends, warmup, first, last, startup, truncated, clock, number)


def _step_numbers(trace: Trace, rows: np.ndarray) -> np.ndarray | None:
    """The number each step marker names (``ProfilerStep#12`` is 12), or None unless every marker names one."""
    names = [trace.names[n] for n in trace.name[rows].tolist()]
    numbers = [name[len(name.rstrip(_DIGITS)) :] for name in names]  # the trailing digits, without a regex
    if not numbers or not all(numbers):
        return None
    return np.array([int(number) for number in numbers], dtype=np.int64)


def device_steps(launched: Launches, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each host step's span on the device, or None unless every step launched device work.

    Step i ends when the last device work launched during host step i ends, and starts where the
    device finished step i-1 (the first step: where its host step starts), so a step's time
    includes the device idling for the host and the spans tile the device's timeline.
    """
    step = np.searchsorted(starts, launched.host_ts, side="right") - 1
    inside = (step >= 0) & (launched.host_ts < ends[np.maximum(step, 0)])
    step = step[inside]
    if np.count_nonzero(np.bincount(step, minlength=starts.size)) < starts.size:
        return None
    device_end = np.full(starts.size, -np.inf)
    np.maximum.at(device_end, step, launched.device_end[inside])
    device_end = np.maximum.accumulate(device_end)
    return np.r_[starts[0], device_end[:-1]], device_end


def startup_end(trace: Trace) -> float | None:
    """Where start-up ends: the last slow initialisation call or warm-up annotation, if any."""
    warmup = (trace.kind == Kind.ANNOTATION) & trace.name_matches(WARMUP_ANNOTATION)
    rows = np.flatnonzero((initialising(trace) | warmup) & (trace.phase == Phase.COMPLETE))
    return float(trace.end[rows].max()) if rows.size else None


def initialising(trace: Trace) -> np.ndarray:
    """Per event: a runtime or library initialisation call slow enough to have created a context.

    Calls such as ``cudaDeviceGetStreamPriorityRange`` also run routinely in a step; only the slow
    ones, which created the context or loaded libraries, are start-up. Whichever runtime call comes
    first creates the context (``cudaFree(0)``, the first ``cudaMalloc``): such a call is start-up
    when it is slow and runs before any device work.
    """
    slow = trace.dur >= STARTUP_CALL_US
    found = trace.name_matches(STARTUP) & slow
    first_calls = trace.name_matches(FIRST_RUNTIME_CALL) & slow
    if first_calls.any():
        device = np.flatnonzero(trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE))
        first_work = float(trace.ts[device].min()) if device.size else np.inf
        found |= first_calls & (trace.ts < first_work)
    return found


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


def _truncated_last(durations: np.ndarray) -> int:
    """1 when the last step is under ``TRUNCATED_SHARE`` of the typical earlier step (cut off by the capture)."""
    if durations.size < 2:
        return 0
    typical = float(np.median(durations[:-1][-8:]))
    return int(durations[-1] < TRUNCATED_SHARE * typical)
