"""``perftool calibrate``: the trace against its fitted config, for people."""

from __future__ import annotations

import math

from rich.console import Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from perftool.common.units import duration, plural
from perftool.report.console import add_columns
from perftool.report.escape import shown
from perftool.report.views import CalibrateView
from perftool.tune.calibration import (
    BATCH_ERROR,
    FIT_STEP_ERROR,
    IDLE_ERROR_POINTS,
    SPREAD_POINTS,
    STEP_ERROR,
    Calibration,
    Check,
)


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
    fitted = Text(f"fitted to: mean step {duration(trace)} (the model's expected step {duration(model)})")
    took = _table("Fitted: what the fit took from the trace (agreeing shows it took them, not that it predicts)",
                  calibration.fitted)  # fmt: skip
    table = _table("Checked on what the fit did not use", calibration.checks)
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
            f"passed: held-out steps within {STEP_ERROR:.0%} and {IDLE_ERROR_POINTS:.0f} points of busy (or what the "
            f"steps' spread allows: the limit column), the spread within {SPREAD_POINTS:.0f} points; the fit "
            f"reproduces its trace's step within {FIT_STEP_ERROR:.0%} and where its time goes within "
            f"{IDLE_ERROR_POINTS:.0f} points",
            style="bold green",
        )
    fit_error = (
        "its held-out error"
        if calibration.held_out_error is not None
        else f"with no step held out, the {STEP_ERROR:.0%} error the check allows, an assumption"
    )
    verdict.append(
        f"\npredictions from this fit are given ± {calibration.interval:.1%} (80%: {fit_error}; and the spread of "
        f"the mean of {plural(calibration.steady_steps, 'step')} like the trace's)"
    )
    if at is not None:
        half = calibration.config.workload.half_efficiency_batch
        rises = f"\nefficiency rises with the batch: half of it at batch {half:,.1f}"
        verdict.append(f"\n{at.note}" if at.note else rises)
    for note in calibration.notes:
        verdict.append(f"\nnote: {note}", style="yellow")
    where = f"\nwritten to {written}: perftool emulate or tune it" if written else "\nwrite it with -o FILE.yaml"
    return Group(header, fitted, took, table, verdict, Text(where))


def _table(title: str, checks: list[Check]) -> Table:
    """Figures of the trace and the model's, each with its error and whether it is within its limit."""
    table = Table(title=title, title_justify="left")
    columns: list[tuple[str, JustifyMethod]] = [("figure", "left"), ("trace", "right"), ("model", "right")]
    columns += [("error", "right"), ("limit", "right"), ("", "left")]
    add_columns(table, columns)
    for check in checks:
        shown_as = (lambda v: f"{v:.1%}") if check.points else duration
        error, limit = (f"{v:.1f} pts" if check.points else f"{v:.1%}" for v in (check.error, check.limit))
        passed = "ok" if check.passed else "FAIL"
        table.add_row(check.figure, shown_as(check.trace), shown_as(check.model), error, limit, passed)
    return table


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
