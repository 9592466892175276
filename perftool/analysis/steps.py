"""Training steps, start-up, and the steady-state window the analysis measures.

Steps come from step markers (``ProfilerStep#N``, emulator markers). A last step much shorter than
the others was cut off by the end of the capture and is dropped. Where flows link each host launch
to the device work it started, a step is timed on the device: it ends when the last device work
its host step launched ends, so step time and throughput are the device's, not those of a host
running ahead. A leading step is warm-up because it looks like warm-up, never because it comes first:
it runs far slower than the typical step, or it shows warm-up's signs (compiles, start-up calls, memory
allocations, ops no later step calls) and runs slower than the steady steps agree. A trace without steps
is measured after its start-up (runtime initialisation, warm-up annotations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perftool.analysis.host_calls import blocking_copies, python_frames
from perftool.analysis.intervals import overlaps_any, union
from perftool.analysis.launches import Launches, launches
from perftool.analysis.repeats import Inferred, inferred_steps
from perftool.analysis.serving import iteration_modes
from perftool.common.arrays import distinct
from perftool.common.units import duration
from perftool.dialects.vocabulary import (
    ALLOCATION,
    ENGINE_STEP,
    FIRST_RUNTIME_CALL,
    MODEL_WARMUP,
    PROFILER_WINDOW_END,
    STARTUP,
    STEP_NUMBER_ARG,
    WARMUP_ANNOTATION,
)
from perftool.trace.model import Kind, Phase, Role, Trace, pandas_module

_DIGITS = "0123456789"  # a step marker's number ends its name: ProfilerStep#12, step 12
WARMUP_SLOWDOWN = 1.5  # a leading step this much slower than the typical step is warm-up
STEADY_AGREEMENT = 1.1  # steps within this ratio of each other agree: a leading step with warm-up's signs is
# warm-up only when it runs slower than that
STARTUP_SHARE = 0.5  # start-up taking this share of the capture leaves no steady state to infer steps in
MIN_MARKED = 3  # fewer step markers than this: the last one's iterations, where it holds several, are the steps
# A host wait at the start covering device idle this share of the device's span, after device work of at most this
# share of the device's busy time, is for work the capture does not hold (UNSEEN_SLACK: the wait may start or end
# this share of the idle stretch inside it, while the host queues work around it)
UNSEEN_SHARE, UNSEEN_BEFORE, UNSEEN_SLACK = 0.2, 0.05, 0.01
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
    inferred: str | None = None  # what told the steps, where they were inferred for want of step markers
    device_span: tuple[float, float] | None = None  # from the device's first work to its last, where it has any
    within: str | None = None  # the step marker whose iterations are the steps, where it held several
    modes: list[str] | None = None  # each step's kind of iteration, where a serving engine's are of several kinds

    def __repr__(self) -> str:
        """What a notebook shows: the steps in one line, not their columns."""
        steady = self.steady_durations
        median = f", steady median {duration(float(np.median(steady)))}" if steady.size else ""
        return f"Steps({self.count:,} on the {self.clock} clock, {self.warmup} warm-up{median})"

    def numbers(self) -> np.ndarray:
        """Each step's number: the marker's own where it gives one, else its position."""
        return self.number if self.number is not None else np.arange(self.count)

    @property
    def mostly_startup(self) -> bool:
        """Whether start-up takes most of the capture (:data:`STARTUP_SHARE`): no steady state to speak of."""
        return _mostly_startup(self.startup_end, self.first, self.last)

    @property
    def count(self) -> int:
        return int(self.start.size)

    def to_pandas(self) -> Any:  # a pandas.DataFrame; pandas is optional
        """One row per step: ``start``, ``end``, ``duration`` (µs, on the clock ``clock`` names), ``warmup``."""
        return pandas_module("Steps.to_pandas").DataFrame(
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
        """The steady steps; without steps, the trace after its start-up (or the whole trace), within the device's own
        span where it has one: a host that ran before the device started, or after it stopped, is not device idle."""
        if self.steady_window is not None:
            return self.steady_window
        after_startup = self.startup_end if self.startup_end is not None and self.startup_end < self.last else None
        lo, hi = (after_startup if after_startup is not None else self.first), self.last
        if self.device_span is not None and max(lo, self.device_span[0]) < min(hi, self.device_span[1]):
            return max(lo, self.device_span[0]), min(hi, self.device_span[1])
        return lo, hi


def detect_steps(trace: Trace, launched: Launches | None = None) -> Steps:
    """Steps from step markers, host tracks preferred (of markers starting together, the longest, which holds the
    others, whatever the file's order), or inferred where there are none, from the optimizer's steps or the host's
    repeating calls (:mod:`perftool.analysis.repeats`), timed on the device where flows allow (``launched``: the
    trace's launches, where the caller has them already).

    Leading steps are warm-up by their look (:func:`warmup_signs`, :func:`warmup_steps`).
    """
    first, last = _extent(trace)
    startup = startup_end(trace)
    is_step = (trace.kind == Kind.STEP) & (trace.phase == Phase.COMPLETE)
    on_host = is_step & trace.on_roles(Role.HOST)
    rows = np.flatnonzero(on_host if on_host.any() else is_step)
    engine = trace.name_matches(ENGINE_STEP, rows)
    if engine.any():  # a serving engine's iterations are the steps: the outermost where its markers nest
        rows = trace.top_level(rows[engine])
    rows = rows[np.lexsort((-trace.end[rows], trace.ts[rows]))]  # of markers starting together, the longest
    starts, index = np.unique(trace.ts[rows], return_index=True)
    ends = trace.end[rows][index]
    number = _step_numbers(trace, rows[index])
    modes = iteration_modes(trace, rows[index]) if engine.any() else None
    inferred = within = None
    if rows.size == 0 and not _mostly_startup(startup, first, last):
        found = inferred_steps(trace, startup if startup is not None else first)
        if found is not None:
            starts, ends, inferred = found.starts, found.ends, found.what
    elif 0 < rows.size < MIN_MARKED and (found := _iterations(trace, starts[-1], ends[-1])) is not None:
        within = trace.names[int(trace.name[rows[index[-1]]])]
        starts, ends, number, modes, inferred = found.starts, found.ends, None, None, found.what
    truncated = _truncated_last(ends - starts)
    starts, ends = starts[: starts.size - truncated], ends[: ends.size - truncated]
    number = number[: starts.size] if number is not None else None
    modes = modes[: starts.size] if modes is not None else None
    if starts.size == 0:
        return Steps(starts, ends, 0, first, last, startup, truncated, device_span=_device_span(trace))
    span = _device_span(trace)
    if span is not None and starts[0] < span[0] < ends[0] and span[0] > first_device_work(trace):
        starts[0] = span[0]  # the first step begins after a wait for work the capture does not hold
    clock = "host"
    if (on_host.any() or inferred) and launched is None:
        launched = launches(trace)
    on_device = device_steps(launched, starts, ends) if launched is not None else None
    if on_device is not None:
        starts, ends, clock = *on_device, "device"
    mode_codes = np.unique(modes, return_inverse=True)[1] if modes is not None else None
    signs = warmup_signs(trace, starts, ends, startup, mode_codes)
    warmup = int(warmup_steps(ends - starts, signs, _typical_by_mode(ends - starts, mode_codes)))
    return Steps(starts, ends, warmup, first, last, startup, truncated, clock, number, inferred, span, within, modes)


def _extent(trace: Trace) -> tuple[float, float]:
    """Where the trace's events begin and end, the profiler's mark of the trace's writing left out
    (:data:`PROFILER_WINDOW_END`)."""
    if not trace.ts.size:
        return 0.0, 0.0
    last = int(np.argmax(trace.end))
    if not PROFILER_WINDOW_END.match(trace.names[int(trace.name[last])]):  # most traces: the last end is an event's
        return float(trace.ts.min()), float(trace.end[last])
    ends = trace.end[~trace.name_matches(PROFILER_WINDOW_END)]
    return (float(trace.ts.min()), float(ends.max())) if ends.size else (0.0, 0.0)


def first_device_work(trace: Trace) -> float:
    """When the device's first work in the capture starts (a trace with device work)."""
    extent = _device_extent(trace)
    if extent is None:
        raise ValueError(f"{trace.source}: no device work")
    return extent[0]


def _device_extent(trace: Trace) -> tuple[float, float] | None:
    """From the start of the device's first work to the end of its last, or None without device work; found once per
    trace (the steps, the device's span and the confidence each read it)."""

    def extent() -> tuple[float, float] | None:
        device = np.flatnonzero(trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE))
        if device.size == 0:
            return None
        return float(trace.ts[device].min()), float(trace.end[device].max())

    return trace.derive("steps.device_extent", extent)


def _iterations(trace: Trace, start: float, end: float) -> Inferred | None:
    """The loop iterations one step marker holds, where each fetches its own batch (a DataLoader's ``__next__``
    each) or ends with the optimizer's step: a model's repeating layers inside one iteration are not iterations."""
    found = inferred_steps(trace, start, end)
    return found if found is not None and (found.fetching or found.optimizer) else None


def _device_span(trace: Trace) -> tuple[float, float] | None:
    """From the device's first work to its last, or None without device work. Where the host waits at the start for
    device work the capture does not hold, from the end of that wait: the device shows (almost) nothing before a
    stretch of idle of at least a fifth of its span (:data:`UNSEEN_SHARE`), all of it inside one host wait (a
    blocking copy, a synchronisation) that ends as the device resumes. That wait is for work launched before the
    capture began (a window cut from a longer capture, or another process on the device), not device idle."""
    extent = _device_extent(trace)
    if extent is None:
        return None
    first, last = extent
    waits = trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE)
    waits &= (trace.kind == Kind.SYNC) | blocking_copies(trace)
    waits &= trace.dur >= (UNSEEN_SHARE - UNSEEN_SLACK) * (last - first)
    if not waits.any():  # no wait long enough: the device's work is all there is (and no sort of it is needed)
        return first, last
    device = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE)
    busy = union(trace.ts[device], trace.end[device])
    lengths = busy[1] - busy[0]
    gap_after = np.r_[busy[0][1:] - busy[1][:-1], 0.0]
    lead = int(np.argmax(gap_after))
    before = float(lengths[: lead + 1].sum())
    gap_start, gap_end = float(busy[1][lead]), float(busy[0][lead + 1]) if lead + 1 < busy[0].size else last
    if gap_end - gap_start < UNSEEN_SHARE * (last - first) or before > UNSEEN_BEFORE * float(lengths.sum()):
        return first, last
    slack = UNSEEN_SLACK * (gap_end - gap_start)
    waiting = waits & (trace.ts <= gap_start + slack) & (trace.end >= gap_end - slack)
    return (gap_end, last) if waiting.any() else (first, last)


