"""Text from a trace shown to people, made harmless: no terminal escapes, markup or hidden characters.

Event, track and file names come from the input. Control characters (ESC, NUL, …), bidirectional
overrides and other invisible format characters are shown as escapes (``\\x1b``, ``\\u202e``), and
rich's markup (``[bold]``) in them stays literal text.
"""

from __future__ import annotations

import html

from rich.text import Text

from perftool.errors import one_line


def shown(text: object, style: str = "") -> Text:
    """``text`` as a rich Text: escaped, and never read as markup."""
    return Text(one_line(str(text)), style=style)


def markdown(text: object) -> str:
    """``text`` for a Markdown table cell or paragraph: escaped, HTML-quoted (``<b>`` shows as written), one line."""
    return html.escape(one_line(str(text)), quote=False).replace("|", "\\|")
