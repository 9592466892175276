"""Rich output for people: to the terminal, or as plain text for ``--output FILE``."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType


def plain(renderable: RenderableType, width: int = 110) -> str:
    """The renderable as plain text (no colour, fixed width)."""
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()
