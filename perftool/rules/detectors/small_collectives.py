"""Many small collectives: each call pays the collective's fixed latency and a launch, whatever it moves.

Thousands of all-reduces of a few kilobytes per step (a gradient reduced parameter by parameter, a
metric reduced every iteration) run far below the links' bandwidth. Counted: the exposed time of the
calls below the size limit, when there are enough of them per step.
"""

from __future__ import annotations

import math

import numpy as np

from perftool.analysis.family import on_tpu
from perftool.common.names import readable
from perftool.dialects.vocabulary import ENGINE_ALLREDUCE
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting, distinct_names

ENGINE_SHARE = 0.5  # low-latency all-reduce kernels holding this share of the time lost: the fast path is in use
# the thresholds below which XLA's combiners merge collectives, where a flag sets them (a GPU's; a TPU's are libtpu's)
XLA_COMBINE = (
    " (on GPU, raise XLA_FLAGS=--xla_gpu_all_reduce_combine_threshold_bytes and the all-gather and reduce-scatter"
    " thresholds)"
)


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    comms = scope.metrics.communication
    calls = comms.calls
    if calls.rows.size == 0 or scope.steady_steps == 0:
        return None
    small = (comms.in_window_us > 0) & _small(calls.nbytes, comms.in_window_us, params)
    per_step = np.count_nonzero(small) / scope.steady_steps
    lost = float(comms.exposed_us[small].sum())
    if per_step < params["min_per_step"] or lost <= 0:
        return None
    sizes = calls.nbytes[small & ~np.isnan(calls.nbytes)]
    kinds = np.bincount(calls.type[small], minlength=len(calls.names))
    trace, rows = scope.trace, calls.rows[small]
    engine = trace.name_matches(ENGINE_ALLREDUCE, rows)
    values = {
        "calls_per_step": per_step,
        "collective": calls.names[int(np.argmax(kinds))],
        "median_kb": float(np.median(sizes)) / 1e3 if sizes.size else math.nan,
        "sizes": _sizes_text(sizes, int(np.count_nonzero(small))),
        "median_us": float(np.median(comms.in_window_us[small])),
        "xla_combine": XLA_COMBINE if "jax" in scope.contexts and not on_tpu(trace) else "",
        "engine_kernels": distinct_names(trace, rows[engine], 2, readable) if engine.any() else "none",
    }
    in_engine = float(comms.exposed_us[small][engine].sum()) >= ENGINE_SHARE * lost  # its own kernels already
    return Detection(
        lost, values, scope.events(rows), key=str(values["collective"]), occurrences=int(np.count_nonzero(small)),
        variant="engine_kernels" if in_engine else None,
    )  # fmt: skip


def _sizes_text(sizes: np.ndarray, calls: int) -> str:
    """The small calls' median size in words, and of how many of them where the trace sizes only some."""
    if not sizes.size:
        return "sizes not recorded"
    median = f"median {float(np.median(sizes)) / 1e3:.1f} kB"
    return median if sizes.size == calls else f"{median} where recorded ({sizes.size:,} of {calls:,})"


def _small(nbytes: np.ndarray, durations: np.ndarray, params: dict[str, float]) -> np.ndarray:
    """Calls below the size limit; a call of unknown size counts when it is as short as a latency-bound one."""
    return np.where(np.isnan(nbytes), durations <= params["max_us"], nbytes <= params["max_kb"] * 1e3)


DETECTOR = Detector(
    name="small_collectives",
    summary="many collectives per step, each too small to use the links' bandwidth",
    values={
        "calls_per_step": "small collectives per steady step",
        "collective": "the most frequent of them (all_reduce, ...)",
        "median_kb": "their median message size, kB (NaN where the trace does not say)",
        "sizes": "their median size in words, and of how many where the trace sizes only some: 'median 4.0 kB', "
        "'median 402.2 kB where recorded (1 of 74)', 'sizes not recorded'",
        "median_us": "their median duration, µs",
        "xla_combine": "for a JAX job, the flag that raises XLA's combine thresholds, in parentheses, where one does "
        "(a GPU's); empty on a TPU and for other jobs",
        "engine_kernels": "the low-latency all-reduce kernels among them (symmetric-memory multimem, one- and "
        "two-shot, a serving engine's custom all-reduce), most time first; none",
    },
    detect=detect,
    settings={
        "min_per_step": Setting(64, "small collectives per step from which they are a finding", int),
        "max_kb": Setting(1024, "a collective moving at most this many kB is small"),
        "max_us": Setting(50, "a collective of unknown size lasting at most this many µs is small"),
    },
)
