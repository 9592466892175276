"""Exposed communication: collectives running with no compute beside them, so the step waits for them.

The fix follows what synchronises the gradients and what the collectives look like. Collectives whose tasks spend half
their exposed time or more waiting for peers' signals, moving no data (HCCL's Notify_Wait), wait for a late rank, and
get the fix that finds it (the rank, where the tasks name the peer of each wait). All-reduces that all start after the
backward pass, with no DDP wrapper, get reduction during backward (emulated as the replicas' overlap); collectives
that take many times what the device's links need to move their data (a late rank, or a slow path between the devices)
get the way to tell which, whatever reduces the gradients; DDP with one bucket per step (nothing to overlap the
backward pass with) or many small buckets (latency-bound) gets a ``bucket_cap_mb`` computed from the all-reduce sizes
seen (emulated before it is printed, as the replicas' bucket); DDP moving more than the backward pass hides gets
gradient accumulation under ``no_sync`` and a compression hook; FSDP gets prefetching; a tensor- or pipeline-parallel
group gets that parallelism's own fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perftool.analysis.communication import BUS_FACTOR, OTHER, CollectiveStat, Communication, bus_bytes
from perftool.analysis.family import on_tpu
from perftool.analysis.idle import CAUSES
from perftool.analysis.peer_waits import PeerWaits
from perftool.common.ranking import largest
from perftool.dialects.vocabulary import DDP, FSDP
from perftool.rules.detectors.base import Detection, Detector, Scope, distinct_names

DEFAULT_BUCKET_MB = 25.0  # DDP's default bucket_cap_mb
BUCKETS_PER_STEP = 6  # enough buckets for the first all-reduces to overlap the rest of the backward pass
IDLE_DEVICE = 0.3  # a device idle this share of the window has little compute to hide collectives behind
NAMED_CAUSE = 0.05  # a cause of the idle time this share of the window is named in the fix
OUTLASTS = 0.5  # collectives this long against compute outlast the backward pass (about half of it) that hides them
HCCL_BUFFER_MB = 200.0  # HCCL_BUFFSIZE's default: larger messages go through the buffer in several rounds
LATE_PEER_SHARE = 0.5  # only waiting for peers this share of the exposed time: the collectives wait for a late rank
# Collectives this many times slower than the device's links would move their data wait, or take a slow path: no
# schedule of the calls explains it (a server's fabric that reaches a tenth of its figure, or one rank a tenth as fast)
SLOWER_THAN_LINKS = 10.0
# What a collective call costs beyond moving its data within a server: of the order nccl-tests and rccl-tests measure
# for the smallest all-reduce across eight devices (tens of µs), taken generously so that small messages are not
# thought slow
LINK_LATENCY_US = 50.0
AFTER_BACKWARD = 0.9  # several all-reduces a step this share exposed, with no DDP, start once backward has ended
# How XLA is told to overlap asynchronous collectives with compute: on a GPU its latency-hiding scheduler; on a TPU the
# asynchronous collective fusion libtpu's flags turn on, over several steps and beside the TensorCore's compute
XLA_OVERLAP = {
    "gpu": "on GPU: XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true",
    "tpu": "on TPU: LIBTPU_INIT_ARGS='--xla_tpu_enable_async_collective_fusion=true "
    "--xla_tpu_enable_async_collective_fusion_multiple_steps=true --xla_tpu_overlap_compute_collective_tc=true "
    "--xla_enable_async_all_gather=true'",
}
# a bandwidth is over the time one rank spends in the calls, its wait for the others held in it: said with it
_TIMED = " over this rank's time in them, waits for the other ranks included"


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    comms = scope.metrics.communication
    exposed = scope.metrics["communication.exposed_us"]
    if not exposed > 0 or not comms.collectives:
        return None
    top = max(comms.collectives, key=lambda c: c.exposed_us)
    sizes = _sizes_mb(comms, top.name)
    per_step = scope.per_step(top.count)
    group = comms.groups[0] if comms.groups else None
    links = _links(scope, comms, top.name)
    variant, bucket_mb = _variant(scope, comms, top.name, group.parallelism if group else "unknown", links)
    peers = comms.peers
    late = peers.late() if variant == "late_peer" else []
    hccl_buffer_mb = _hccl_buffer(scope, sizes)
    if variant is None and hccl_buffer_mb:
        variant = "hccl_buffer"
    values = {
        "exposed_ms_per_step": scope.per_step(exposed) / 1e3,
        "exposed_share": exposed / scope.metrics["communication.time_us"],
        "collective": top.name,
        "named": top.name if top.name != OTHER else f"collective tasks of no named type ({_untyped(comms, scope)})",
        "calls_per_step": per_step if not math.isnan(per_step) else float(top.count),
        "message_mb": float(np.median(sizes)) if sizes.size else math.nan,
        "sizes": _sizes_text(sizes, top),
        "group": group.name if group else "default",
        "bucket_cap_mb": bucket_mb,
        "hccl_buffsize_mb": hccl_buffer_mb,
        "device_idle": scope.metrics["device.idle_fraction"],
        "idle_causes": _idle_causes(scope) if variant == "idle_device" else "",
        "rank": "" if peers.rank is None else f"rank {peers.rank}",
        "late_peers": _ranks(late, peers),
        "peer_wait_ms_per_step": scope.per_step(max(peers.wait_us.values(), default=0.0)) / 1e3,
        "waiting_ms_per_step": scope.per_step(peers.waiting_us) / 1e3,
        "transfer_ms_per_step": scope.per_step(peers.transfer_us) / 1e3,
        "transfer_rate": _transfer_rate(scope.metrics["communication.bytes"], peers.transfer_us),
        "links_shortfall": links.shortfall,
        "links_busbw_gbps": links.busbw_gbps,
        "device": links.device,
        "xla_overlap": XLA_OVERLAP["tpu" if on_tpu(scope.trace) else "gpu"] if "jax" in scope.contexts else "",
    }
    exposed_calls = np.flatnonzero(comms.exposed_us > 0)  # in the window, not all hidden: what the cost is made of
    rows, cost = comms.calls.rows[exposed_calls], comms.exposed_us[exposed_calls]
    if variant in ("late_peer", "peer_wait"):  # the cause's evidence: the longest waits (for the late peers)
        rows = peers.waits_for(late)
        cost = scope.trace.dur[rows]
    changes = _changes(variant, bucket_mb)
    evidence = scope.events(rows[largest(cost, scope.evidence_count, ties=scope.trace.ts[rows])])
    return Detection(exposed, values, evidence, top.name, variant, changes, occurrences=exposed_calls.size)


@dataclass(frozen=True)
class Links:
    """How the most exposed collective's calls compare with what the device's links need to move their data."""

    shortfall: float = math.nan  # the calls' time over what the links need (NaN where unknown)
    busbw_gbps: float = math.nan  # the bus bandwidth the links reach at the calls' sizes, GB/s
    device: str = ""  # the device whose figure it is


def _links(scope: Scope, comms: Communication, collective: str) -> Links:
    """The time the device collectives of ``collective`` in the window took, against what the device's links need
    for their data: :data:`LINK_LATENCY_US` a call and their bus bytes at the all-reduce bus bandwidth a server of the
    device reaches (its spec's ``collective_gbps``). Unknown (NaN) where the device, its figure, the calls' sizes or
    their ranks are not known, the type has no bus bandwidth (sends, broadcasts), or the ranks outnumber the devices
    the trace lists beside its own (Kineto lists every device the process sees: its server's, unless it was given
    one), so that the ranks span servers whose network, not the server's links, sets the pace."""
    spec = scope.roofline.spec
    calls = comms.calls
    if spec is None or not spec.collective_gbps > 0 or calls.on != "device" or collective not in BUS_FACTOR:
        return Links()
    sized = (
        (calls.type == calls.names.index(collective))
        & (comms.in_window_us > 0)
        & ~np.isnan(calls.nbytes)
        & (calls.group_size > 1)
    )
    visible = len(scope.trace.metadata.get("deviceProperties") or ())  # the devices of this rank's server it saw
    if not sized.any() or 1 < visible < np.max(calls.group_size[sized]):  # ranks across servers: no server's links
        return Links()
    bus = float(bus_bytes(calls, sized).sum())
    needed_us = np.count_nonzero(sized) * LINK_LATENCY_US + bus / (spec.collective_gbps * 1e3)
    return Links(float(comms.in_window_us[sized].sum()) / needed_us, bus / needed_us / 1e3, spec.model)


def _transfer_rate(nbytes: float, transfer_us: float) -> str:
    """The collectives' messages over the time their tasks moved data, in words (their algorithm bandwidth while
    moving, to set beside the links'); "" where the sizes or the tasks are not recorded."""
    if math.isnan(nbytes) or not transfer_us > 0:
        return ""
    return f" ({nbytes / transfer_us / 1e3:.1f} GB/s algorithm bandwidth while they move)"


def _ranks(ranks: list[int], peers: PeerWaits) -> str:
    """Ranks in words: "rank 5", "ranks 4 and 7", "ranks 1, 4 and 7"; where the trace's waits name peers in several
    communicators, each numbering its ranks, the one they are of ("rank 5 of Group 1 Communication")."""
    if not ranks:
        return ""
    said = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks[:-1]))} and {ranks[-1]}"
    return f"{said} of {peers.communicator or 'their communicator'}" if peers.communicators > 1 else said


