"""``perftool diff --format html``: what changed between two traces, as one self-contained page.

The step-time change; both sides' steady steps side by side; a waterfall from the baseline's step to the
candidate's whose bars (the largest contributors, the others, each idle cause and the overlap) add up to
the change; where the steps go, per key; what appeared and went; what had no counterpart. For two jobs, a
row per rank first, then the rank whose step changed most. Every figure is the json format's, embedded.
"""

from __future__ import annotations

import json

from perftool.common.names import readable
from perftool.common.units import duration, number, percent, plural, signed_duration
from perftool.diff.compare import nothing_changed, shown, unchanged
from perftool.diff.files import DiffResult
from perftool.report import svg
from perftool.report.html_page import Cell, facts, page, paragraph, section, table

TOP = 10  # contributors drawn and listed; the others share one bar
EMBEDDED_ROWS = 1_000  # rows of each diff in the page's data: a diff of 300k names made a 116 MB page


def render(result: DiffResult) -> str:
    data = result.json_text()
    document = json.loads(data)  # the json format's figures, exactly
    body = []
    if len(document["diffs"]) > 1 or document["diffs"][0]["rank"] is not None:
        rows = [
            [str(d["rank"]), duration(d["baseline"]["step_time_us"]), duration(d["candidate"]["step_time_us"]),
             signed_duration(d["delta_us"]), d["headline"]]
            for d in document["diffs"]
        ]  # fmt: skip
        body.append(section("Ranks", table("ranks", ["rank", "baseline", "candidate", "change", "largest parts"],
                                           rows, (0, 1, 2, 3))))  # fmt: skip
    changed = max(document["diffs"], key=lambda d: abs(d["delta_us"]))
    body += trace_diff(changed)
    if left_out := _keep_largest_rows(document):
        body.append(paragraph(f"The data embedded in this page holds each diff's {number(EMBEDDED_ROWS)} rows that "
                              f"contribute most; {number(left_out)} more are left out (--format json holds every "
                              "row).", "info"))  # fmt: skip
        data = json.dumps(document)
    change = f" {changed['change']:+.1%}" if changed["change"] is not None else ""
    title = f"perftool diff: step{change}"
    return page(title, f"{document['baseline']} → {document['candidate']}", body, data)


def _keep_largest_rows(document: dict) -> int:
    """Cut each diff's rows (largest contribution first) to :data:`EMBEDDED_ROWS`, the rows left out said in the diff
    (``rows_left_out``: their count and summed contribution); the number of rows left out in all."""
    left_out = 0
    for diff in document["diffs"]:
        rest = diff["rows"][EMBEDDED_ROWS:]
        if rest:
            diff["rows"] = diff["rows"][:EMBEDDED_ROWS]
            diff["rows_left_out"] = {"rows": len(rest), "contribution_us": sum(r["contribution_us"] for r in rest)}
            left_out += len(rest)
    return left_out


