"""Rich output for people: to the terminal, or as plain text for ``--output FILE``."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, JustifyMethod, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text


def plain(renderable: RenderableType, width: int = 110) -> str:
    """The renderable as plain text (no colour, fixed width)."""
    buffer = io.StringIO()
    Console(width=width, file=buffer, color_system=None).print(renderable)
    return buffer.getvalue()


NAME_WIDTH = 24  # the fewest characters a name column is left before spare figure columns give way


class NamesAndFigures:
    """A table of a first column of names and figure columns. The names give way where the table runs out of
    width (a name made with :func:`cut` loses its end to "…"); figures are never cut or wrapped. Figure columns
    marked spare are left out, the last first, where keeping them would leave the names fewer than
    :data:`NAME_WIDTH` characters."""

    def __init__(
        self,
        table: Table,
        name: str,
        figures: list[tuple[str, JustifyMethod]],
        rows: Iterable[tuple[Any, ...]],
        spare: tuple[str, ...] = (),
        footers: dict[str, str] | None = None,
    ) -> None:
        self.table, self.name, self.figures, self.rows = table, name, figures, list(rows)
        self.spare, self.footers = spare, footers or {}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [max([len(h), *(len(str(row[i])) for row in self.rows)]) for i, (h, _) in enumerate(self.figures, 1)]
        kept = list(range(len(self.figures)))
        needed = min(NAME_WIDTH, max([len(self.name), *(Text(str(row[0])).cell_len for row in self.rows)]))
        for header in reversed(self.spare):
            room = options.max_width - sum(widths[i] + 3 for i in kept) - 4  # a column's padding and rule, the edges
            if room >= needed:
                break
            kept.remove(next(i for i, (h, _) in enumerate(self.figures) if h == header))
        table = self.table
        table.add_column(self.name, ratio=1, footer=self.footers.get(self.name, ""))
        for index in kept:
            header, justify = self.figures[index]
            footer = self.footers.get(header, "")
            table.add_column(header, justify=justify, no_wrap=True, min_width=widths[index], footer=footer)
        for row in self.rows:
            table.add_row(row[0], *(row[index + 1] for index in kept))
        yield table


def cut(text: Text) -> Text:
    """``text`` on one line, its end cut once with "…" where its column is too narrow: a name read by its start."""
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def add_columns(table: Table, columns: Iterable[tuple[str, JustifyMethod]], **options: Any) -> None:
    """Add (header, justify) columns to ``table``, each with the same other ``options``."""
    for header, justify in columns:
        table.add_column(header, justify=justify, **options)
