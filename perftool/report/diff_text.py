"""``perftool diff``: what changed between two traces, for people.

The step-time change first, then its largest contributors in one table whose last rows (the other
keys, the idle and overlap changes) make it add up to the change; then what appeared and disappeared,
and how much of each trace had no counterpart. A job gets a row per rank, then the rank whose step changed
most, in full.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from perftool.common.names import readable
from perftool.common.units import duration, number, percent, plural, signed_duration
from perftool.diff.compare import TraceDiff, nothing_changed
from perftool.diff.explanation import Explanation
from perftool.diff.files import DiffResult
from perftool.report.console import NamesAndFigures, add_columns, cut
from perftool.report.escape import shown

TOP = 10  # contributors listed; the others share one row
LISTED = 8  # added or removed keys named


def render(result: DiffResult) -> Group:
    header = Text.assemble(
        ("perftool diff ", "bold"),
        shown(result.baseline, "bold magenta"),
        " → ",
        shown(result.candidate, "bold magenta"),
    )
    changed = result.most_changed
    where = f" (rank {changed.rank}, whose step changed most)" if result.is_job else ""
    lead = shown(changed.headline + where, "bold")  # the change in one line first, as the API's headline says it
    if not result.is_job:
        return Group(lead, header, *trace_diff(result.diffs[0]))
    parts: list[RenderableType] = [lead, header, _ranks(result)]
    for side, ranks in (("baseline", result.only_baseline), ("candidate", result.only_candidate)):
        if ranks:
            parts.append(Text(f"only in the {side}: ranks {', '.join(map(str, ranks))}", style="yellow"))
    parts += [Text(f"\nRank {changed.rank}, whose step changed most", style="bold"), *trace_diff(changed)]
    return Group(*parts)


def trace_diff(diff: TraceDiff) -> list[RenderableType]:
    """One pair of traces: the change, its contributors, what appeared or went, what did not match."""
    base, cand = diff.baseline, diff.candidate
    compared = f"compared per {diff.level} on the {base.timeline}'s timeline"
    if diff.why:
        compared += f" ({diff.why})"
    style = "red" if diff.delta_us > 0 else "green"
    lines: list[RenderableType] = [
        shown(f"device: {diff.devices}; {compared}", "dim"),
        Text.assemble(
            f"{diff.measured}: {duration(base.step_us)} → {duration(cand.step_us)}  ",
            (diff.change_text, style),
        ),
        *(Text(note, style="yellow") for note in diff.notes),
        *_made_of(Explanation.of(diff, TOP)),
        Text(
            f"Where the steps go: the {plural(min(TOP, len(diff.rows)), diff.level)} with the most time", style="bold"
        ),
        _largest(diff),
    ]
    for status, title in (("added", "New"), ("removed", "Gone")):
        keys = [row for row in diff.rows if row.status == status]
        if keys:
            named = ", ".join(
                f"{row.key} ({duration(row.baseline_paced_us + row.candidate_paced_us)}/step)" for row in keys[:LISTED]
            )
            more = f", and {len(keys) - LISTED} more" if len(keys) > LISTED else ""
            lines.append(shown(f"{title} {plural(len(keys), diff.level)}: {named}{more}"))
    lines.append(Text(_unmatched(diff), style="dim"))
    return lines


def _made_of(explained: Explanation) -> list[RenderableType]:
    """The change's parts under their heading, or where none shows, that nothing changed."""
    if explained.unchanged:
        return [Text(f"\n{nothing_changed(explained.level)}\n", style="bold")]
    heading = Text(f"\nWhat the change is made of (adds up to {signed_duration(explained.delta_us)})", style="bold")
    return [heading, contributions(explained)]


def contributions(explained: Explanation) -> NamesAndFigures:
    """The largest contributors, the others and the remainders, with the step-time change as the footer."""
    table = Table(box=box.SIMPLE_HEAD, show_footer=True)
    rows: list[tuple[Any, ...]] = []
    for part in explained.shown():
        if part.status == "others":
            name, calls = cut(Text(plural(part.keys, "other " + explained.level))), ""
        elif part.status == "remainder":
            name, calls = cut(Text(part.name, style="italic")), ""
        else:
            name = cut(shown(_marked(readable(part.name), part.status)))
            calls = f"{number(part.baseline_calls_per_step)} → {number(part.candidate_calls_per_step)}"
        time = (
            ""
            if part.status == "others"
            else f"{duration(part.baseline_us_per_step)} → {duration(part.candidate_us_per_step)}"
        )
        rows.append(
            (name, calls, time, signed_duration(part.contribution_us), percent(explained.share(part.contribution_us)))
        )
    figures: list[tuple[str, JustifyMethod]] = [
        ("calls/step", "right"), (f"{explained.paced_time}/step", "right"), ("Δ step", "right"), ("of Δ", "right")
    ]  # fmt: skip
    footers = {explained.level: "step time", "Δ step": signed_duration(explained.delta_us)}
    return NamesAndFigures(table, explained.level, figures, rows, spare=("calls/step",), footers=footers)


def _largest(diff: TraceDiff) -> NamesAndFigures:
    """The keys with the most time: calls, time and share of the step on each side."""
    table = Table(box=box.SIMPLE_HEAD)
    base, cand = diff.baseline.step_us, diff.candidate.step_us
    rows = [
        (
            cut(shown(_marked(readable(row.key), row.status))),
            f"{number(row.baseline_calls)} → {number(row.candidate_calls)}",
            f"{duration(row.baseline_paced_us)} → {duration(row.candidate_paced_us)}",
            f"{percent(row.baseline_paced_us / base)} → {percent(row.candidate_paced_us / cand)}",
        )
        for row in diff.largest_keys(TOP)
    ]
    figures: list[tuple[str, JustifyMethod]] = [
        (name, "right") for name in ("calls/step", f"{diff.paced_time}/step", "of step")
    ]
    return NamesAndFigures(table, diff.level, figures, rows, spare=("calls/step",))


def _ranks(result: DiffResult) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    add_columns(table, [("rank", "right"), ("step time", "right"), ("change", "right"), ("largest parts", "left")])
    for diff in result.diffs:
        table.add_row(
            str(diff.rank),
            f"{duration(diff.baseline.step_us)} → {duration(diff.candidate.step_us)}",
            signed_duration(diff.delta_us),
            shown(", ".join(diff.largest())),
        )
    return table


def _marked(key: str, status: str) -> str:
    """The key with its status first, so that cutting a long name keeps it."""
    return {"added": f"(new) {key}", "removed": f"(gone) {key}"}.get(status, key)


def _unmatched(diff: TraceDiff) -> str:
    base, cand = diff.unmatched["baseline"], diff.unmatched["candidate"]
    return (
        f"No counterpart: {number(base.events)} baseline events ({plural(base.keys, diff.level)}), "
        f"{number(cand.events)} candidate events ({plural(cand.keys, diff.level)}), in the steady steps compared"
    )
