"""``perftool tune``: the sweep's answer for people — top configurations, baseline, why, sensitivity."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from perftool.common.errors import one_line
from perftool.common.units import duration, percent, plural
from perftool.emulator.config import TUNABLES, setting
from perftool.report.console import add_columns
from perftool.report.views import TuneView
from perftool.tune.explain import shown
from perftool.tune.result import TuneResult

COLUMNS = {  # short knob names for the table's headers
    "loop_size": "loop",
    "prefetch_depth": "prefetch",
    "io_tiles": "IO tiles",
    "batch_size": "batch",
    "gradient_accumulation": "accum",
    "transfer_dtype": "dtype",
    "offload_optimizer": "offload",
    "last_batch": "last",
    "device_graphs": "graphs",
    "layout_mismatch": "layout",
    "pin_memory": "pinned",
    "pin_readback": "pinned out",
    "workload.input_workers": "workers",
    "replicas.bucket": "bucket",
    "replicas.overlap": "overlap",
}


def render(view: TuneView) -> Group:
    """Header, top configurations, baseline and best, one line of why per knob, sensitivity."""
    result = view.result
    return Group(
        _header(result, view.source),
        *_failed_calibration(result),
        _top_table(result, view.top),
        _verdict(result),
        _why(result),
        _sensitivity(result),
    )


def _failed_calibration(result: TuneResult) -> list[Text]:
    """Before any result: the config is a fit that failed its checks, so what follows predicts from a model not shown
    to hold."""
    if not result.failed_calibration:
        return []
    reasons = "; ".join(result.failed_calibration)
    return [
        Text(
            f"WARNING: this config's calibration failed its checks ({reasons}): the figures below predict from a fit "
            "not shown to hold; calibrate again (a longer capture, the batch size given) before acting on them",
            style="bold red",
        )
    ]


def objective_label(result: TuneResult) -> str:
    higher = result.objective.higher_is_better
    return f"throughput ({result.rate_unit}, higher is better)" if higher else "mean step time"


def _header(result: TuneResult, source: str) -> Text:
    config = result.config
    pruned = result.rows.causes(~result.rows.simulated)
    causes = ", ".join(f"{n:,} {cause}" for cause, n in pruned.most_common())
    pruned_text = f", {result.pruned:,} pruned before simulation ({causes})" if pruned else ""
    budget = f" of a budget of {result.budget:,}" if result.budget else ""
    share = result.evaluations / result.space.size
    return Text.assemble(
        ("perftool tune ", "bold"),
        (one_line(source), "bold magenta"),
        "\n"
        + one_line(f"{config.device} · {config.profile.model} · {config.workload.name}")
        + f" · objective: {objective_label(result)}",
        f"\nspace: {result.space.size:,} configurations over {len(result.space.names)} knobs · "
        f"strategy {result.strategy}: {result.evaluations:,} evaluated{budget} ({share:.1%} of the space)"
        f"{pruned_text} · {result.seconds:.2f} s",
        *_held(result),
    )


def _held(result: TuneResult) -> list[str]:
    """The knobs kept as written because their other values change the training."""
    held = result.config.tune.held
    if not held:
        return []
    knobs = ", ".join(f"{TUNABLES[name].label} {shown(setting(result.config, name))}" for name in held)
    return [f"\nkept as written, as other values change the training: {knobs} (tune.change_training: true sweeps them)"]


def _top_table(result: TuneResult, top: int) -> Table:
    """One row per configuration with figures of its own (those with the same figures counted beside it); every
    column keeps its full width (none is cut to "b…" in an 80-column log). A fit's memory is not modelled from its
    trace, so a calibrated config's column is left out."""
    ranked = result.ranked().tolist()
    distinct = result.distinct(top)
    alike = dict(distinct) | ({} if result.best in dict(distinct) else {result.best: 0})
    listed = list(alike)
    figures = result.rows.figures
    memory = result.config.calibration is None
    rows = [
        [
            ("★ " if row == result.best else "") + str(ranked.index(row) + 1),
            *(shown(v) for v in result.knobs(row).values()),
            f"{figures['throughput'][row]:,.1f}",
            duration(figures["step_time_mean_us"][row]),
            *([f"{figures['memory_bytes'][row] / 1e9:,.2f} GB"] if memory else []),
            f"+{alike[row]:,} alike" if alike[row] else "",
        ]
        for row in listed
    ]  # device busy is in --format json and in emulate's summary: an 80-column log has room for these
    headers = ["#", *(COLUMNS[name] for name in result.space.names), result.rate_unit, "mean step"]
    headers += ["memory"] * memory + [""]
    table = Table(
        title=f"Top {plural(len(distinct), 'configuration')} (★ recommended)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=0,
        pad_edge=False,
    )
    for i, header in enumerate(headers):
        numeric = i == 0 or i > len(result.space.names)
        width = max(len(header), *(len(row[i]) for row in rows))
        table.add_column(header, justify="right" if numeric else "left", no_wrap=True, min_width=width)
    for row, cells in zip(listed, rows):
        table.add_row(*cells, style="bold green" if row == result.best else None)
    return table


