"""Attention computed op by op: a GEMM writes the score matrix, a softmax reads and writes it, and another GEMM
reads it again, where one fused kernel (FlashAttention, memory-efficient attention) keeps the scores on chip.

Found on each host thread as a softmax over a [..., queries, keys] score matrix with a GEMM just before it that
wrote a tensor of that size and a GEMM just after it. The time lost is the forward chain's device time beyond a
fused kernel's roofline time for the same FLOPs without the score matrix's traffic: an upper bound, the backward
pass's share left out.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perftool.roofline.calls import Calls
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting

REACH = 3  # the GEMMs sit at most this many modelled calls from the softmax (scaling, masking and dropout between)
MIN_KEYS = 32  # a softmax over at least this many keys is attention's (the rule's min_keys by default)


def attention_chains(calls: Calls, track: np.ndarray, min_keys: int = MIN_KEYS) -> list[tuple[int, int, int]]:
    """(first GEMM, softmax, second GEMM) call indices of each unfused attention; ``track``: each call's thread.
    The first is the nearest GEMM before the softmax that wrote a tensor of the scores' size, the second the nearest
    GEMM after it, each within :data:`REACH` calls on the same thread: every softmax at once, one offset at a time."""
    softmax = np.flatnonzero(
        calls.matching(lambda w: w.family == "softmax" and len(w.out_shape) >= 3 and w.out_shape[-1] >= min_keys)
        & (calls.device_us > 0)
        & calls.each(lambda kind: "backward" not in kind.name, bool)  # forward only
    )
    gemm = calls.matching(lambda w: w.family == "gemm")
    size = calls.each(lambda kind: math.prod(kind.work.out_shape) if kind.work else -1, np.int64)
    count = gemm.size
    before, after = np.full(softmax.size, -1), np.full(softmax.size, -1)
    for offset in range(REACH, 0, -1):  # the nearest last, so that it wins
        for found, at in ((before, softmax - offset), (after, softmax + offset)):
            inside = (at >= 0) & (at < count)
            j = np.where(inside, at, 0)
            hit = inside & gemm[j] & (track[j] == track[softmax])
            if found is before:  # the scores' GEMM wrote a tensor of their size
                hit &= size[j] == size[softmax]
            found[hit] = at[hit]
    chained = (before >= 0) & (after >= 0)
    return list(zip(before[chained].tolist(), softmax[chained].tolist(), after[chained].tolist()))


def program_attentions(calls: Calls, track: np.ndarray, min_keys: int = MIN_KEYS) -> list[tuple[int, int, int, float]]:
    """(first GEMM, softmax, second GEMM, the chain's device time) call indices of each attention XLA programs write
    out (:func:`perftool.dialects.hlo.attention_roles`): of one attention of one program on one stream, the nearest
    scores' GEMM before its softmax and values' GEMM after it, the chain's time that of the attention's kernels from
    the one to the other."""
    assert calls.program is not None, "XLA's calls name their program"
    members = np.flatnonzero(calls.each(lambda kind: kind.attention is not None, bool))
    role = calls.each(lambda kind: kind.attention[1] if kind.attention else "", object)[members]
    number = calls.each(lambda kind: kind.attention[0] if kind.attention else -1, np.int64)[members]
    groups: dict[tuple[int, int, int], list[int]] = {}
    for position, key in enumerate(zip(calls.program[members].tolist(), track[members].tolist(), number.tolist())):
        groups.setdefault(key, []).append(position)
    found = []
    for positions in groups.values():
        at = np.array(positions)
        firsts, seconds = at[role[at] == "first"], at[role[at] == "second"]
        elapsed = np.concatenate(([0.0], np.cumsum(calls.device_us[members[at]])))
        for softmax in at[role[at] == "softmax"].tolist():
            before, after = np.searchsorted(firsts, softmax) - 1, np.searchsorted(seconds, softmax)
            scores = calls.work_of(int(members[softmax])).out_shape
            if before < 0 or after >= seconds.size or not scores or scores[-1] < min_keys:
                continue
            first, second = int(firsts[before]), int(seconds[after])
            chain_us = elapsed[np.searchsorted(at, second) + 1] - elapsed[np.searchsorted(at, first)]
            found.append((int(members[first]), int(members[softmax]), int(members[second]), float(chain_us)))
    return found


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    roof = scope.roofline
    calls, spec = roof.calls, roof.spec
    if calls is None or spec is None:
        return None
    track = scope.trace.track[calls.rows]
    if calls.program is not None:
        chains = program_attentions(calls, track, int(params["min_keys"]))
    else:
        chains = [(first, softmax, second, float(calls.device_us[first : second + 1].sum()))
                  for first, softmax, second in attention_chains(calls, track, int(params["min_keys"]))]  # fmt: skip
    lost = 0.0
    counted = []
    for first, softmax, second, chain_us in chains:
        qk, pv = calls.work_of(first), calls.work_of(second)
        peak = spec.peak_flops(qk.dtype)
        if not peak:
            continue  # no peak for its dtype: no roofline to measure against
        moved = qk.bytes + pv.bytes - 2 * qk.out_bytes  # Q, K, V and the output: the scores never leave the chip
        fused_us = max((qk.flops + pv.flops) / peak, moved / spec.memory_bandwidth) * 1e6
        lost += max(chain_us - fused_us, 0.0)
        counted.append((first, softmax, second, chain_us))
    if lost <= 0:
        return None
    rows = calls.rows[[softmax for _, softmax, _, _ in counted]]
    values: dict[str, Any] = {
        "per_step": scope.per_step(len(counted)),
        "scores": "x".join(map(str, calls.work_of(counted[0][1]).out_shape)),
        "chain_ms_per_step": scope.per_step(sum(chain_us for *_, chain_us in counted)) / 1e3,
    }
    shapes = sorted({"x".join(map(str, calls.work_of(softmax).out_shape)) for _, softmax, _, _ in counted})
    return Detection(lost, values, scope.events(rows), key=" ".join(shapes), occurrences=len(counted))


DETECTOR = Detector(
    name="unfused_attention",
    summary="attention computed as GEMM, softmax, GEMM instead of one fused kernel",
    values={
        "per_step": "unfused attentions per steady step",
        "scores": "the shape of the first one's score matrix",
        "chain_ms_per_step": "device time of the GEMM-softmax-GEMM chains per steady step, ms",
    },
    detect=detect,
    sets_knobs=False,  # the emulator models no dtype, shape or kernel fusion
    reads_roofline=True,
    settings={"min_keys": Setting(MIN_KEYS, "a softmax over at least this many keys counts as attention's", int)},
)
