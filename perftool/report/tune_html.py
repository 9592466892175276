"""``perftool tune --format html``: the sweep as one self-contained page.

The recommended configuration and why each value wins, then each knob's sensitivity (the objective at each
value with the others at their best; values that cannot run, out of memory or too few tiles, hatched and
named), then the top configurations. Every figure comes from the json format's document, embedded in the page.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from perftool.common.units import duration, number, plural
from perftool.report import svg
from perftool.report.html_page import facts, page, paragraph, section, table
from perftool.report.views import TuneView
from perftool.tune.documents import answer
from perftool.tune.spec import Objective


def render(view: TuneView) -> str:
    data = answer(view.result, view.source, view.top).json_text()
    document = json.loads(data)  # the json format's figures, exactly
    throughput = Objective(document["objective"]).higher_is_better
    unit = document["throughput_unit"]
    show = (lambda value: _throughput(value, unit)) if throughput else duration
    best = document["best"]
    speedup = document["speedup"]
    figures = facts([
        ("device", document["device"]),
        ("objective", f"throughput ({unit})" if throughput else "step time"),
        ("configurations", f"{document['space_size']:,} ({document['evaluations']:,} evaluated)"),
        ("best throughput", _throughput(best["figures"]["throughput"], unit)),
        ("best step time (mean)", duration(best["figures"]["step_time_mean_us"])),
        ("speed-up over the config", f"×{speedup:.2f}" if speedup else "—"),
    ])  # fmt: skip
    knobs = [[name, str(document["baseline"]["knobs"][name]), str(value), document["why"].get(name, "")]
             for name, value in best["knobs"].items()]  # fmt: skip
    recommended = [figures, table("best", ["knob", "as written", "best", "why"], knobs)]
    changes = document["best_changes_training"]
    recommended += [paragraph(f"Changes the training: {change}", "warn") for change in changes]
    recommended += [paragraph(f"Kept as written (changes the training): {knob}: {why}", "info")
                    for knob, why in document["kept_for_training"].items()]  # fmt: skip
    charts = []
    for line in document["sensitivity"]:
        items = [(str(p["value"]), p["objective"] or 0.0, bool(p["reason"])) for p in line["line"]
                 if p["evaluated"] or p["reason"]]  # fmt: skip
        if items:
            caption = f"{line['knob']}: the objective at each value, the others at their best (hatched: cannot run)"
            charts.append(svg.bars(f"sensitivity-{line['knob']}", caption, items, _against(items, show, throughput)))
    names = list(best["knobs"])
    rows = [
        [str(i + 1), *(str(c["knobs"][n]) for n in names), _throughput(c["figures"]["throughput"], unit),
         duration(c["figures"]["step_time_mean_us"]), f"{c['figures']['memory_fraction']:.0%}"]
        for i, c in enumerate(document["top"])
    ]  # fmt: skip
    headers = ["#", *names, "throughput", "step time", "memory"]
    marked = (len(names) + 1, len(names) + 2)
    body = [
        section("Recommended configuration", *recommended),
        section("Sensitivity: how much each knob matters", *charts),
        section(f"Top {plural(len(rows), 'configuration')}", table("top", headers, rows, (0, *marked))),
    ]
    subtitle = f"{view.source}: {document['strategy']} search, {document['seconds']:.2f} s"
    return page("perftool tune", subtitle, body, data)


def _against(items: list[tuple[str, float, bool]], show: Callable[[float], str], higher: bool) -> svg.Label:
    """Each value's figure and how far it is from the best of the knob's values."""
    feasible = [value for _, value, shaded in items if not shaded]
    best = (max(feasible) if higher else min(feasible)) if feasible else 0.0
    return lambda value: f"{show(value)} ({value / best - 1:+.1%})" if best else show(value)


def _throughput(value: float | None, unit: str) -> str:
    return f"{number(round(value, 1))} {unit}" if value is not None else "—"
