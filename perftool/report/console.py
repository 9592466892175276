"""Rich output for people: to the terminal, or as plain text for ``--output FILE``."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from rich.console import Console, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text


def plain(renderable: RenderableType, width: int = 110) -> str:
    """The renderable as plain text (no colour, fixed width)."""
    buffer = io.StringIO()
    Console(width=width, file=buffer, color_system=None).print(renderable)
    return buffer.getvalue()


def name_and_figures(
    table: Table, name: str, figures: Iterable[tuple[str, JustifyMethod]], rows: Iterable[tuple[Any, ...]]
) -> None:
    """A first column that gives way where the table runs out of width (a name made with :func:`cut` loses its end
    to "…", other text wraps), and figure columns that are never cut or wrapped; then ``rows`` (a name and its
    figures)."""
    rows = list(rows)
    table.add_column(name, ratio=1)  # the one column that gives way
    for index, (header, justify) in enumerate(figures, start=1):
        widest = max([len(header), *(len(str(row[index])) for row in rows)])
        table.add_column(header, justify=justify, no_wrap=True, min_width=widest)
    for row in rows:
        table.add_row(*row)


def cut(text: Text) -> Text:
    """``text`` on one line, its end cut once with "…" where its column is too narrow: a name read by its start."""
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def add_columns(table: Table, columns: Iterable[tuple[str, JustifyMethod]], **options: Any) -> None:
    """Add (header, justify) columns to ``table``, each with the same other ``options``."""
    for header, justify in columns:
        table.add_column(header, justify=justify, **options)
