"""``perftool calibrate``: the trace against its fitted config, for people."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from perftool.calibrate import IDLE_ERROR_POINTS, STEP_ERROR, Calibration
from perftool.report.console import add_columns
from perftool.report.escape import shown
from perftool.units import duration


def render(calibration: Calibration, written: str | None) -> Group:
    config = calibration.config
    header = Text.assemble(
        ("perftool calibrate ", "bold"),
        shown(calibration.source, "bold magenta"),
        f"\nfitted: {config.device} · {config.profile.model} (constants overridden where the trace differs)",
        _replicas(calibration),
    )
    table = Table(title="The trace against the fitted config, emulated (steady state)", title_justify="left")
    add_columns(table, [("figure", "left"), ("trace", "right"), ("model", "right"), ("error", "right")])
    trace, model = calibration.step_time_us
    table.add_row("mean step", duration(trace), duration(model), f"{calibration.step_error:.1%}")
    for part, (traced, modelled) in calibration.idle.items():
        table.add_row(
            f"device idle: {part}", f"{traced:.1%}", f"{modelled:.1%}", f"{abs(modelled - traced) * 100:.1f} pts"
        )
    check = calibration.at_batch
    if check is not None:
        traced, modelled = check.step_time_us
        table.add_row(f"mean step at batch {check.batch}", duration(traced), duration(modelled), f"{check.error:.1%}")
    verdict = Text()
    for warning in calibration.warnings:
        verdict.append(f"warning: {warning}: predictions from this fit are rough\n", style="bold yellow")
    if not calibration.warnings:
        verdict.append(
            f"within {STEP_ERROR:.0%} of the step time and {IDLE_ERROR_POINTS:.0f} points of each idle part",
            style="bold green",
        )
    if check is not None:
        half = calibration.config.workload.half_efficiency_batch
        verdict.append(
            f"\n{check.note}" if check.note else f"\nefficiency rises with the batch: half of it at batch {half:,.1f}"
        )
    where = f"\nwritten to {written}: perftool emulate or tune it" if written else "\nwrite it with -o FILE.yaml"
    return Group(header, table, verdict, Text(where))


def _replicas(calibration: Calibration) -> str:
    """The gradient all-reduces the fit models, in a line (empty where it models none)."""
    config, replicas = calibration.config, calibration.config.replicas
    if replicas is None:
        return ""
    buckets = round(config.workload.weights / replicas.bucket)
    when = "during the backward pass" if replicas.overlap else "after the backward pass"
    return (
        f"\ncommunication: {replicas.count} ranks all-reduce {buckets} bucket{'s' if buckets != 1 else ''} of "
        f"{replicas.bucket / 1e6:,.1f} MB a step {when}, at {replicas.bus_bandwidth or 0:,.1f} GB/s bus bandwidth"
    )
