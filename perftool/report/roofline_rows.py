"""What ``perftool info`` shows of the roofline, as plain rows: the text, markdown and HTML formats each lay these
out their own way, so the three say the same things."""

from __future__ import annotations

from statistics import median

import numpy as np

from perftool.analysis.family import HOST_ONLY
from perftool.common.units import duration, flop_count, number, percent
from perftool.roofline.figures import Roofline

TITLE = "Roofline (steady state)"
OPS_LISTED = 10  # ops below the roofline in the tables for people; JSON lists every op
OP_HEADERS = ("op", "shapes", "dtype", "calls", "time", "TFLOP/s", "GB/s", "of roofline", "bound", "lost")
OP_NUMBERS = (3, 4, 5, 6, 7, 9)  # the columns of figures, aligned right
REGIONS_TITLE = "By annotation (the innermost record_function range around each op)"
SCOPES_TITLE = "By name scope (each XLA op's path less the op: jax.named_scope, a Flax module)"
REGIONS_LISTED = 10
REGION_HEADERS = ("annotation", "calls", "time", "TFLOP/s", "of peak", "lost")
REGION_NUMBERS = (1, 2, 3, 4, 5)
MEASURED_TITLE = "Pipes the NPU measured busy (msprof's counters, every kernel it lists)"
MEASURED_LISTED = 10
MEASURED_HEADERS = ("kernel type", "core", "kernels", "time", "busiest pipe", "busy", "limited by")
MEASURED_NUMBERS = (2, 3, 5)


def mfu_text(mfu: float | None, is_lower_bound: bool, short: bool = False) -> str:
    """An MFU as a percentage, "≥" where part of the device time is in ops without a model; "—" where unknown.
    ``short``: three significant digits and no space, for a narrow column."""
    if mfu is None:
        return "—"
    if short:
        return f"{'≥' if is_lower_bound else ''}{mfu * 100:.3g}%"
    return f"{'≥ ' if is_lower_bound else ''}{number(mfu * 100)}%"


def summary_rows(roof: Roofline, unit: str) -> list[tuple[str, str]]:
    """(what, figures): the device's peaks, MFU, the modelled share of device time and the time lost."""
    spec = roof.spec
    rows = []
    if spec is not None:
        peaks = " · ".join(f"{dtype} {number(tflops)}" for dtype, tflops in spec.peak_tflops.items())
        rows.append(
            ("device", f"{spec.model}: peak TFLOP/s {peaks} · memory {number(spec.memory_bandwidth_gbps)} GB/s"),
        )
    else:
        rows.append(
            ("device", roof.device if roof.device == HOST_ONLY else f"{roof.device}: not known to perftool (no peaks)")
        )
    share = roof.modelled_share
    partial = roof.is_lower_bound
    if roof.flops > 0:
        per_step = f"{flop_count(roof.flops_per_step)} a step · " if roof.flops_per_step else ""
        achieved = f"{number(roof.achieved_tflops)} TFLOP/s achieved over the window"
        rows.append(("model FLOPs", per_step + achieved))
    if roof.mfu is not None:
        rows.append(
            ("MFU", f"{mfu_text(roof.mfu, partial)} of the {roof.dtype} peak ({number(roof.peak_tflops)} TFLOP/s)"),
        )
    step_mfu = np.sort(roof.per_step.mfu[~np.isnan(roof.per_step.mfu)]).tolist()
    if len(step_mfu) > 1:
        low, middle, high = (mfu_text(v, partial) for v in (step_mfu[0], median(step_mfu), step_mfu[-1]))
        rows.append(("MFU per step", f"{low} min · {middle} median · {high} max over {len(step_mfu)} steps"))
    if share is not None and roof.device_us > 0:
        rows.append((
            "modelled",
            f"{percent(share)} of device compute time ({duration(roof.modelled_us, unit)} of "
            f"{duration(roof.device_us, unit)}) ran in ops with shapes and a model",
        ))  # fmt: skip
    if roof.lost_us is not None and roof.window_us > 0:
        rows.append((
            "below the roofline",
            f"{duration(roof.lost_us, unit)} of device time beyond the roofline "
            f"({percent(roof.lost_us / roof.window_us)} of the window)",
        ))  # fmt: skip
    return rows


def op_rows(roof: Roofline, unit: str, listed: int = OPS_LISTED) -> list[tuple[str, ...]]:
    """Per op, shapes and dtype, the most time lost first: the cells of :data:`OP_HEADERS`."""
    return [
        (
            op.name,
            op.shapes or "—",
            op.dtype,
            f"{op.calls:,}",
            duration(op.device_us, unit),
            number(op.achieved_tflops),
            number(op.achieved_gbps),
            percent(op.of_roofline) if op.of_roofline is not None else "—",
            op.bound or "—",
            duration(op.lost_us, unit) if op.lost_us is not None else "—",
        )
        for op in roof.ops[:listed]
    ]


def regions_heading(roof: Roofline) -> tuple[str, tuple[str, ...]]:
    """The title and headers of the table of regions: annotations, or an XLA capture's name scopes."""
    if roof.calls is not None and roof.calls.program is not None:
        return SCOPES_TITLE, ("name scope", *REGION_HEADERS[1:])
    return REGIONS_TITLE, REGION_HEADERS


def region_rows(roof: Roofline, unit: str, listed: int = REGIONS_LISTED) -> list[tuple[str, ...]]:
    """Per annotation, the most device time first: the cells of :data:`REGION_HEADERS`."""
    return [
        (
            region.name,
            f"{region.calls:,}",
            duration(region.device_us, unit),
            number(region.achieved_tflops) if region.achieved_tflops is not None else "—",
            percent(region.share_of_peak) if region.share_of_peak is not None else "—",
            duration(region.lost_us, unit) if region.lost_us is not None else "—",
        )
        for region in roof.regions[:listed]
    ]


def measured_rows(roof: Roofline, unit: str, listed: int = MEASURED_LISTED) -> list[tuple[str, ...]]:
    """Per NPU kernel type its counters measured, the most device time first: the cells of
    :data:`MEASURED_HEADERS`."""
    return [
        (
            kernel_type.type,
            kernel_type.core,
            f"{kernel_type.kernels:,}",
            duration(kernel_type.device_us, unit),
            kernel_type.busiest,
            percent(kernel_type.pipes[kernel_type.busiest]),
            kernel_type.bound,
        )
        for kernel_type in roof.measured[:listed]
    ]
