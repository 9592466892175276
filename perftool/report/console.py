"""Rich output for people: to the terminal, or as plain text for ``--output FILE``."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from rich.console import Console, JustifyMethod, RenderableType
from rich.table import Table


def plain(renderable: RenderableType, width: int = 110) -> str:
    """The renderable as plain text (no colour, fixed width)."""
    buffer = io.StringIO()
    Console(width=width, file=buffer, color_system=None).print(renderable)
    return buffer.getvalue()


def add_columns(table: Table, columns: Iterable[tuple[str, JustifyMethod]], **options: Any) -> None:
    """Add (header, justify) columns to ``table``, each with the same other ``options``."""
    for header, justify in columns:
        table.add_column(header, justify=justify, **options)
