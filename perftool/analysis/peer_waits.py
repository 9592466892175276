"""Whom a rank's collectives wait for: HCCL's tasks say when a collective waits for its peers, and which peer.

An HCCL op runs its work as tasks: ``Notify_Wait`` is the rank waiting for a peer's signal, ``Memcpy``,
``Reduce_Inline``, ``RDMASend`` (a stream's ``SDMA``) move and reduce the data. msprof records them on the
communication stream at every profiler level (``Notify Wait``), and from level 1 on the op's planes too, each wait
with its two ranks in its args (``src rank``, the rank itself, and ``dst rank``, the peer; the db export's
``COMMUNICATION_TASK_INFO``). A collective that spends most of its time waiting, not moving data, waits for a peer
to reach it: the peer is late, whichever rank it is, captured or not.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from perftool.analysis import intervals
from perftool.common.arrays import distinct
from perftool.trace.model import Trace

PEER_WAIT = re.compile(r"^Notify[_ ]Wait$")  # a wait for a peer's signal: a plane's Notify_Wait, a stream's Notify Wait
_COMMUNICATOR = re.compile(r"Communication$")  # msprof's thread of a communicator's ops: "Group <name> Communication"
_NOTIFY = re.compile(r"^Notify[_ ]")  # the signalling tasks; a collective's other tasks move or reduce data
NO_RANK = 0xFFFFFFFF  # HCCL's rank field where a task has no rank (a local reduce's destination)
LATE_PEER = 0.5  # a peer waited on at least this share of the longest wait on any peer is late too


@dataclass(frozen=True)
class PeerWaits:
    """A rank's collectives in a window, told by their tasks: how long they only waited for peers, how long they
    moved data, and, where the tasks name the peer of each wait, how long they waited for each. Empty where the trace
    records no such tasks."""

    waiting_us: float = 0.0  # time a wait ran and no task moved data
    transfer_us: float = 0.0  # time any task moved or reduced data
    rank: int | None = None  # this trace's rank in the communicator of the peers named, as the trace numbers it
    # (the communicator's own numbering, or the job's where the export maps it); None where no wait names one
    wait_us: dict[int, float] = field(default_factory=dict)  # per peer rank, the longest wait first
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the waits in the window
    peer: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the peer of each (NO_RANK: not named)
    communicator: str = ""  # the thread of the communicator of the peers named, where msprof draws one
    communicators: int = 0  # how many communicators' waits name their peers (ranks are each one's own)

    def late(self) -> list[int]:
        """The peers waited on longest: the one waited on most, and those waited on at least :data:`LATE_PEER` of its
        time; none where no wait names its peer."""
        longest = max(self.wait_us.values(), default=0.0)
        return [peer for peer, wait in self.wait_us.items() if longest > 0 and wait >= LATE_PEER * longest]

    def waits_for(self, peers: list[int]) -> np.ndarray:
        """The waits in the window for any of ``peers`` (all of them where ``peers`` is empty)."""
        return self.rows[np.isin(self.peer, peers)] if peers else self.rows


def measure(trace: Trace, lo: float, hi: float, tasks: np.ndarray) -> PeerWaits:
    """The collectives' waits and data movement within [lo, hi], given which events are their tasks
    (:func:`~perftool.analysis.communication.collective_tasks`). Ranks are a communicator's own: where waits of
    several name their peers, the peers named are those of the communicator waited on longest for one peer."""
    waits = tasks & trace.name_matches(PEER_WAIT)
    if not waits.any():
        return PeerWaits()
    leaves = _not_enclosing(trace, np.flatnonzero(tasks))  # not a task drawn over others (the db's record of the op)
    transfer = _union(trace, leaves[~trace.name_matches(_NOTIFY, leaves)], lo, hi)
    rows = np.flatnonzero(waits)
    clipped = np.minimum(trace.end[rows], hi) - np.maximum(trace.ts[rows], lo)
    rows, clipped = rows[clipped > 0], clipped[clipped > 0]
    waiting = intervals.total(intervals.subtract(_union(trace, rows, lo, hi), transfer, lo, hi))
    peer = np.full(rows.size, NO_RANK, np.int64)
    named, ranks = _named(trace, rows)
    group = _communicators(trace, rows)
    by_group = {g: _peers_of(group[named] == g, ranks, clipped[named]) for g in distinct(group[named]).tolist()}
    if not by_group:
        return PeerWaits(waiting, intervals.total(transfer), rows=rows, peer=peer)
    head = max(by_group, key=lambda g: max(by_group[g][2].values(), default=0.0))
    rank, named_peers, wait = by_group[head]
    peer[named] = named_peers
    by_wait = dict(sorted(wait.items(), key=lambda item: -item[1]))
    communicator = trace.tracks[head].thread_name if head >= 0 else ""
    return PeerWaits(waiting, intervals.total(transfer), rank, by_wait, rows, peer, communicator, len(by_group))


def _peers_of(mine: np.ndarray, ranks: np.ndarray, clipped: np.ndarray) -> tuple[int, np.ndarray, dict[int, float]]:
    """One communicator's waits (``mine`` of the named waits, their ``ranks`` and times): its own rank (its waits'
    usual source), each named wait's peer (NO_RANK for the others') and the time waited for each peer."""
    rank = Counter(ranks[mine, 0].tolist()).most_common(1)[0][0]
    peer = np.where(ranks[:, 0] == rank, ranks[:, 1], ranks[:, 0])
    peer[~mine | (peer == rank)] = NO_RANK
    known = peer != NO_RANK
    peers, which = np.unique(peer[known], return_inverse=True)
    return rank, peer, dict(zip(peers.tolist(), np.bincount(which.reshape(-1), clipped[known], peers.size).tolist()))


def _communicators(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per wait: the track of its communicator's thread, which msprof draws before the communicator's planes
    (``Group <name> Communication``, then ``Plane 0``, ``Plane 1``...; -1 where no such thread comes before it)."""
    heads: dict[int | str, list[tuple[int, int]]] = {}
    for track in trace.tracks:
        if isinstance(track.tid, int) and _COMMUNICATOR.search(track.thread_name):
            heads.setdefault(track.pid, []).append((track.tid, track.id))
    head_of = {}
    for track_id in distinct(trace.track[rows]).tolist():
        track = trace.tracks[track_id]
        before = [
            (tid, head) for tid, head in heads.get(track.pid, []) if isinstance(track.tid, int) and tid <= track.tid
        ]
        head_of[track_id] = max(before)[1] if before else -1
    return np.array([head_of[t] for t in trace.track[rows].tolist()], dtype=np.int64)


