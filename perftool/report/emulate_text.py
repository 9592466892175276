"""``perftool emulate``: what the emulated run predicts, for people."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from perftool.common.units import duration, percent
from perftool.emulator.full_run import BREAKDOWN
from perftool.report.console import add_columns
from perftool.report.escape import shown
from perftool.report.views import EmulateView


def render(view: EmulateView) -> Group:
    """Header, predicted figures and where a steady step's time goes."""
    run, written = view.run, view.trace_file
    config, p = run.config, run.prediction
    header = Text.assemble(
        ("perftool emulate ", "bold"),
        shown(config.workload.name, "bold magenta"),
        "\n",
        shown(f"{config.device} · {config.profile.model} · {run.plan.total_steps[0]:,} steps · seed {config.seed}"),
    )
    figures = Table(title="Prediction (steady state)", title_justify="left", show_header=False)
    figures.add_column("what", style="bold")
    figures.add_column("value")
    figures.add_row(
        "step time",
        f"median {duration(p['step_time_us'])} · mean {duration(p['step_time_mean_us'])} · "
        f"p10–p90 {duration(p['step_time_p10_us'])} – {duration(p['step_time_p90_us'])} "
        f"({p['warmup_steps']:.0f} warm-up)",
    )
    figures.add_row("throughput", f"{p['throughput']:,.1f} samples/s")
    figures.add_row("device", f"busy {percent(p['device_busy_fraction'])}")
    memory, capacity = float(run.plan.memory_bytes[0]), float(run.plan.capacity_bytes[0])
    figures.add_row("memory", f"{memory / 1e9:,.2f} GB of {capacity / 1e9:,.2f} GB ({percent(memory / capacity)})")
    figures.add_row("compiles", f"{p['compiles']:.0f} ({p['recompilations']:.0f} after warm-up)")
    figures.add_row("run time", duration(p["run_time_us"]))
    if written:
        figures.add_row("trace", shown(written))
    step = Table(title="Where a steady step goes (mean)", title_justify="left")
    add_columns(step, [("part", "left"), ("time", "right"), ("share", "right"), ("meaning", "left")])
    for name, spent in run.breakdown().items():
        if spent > 0.0005:
            step.add_row(name, duration(spent), percent(spent / p["step_time_mean_us"]), BREAKDOWN[name])
    return Group(header, figures, step)
