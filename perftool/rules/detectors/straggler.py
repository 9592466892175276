"""Stragglers: the rank the others wait for in collectives, and what makes it slow.

Read from a job's summaries (a job-level detector): with the ranks' clocks aligned, the rank that
arrives last at the collectives and holds the others back the longest is the straggler, unless it is late by no
more than twice what the clocks' alignment strays (then the trace cannot tell who is slow). What makes it slow is
the part of its step that exceeds the median of the other ranks most: device compute (uneven work or a slow
device), waiting for input, or its device waiting on its host (on a rank without a device, its host running no traced
call, or running Python between its ops where its trace records its Python stack) — named only where that excess
accounts for at least half of its lag (the longest wait it causes in a step); else the trace does not show the cause.
Where the job's ranks ran on several hosts (as their traces or file names say), the other ranks on the straggler's
host are compared with the ranks of the other hosts in that part: where they exceed them too, by at least half the
straggler's own excess, the node is the cause, not the rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.analysis.communication import COLLECTIVES
from perftool.rules.detectors.base import Detection, Detector
from perftool.rules.findings import Evidence

CAUSES = {  # breakdown part -> (fix variant, how the message names it)
    "compute": ("compute", "device compute"),
    "idle.input_wait": ("input", "waiting for input"),
    "idle.input_pipeline": ("input", "waiting for input workers"),
    "idle.h2d": ("input", "input copies"),
    "idle.host": ("host", "its device waiting on host Python and dispatch"),
    "idle.launch": ("host", "its device waiting on kernel launches"),
    "idle.sync": ("host", "its device waiting after host syncs"),
    "idle.blocking_copy": ("host", "its device waiting on blocking copies"),
    "idle.cpu_fallback": ("host", "CPU fallbacks"),
    "idle.compile": ("host", "compiling"),
    "idle.other": (None, "unexplained device idle"),
    "host.untraced": ("untraced", "host time outside every traced call"),  # a rank without a device, ...
    "host.python": ("python", "Python between its host's ops"),  # ... whose trace records its Python stack
}
# A part another rank lacks is none of its time (an idle cause it never met), but a host part cannot be compared
# with a rank whose trace does not record it (one with a device; one captured without its Python stack); a host-only
# rank's device parts are NaN
_UNRECORDED = {"host.untraced": np.nan, "host.python": np.nan}
EXPLAINS = 0.5  # a part of the slow rank's step is its cause when it exceeds the others' by this share of its lag
PYTHON_FRAMES_NAMED = 3  # the Python frames a host-only straggler's fix names, those it exceeds the others in most,
FRAME_SHARE = 0.1  # each at least this share of its excess time in Python
# How to check the network between the straggler's node and another, by where the job's collectives run: the GPUs'
# libraries (NCCL, RCCL), or gloo on the hosts' CPUs (a job whose ranks have no device)
NETWORK_CHECK = {
    "device": "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET for the transport each rank uses, RCCL's too, and nccl-tests,"
    " or rccl-tests on AMD",
    "host": "the interface gloo binds (GLOO_SOCKET_IFNAME sets it) and iperf3",
}
CLOCK_MARGIN = 2.0  # a rank is a straggler only when it is later than this many times the clocks' own disagreement
SHARED = 0.5  # the other ranks on the straggler's host share its cause where they exceed by this share of its excess


def detect(scope: Any, params: dict[str, float]) -> Detection | None:  # scope: perftool.job.view.JobScope
    rank = scope.slowest
    waited = scope.waits
    if rank is None or not waited.held_back_us.get(rank):
        return None
    steps = scope.steps_compared[rank]
    held = waited.held_back_us[rank] / steps
    others = [s for r, s in scope.summaries.items() if r != rank]
    mine = scope.summaries[rank].breakdown_us
    excess = {part: mine[part] - float(np.median([_part(o, part) for o in others])) for part in CAUSES if part in mine}
    excess = {part: more for part, more in excess.items() if np.isfinite(more)}
    cause = max(excess, key=excess.__getitem__) if excess else None
    most = max(excess.get(cause, 0.0), 0.0) if cause else 0.0
    variant, cause_text = CAUSES[cause] if cause and most > 0 else (None, "no single part of its step")
    lag = waited.lag_us.get(rank, 0.0) / steps  # how late it is: its longest wait caused in a step
    if lag <= CLOCK_MARGIN * scope.clock_error_us:
        return None  # the ranks' clocks agree no better than it is late: the trace cannot tell who is slow
    node, on_host = "", list[int]()
    if most >= EXPLAINS * lag:
        why = f"Against the median rank it spends {most / 1e3:.2f} ms more per step in {cause_text}."
        node, on_host, node_slow = _node(scope, rank, cause, cause_text) if cause else ("", [], False)
        variant = "node" if node_slow else variant
    else:  # a difference too small to account for the wait names no cause
        variant = None
        why = (
            f"No part of its step that the trace shows explains its lag of {lag / 1e3:.2f} ms per step (the largest "
            f"difference from the median rank, {cause_text}, is {most / 1e3:.2f} ms)."
        )
    top = scope.summaries[rank].scan.findings
    values = {
        "rank": rank,
        "held_ms_per_step": held / 1e3,
        "last_share": waited.last[rank] / max(waited.compared[rank], 1),
        "cause": cause_text,
        "excess_ms_per_step": most / 1e3,
        "why": why,
        "rank_finding": f"{top[0].rule_id} {top[0].title}: {top[0].fix.text}" if top else "no finding of its own",
        "python_frames": _python_frames(scope, rank, most) if variant == "python" else "",
        "network_check": NETWORK_CHECK["host" if "host.untraced" in mine else "device"],
        "node": node,
        "host": scope.summaries[rank].host or "",
        "at_host": f" ({scope.summaries[rank].host})" if scope.summaries[rank].host else "",
        "host_ranks": ", ".join(map(str, on_host)),
    }
    lost = held * scope.steady_steps
    moved = set(on_host) if variant == "node" else {rank}  # the node's ranks, or the rank alone
    changes = _at_others_pace(scope.run.slow_ranks, list(scope.summaries), moved) if scope.run is not None else {}
    return Detection(lost, values, _evidence(scope, rank), key=f"rank {rank} {cause}", variant=variant, changes=changes)


def _node(scope: Any, rank: int, cause: str, cause_text: str) -> tuple[str, list[int], bool]:
    """Where the job's ranks ran on several hosts: a sentence on the straggler's, the ranks on it, and whether it is
    the cause (the other ranks on it exceed the ranks of the other hosts in ``cause`` by at least :data:`SHARED` of
    the straggler's own excess over them); no sentence where the ranks' hosts are not known. Every rank records
    ``cause`` (one that a rank does not record is never a cause)."""
    hosts = {r: summary.host for r, summary in scope.summaries.items()}
    host = hosts[rank]
    if host is None or len(set(hosts.values()) - {None}) < 2:
        return "", [], False
    on_host = sorted(r for r, h in hosts.items() if h == host)
    mates = [r for r in on_host if r != rank]
    if not mates:
        return f" It ran on {host}, the only rank there.", on_host, False
    pace = float(np.median([_part(s, cause) for s in scope.summaries.values() if s.host not in (host, None)]))
    own = _part(scope.summaries[rank], cause) - pace
    theirs = float(np.median([_part(scope.summaries[r], cause) for r in mates])) - pace
    ranks = f"rank{'s' if len(mates) > 1 else ''} {', '.join(map(str, mates))}"
    if own > 0 and theirs >= SHARED * own:
        return (
            f" So do the other ranks on its host, {host} ({ranks}): {theirs / 1e3:.2f} ms more per step in "
            f"{cause_text} than the ranks of the other hosts, against its {own / 1e3:.2f} ms. The node is slow, not "
            f"the rank.",
            on_host,
            True,
        )
    return f" The other ranks on its host, {host} ({ranks}), keep the other hosts' pace.", on_host, False


def _part(summary: Any, part: str) -> float:
    """A rank's time in one part of its step (µs a step): none where it never met it, NaN where its trace cannot
    record it (:data:`_UNRECORDED`)."""
    return float(summary.breakdown_us.get(part, _UNRECORDED.get(part, 0.0)))


def _python_frames(scope: Any, rank: int, excess_us: float) -> str:
    """The Python frames (of those its summary names) in which ``rank``, a rank without a device whose trace records
    its Python stack, spends most beyond the other ranks' median, each at least :data:`FRAME_SHARE` of its
    ``excess_us`` in Python, as a phrase: "most of it in …", or that it is spread over many frames."""
    mine = scope.summaries[rank].python_us
    others = [s.python_us for r, s in scope.summaries.items() if r != rank]
    excess = {name: time - float(np.median([o.get(name, 0.0) for o in others])) for name, time in mine.items()}
    named = sorted((name for name, more in excess.items() if more >= FRAME_SHARE * excess_us), key=excess.__getitem__)
    named = named[::-1][:PYTHON_FRAMES_NAMED]
    return f"most of it in {', '.join(named)}" if named else "spread over many frames, none standing out"


def _at_others_pace(slow_ranks: tuple[dict, ...], ranks: list[int], moved: set[int]) -> dict[str, list[dict]]:
    """The job's slow ranks with those of ``moved`` computing and preparing input at the median pace of its other
    ``ranks`` (one the job does not list as slow at 1): the fix's what-if; no change where the job lists none of
    ``moved`` as slow."""
    listed = {entry["rank"]: entry for entry in slow_ranks}
    if not moved & listed.keys():
        return {}
    others = [r for r in ranks if r not in moved]
    pace = {
        part: float(np.median([listed[r][part] if r in listed else 1.0 for r in others])) if others else 1.0
        for part in ("compute", "preprocess")
    }
    kept = [entry for entry in slow_ranks if entry["rank"] not in moved]
    if pace != {"compute": 1.0, "preprocess": 1.0}:
        kept += [{"rank": r, **pace} for r in moved]
    return {"replicas.slow_ranks": sorted(kept, key=lambda entry: entry["rank"])}


def _evidence(scope: Any, rank: int) -> list[Evidence]:
    """The collectives the others waited longest for this rank at, on its own clock."""
    summary = scope.summaries[rank]
    timeline = summary.timeline
    found = []
    for call, held in scope.waits.worst.get(rank, [])[: scope.evidence_count]:
        start = float(timeline.start[call])
        name = f"{COLLECTIVES[timeline.type[call]]} ({timeline.group[call]}, step {int(timeline.step[call])})"
        found.append(
            Evidence(
                ts_us=start,
                at_us=start - summary.first_us,
                dur_us=held,
                track=f"rank {rank}",  # its file is the job's trace of that rank
                name=f"others wait at {name}",
            )
        )
    return found


DETECTOR = Detector(
    name="straggler",
    summary="the rank the others wait for in collectives (jobs of many ranks)",
    values={
        "rank": "the slowest rank",
        "held_ms_per_step": "time per step the other ranks wait for it in collectives (mean over them), ms",
        "last_share": "share of the shared collectives it arrives last at",
        "cause": "the part of its step furthest above the median rank's",
        "excess_ms_per_step": "how far above the median rank's that part is, ms per step",
        "why": "that part as the cause, or that no part the trace shows explains the wait, in a sentence",
        "rank_finding": "the rank's own most severe finding and its fix",
        "python_frames": "a host-only rank: the Python frames between its ops it spends most in beyond the others",
        "network_check": "how to check the network the job's collectives use (the GPUs' libraries', or gloo's on CPUs)",
        "node": "where the ranks ran on several hosts: whether the other ranks on its host share its cause, a sentence",
        "host": "the host it ran on, where its trace or its file's name says",
        "at_host": "that host, in brackets after the words that name it (empty where not known)",
        "host_ranks": "the ranks on its host, itself included, where the ranks ran on several hosts",
    },
    detect=detect,
    level="job",
)