def _changes(variant: str | None, bucket_mb: float) -> dict[str, object]:
    """The emulator settings a variant's fix sets: the replicas' bucket or their reducing during backward."""
    if variant == "ddp_buckets":
        return {"replicas.bucket": int(bucket_mb * 1e6)}
    return {"replicas.overlap": True} if variant == "after_backward" else {}


def _idle_causes(scope: Scope) -> str:
    """What the device's idle time is, in words: its causes as shares of the window, the largest first, those of
    :data:`NAMED_CAUSE` or more (the largest whatever its share); "" where the idle time was not attributed."""
    idle = scope.idle
    if idle is None or not scope.window > 0:
        return ""
    shares = sorted(((idle.time(cause) / scope.window, cause) for cause in CAUSES), reverse=True)
    named = [
        (share, cause)
        for rank, (share, cause) in enumerate(shares)
        if share > 0 and (rank == 0 or share >= NAMED_CAUSE)
    ]
    return ", ".join(f"{CAUSES[cause]} {share:.0%}" for share, cause in named)


def _untyped(comms: Communication, scope: Scope) -> str:
    """The names of the collective events whose type no name says (HCCL's tasks on a stream: Notify_Wait, …)."""
    rows = comms.calls.rows[comms.calls.type == comms.calls.names.index(OTHER)]
    return distinct_names(scope.trace, rows, 3)


