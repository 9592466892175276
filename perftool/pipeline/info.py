"""What ``info`` reports of one trace, as its document (perftool.info/1): the trace's tracks and metadata, the
shared metrics, the steps, the top ops, the collectives and the roofline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from perftool.analysis.family import job_said
from perftool.analysis.metrics import Metrics
from perftool.common.results import InfoReport
from perftool.roofline.figures import Roofline
from perftool.trace.model import Trace


def info_report(trace: Trace, metrics: Metrics, roof: Roofline, folders_not_read: Sequence[str] = ()) -> InfoReport:
    """Everything ``info`` reports of one trace (NaN becomes null); ``folders_not_read``: those beside it in the
    directory named for it that hold traces of their own."""
    return InfoReport.model_validate({
        "source": trace.source,
        "dialect": trace.dialect,
        "device": metrics.device,
        "job_kind": job_said(trace),
        "step_clock": metrics.step_clock,
        "caveats": [c.text for c in metrics.caveats],
        "folders_not_read": list(folders_not_read),
        "display_time_unit": trace.display_time_unit,
        "metadata": trace.metadata,
        "tracks": [
            {
                "id": t.id,
                "pid": t.pid,
                "tid": t.tid,
                "process": t.process_name,
                "thread": t.thread_name,
                "labels": t.process_labels,
                "role": t.role.value,
                "events": metrics.track_events[t.id],
            }
            for t in sorted(trace.tracks, key=lambda t: t.shown_order)
        ],
        "metrics": {k: _number(v) for k, v in metrics.values.items()},
        "step_times_us": metrics.step_times_us,
        "step_numbers": metrics.step_numbers,
        "top_ops": {
            "scope": metrics.top_ops_scope,
            "ops": [
                {"name": op.name, "count": op.count, "total_us": op.total_us, "share": _number(op.share)}
                for op in metrics.top_ops
            ],
        },
        "collectives": [asdict(c) for c in metrics.collectives],
        "process_groups": [asdict(g) for g in metrics.groups],
        "categories": metrics.categories,
        "roofline": _roofline(roof),
    })  # fmt: skip


def _roofline(roof: Roofline) -> dict[str, Any]:
    """The roofline's figures as plain data."""
    spec = roof.spec
    return {
        "device": roof.device,
        "device_spec": spec.key if spec else None,
        "peak_tflops": dict(spec.peak_tflops) if spec else {},
        "memory_bandwidth_gbps": spec.memory_bandwidth_gbps if spec else None,
        "window_us": roof.window_us,
        "steps": roof.steps,
        "flops": roof.flops,
        "flops_per_step": roof.flops_per_step,
        "dtype": roof.dtype,
        "mfu": roof.mfu,
        "achieved_tflops": roof.achieved_tflops,
        "device_us": roof.device_us,
        "modelled_us": roof.modelled_us,
        "modelled_share": roof.modelled_share,
        "lost_us": roof.lost_us,
        "ops": [op.model_dump() for op in roof.ops],
        "families": [family.model_dump() for family in roof.families],
        "per_step": roof.per_step,  # the columns as they are: written a row a step, without a model each
        "regions": [region.model_dump() for region in roof.regions],
        "measured": [kernel_type.model_dump() for kernel_type in roof.measured],
        "notes": roof.notes,
    }


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value
