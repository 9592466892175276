"""Putting the ranks on one clock, and the time each rank waits in collectives for the others.

Every rank's profiler stamps events with its own host clock; across machines they differ by far more
than a step. A synchronising collective (all-reduce, all-gather, …) ends on every member at the same
instant, so the same collective on two ranks — the same process group, step number, type and position
within the step — gives one reading of their clock difference. A rank's offset is the median of those
readings, and the spread of the rest says how well the clocks aligned. Ranks that share no collective
with the reference rank are aligned through any rank already aligned that they share collectives with.

Once aligned, a collective cannot finish before its last member arrives: each rank waits from its own
start until then (at most the collective's length), and the last to arrive is the one the others wait for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perftool.job.summary import Timeline

MIN_MATCHED = 3  # collectives two ranks must share before their clocks are compared


@dataclass
class Alignment:
    """Each aligned rank's clock offset from the reference rank's (µs: its clock minus the reference's), the
    collectives each offset was measured on, and how far those readings spread around it."""

    reference: int | None
    offsets_us: dict[int, float]
    matched: dict[int, int]
    residual_p95_us: float | None  # 95th percentile of |reading - offset| over every aligned rank
    unaligned: list[int]


@dataclass
class Waits:
    """Per rank, over its timeline's steps: time waiting in collectives for later ranks, collectives it
    arrived last at, the time the others waited for it then (each a mean over the others), and the
    collectives compared."""

    wait_us: dict[int, float]
    last: dict[int, int]
    held_back_us: dict[int, float]
    compared: dict[int, int]
    worst: dict[int, list[tuple[int, float]]]  # rank -> (its call index, others' mean wait), longest first
    lag_us: dict[int, float] = field(default_factory=dict)  # per rank: over its steps, the longest wait it causes
    # in each (collectives reduced while the others compute each wait for its lag so far: their sum counts it again)
    step_wait_us: dict[int, dict[int, float]] = field(default_factory=dict)  # per rank: step number -> its wait


def _keys(timeline: Timeline) -> list[tuple[str, int, int, int]]:
    """(group, step, type, position among the step's collectives of that group and type) per call."""
    seen: dict[tuple[str, int, int], int] = {}
    keys = []
    for group, step, kind in zip(timeline.group, timeline.step.tolist(), timeline.type.tolist()):
        base = (group, step, kind)
        position = seen.get(base, 0)
        seen[base] = position + 1
        keys.append((group, step, kind, position))
    return keys


def align(timelines: dict[int, Timeline]) -> tuple[Alignment, dict[int, dict[tuple, int]]]:
    """The clock offsets of the ranks, and each rank's key -> call index (for :func:`waits`)."""
    index = {rank: {key: i for i, key in enumerate(_keys(t))} for rank, t in sorted(timelines.items())}
    ranks = [rank for rank, keys in index.items() if keys]
    if not ranks:
        return Alignment(None, {}, {}, None, sorted(timelines)), index
    reference = ranks[0]
    offsets, matched, residuals = {reference: 0.0}, {reference: len(index[reference])}, []
    pending = ranks[1:]
    while pending:
        progress = []
        for rank in pending:
            for other in offsets:  # the reference first, then the ranks aligned since
                common = index[rank].keys() & index[other].keys()
                if len(common) < MIN_MATCHED:
                    continue
                mine = np.array([index[rank][k] for k in common])
                theirs = np.array([index[other][k] for k in common])
                readings = timelines[rank].end[mine] - timelines[other].end[theirs]
                offset = float(np.median(readings))
                offsets[rank], matched[rank] = offset + offsets[other], len(common)
                residuals.append(np.abs(readings - offset))
                progress.append(rank)
                break
        if not progress:
            break
        pending = [rank for rank in pending if rank not in offsets]
    spread = float(np.percentile(np.concatenate(residuals), 95)) if residuals else None
    unaligned = sorted(set(timelines) - set(offsets))
    return Alignment(reference, offsets, matched, spread, unaligned), index


def waits(timelines: dict[int, Timeline], alignment: Alignment, index: dict[int, dict[tuple, int]]) -> Waits:
    """Who waits for whom in the collectives the aligned ranks share."""
    ids: dict[tuple, int] = {}
    rank_col, call_col, key_col, start_col, dur_col = [], [], [], [], []
    for rank, offset in alignment.offsets_us.items():
        timeline, calls = timelines[rank], index[rank]
        positions = np.fromiter(calls.values(), dtype=np.int64, count=len(calls))
        key_ids = np.fromiter((ids.setdefault(k, len(ids)) for k in calls), dtype=np.int64, count=len(calls))
        rank_col.append(np.full(positions.size, rank))
        call_col.append(positions)
        key_col.append(key_ids)
        start_col.append(timeline.start[positions] - offset)
        dur_col.append(timeline.end[positions] - timeline.start[positions])
    keys = np.concatenate(key_col) if key_col else np.empty(0, np.int64)
    shared = np.bincount(keys, minlength=len(ids))[keys] > 1
    if not shared.any():  # one rank alone, or ranks that share no collective: nobody waits for anybody
        ranks = sorted(alignment.offsets_us)
        return Waits(dict.fromkeys(ranks, 0.0), dict.fromkeys(ranks, 0), dict.fromkeys(ranks, 0.0),
                     dict.fromkeys(ranks, 0), {})  # fmt: skip
    who, call, key = (np.concatenate(c)[shared] for c in (rank_col, call_col, key_col))
    start, dur = (np.concatenate(c)[shared] for c in (start_col, dur_col))
    members = np.bincount(key, minlength=len(ids))
    last_arrival = np.full(len(ids), -np.inf)
    np.maximum.at(last_arrival, key, start)
    wait = np.clip(last_arrival[key] - start, 0.0, dur)
    order = np.lexsort((start, key))  # within each key, the last to arrive comes last
    is_last = np.zeros(order.size, dtype=bool)
    is_last[order[np.r_[key[order][1:] != key[order][:-1], True]]] = True
    others_wait = np.bincount(key, weights=wait, minlength=len(ids)) / np.maximum(members - 1, 1)
    held = np.where(is_last, others_wait[key], 0.0)
    ranks = sorted(alignment.offsets_us)
    result = Waits(
        wait_us={r: float(wait[who == r].sum()) for r in ranks},
        last={r: int(np.count_nonzero(is_last & (who == r))) for r in ranks},
        held_back_us={r: float(held[who == r].sum()) for r in ranks},
        compared={r: int(np.count_nonzero(who == r)) for r in ranks},
        worst={},
    )
    for r in ranks:
        calls_of_r = who == r
        numbers, in_step = np.unique(timelines[r].step[call[calls_of_r]], return_inverse=True)
        per_step = np.bincount(in_step, weights=wait[calls_of_r], minlength=numbers.size)
        result.step_wait_us[r] = dict(zip(numbers.tolist(), per_step.tolist()))
        mine = np.flatnonzero(is_last & calls_of_r & (held > 0))
        longest = mine[np.argsort(-held[mine], kind="stable")[:5]]
        result.worst[r] = [(int(call[i]), float(held[i])) for i in longest.tolist()]
        _, in_step = np.unique(timelines[r].step[call[mine]], return_inverse=True)
        longest_in_step = np.zeros(int(in_step.max()) + 1 if in_step.size else 0)
        np.maximum.at(longest_in_step, in_step, held[mine])
        result.lag_us[r] = float(longest_in_step.sum())
    return result
