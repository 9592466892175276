"""CPU fallbacks: ops the device cannot run (for their dtype), so each call goes to the host and back.

Recognised by the text the vendors' tools write: Gaudi's ``CPU fallback <op> : self=HPU<dtype>Type``,
PyTorch-style ``aten::<op> (CPU fallback, <dtype>)``, Ascend AI CPU ops. The time lost is the device
idle while the op and its copies there and back run.
"""

from __future__ import annotations

import re

import numpy as np

from perftool.dialects.vocabulary import CPU_FALLBACK
from perftool.rules.detectors.base import Detection, Detector, Scope

_OP = re.compile(r"CPU fallback\s+(?P<op>[\w:.]+)|^(?:aten::)?(?P<aten>[\w.]+)\s*\(CPU fallback")
_DTYPE = re.compile(r"self=HPU(?P<hpu>\w+?)Type|CPU fallback,\s*(?P<plain>\w+)")


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    rows = np.flatnonzero(trace.name_matches(CPU_FALLBACK) & scope.in_window)
    if rows.size == 0:
        return None
    idle = scope.idle
    lost = idle.time("cpu_fallback") if idle is not None else float(np.sum(trace.dur[rows]))
    names = sorted({trace.names[i] for i in trace.name[rows].tolist()})
    ops = sorted({_op(name) for name in names})
    dtypes = sorted({d for d in (_dtype(name) for name in names) if d})
    values = {
        "ops": ", ".join(ops),
        "op": ops[0] if len(ops) == 1 else "these ops",
        "dtype": ", ".join(dtypes) or "an unsupported dtype",
        "calls_per_step": scope.per_step(rows.size),
        "host_ms_per_step": scope.per_step(float(np.sum(trace.dur[rows]))) / 1e3,
        "lost_ms_per_step": scope.per_step(lost) / 1e3,
    }
    return Detection(
        lost, values, scope.events(rows), key=",".join(ops), changes={"cpu_fallback_ops": []}, occurrences=rows.size
    )


def _op(name: str) -> str:
    match = _OP.search(name)
    return (match.group("op") or match.group("aten")) if match else name


def _dtype(name: str) -> str:
    match = _DTYPE.search(name)
    return (match.group("hpu") or match.group("plain")) if match else ""


DETECTOR = Detector(
    name="cpu_fallback",
    summary="ops that fall back to the host CPU, with their copies there and back",
    values={
        "ops": "the ops that fell back",
        "op": "the op, or 'these ops' when several did",
        "dtype": "the dtypes they ran with",
        "calls_per_step": "fallback calls per steady step",
        "host_ms_per_step": "host time in the fallback ops per step, ms",
        "lost_ms_per_step": "device idle per step while they and their copies run, ms",
    },
    detect=detect,
)
