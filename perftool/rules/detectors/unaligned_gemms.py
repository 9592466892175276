"""GEMMs whose sizes are not multiples of the tensor cores' tile: the last tile of each row and column is
partly empty, and below a multiple of 8 elements cuBLAS may not use the tensor cores at all. An attention's own
GEMMs, computed op by op, are left out: their sizes are the sequence's, and fusing them is the fix.

Measured against the trace itself: the time lost is what the unaligned GEMMs take beyond what they would at the
share of their roofline that the trace's aligned GEMMs of the same dtype reach. Without aligned GEMMs to compare
with, nothing shows that alignment is the cause, and nothing is reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perftool.dialects.op_families import Work
from perftool.roofline.calls import Calls
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting, distinct_names, names_key
from perftool.rules.detectors.unfused_attention import attention_chains

TENSOR_CORE_DTYPES = ("fp16", "bf16", "fp8", "tf32")


def _sizes(work: Work) -> tuple[int, int]:
    """The GEMM's output columns and inner size: the model's hidden sizes, which the user chooses."""
    assert work.mnk is not None
    return work.mnk[1], work.mnk[2]


def _in_attention(calls: Calls, track: np.ndarray) -> np.ndarray:
    """Per call: a GEMM of an attention computed op by op (scores, then scores times values), whose sizes are the
    sequence's and a head's, not widths the user pads; a fused kernel is its fix (PT017's)."""
    found = np.zeros(calls.rows.size, dtype=bool)
    for first, _, second in attention_chains(calls, track, min_keys=1):  # over a few keys too (frames, heads)
        found[[first, second]] = True
    return found


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    roof = scope.roofline
    calls = roof.calls
    if calls is None or roof.spec is None:
        return None
    multiple = int(params["multiple"])
    at_roof = roof.call_roofline_us()
    tensor_core = calls.matching(lambda w: w.dtype in TENSOR_CORE_DTYPES) | calls.tf32
    counted = (
        calls.matching(lambda w: w.family == "gemm" and w.mnk is not None)
        & tensor_core
        & (calls.device_us > 0)
        & (at_roof >= params["min_roofline_us"])  # small ones are another rule's, and NaN has no roofline
        & ~_in_attention(calls, scope.trace.track[calls.rows])
    )
    unaligned = calls.matching(lambda w: w.mnk is not None and any(size % multiple for size in _sizes(w)))
    lost = 0.0
    chosen: list[np.ndarray] = []
    reference: list[float] = []
    dtype_of = calls.each(lambda kind: kind.work.dtype if kind.work else "", object)
    for dtype in sorted(set(dtype_of[counted].tolist())):
        of_dtype = counted & (dtype_of == dtype)
        aligned, off = np.flatnonzero(of_dtype & ~unaligned), np.flatnonzero(of_dtype & unaligned)
        if not aligned.size or not off.size:
            continue
        share = float(at_roof[aligned].sum() / calls.device_us[aligned].sum())  # the aligned ones' share of roofline
        expected = at_roof[off] / share
        lost += float(np.maximum(calls.device_us[off] - expected, 0).sum())
        chosen.append(off)
        reference.append(share)
    if lost <= 0:
        return None
    off = np.concatenate(chosen)
    rows = calls.rows[off]
    worst = int(off[np.argmax(calls.device_us[off])])
    work = calls.work_of(worst)
    assert work.mnk is not None
    m, n, k = work.mnk
    values: dict[str, Any] = {
        "names": distinct_names(scope.trace, rows, 3, time=calls.device_us[off]),
        "shape": f"M={m}, N={n}, K={k}",
        "multiple": multiple,
        "of_roofline": float(at_roof[off].sum() / calls.device_us[off].sum()),
        "aligned_of_roofline": max(reference),
        "gemm_ms_per_step": scope.per_step(float(calls.device_us[off].sum())) / 1e3,
    }
    return Detection(lost, values, scope.events(rows), key=names_key(scope.trace, rows), occurrences=rows.size)


DETECTOR = Detector(
    name="unaligned_gemms",
    summary="GEMMs whose hidden sizes are not multiples of the tensor cores' tile, slower than the aligned ones",
    values={
        "names": "the unaligned GEMM ops, most device time first",
        "shape": "the sizes of the one taking most device time",
        "multiple": "the multiple the sizes should be",
        "of_roofline": "the unaligned GEMMs' roofline time over their device time",
        "aligned_of_roofline": "the same for the trace's aligned GEMMs of their dtype",
        "gemm_ms_per_step": "the unaligned GEMMs' device time per steady step, ms",
    },
    detect=detect,
    sets_knobs=False,  # the emulator models no dtype, shape or kernel fusion
    reads_roofline=True,
    settings={
        "multiple": Setting(64, "the columns (N) and inner size (K) should be multiples of this", int),
        "min_roofline_us": Setting(5.0, "leave out GEMMs that would take less than this at the roofline, µs"),
    },
)