def warmup_signs(
    trace: Trace, starts: np.ndarray, ends: np.ndarray, startup: float | None, mode_codes: np.ndarray | None = None
) -> np.ndarray:
    """Per step: whether it shows warm-up's signs. It overlaps a compile, starts inside start-up, allocates device
    or pinned memory, or calls ops that no later step calls (first calls: kernels selected, caches filled); where a
    serving engine's steps are of several kinds (``mode_codes``, a number per kind: its prefills, its decodes), no
    later step of its kind (a prefill's attention is no decode's)."""
    compile_rows = np.flatnonzero(trace.kind == Kind.COMPILE)
    signs = overlaps_any(starts, ends, trace.ts[compile_rows], trace.end[compile_rows])
    if startup is not None:
        signs |= starts < startup
    host = trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.STEP)
    allocating = np.flatnonzero(host & trace.name_matches(ALLOCATION))
    signs |= overlaps_any(starts, ends, trace.ts[allocating], trace.end[allocating])
    calls = host & trace.of_kinds(Kind.HOST_OP, Kind.RUNTIME)  # not waits, which come and go
    rows = np.flatnonzero(calls & (trace.ts >= starts[0]) & (trace.ts < ends[-1]))
    step = np.searchsorted(starts, trace.ts[rows], side="right") - 1
    count = int(mode_codes.max()) + 1 if mode_codes is not None else 1
    key = trace.name[rows].astype(np.int64) * count + (mode_codes[step] if mode_codes is not None else 0)  # op, kind
    last_step_of = np.full(len(trace.names) * count, -1)
    np.maximum.at(last_step_of, key, step)
    signs[distinct(step[last_step_of[key] == step])] = True  # the op's last step (of its kind) is this one
    signs[-1] = False  # nothing comes after the last step to compare its ops with
    return signs