def _sizes_text(sizes_mb: np.ndarray, top: CollectiveStat) -> str:
    """The message size and bandwidth in words, or that the trace does not record them: bus bandwidth where the
    ranks are known, else the algorithm bandwidth (bus bandwidth scales it by the ranks). Either is over the time
    this rank spends in the calls, which holds its wait for the other ranks: one rank's trace cannot tell a slow
    link from a late peer, and says so."""
    if not sizes_mb.size or top.busbw_gbps is None or top.algbw_gbps is None:
        return "message sizes not recorded"
    median = f"median {float(np.median(sizes_mb)):.1f} MB"
    if top.group_size is None:
        return f"{median}, {top.algbw_gbps:.1f} GB/s algorithm bandwidth{_TIMED}, the ranks not recorded"
    return f"{median}, {top.busbw_gbps:.1f} GB/s bus bandwidth{_TIMED}"


def _sizes_mb(comms: Communication, collective: str) -> np.ndarray:
    """Message sizes of the calls of ``collective`` in the window, MB."""
    calls = comms.calls
    mine = (calls.type == calls.names.index(collective)) & (comms.in_window_us > 0) & ~np.isnan(calls.nbytes)
    return calls.nbytes[mine] / 1e6


def _variant(
    scope: Scope, comms: Communication, collective: str, parallelism: str, links: Links
) -> tuple[str | None, float]:
    """Which fix applies to the most exposed ``collective``, and the DDP bucket size it names (0 when none). A job
    that trains nothing (inference, serving) and wraps no model in DDP or FSDP reduces no gradients: its
    collectives are the model's parallelism, told in the job's terms (the rule's own fix, or the group's).
    Collectives that mostly wait for peers, moving no data, wait for a late rank, whatever they are; those that
    take :data:`SLOWER_THAN_LINKS` times what the device's links need (``links``), on a device with compute to hide
    them behind, wait or take a slow path, however the gradients are reduced."""
    peers = comms.peers
    if peers.waiting_us >= LATE_PEER_SHARE * scope.metrics["communication.exposed_us"]:
        return ("late_peer" if peers.late() else "peer_wait"), 0.0
    if parallelism in ("tensor", "pipeline"):
        return parallelism, 0.0
    if collective == "all_to_all":
        return "all_to_all", 0.0
    if scope.metrics["device.idle_fraction"] >= IDLE_DEVICE:  # NaN (no device) is not idle
        return "idle_device", 0.0
    if links.shortfall >= SLOWER_THAN_LINKS:  # NaN (unknown) is not
        return "slow_links", 0.0
    trace = scope.trace
    sharded, replicated = trace.name_matches(FSDP).any(), trace.name_matches(DDP).any()
    if "inference" in scope.contexts and not (sharded or replicated):  # a forward's collectives: the model's
        return None, 0.0  # parallelism, no gradient to reduce (the job's own fix)
    if sharded and collective in ("all_gather", "reduce_scatter"):
        return "fsdp", 0.0
    reduce_mb = _sizes_mb(comms, "all_reduce")
    if collective != "all_reduce" or reduce_mb.size == 0 or not scope.steady_steps:
        return None, 0.0
    per_step = reduce_mb.size / scope.steady_steps
    if not replicated:  # gradients reduced by hand (or Horovod): DDP's own reduction overlaps
        late = per_step > 2 and comms.values["communication.overlap_fraction"] <= 1 - AFTER_BACKWARD
        return ("after_backward" if late else None), 0.0
    gradients_mb = float(reduce_mb.sum()) / scope.steady_steps
    bucket_mb = float(np.median(reduce_mb))
    suggested = _round_mb(gradients_mb / BUCKETS_PER_STEP)
    if per_step <= 2 and suggested < bucket_mb:  # one bucket holds every gradient: it waits for the whole backward
        return "ddp_buckets", suggested
    if per_step > 2 * BUCKETS_PER_STEP and bucket_mb < DEFAULT_BUCKET_MB and suggested > bucket_mb:
        return "ddp_buckets", suggested
    if scope.metrics["communication.time_us"] >= OUTLASTS * scope.metrics["device.compute_fraction"] * scope.window:
        return "ddp_bandwidth", 0.0
    return None, 0.0


