"""``perftool tune --format markdown``: the recommendation, why, each knob's sensitivity and the top configurations,
for a PR comment. Every figure comes from the json format's document."""

from __future__ import annotations

from typing import Any

from perftool.common.units import duration, percent, plural
from perftool.report.escape import markdown_code
from perftool.report.scan_markdown import cell
from perftool.report.views import TuneView
from perftool.tune.documents import answer
from perftool.tune.explain import shown
from perftool.tune.spec import Objective


def render(view: TuneView) -> str:
    document = answer(view.result, view.source, view.top).model_dump(mode="json", by_alias=True)
    best, baseline, why = document["best"], document["baseline"], document["why"]
    notes = [f"- ⚠ Changes the training: {cell(change)}" for change in document["best_changes_training"]]
    notes += [f"- Kept as written: {name}: {cell(text)}" for name, text in document["kept_for_training"].items()]
    lines = [
        f"# perftool tune: {markdown_code(view.source)}",
        "",
        _summary(document),
        "",
        "| knob | as written | best | why |",
        "| --- | --- | --- | --- |",
        *(
            f"| {name} | {_shown(baseline['knobs'][name])} | **{_shown(value)}** | {cell(why.get(name, ''))} |"
            for name, value in best["knobs"].items()
        ),
        *([""] + notes if notes else []),
        "",
        "## Sensitivity",
        "",
        "How far the objective moves along each knob, the others at the best.",
        "",
        "| knob | best | worst → best | spread |",
        "| --- | --- | --- | ---: |",
        *(_sensitivity(line, Objective(document["objective"]).higher_is_better) for line in document["sensitivity"]),
        "",
        f"## Top {plural(len(document['top']), 'configuration')}",
        "",
        _top(document),
    ]
    return "\n".join(lines) + "\n"


def _summary(document: dict[str, Any]) -> str:
    """The sweep and its answer against the config as written, in two sentences."""
    swept = (
        f"{document['device']}, objective {document['objective']}: {document['space_size']:,} configurations, "
        f"{document['evaluations']:,} evaluated ({document['strategy']}, {document['seconds']:.2f} s)."
    )
    best, baseline, speedup = document["best"], document["baseline"], document["speedup"]
    unit = document["throughput_unit"]
    if not speedup:
        return f"{swept} Best: {_figures(best, unit)}; the config as written {_figures(baseline, unit)}."
    gain = "throughput" if Objective(document["objective"]).higher_is_better else "shorter steps"
    over = f"over the config as written ({_figures(baseline, unit)})"
    return f"{swept} Best: {_figures(best, unit)}, **×{speedup:.2f}** {gain} {over}."


def _shown(value: Any) -> str:
    return cell(shown(value))


def _figures(side: dict[str, Any], unit: str) -> str:
    if not side["feasible"]:
        return f"cannot run: {cell(side['reason'])}"
    figures = side["figures"]
    return f"{figures['throughput']:,.1f} {unit}, mean step {duration(figures['step_time_mean_us'])}"


def _sensitivity(line: dict[str, Any], throughput: bool) -> str:
    ran = [point for point in line["line"] if point["evaluated"] and not point["reason"]]
    if not ran:
        return f"| {line['knob']} | {_shown(line['best'])} | — | — |"
    worst, top = (min, max) if throughput else (max, min)
    low, high = worst(ran, key=lambda p: p["objective"]), top(ran, key=lambda p: p["objective"])
    show = (lambda value: f"{value:,.1f}") if throughput else duration
    if low["objective"] == high["objective"]:
        along = f"{show(low['objective'])} at every value"
    else:
        along = (
            f"{show(low['objective'])} at {_shown(low['value'])} → {show(high['objective'])} at {_shown(high['value'])}"
        )
    return f"| {line['knob']} | {_shown(line['best'])} | {along} | {percent(line['spread'])} |"


def _top(document: dict[str, Any]) -> str:
    names = list(document["best"]["knobs"])
    rows = [
        f"| {rank} | " + " | ".join(_shown(c["knobs"][n]) for n in names) + f" | {c['figures']['throughput']:,.1f} | "
        f"{duration(c['figures']['step_time_mean_us'])} | {c['figures']['memory_fraction']:.0%} |"
        for rank, c in enumerate(document["top"], start=1)
    ]
    header = "| # | " + " | ".join(names) + f" | {document['throughput_unit']} | mean step | memory |"
    rule = "| ---: | " + " | ".join("---" for _ in names) + " | ---: | ---: | ---: |"
    return "\n".join([header, rule, *rows])