def _typical_by_mode(durations: np.ndarray, mode_codes: np.ndarray | None) -> np.ndarray | None:
    """Per step, the typical step of its kind (the median of the later half of its kind's steps), where a serving
    engine's steps are of several kinds: a prefill is no slow decode. None otherwise (every step's typical step is
    the steps' own)."""
    if mode_codes is None:
        return None
    typical = np.empty_like(durations)
    for mode in distinct(mode_codes).tolist():
        mine = np.flatnonzero(mode_codes == mode)
        typical[mine] = np.median(durations[mine[mine.size // 2 :]])
    return typical


def _step_numbers(trace: Trace, rows: np.ndarray) -> np.ndarray | None:
    """The number each step marker names (``ProfilerStep#12`` is 12), else the number its args give it
    (``step_num``, as jax.profiler's StepTraceAnnotation records it); None unless every marker has one."""
    names = [trace.names[n] for n in trace.name[rows].tolist()]
    numbers = [name[len(name.rstrip(_DIGITS)) :] for name in names]  # the trailing digits, without a regex
    if numbers and not all(numbers):
        numbers = [str((trace.args(row) or {}).get(STEP_NUMBER_ARG, "")) for row in rows.tolist()]
    if not numbers or not all(number.isascii() and number.isdigit() and len(number) <= 18 for number in numbers):
        return None  # a number past an int64's 18 safe digits is no step's
    return np.array([int(number) for number in numbers], dtype=np.int64)


def device_steps(launched: Launches, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each host step's span on the device, or None unless every step launched device work.

    Step i ends when the last device work launched during host step i ends, or, where the host starts step i+1
    only later (a host behind the device), then; it starts where step i-1 ended (the first step: where its host
    step starts), so a step's time includes the device idling for the host and the spans tile the device's
    timeline.
    """
    step = np.searchsorted(starts, launched.host_ts, side="right") - 1
    inside = (step >= 0) & (launched.host_ts < ends[np.maximum(step, 0)])
    step = step[inside]
    if np.count_nonzero(np.bincount(step, minlength=starts.size)) < starts.size:
        return None
    device_end = np.full(starts.size, -np.inf)
    np.maximum.at(device_end, step, launched.device_end[inside])
    device_end[:-1] = np.maximum(device_end[:-1], starts[1:])  # nor before the host starts the next step
    device_end = np.maximum.accumulate(device_end)
    return np.r_[starts[0], device_end[:-1]], device_end


def startup_end(trace: Trace) -> float | None:
    """Where start-up ends: the last slow initialisation call or warm-up annotation, if any, or the end of the
    host call a compiled model's warm-up ran in (its first call: compiling and recording its graphs, then
    replaying them for that call's result). Warm-up past the first step marker is a step's, judged as steps are."""
    warmup = (trace.kind == Kind.ANNOTATION) & trace.name_matches(WARMUP_ANNOTATION)
    complete = trace.phase == Phase.COMPLETE
    ends = trace.end[np.flatnonzero((initialising(trace) | warmup) & complete)]
    before_steps = model_warmup(trace) & (trace.ts < _first_step(trace)[0])
    ends = np.r_[ends, _enclosing_call_ends(trace, np.flatnonzero(before_steps))]
    return float(ends.max()) if ends.size else None


def model_warmup(trace: Trace) -> np.ndarray:
    """Per event: a compiled model's warm-up on the host (:data:`MODEL_WARMUP`: compiling, recording or instantiating
    a device graph) before the first step marker ends. One in a later step is that step's (a recompile, a graph
    recorded late), judged as steps are."""

    def found() -> np.ndarray:
        model = trace.name_matches(MODEL_WARMUP) & (trace.phase == Phase.COMPLETE) & trace.on_roles(Role.HOST)
        return model & (trace.ts < _first_step(trace)[1])

    return trace.derive("steps.model_warmup", found)  # start-up and the idle's causes ask, each more than once


def _first_step(trace: Trace) -> tuple[float, float]:
    """Where the first step marker starts and ends; infinite where there is none."""
    steps = np.flatnonzero((trace.kind == Kind.STEP) & (trace.phase == Phase.COMPLETE))
    if steps.size == 0:
        return np.inf, np.inf
    first = steps[np.argmin(trace.ts[steps])]
    return float(trace.ts[first]), float(trace.end[first])


def _enclosing_call_ends(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Where the outermost call of each row's track that encloses it ends (not a Python frame, which may enclose the
    whole script): one sort of each such track's calls, whatever the rows' number."""
    found = trace.end[rows].copy()
    calls = (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.STEP) & ~python_frames(trace)
    for track in distinct(trace.track[rows]).tolist():
        outer = trace.top_level(np.flatnonzero(calls & (trace.track == track)))
        mine = np.flatnonzero(trace.track[rows] == track)
        at = np.searchsorted(trace.ts[outer], trace.ts[rows[mine]], side="right") - 1
        inside = (at >= 0) & (trace.end[outer[np.maximum(at, 0)]] >= trace.end[rows[mine]])
        found[mine[inside]] = trace.end[outer[at[inside]]]
    return found


def initialising(trace: Trace) -> np.ndarray:
    """Per event: a runtime or library initialisation call slow enough to have created a context, or a compiled
    model's warm-up before the first step (:func:`model_warmup`).

    Calls such as ``cudaDeviceGetStreamPriorityRange`` also run routinely in a step; only the slow
    ones, which created the context or loaded libraries, are start-up. Whichever runtime call comes
    first creates the context (``cudaFree(0)``, the first ``cudaMalloc``): such a call is start-up
    when it is slow and runs before any device work. Found once per trace (the steps and the idle's causes ask).
    """
    return trace.derive("steps.initialising", lambda: _initialising(trace))


def _initialising(trace: Trace) -> np.ndarray:
    slow = trace.dur >= STARTUP_CALL_US
    found = (trace.name_matches(STARTUP) & slow) | model_warmup(trace)
    first_calls = trace.name_matches(FIRST_RUNTIME_CALL) & slow
    if first_calls.any():
        device = np.flatnonzero(trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE))
        first_work = float(trace.ts[device].min()) if device.size else np.inf
        found |= first_calls & (trace.ts < first_work)
    return found


def warmup_steps(durations: np.ndarray, signs: np.ndarray, typical: np.ndarray | None = None) -> np.ndarray:
    """How many leading steps are warm-up, along the last axis (one row per run when 2-D).

    Warm-up is the run of leading steps that take more than ``WARMUP_SLOWDOWN`` times the typical
    step (by default the median of the later half), or show warm-up's ``signs`` (a compile, start-up)
    and take more than ``STEADY_AGREEMENT`` times it: a step with a sign but the others' time is
    steady. At least one step always stays. Only the leading steps matter, so ``durations`` may be a
    prefix when ``typical`` is given.
    """
    count = durations.shape[-1]
    if typical is None:
        typical = np.median(durations[..., count // 2 :], axis=-1, keepdims=True)
    slow_or_compiling = (signs & (durations > STEADY_AGREEMENT * typical)) | (durations > WARMUP_SLOWDOWN * typical)
    return np.where(slow_or_compiling.all(axis=-1), count - 1, np.argmin(slow_or_compiling, axis=-1))


def _mostly_startup(startup: float | None, first: float, last: float) -> bool:
    return startup is not None and startup - first >= STARTUP_SHARE * (last - first)


def _truncated_last(durations: np.ndarray) -> int:
    """1 when the last step is under ``TRUNCATED_SHARE`` of the typical earlier step (cut off by the capture). The
    first step counts only where it is the one earlier step: it is the one warm-up stretches (a first call compiling),
    and the median of two takes half of it."""
    if durations.size < 2:
        return 0
    earlier = durations[1:-1] if durations.size > 2 else durations[:-1]
    typical = float(np.median(earlier[-8:]))
    return int(durations[-1] < TRUNCATED_SHARE * typical)