def _round_mb(value: float) -> float:
    """A bucket size a person would write: a whole number of MB, at least 1."""
    return float(max(1, round(value)))


def _hccl_buffer(scope: Scope, sizes_mb: np.ndarray) -> float:
    """The HCCL_BUFFSIZE (MB) that holds the largest message on an NPU, when it exceeds the default; else 0."""
    if scope.family != "npu" or sizes_mb.size == 0 or sizes_mb.max() <= HCCL_BUFFER_MB:
        return 0.0
    return float(2 ** math.ceil(math.log2(sizes_mb.max())))


DETECTOR = Detector(
    name="exposed_communication",
    summary="collectives running with no compute beside them",
    values={
        "exposed_ms_per_step": "communication time per steady step with no device compute beside it, ms",
        "exposed_share": "share of communication time exposed (1 - communication.overlap_fraction)",
        "collective": "the collective type with the most exposed time (all_reduce, all_gather, ..., other)",
        "named": "that collective in words (tasks of no named type listed by name)",
        "calls_per_step": "its calls per steady step",
        "message_mb": "its median message size, MB (NaN where the trace does not say)",
        "sizes": "its median message size and achieved bus bandwidth (over this rank's time in the calls) in "
        "words, where the trace records sizes",
        "group": "the process group with the most exposed communication",
        "bucket_cap_mb": "DDP bucket size giving about six all-reduces per step (0 when no bucket change is advised)",
        "hccl_buffsize_mb": "HCCL_BUFFSIZE holding the largest message on an NPU, above the 200 MB default (else 0)",
        "device_idle": "share of the window the device is idle (device.idle_fraction)",
        "idle_causes": "what that idle time is, where it leaves too little compute: its causes, shares of the window",
        "rank": "this trace's rank as its collectives' tasks name it (empty where they do not)",
        "late_peers": "the ranks the collectives wait for most, where they mostly wait and their tasks name the peer "
        "of each wait (HCCL's Notify_Wait from profiler level 1); empty otherwise",
        "peer_wait_ms_per_step": "the longest time per steady step the collectives waited for one peer rank, ms",
        "waiting_ms_per_step": "time per steady step the collectives' tasks waited for peers and moved no data, ms",
        "transfer_ms_per_step": "time per steady step the collectives' tasks moved or reduced data, ms",
        "transfer_rate": "the collectives' messages over that time in words (algorithm bandwidth while moving), where "
        "both are recorded; else empty",
        "links_shortfall": "how many times longer the collective's sized calls took than the device's links need to "
        "move their data (a call's latency and its bus bytes at the all-reduce bus bandwidth a server of the device "
        "reaches); NaN where the device's figure, the sizes or the ranks are unknown",
        "links_busbw_gbps": "the bus bandwidth those links reach at the calls' sizes, GB/s (NaN where unknown)",
        "device": "the device whose links those are (empty where unknown)",
        "xla_overlap": "for a JAX job, how XLA is told to overlap asynchronous collectives with compute on this device "
        "(a GPU's or a TPU's flags); empty otherwise",
    },
    detect=detect,
)
