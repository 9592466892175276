"""Text from a trace shown to people, made harmless: no terminal escapes, markup or hidden characters.

Event, track and file names come from the input. Control characters (ESC, NUL, …), bidirectional
overrides and other invisible format characters are shown as escapes (``\\x1b``, ``\\u202e``), and
markup in them stays literal text: rich's (``[bold]``), HTML's, and Markdown's — a kernel named
``[x](https://…)`` is no link in a PR comment, and ``@someone`` in a name notifies nobody.
"""

from __future__ import annotations

import html
import re

from rich.text import Text

from perftool.common.errors import one_line

# Characters that open Markdown markup anywhere in a line: code, emphasis, links and images, raw HTML and
# entities, table cells, strikethrough. CommonMark shows any of them literally after a backslash.
_MARKUP = re.compile(r"[\\`*\[\]<>|!~&]|(?<![^\W_])_|_(?![^\W_])")  # "_" inside a word emphasises nothing
_AUTOLINK = re.compile(r"(?i)(?<=www)\.|:(?=//)")  # www.host and scheme://host become links by themselves
_LINE_START = re.compile(r"^(?:[-+=#]|\d+[.)])")  # a list item, heading or underline at a line's start
_WORD_JOINER = "\u2060"  # after "@": a mention or an e-mail link needs a name character right there


def shown(text: object, style: str = "") -> Text:
    """``text`` as a rich Text: escaped, and never read as markup."""
    return Text(one_line(str(text)), style=style)


def html_text(text: object) -> str:
    """``text`` for HTML and SVG, in an element or a quoted attribute: escaped, one line, nothing invisible."""
    return html.escape(one_line(str(text)), quote=True)


def markdown(text: object) -> str:
    """``text`` for Markdown inline content (a paragraph, heading, list item or table cell): one line, every
    character that could open markup escaped, links and mentions broken."""
    line = _AUTOLINK.sub(r"\\\g<0>", _MARKUP.sub(r"\\\g<0>", one_line(str(text))))
    line = _LINE_START.sub(lambda start: start[0][:-1] + "\\" + start[0][-1], line)  # "12\." "\-"
    return line.replace("@", "@" + _WORD_JOINER)


def markdown_code(text: object) -> str:
    """``text`` as a Markdown code span outside a table (monospace, shown as written): fenced by more backticks
    than it holds."""
    line = one_line(str(text))
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    return fence + (f" {line} " if line.startswith("`") or line.endswith("`") else line) + fence
