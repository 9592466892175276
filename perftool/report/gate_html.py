"""``perftool gate --format html``: the verdict as one self-contained page.

The verdict and its counts; the baseline's and candidate's step times side by side (every steady step, and
each side's median); every check with its figures, threshold and verdict; and where the step time failed,
what its change is made of, as a waterfall that adds up to the change. Every figure is the json format's,
embedded in the page.
"""

from __future__ import annotations

import json

from perftool.common.units import duration, figure
from perftool.gate.verdict import GateResult
from perftool.report import svg
from perftool.report.html_page import Cell, facts, page, paragraph, section, table

TOP = 8  # contributors drawn in a waterfall; the others share one bar


def render(result: GateResult) -> str:
    data = result.json_text()
    document = json.loads(data)  # the json format's figures, exactly
    counts = document["counts"]
    status = document["status"]
    summary = facts([
        ("verdict", status.upper()),
        ("failed", str(counts["fail"])), ("warned", str(counts["warn"])), ("passed", str(counts["pass"])),
        ("skipped", str(counts["skip"])), ("not checked", str(counts["not_checked"])),
    ])  # fmt: skip
    body = [section("Verdict", summary, *(paragraph(f"Compared anyway: {m}", "warn") for m in document["mismatches"]))]
    strips = [
        svg.strips(
            f"steps-{times['rank'] if times['rank'] is not None else 'trace'}",
            "Steady step times" + (f" of rank {times['rank']}" if times["rank"] is not None else "")
            + ": every step a tick, each side's median a black bar",
            [("baseline", times["baseline"]), ("candidate", times["candidate"])],
        )
        for times in document["step_times"][:TOP]
    ]  # fmt: skip
    if strips:
        body.append(section("Step times, baseline against candidate", *strips))
    headers = ["check", "baseline", "candidate", "change", "fails when", "verdict", "why"]
    rows: list[list[Cell]] = [
        [c["name"], figure(c["baseline"], c["unit"]), figure(c["candidate"], c["unit"]), c["change"], c["limit"],
         (c["verdict"].replace("_", " "), c["verdict"]), c["detail"]]
        for c in document["checks"]
    ]  # fmt: skip
    body.append(section("Checks", table("checks", headers, rows, (1, 2, 3), (0, 6))))
    for explained in document["explanations"]:
        where = f" on rank {explained['rank']}" if explained["rank"] is not None else ""
        parts = [(c["name"], c["contribution_us"]) for c in explained["contributors"] if c["contribution_us"]]
        chart = svg.waterfall(
            "explanation",
            f"What the step time's change is made of (per {explained['level']}): the parts add up to "
            f"{duration(explained['delta_us'])}",
            explained["baseline_step_us"],
            parts,
            duration,
        )
        body.append(section(f"Why the step time changed{where}", paragraph(explained["headline"]), chart))
    if document["unexplained"]:
        body.append(section("Why the step time changed", paragraph(f"Not known: {document['unexplained']}.")))
    against = document["baseline"] or "its budget"
    return page(f"perftool gate: {status}", f"{document['candidate']} against {against}", body, data)