def trace_diff(diff: dict) -> list[str]:
    """One pair of traces from the json format's document."""
    base, cand = diff["baseline"], diff["candidate"]
    where = f" (rank {diff['rank']})" if diff["rank"] is not None else ""
    devices = base["device"] if base["device"] == cand["device"] else f"{base['device']} → {cand['device']}"
    summary = facts([
        ("device", devices),
        ("compared per", diff["level"] + (f" ({diff['why']})" if diff["why"] else "")),
        ("steady steps", f"{base['steps']} → {cand['steps']}"),
        ("step time (mean)", f"{duration(base['step_time_us'])} → {duration(cand['step_time_us'])}"),
        ("change", signed_duration(diff["delta_us"]) + (f" ({diff['change']:+.1%})" if diff["change"] else "")),
    ])  # fmt: skip
    strips = svg.strips(
        "steps", "Steady step times: every step a tick, each side's median a black bar",
        [("baseline", base["step_durations_us"]), ("candidate", cand["step_durations_us"])],
    )  # fmt: skip
    rows = diff["rows"]
    listed = [r for r in rows[:TOP] if abs(r["contribution_us"]) >= 0.05]
    others = sum(r["contribution_us"] for r in rows[len(listed) :])
    parts = [(_bar_label(r), r["contribution_us"]) for r in listed]
    parts += [("other keys", others)] if len(rows) > len(listed) else []
    remainders = [r for r in diff["remainders"] if shown(r["baseline_us"], r["candidate_us"])]
    parts += [(r["name"], r["contribution_us"]) for r in remainders]
    waterfall = svg.waterfall(
        "contributions", f"From the baseline's step to the candidate's, in parts adding up to "
        f"{signed_duration(diff['delta_us'])}",
        base["step_time_us"], parts, duration,
    )  # fmt: skip
    headers = [diff["level"], "calls/step", "time/step on the timeline", "change", "of the change"]
    contribution_rows: list[list[Cell]] = [
        [_marked(r), f"{number(r['baseline_calls_per_step'])} → {number(r['candidate_calls_per_step'])}",
         f"{duration(r['baseline_paced_us_per_step'])} → {duration(r['candidate_paced_us_per_step'])}",
         signed_duration(r["contribution_us"]), _share(r["contribution_us"], diff["delta_us"])]
        for r in listed
    ]  # fmt: skip
    contribution_rows += [
        [(r["name"], "info"), "", f"{duration(r['baseline_us'])} → {duration(r['candidate_us'])}",
         signed_duration(r["contribution_us"]), _share(r["contribution_us"], diff["delta_us"])]
        for r in remainders
    ]  # fmt: skip
    largest = sorted(rows, key=lambda r: -max(r["baseline_paced_us_per_step"], r["candidate_paced_us_per_step"]))
    where_rows = [
        [_marked(r), f"{number(r['baseline_calls_per_step'])} → {number(r['candidate_calls_per_step'])}",
         f"{duration(r['baseline_paced_us_per_step'])} → {duration(r['candidate_paced_us_per_step'])}",
         f"{percent(r['baseline_paced_us_per_step'] / base['step_time_us'])} → "
         f"{percent(r['candidate_paced_us_per_step'] / cand['step_time_us'])}"]
        for r in largest[:TOP]
    ]  # fmt: skip
    unmatched = diff["unmatched"]
    parts_html = [
        section("What changed" + where, summary, *(paragraph(note, "warn") for note in diff["notes"]), strips),
        section("What the change is made of", paragraph(nothing_changed(diff["level"])))
        if unchanged(diff["delta_us"], (r["contribution_us"] for r in [*rows, *diff["remainders"]]))
        else section("What the change is made of", waterfall,
                     table("contributions", headers, contribution_rows, (1, 2, 3, 4), (0,))),
        section("Where the steps go", table("largest", [diff["level"], "calls/step", "time/step", "of the step"],
                                            where_rows, (1, 2, 3), (0,))),
        section("No counterpart", paragraph(
            f"{_unmatched(unmatched['baseline'], 'baseline')} and {_unmatched(unmatched['candidate'], 'candidate')} "
            "in the steady steps compared have no counterpart on the other side.")),
    ]  # fmt: skip
    return parts_html


def _unmatched(side: dict, name: str) -> str:
    """``3 baseline events (1 key)``: one side's events without a counterpart."""
    return f"{plural(side['events'], f'{name} event')} ({plural(side['keys'], 'key')})"


def _bar_label(row: dict) -> str:
    """A key as a chart's bar names it: readable, and new or gone said first, where a cut cannot lose it."""
    return {"added": "new ", "removed": "gone "}.get(row["status"], "") + readable(row["key"])


def _marked(row: dict) -> str:
    return row["key"] + {"added": " (new)", "removed": " (gone)"}.get(row["status"], "")


def _share(part: float, whole: float) -> str:
    return percent(part / whole) if whole else "—"
