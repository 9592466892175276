"""Blocking copies: copies to or from pageable host memory, or synchronous copy calls, every step.

A copy from pageable memory cannot run asynchronously: the runtime stages it and the host waits
until it is done (``Memcpy DtoH (Device -> Pageable)``, ``cudaMemcpy``, ``hipMemcpyWithStream``).
The device then idles until the host has launched its next work, and the copy itself overlaps
nothing. The time lost is that idle time plus the read-back copies' time not hidden behind compute
(input copies' own time is the exposed-transfers rule's, so no time is counted twice). Its fix, pinned
memory for the inputs and for the results read back (each where its copies are pageable), is emulated where the job
can pin its buffers (a fit reads the copies' memory and bandwidth).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.host_calls import blocking_copies, copies_during, read_backs
from perftool.dialects.vocabulary import PAGEABLE
from perftool.rules.detectors.base import Detection, Detector, Scope, distinct_names
from perftool.trace.model import Kind, Trace

DIRECTIONS = {Kind.D2H: "device→host", Kind.H2D: "host→device", Kind.D2D: "device→device"}  # a copy's kind, in words


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    idle = scope.idle
    if idle is None:
        return None
    trace = scope.trace
    pageable = trace.name_matches(PAGEABLE) & trace.of_kinds(Kind.H2D, Kind.D2H)
    read_back = scope.busy(pageable & (trace.kind == Kind.D2H))  # input copies belong to exposed-transfers
    exposed = intervals.total(read_back) - intervals.overlap(read_back, scope.compute)
    blocked = idle.time("blocking_copy")
    lost = blocked + exposed
    if lost <= 0:
        return None
    calls = np.flatnonzero(blocking_copies(trace) & scope.in_window)
    copying = pageable | copies_during(trace, calls)
    copy_rows = np.flatnonzero(copying & scope.in_window)
    copies = scope.busy(copying)
    directions = sorted({DIRECTIONS[k] for k in trace.kind[copy_rows].tolist()})
    values: dict[str, Any] = {
        "per_step": scope.per_step(calls.size),
        "calls": distinct_names(trace, calls, 3) if calls.size else "a copy call the trace does not show",
        "copies": distinct_names(trace, copy_rows, 2) if copy_rows.size else "synchronous copies",
        "directions": " and ".join(directions) or "synchronous",
        "copy_ms_per_step": scope.per_step(intervals.total(copies)) / 1e3,
        "blocked_ms_per_step": scope.per_step(blocked) / 1e3,
    }
    staged = np.flatnonzero(pageable & scope.in_window)  # the copies the runtime stages, else the calls that wait
    evidence = scope.events(staged if staged.size else calls)
    # advice about the input pipeline's pinned memory needs an input pipeline; results read back need none
    loads_input = bool(np.any(trace.kind == Kind.INPUT)) and (not directions or DIRECTIONS[Kind.H2D] in directions)
    variant = None if loads_input else "without_loader"
    return Detection(
        lost,
        values,
        evidence,
        key=values["directions"],
        variant=variant,
        occurrences=max(calls.size, copy_rows.size),
        changes=_pinned(trace, calls, staged),
    )


def _pinned(trace: Trace, calls: np.ndarray, staged: np.ndarray) -> dict[str, Any]:
    """The fix as settings, a what-if where the job can pin: pinned inputs where copies from pageable memory
    (``staged``) go to the device or a blocking call is no read-back (a call whose copy the trace does not show may be
    either), a pinned read-back where pageable copies or blocking calls read results back."""
    kinds = set(trace.kind[staged].tolist())
    reading = read_backs(trace, calls)
    pins = {"pin_memory": Kind.H2D in kinds or not reading.all(), "pin_readback": Kind.D2H in kinds or reading.any()}
    return {knob: True for knob, pinned in pins.items() if pinned}


DETECTOR = Detector(
    name="blocking_copies",
    summary="copies to or from pageable memory (or synchronous copy calls) that block the host every step",
    values={
        "per_step": "blocking copy calls per steady step",
        "calls": "the host's copy calls, most time first",
        "copies": "the device copies to or from pageable memory, and those the blocking calls wait for",
        "directions": 'which way they copy ("synchronous" where the trace shows no copy on the device)',
        "copy_ms_per_step": "time in those copies per step, ms",
        "blocked_ms_per_step": "device idle per step after the host was blocked in a copy, ms",
    },
    detect=detect,
)