def _not_enclosing(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of ``rows``, those that enclose none of the others on their track (tasks running side by side on one stream
    overlap, and stay)."""
    order = rows[np.lexsort((-trace.dur[rows], trace.ts[rows], trace.track[rows]))]
    encloses_next = (trace.track[order[1:]] == trace.track[order[:-1]]) & (
        trace.end[order[1:]] <= trace.end[order[:-1]]
    )
    return order[np.append(~encloses_next, True)]


def _union(trace: Trace, rows: np.ndarray, lo: float, hi: float) -> intervals.Intervals:
    """The time any of ``rows`` runs within [lo, hi]."""
    starts, ends = np.maximum(trace.ts[rows], lo), np.minimum(trace.end[rows], hi)
    inside = ends > starts
    return intervals.union(starts[inside], ends[inside])


def _named(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of the waits ``rows`` name their ranks, and those ranks (source, destination) per such wait."""
    pairs = [_ranks(args) for args in trace.args_of(rows)]
    named = np.array([pair is not None for pair in pairs], dtype=bool)
    ranks = np.array([pair for pair in pairs if pair is not None], dtype=np.int64).reshape(-1, 2)
    return named, ranks


def _ranks(args: dict | None) -> tuple[int, int] | None:
    """A wait's (source, destination) ranks from its args, where both are whole numbers."""
    source, destination = (args or {}).get("src rank"), (args or {}).get("dst rank")
    if _is_rank(source) and _is_rank(destination):
        return source, destination
    return None


def _is_rank(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a rank as HCCL writes one: a whole number that fits its 32 bits."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= NO_RANK
