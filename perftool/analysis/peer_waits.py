"""Whom a rank's collectives wait for: HCCL's tasks on its planes name the peer of each wait.

msprof records an HCCL op's tasks on the planes it runs them on (profiler level 1 and above; the db export's
``COMMUNICATION_TASK_INFO``): ``Notify_Wait`` is the rank waiting for a peer's signal, with the two ranks in its
args (``src rank``, the rank itself, and ``dst rank``, the peer); ``Memcpy``, ``Reduce_Inline`` and ``RDMASend``
move and reduce the data. A collective that spends most of its time in the waits for one peer is waiting for that
peer to reach it, not moving data: the peer is late, whichever rank it is, captured or not.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from perftool.analysis import intervals
from perftool.trace.model import Kind, Phase, Role, Trace

PEER_WAIT = re.compile(r"^Notify_Wait$")  # a plane's wait for its peer's signal (the stream's copy is "Notify Wait")
_NOTIFY = re.compile(r"^Notify_")  # a plane's signalling tasks; its other tasks move or reduce data
NO_RANK = 0xFFFFFFFF  # HCCL's rank field where a task has no rank (a local reduce's destination)
LATE_PEER = 0.5  # a peer waited on at least this share of the longest wait on any peer is late too


@dataclass(frozen=True)
class PeerWaits:
    """A rank's collectives in a window, told by their plane tasks: how long they waited for each peer rank, and
    how long they moved data. Empty where the trace records no plane tasks."""

    rank: int | None = None  # this trace's rank, as its tasks name it
    wait_us: dict[int, float] = field(default_factory=dict)  # per peer rank, the longest wait first
    transfer_us: float = 0.0  # time any plane moved or reduced data (the union over planes)
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the waits in the window
    peer: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the peer each of them waits for

    def late(self) -> list[int]:
        """The peers waited on longest: the one waited on most, and those waited on at least :data:`LATE_PEER` of its
        time; none where no wait is recorded."""
        longest = max(self.wait_us.values(), default=0.0)
        return [peer for peer, wait in self.wait_us.items() if longest > 0 and wait >= LATE_PEER * longest]

    def waits_for(self, peers: list[int]) -> np.ndarray:
        """The waits in the window for any of ``peers``."""
        return self.rows[np.isin(self.peer, peers)]


def measure(trace: Trace, lo: float, hi: float, parts: np.ndarray) -> PeerWaits:
    """The plane tasks' waits per peer and their data movement within [lo, hi], given which events are tasks of a
    collective (:func:`~perftool.analysis.communication.collective_parts`)."""
    rows, ranks = _waits(trace)
    if rows.size == 0:
        return PeerWaits()
    rank = Counter(ranks[:, 0].tolist()).most_common(1)[0][0]  # a wait's own rank is its source
    planes = np.unique(trace.track[rows])
    peer = np.where(ranks[:, 0] == rank, ranks[:, 1], ranks[:, 0])
    clipped = np.minimum(trace.end[rows], hi) - np.maximum(trace.ts[rows], lo)
    mine = (clipped > 0) & (peer != rank) & (peer != NO_RANK)
    rows, peer, clipped = rows[mine], peer[mine], clipped[mine]
    peers, which = np.unique(peer, return_inverse=True)
    wait = dict(zip(peers.tolist(), np.bincount(which.reshape(-1), clipped, peers.size).tolist()))
    moving = np.flatnonzero(parts & np.isin(trace.track, planes) & ~trace.name_matches(_NOTIFY))
    starts, ends = np.maximum(trace.ts[moving], lo), np.minimum(trace.end[moving], hi)
    inside = ends > starts
    transfer = intervals.total(intervals.union(starts[inside], ends[inside]))
    return PeerWaits(rank, dict(sorted(wait.items(), key=lambda item: -item[1])), transfer, rows, peer)


def _waits(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The plane waits that name their ranks, and those ranks (source, destination) per wait."""
    candidates = np.flatnonzero(
        trace.name_matches(PEER_WAIT)
        & (trace.phase == Phase.COMPLETE)
        & (trace.kind == Kind.COMMUNICATION)
        & trace.on_roles(Role.DEVICE)
        & (trace.args_ref >= 0)
    )
    pairs = [_ranks(args) for args in trace.args_of(candidates)]
    named = np.array([pair is not None for pair in pairs], dtype=bool)
    ranks = np.array([pair for pair in pairs if pair is not None], dtype=np.int64).reshape(-1, 2)
    return candidates[named], ranks


def _ranks(args: dict | None) -> tuple[int, int] | None:
    """A wait's (source, destination) ranks from its args, where both are whole numbers."""
    source, destination = (args or {}).get("src rank"), (args or {}).get("dst rank")
    if _is_rank(source) and _is_rank(destination):
        return source, destination
    return None


def _is_rank(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a rank as HCCL writes one: a whole number that fits its 32 bits."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= NO_RANK
