"""``perftool calibrate``: the trace against its fitted config, for people."""

from __future__ import annotations

import math

from rich.console import Group
from rich.table import Table
from rich.text import Text

from perftool.calibration import BATCH_ERROR, IDLE_ERROR_POINTS, LONG_RUN_ERROR, STEP_ERROR, Calibration
from perftool.report.console import add_columns
from perftool.report.escape import shown
from perftool.report.views import CalibrateView
from perftool.units import duration


def render(view: CalibrateView) -> Group:
    calibration, written = view.calibration, view.written
    config = calibration.config
    header = Text.assemble(
        ("perftool calibrate ", "bold"),
        shown(calibration.source, "bold magenta"),
        "\n",
        shown(f"fitted: {config.device} · {config.profile.model} (constants overridden where the trace differs)"),
        _replicas(calibration),
    )
    trace, model = calibration.step_time_us
    fitted = Text(f"fitted to: mean step {duration(trace)} (the model's {duration(model)})")
    table = Table(title="Checked on what the fit was not fitted to", title_justify="left")
    add_columns(table, [("figure", "left"), ("trace", "right"), ("model", "right"), ("error", "right"), ("", "left")])
    for check in calibration.checks:
        shown_as = (lambda v: f"{v:.1%}") if check.points else duration
        error = f"{check.error:.1f} pts" if check.points else f"{check.error:.1%}"
        table.add_row(
            check.figure, shown_as(check.trace), shown_as(check.model), error, "ok" if check.passed else "FAIL"
        )
    at = calibration.at_batch
    if at is not None:
        traced, modelled = at.step_time_us
        passed = "ok" if at.error <= BATCH_ERROR else "FAIL"
        table.add_row(f"mean step at batch {at.batch}", duration(traced), duration(modelled), f"{at.error:.1%}", passed)
    verdict = Text()
    for warning in calibration.warnings:
        verdict.append(f"failed: {warning}\n", style="bold red")
    if not calibration.warnings:
        verdict.append(
            f"passed: held-out steps within {STEP_ERROR:.0%} (or their spread), where the time goes within "
            f"{IDLE_ERROR_POINTS:.0f} points, a long run within {LONG_RUN_ERROR:.0%}",
            style="bold green",
        )
    if at is not None:
        half = calibration.config.workload.half_efficiency_batch
        rises = f"\nefficiency rises with the batch: half of it at batch {half:,.1f}"
        verdict.append(f"\n{at.note}" if at.note else rises)
    for note in calibration.notes:
        verdict.append(f"\nnote: {note}", style="yellow")
    where = f"\nwritten to {written}: perftool emulate or tune it" if written else "\nwrite it with -o FILE.yaml"
    return Group(header, fitted, table, verdict, Text(where))


def _replicas(calibration: Calibration) -> str:
    """The gradient all-reduces the fit models, in a line (empty where it models none)."""
    config, replicas = calibration.config, calibration.config.replicas
    if replicas is None:
        return ""
    buckets = math.ceil(config.workload.weights / replicas.bucket)
    when = "during the backward pass" if replicas.overlap else "after the backward pass"
    return (
        f"\ncommunication: {replicas.count} ranks all-reduce {config.workload.weights / 1e6:,.1f} MB a step in "
        f"{buckets} bucket{'s' if buckets != 1 else ''} of at most {replicas.bucket / 1e6:,.1f} MB {when}, at "
        f"{replicas.bus_bandwidth or 0:,.1f} GB/s bus bandwidth"
    )
