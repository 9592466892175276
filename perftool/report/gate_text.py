"""``perftool gate``: the verdict for people — one row per check, the failures spelled out.

The table lays itself out for the width it is given: wide, with a "why" column; in a narrow
terminal or an 80-column CI log, the figures in a compact table and every check that did not pass
spelled out below it, so no column is dropped or cut.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from perftool.gate.checks import Check, Verdict
from perftool.gate.verdict import GateResult
from perftool.report.diff_text import contributions
from perftool.report.escape import shown

STYLE = {
    Verdict.FAIL: "bold red",
    Verdict.WARN: "yellow",
    Verdict.PASS: "green",
    Verdict.SKIP: "dim",
    Verdict.NOT_CHECKED: "bold yellow",
}
WIDE = 110  # from this width on, "why" is a column of the table
CHECK_NAME_WIDTH = 24  # a metric's name is held whole up to this long (device.compute_fraction)
FIGURE_WIDTH = 11  # narrow, the widest a figure's column grows: "-17.2 pts", "11.239 ms", "107.6 steps/s" wrapped


def render(result: GateResult) -> Group:
    against = f"against {result.baseline}" if result.baseline else "against its budget"
    header = Text.assemble(("perftool gate ", "bold"), shown(result.candidate, "bold magenta"), " ", shown(against))
    if result.mismatches:
        header.append("\n")
        header.append(shown(f"compared anyway (--allow-mismatch): {'; '.join(result.mismatches)}", "yellow"))
    summary = Text.assemble(("\n" + result.status.upper(), STYLE[result.status]), f": {result.tally()}")
    return Group(header, _Checks(result.checks, budget=result.baseline is None), *_explained(result), summary)


def _explained(result: GateResult) -> list[RenderableType]:
    """What each failed step time's change is made of (the top of the traces' diff), or why it is not known."""
    parts: list[RenderableType] = []
    for explained in result.explanations:
        where = f" on rank {explained.rank}" if explained.rank is not None else ""
        parts += [Text(f"\nWhy the step time changed{where} (perftool diff, per {explained.level})", style="bold"),
                  contributions(explained)]  # fmt: skip
    if result.unexplained:
        parts.append(Text.assemble("\n", shown(f"Why the step time changed: not known, {result.unexplained}", "dim")))
    return parts


class _Checks:
    """The checks as a table, wide or narrow by the width rich offers."""

    def __init__(self, checks: list[Check], budget: bool) -> None:
        self.checks = checks
        self.budget = budget  # no baseline: a column of the limits instead

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width >= WIDE:
            yield _table(self.checks, with_why=True, budget=self.budget, width=options.max_width)
            return
        yield _table(self.checks, with_why=False, budget=self.budget, width=options.max_width)
        explained = [
            check for check in self.checks if check.verdict in (Verdict.FAIL, Verdict.WARN, Verdict.NOT_CHECKED)
        ]
        if explained:
            bullets = Table.grid(padding=(0, 1))
            bullets.add_column(no_wrap=True)
            bullets.add_column(overflow="fold")  # a word longer than the line (a call with its arguments) folds whole
            for check in explained:
                bullets.add_row(
                    Text(_verdict_word(check), style=STYLE[check.verdict]),
                    Text.assemble(shown(check.name, "bold"), ": ", shown(check.detail or check.limit)),
                )
            yield Text("Why", style="bold")
            yield bullets


def _verdict_word(check: Check) -> str:
    """FAIL, WARN, PASS, SKIP or NOT CHECKED."""
    return check.verdict.replace("_", " ").upper()


def _table(checks: list[Check], with_why: bool, budget: bool, width: int) -> Table:
    """Check, baseline (or, held to a budget, the limits), candidate, change, verdict, and the why when wide."""
    narrow = not with_why
    table = Table(show_header=True, box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD, pad_edge=not narrow)
    figures: tuple[str, ...] = ("candidate",) if budget else ("baseline", "candidate", "change")
    others = (len(figures) + budget) * FIGURE_WIDTH + len("verdict") + 2 * (len(figures) + budget + 1)  # and padding
    longest = max((len(check.name) for check in checks), default=0)
    table.add_column("check", overflow="fold", min_width=max(0, min(longest, CHECK_NAME_WIDTH, width - others - 2)))
    if budget:
        table.add_column("limits", overflow="fold")
    for column in figures:  # narrow, a figure wraps before its unit, so that a check's name stays whole
        table.add_column(column, justify="right", no_wrap=not narrow, max_width=FIGURE_WIDTH if narrow else None)
    table.add_column("verdict", no_wrap=True)
    if with_why:
        table.add_column("why", overflow="fold")
    for check in checks:
        sides = [check.candidate] if budget else [check.baseline, check.candidate]
        values = [check.shown(value) for value in sides]
        cells: list[RenderableType] = [
            shown(check.name),
            *([shown(check.limit)] if budget else []),
            *values,
            *([] if budget else [shown(check.change)]),
            Text(_verdict_word(check), style=STYLE[check.verdict]),
        ]
        table.add_row(*cells, *([shown(check.detail)] if with_why else []))
    return table