def _verdict(result: TuneResult) -> Text:
    baseline, figures = result.baseline, result.rows.figures
    written = ", ".join(f"{TUNABLES[name].label} {shown(setting(result.config, name))}" for name in result.space.names)
    best = ", ".join(f"{TUNABLES[name].label} {shown(value)}" for name, value in result.knobs(result.best).items())
    if baseline.simulated[0]:
        was = (
            f"{baseline.figures['throughput'][0]:,.1f} {result.rate_unit}, mean step "
            f"{duration(baseline.figures['step_time_mean_us'][0])}"
            + (f" ({baseline.reason[0]})" if baseline.reason[0] else "")
        )
        gain = f"×{result.speedup():.2f} {'throughput' if result.objective.higher_is_better else 'shorter steps'}"
    else:
        was, gain = f"cannot run: {baseline.reason[0]}", "the baseline cannot run"
    return Text.assemble(
        ("\nBaseline (as written): ", "bold"),
        f"{written} → {was}",
        ("\nBest: ", "bold green"),
        f"{best} → {figures['throughput'][result.best]:,.1f} {result.rate_unit}, "
        f"mean step {duration(figures['step_time_mean_us'][result.best])}: ",
        (gain, "bold green"),
        *((f"\nThis changes the training: {change}", "bold yellow") for change in result.training_changes(result.best)),
    )


def _why(result: TuneResult) -> Group:
    """One bullet per knob; a long one wraps under its own text, not at the margin."""
    bullets = Table.grid(padding=(0, 1))
    bullets.add_column(no_wrap=True)
    bullets.add_column()
    for line in result.explanation.values():
        bullets.add_row(" •", line)
    return Group(Text("\nWhy", style="bold"), bullets, Text(""))


def _sensitivity(result: TuneResult) -> Table:
    unit = result.rate_unit if result.objective.higher_is_better else "step time"
    table = Table(title="Sensitivity (each knob moved with the others at the best)", title_justify="left")
    add_columns(table, [("knob", "left"), ("best", "left"), (f"along the knob ({unit})", "left"), ("spread", "right")])
    for line in result.sensitivity:
        worst, top = line.extremes()
        along = (
            f"{_objective(result, worst.objective)} at {shown(worst.value)} → "
            f"{_objective(result, top.objective)} at {shown(top.value)}"
        )
        unseen = sum(p.row is None for p in line.points)
        ruled_out = sum(p.row is not None and bool(p.reason) for p in line.points)
        notes = [f"{unseen:,} not looked at"] * bool(unseen) + [f"{ruled_out:,} infeasible"] * bool(ruled_out)
        if notes:
            along += f" ({', '.join(notes)})"
        table.add_row(TUNABLES[line.knob].label, shown(line.best_value), along, percent(line.spread))
    return table


def _objective(result: TuneResult, value: float) -> str:
    return f"{value:,.1f}" if result.objective.higher_is_better else duration(value)
