"""Chains of pointwise ops over the same tensor, each its own kernel: every link writes its result to device
memory and the next reads it back, where one fused kernel would read the inputs once and write once.

A chain is three or more consecutive pointwise calls that compute (copies and fills, each of its own tensor, are
not links) on one host thread and in one step, with outputs of one size and no other kernel launched between them;
in an XLA trace, consecutive kernels of separately compiled programs (the ops of one program XLA has fused as far as
it would).
Pointwise ops are memory-bound, so the time lost is the chain's device time times the share of its bytes that
fusing saves (each intermediate written and read again), at the bandwidth the chain reaches now.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perftool.analysis.launches import launch_rows
from perftool.roofline.calls import Calls
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting, names_key
from perftool.trace.model import Trace


def _launches_between(trace: Trace, calls: Calls, pairs: np.ndarray) -> np.ndarray:
    """Per pair of consecutive calls ``pairs`` names (the first's index): how many kernels the thread launched between
    the first's end and the second's start (by ops perftool does not model)."""
    if pairs.size == 0:
        return np.zeros(0, np.int64)
    sources, _ = launch_rows(trace)
    first, second = calls.rows[pairs], calls.rows[pairs + 1]
    before_start, until_end = _launched_before(
        trace.track[sources], trace.ts[sources], trace.track[second], trace.ts[second], trace.end[first]
    )
    return before_start - until_end


def _launched_before(
    launch_track: np.ndarray, launch_ts: np.ndarray, track: np.ndarray, before: np.ndarray, until: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per query on ``track``: the launches on that track before ``before``, and those at or before ``until``. One
    sort of launches and both queries together: linear in all three, whatever the number of threads."""
    queries = track.size
    # at the same time, a query before counts no launch, a query until counts every one: it sorts after them
    ties = np.concatenate((np.ones(launch_ts.size, np.int8), np.zeros(queries, np.int8), np.full(queries, 2, np.int8)))
    order = np.lexsort((ties, np.concatenate((launch_ts, before, until)), np.concatenate((launch_track, track, track))))
    is_launch = ties[order] == 1
    launched_so_far = np.cumsum(is_launch)
    counted = np.empty(2 * queries, np.int64)
    counted[order[~is_launch] - launch_ts.size] = launched_so_far[~is_launch]
    lower_tracks = np.searchsorted(np.sort(launch_track, kind="stable"), track, side="left")
    return counted[:queries] - lower_tracks, counted[queries:] - lower_tracks


def _chains(trace: Trace, calls: Calls, shortest: int, step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and the last call index of each chain (``step``: each call's step, which a chain never leaves)."""
    pointwise = calls.matching(lambda w: w.family == "elementwise" and w.flops > 0) & (calls.device_us > 0)
    size = calls.each(lambda kind: math.prod(kind.work.out_shape) if kind.work else -1, np.int64)
    track = trace.track[calls.rows]
    linked = (
        pointwise[:-1] & pointwise[1:] & (size[:-1] == size[1:]) & (track[:-1] == track[1:]) & (step[:-1] == step[1:])
    )
    if calls.program is not None:  # a compiler left two kernels of one program apart: only separate programs fuse
        linked &= calls.program[:-1] != calls.program[1:]
    pairs = np.flatnonzero(linked)  # the launches between are counted only where all else links the two calls
    linked[pairs] = _launches_between(trace, calls, pairs) == 0
    # runs of links: a chain of n calls is n - 1 consecutive links
    edges = np.diff(np.concatenate(([0], linked.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    long_enough = ends + 1 - starts >= shortest
    return starts[long_enough], ends[long_enough]


def _spelled(calls: Calls, members: np.ndarray, shown: int = 6) -> str:
    """A chain's ops (``members``: its call indices) in order, the first few of a long one."""
    names = [calls.kinds[kind].name for kind in calls.kind[members[:shown]].tolist()]
    return " → ".join(names) + (f" → … ({members.size} ops)" if members.size > shown else "")


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    calls = scope.roofline.calls
    if calls is None:
        return None
    steps = scope.steps
    step = np.searchsorted(steps.start, calls.started(scope.trace, steps.clock), side="right")
    first, last = _chains(scope.trace, calls, int(params["min_ops"]), step)
    if first.size == 0:
        return None
    lengths = last + 1 - first
    offsets = np.cumsum(lengths) - lengths  # where each chain's calls start in ``members``
    members = np.arange(int(lengths.sum())) - np.repeat(offsets - first, lengths)  # the chains' calls, in order
    kind = calls.kind[members]
    read = np.array([k.work.bytes if k.work else 0.0 for k in calls.kinds], float)[kind]
    written = np.array([k.work.out_bytes if k.work else 0.0 for k in calls.kinds], float)[kind]
    written[offsets + lengths - 1] = 0.0  # the last link's result is the chain's own: fused, it is written still
    total = np.add.reduceat(read, offsets)
    kept = np.maximum(total - 2 * np.add.reduceat(written, offsets), np.maximum.reduceat(read, offsets))
    chain_us = np.add.reduceat(calls.device_us[members], offsets)
    saved = 1 - np.divide(kept, total, out=np.ones_like(total), where=total > 0)  # of a chain's bytes, by fusing
    lost = sum((chain_us * saved).tolist())
    if lost <= 0:
        return None
    longest = int(np.argmax(chain_us))
    rows = calls.rows[members]
    values: dict[str, Any] = {
        "per_step": scope.per_step(first.size),
        "ops_per_chain": members.size / first.size,
        "chain": _spelled(calls, np.arange(first[longest], last[longest] + 1)),
        "chain_ms_per_step": scope.per_step(sum(chain_us.tolist())) / 1e3,
        "bytes_saved": 1 - sum(kept.tolist()) / sum(total.tolist()),
    }
    return Detection(lost, values, scope.events(rows), key=names_key(scope.trace, rows), occurrences=first.size)


DETECTOR = Detector(
    name="elementwise_chains",
    summary="chains of pointwise ops over one tensor, each a kernel of its own",
    values={
        "per_step": "chains per steady step",
        "ops_per_chain": "pointwise ops in a chain, on average",
        "chain": "the ops of the chain taking most device time",
        "chain_ms_per_step": "device time of the chains per steady step, ms",
        "bytes_saved": "share of the chains' memory traffic fusing them saves",
    },
    detect=detect,
    sets_knobs=False,  # the emulator models no dtype, shape or kernel fusion
    reads_roofline=True,
    settings={"min_ops": Setting(3, "a chain has at least this many pointwise ops", int)},
)
