"""Steps inferred for traces without step markers: from the optimizer's steps where the loop records them, else from
the trace's repeating structure.

A PyTorch training iteration ends with its optimizer's step, which torch.optim records (``Optimizer.step#SGD.step``):
each step ends where one ends. Without them: a training loop does the same thing every step, so the host thread that
drives the device issues the same sequence of top-level calls again and again: an engine or program run
(``Engine::run``), a model execution (``aclmdlExecute``), a graph launch, or a longer sequence of framework ops. The
shortest period with which the names of those calls repeat is a step; each step starts at the call of the period that
follows the longest pause on average (where the loop reads back its loss, say), or at its fetch of the next batch
where the loop loads its own input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perftool.analysis.host_calls import driving_calls
from perftool.dialects.vocabulary import OPTIMIZER_STEP
from perftool.trace.model import Kind, Phase, Role, Trace, looked_up

MIN_REPEATS = 3  # a sequence seen fewer times than this is not a loop
MATCH = 0.9  # this share of the calls a period apart must have the same name
MATCH_SLACK = 0.02  # a shorter period must agree within this of the best one
MAX_PERIODS_TRIED = 64  # names whose typical distance is tried as a period, rarest first


@dataclass(frozen=True)
class Inferred:
    """Steps found by repetition: their spans on the host, and what repeats, in words."""

    starts: np.ndarray
    ends: np.ndarray
    what: str  # what the steps were told by, in words: "the optimizer's steps (...)"
    fetching: bool = False  # each step begins with the loop's fetch of its next batch
    optimizer: bool = False  # each step ends with the optimizer's step


def inferred_steps(trace: Trace, after: float, before: float = np.inf) -> Inferred | None:
    """Steps between ``after`` (the end of start-up) and, where given, ``before`` (a step marker holding several
    iterations): the optimizer's (:func:`optimizer_steps`) where it records at least :data:`MIN_REPEATS`, else the
    host's repeating calls (:func:`repeating_steps`); None when neither finds a loop."""
    return optimizer_steps(trace, after, before) or repeating_steps(trace, after, before)


def optimizer_steps(trace: Trace, after: float, before: float = np.inf) -> Inferred | None:
    """Iterations as the optimizer closes them: each ends where an outermost optimizer step of the loop's thread (the
    thread that records most) ends, and starts where the one before it ended. Where a loop steps several optimizers
    under distinct names, only the name stepped most (the last of those) closes an iteration. The iteration before the
    first optimizer step, from the thread's first call, is a step where its process runs about as many ops in it as
    in the others (:data:`MATCH` of their median): with fewer, the capture began inside it."""
    host = trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE) & (trace.ts >= after) & (trace.end <= before)
    rows = np.flatnonzero(host & trace.name_matches(OPTIMIZER_STEP))
    if not rows.size:
        return None
    track = int(np.argmax(np.bincount(trace.track[rows])))
    rows = trace.top_level(rows[trace.track[rows] == track])
    counts = np.bincount(trace.name[rows])
    stepped_most = np.flatnonzero(counts[trace.name[rows]] == counts.max())
    rows = rows[trace.name[rows] == trace.name[rows[stepped_most[-1]]]]
    if rows.size < MIN_REPEATS:
        return None
    on_thread = np.flatnonzero(host & (trace.track == track) & (trace.kind != Kind.STEP))
    ends = trace.end[rows]
    starts = np.r_[trace.ts[on_thread].min(), ends[:-1]]
    pid = trace.tracks[track].pid
    of_process = looked_up(np.array([thread.pid == pid for thread in trace.tracks]), trace.track)
    ops = np.sort(trace.ts[np.flatnonzero(host & of_process & (trace.kind == Kind.HOST_OP))])
    per_step = np.searchsorted(ops, ends) - np.searchsorted(ops, starts)
    if per_step[0] < MATCH * np.median(per_step[1:]):
        starts, ends = starts[1:], ends[1:]
    name = trace.names[int(trace.name[rows[0]])]
    return Inferred(starts, ends, f"the optimizer's steps ({name})", optimizer=True)


def repeating_steps(trace: Trace, after: float, before: float = np.inf) -> Inferred | None:
    """Steps of the host thread that drives the device, from the calls it makes after ``after`` (the end of
    start-up; :func:`~perftool.analysis.host_calls.driving_calls`) and, where given, ending by ``before`` (a
    step marker holding several iterations); None when no sequence repeats at least :data:`MIN_REPEATS` times."""
    rows = driving_calls(trace, (trace.ts >= after) & (trace.end <= before))
    if rows.size < MIN_REPEATS:
        return None
    names = trace.name[rows]
    period = _period(names)
    if period is None:
        return None
    phase = _first_of_step(trace, rows, period)
    firsts = np.arange(phase, rows.size, period)
    complete = firsts[firsts + period <= rows.size]  # periods the capture holds whole
    if complete.size < MIN_REPEATS:
        return None
    starts = trace.ts[rows[complete]]
    last_ends = trace.end[rows[complete + period - 1]]
    ends = np.r_[starts[1:], last_ends[-1]]
    first = trace.names[int(names[phase])]
    what = f"{first}, repeated" if period == 1 else f"a repeated sequence of {period:,} host calls from {first}"
    what = f"the host's repeating calls ({what})"
    return Inferred(starts, ends, what, bool(trace.kind[rows[phase]] == Kind.INPUT))


def _first_of_step(trace: Trace, rows: np.ndarray, period: int) -> int:
    """Which call of the period starts a step: the loop's fetch of its next batch where it makes one, else the
    call after the longest pause on average."""
    fetches = np.flatnonzero(trace.kind[rows[:period]] == Kind.INPUT)
    if fetches.size:
        return int(fetches[0])
    pauses = trace.ts[rows][1:] - trace.end[rows][:-1]
    phase = np.arange(1, rows.size) % period
    mean_pause = np.bincount(phase, weights=pauses, minlength=period) / np.bincount(phase, minlength=period)
    return int(np.argmax(mean_pause)) if period > 1 else 0


def _period(names: np.ndarray) -> int | None:
    """The period with which ``names`` repeat, over at least ``MIN_REPEATS`` periods: of the candidates whose names a
    period apart agree at least ``MATCH`` of the time, the shortest that agrees about as well as the best (a model's
    identical layers repeat too, but less exactly than its steps). Candidates are the typical distances between the
    calls of the rarest names (those called once a step), and the length the calls' counts have in common."""
    count = names.size
    order = np.argsort(names, kind="stable")
    sorted_names = names[order]
    bounds = np.flatnonzero(np.r_[True, sorted_names[1:] != sorted_names[:-1], True])
    calls = np.diff(bounds)
    recurring = np.flatnonzero(calls >= MIN_REPEATS)
    rarest = recurring[np.argsort(calls[recurring], kind="stable")][:MAX_PERIODS_TRIED]
    typical = [int(np.median(np.diff(order[bounds[i] : bounds[i + 1]]))) for i in rarest.tolist()]
    repeats = int(np.gcd.reduce(calls[recurring])) if recurring.size else 0
    shared = [count // repeats] if repeats >= MIN_REPEATS else []
    candidates = np.unique([d for d in typical + shared if 0 < d <= count // MIN_REPEATS])
    if candidates.size == 0:
        return None
    agreement = np.array([np.mean(names[:-period] == names[period:]) for period in candidates.tolist()])
    good = agreement >= max(MATCH, float(agreement.max()) - MATCH_SLACK)
    return int(candidates[np.argmax(good)]) if good.any() else None
