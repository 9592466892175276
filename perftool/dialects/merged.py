"""A trace that merges several ranks' traces into one file: SGLang's merged profile (``--merge-profiles``), perftool's
own job timeline (``scan --format perfetto`` of a job). Each rank's processes are labelled by the rank; one rank is
analysed, as a trace of its own, and the others are shown, not analysed: taken together, every rank's host would
mark each step once per rank, and one rank's idle time would hide under the others' work."""

from __future__ import annotations

from perftool.dialects.base import device_work_per_track
from perftool.dialects.vocabulary import MERGED_RANK_PID, MERGED_RANK_PIDS, MERGED_RANK_PROCESS, OTHER_RANKS
from perftool.trace.model import Role, Trace, Track


def merged_rank(track: Track) -> str | None:
    """The rank a track's process belongs to in a trace merging several ranks' (``TP01``, ``rank 3``), by its pid or
    its process's name; None where neither labels one."""
    if isinstance(track.pid, str) and (labelled := MERGED_RANK_PID.match(track.pid)):
        return labelled.group(1)
    named = MERGED_RANK_PROCESS.match(track.process_name)
    return named.group(1) if named else None


def own_pid(track: Track) -> int | str:
    """A track's process id in its rank's own trace (a device's id in Kineto's ``deviceProperties``): SGLang's merge
    prefixes the rank's label (``[TP01] 1`` → 1), perftool's job timeline numbers a rank's processes from (its rank +
    1) × :data:`MERGED_RANK_PIDS` (rank 1's device 1 is 20,000,001); any other id as it is."""
    pid = track.pid
    if isinstance(pid, str) and (labelled := MERGED_RANK_PID.match(pid)):
        own = labelled.group(2)
        return int(own) if own.isdigit() else own
    if isinstance(pid, int) and MERGED_RANK_PROCESS.match(track.process_name):
        return pid % MERGED_RANK_PIDS
    return pid


def own_name(track: Track) -> str:
    """A track's process name in its rank's own trace: perftool's job timeline prefixes the rank (``rank 1 · GPU 0``
    → ``GPU 0``); any other name as it is."""
    labelled = MERGED_RANK_PROCESS.match(track.process_name)
    return track.process_name[labelled.end() :] if labelled else track.process_name


def merged_ranks(trace: Trace) -> list[str]:
    """The ranks a trace merging several ranks' traces holds, the one analysed first; none for any other trace."""
    ranks = trace.metadata.get(OTHER_RANKS)
    return [ranks["analysed"], *ranks["others"]] if ranks else []


def other_ranks(trace: Trace) -> dict[int, Role]:
    """Where the trace merges ranks' traces, the tracks of all but one rank: the rank whose device did the most work
    (of equals, the first in the trace; the first rank where no device did any), said in the trace's metadata
    (:data:`OTHER_RANKS`) with the others in the trace's order. A merge of one rank's trace (SGLang's of a job on one
    device: every process labelled alike) is that rank's trace, said all the same; one labelled process among others
    makes no merge."""
    ranks = {track.id: rank for track in trace.tracks if (rank := merged_rank(track)) is not None}
    labels = list(dict.fromkeys(ranks.values()))
    if not labels or len(labels) == 1 and len(ranks) < len(trace.tracks):
        return {}
    per_track = device_work_per_track(trace)
    per_rank = dict.fromkeys(labels, 0.0)
    for track, rank in ranks.items():
        per_rank[rank] += float(per_track[track])
    analysed = max(labels, key=lambda rank: (per_rank[rank], -labels.index(rank)))
    trace.metadata[OTHER_RANKS] = {"analysed": analysed, "others": [rank for rank in labels if rank != analysed]}
    return {track: Role.OTHER_RANK for track, rank in ranks.items() if rank != analysed}
