"""The page every HTML report is: one self-contained file, its style inline, nothing fetched, no script.

A report opens offline, reads at 1280 px and on a phone (tables scroll sideways in their own box),
and keeps its text without JavaScript. The json format's document for the same result is embedded
(``<script type="application/json" id="perftool-data">``, data, never run), so the page's figures are
the json format's and tools can read them from the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from perftool.common.names import NAME_IN_TABLE, readable
from perftool.common.version import __version__
from perftool.report.escape import html_text

STYLE = """
:root { color-scheme: light; --ink: #1a1a1a; --muted: #555; --line: #d8d8d8; --fail: #b3261e; --warn: #8a5a00;
  --pass: #1b6e3a; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1100px; padding: 16px; font: 15px/1.45 system-ui, -apple-system, "Segoe UI",
  Roboto, sans-serif; color: var(--ink); background: #fff; }
h1 { font-size: 1.5em; margin: 0 0 4px; } h2 { font-size: 1.2em; margin: 28px 0 8px; border-bottom: 1px solid
  var(--line); } h3 { font-size: 1.05em; margin: 18px 0 6px; }
h1, h2, h3, .sub, p, li { overflow-wrap: anywhere; }  /* a mangled name is one word of hundreds of letters */
.sub { color: var(--muted); margin: 0 0 12px; }
.facts { display: flex; flex-wrap: wrap; gap: 8px; padding: 0; list-style: none; }
.facts li { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; }
.facts b { display: block; font-size: 1.1em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 0.93em; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
td.wrap { overflow-wrap: anywhere; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; } td.num { white-space: nowrap; }
.fail, .error, .not_checked { color: var(--fail); font-weight: 600; }
.warn, .warning { color: var(--warn); font-weight: 600; }
.pass { color: var(--pass); } .skip, .info { color: var(--muted); }
figure.chart { margin: 12px 0; } figcaption { color: var(--muted); font-size: 0.9em; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 0.9em; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: -1px;
  border: 1px solid #0003; }
.finding { border-left: 4px solid var(--line); padding: 2px 12px; margin: 12px 0; }
.finding.sev-error { border-color: var(--fail); } .finding.sev-warning { border-color: var(--warn); }
footer { margin-top: 32px; color: var(--muted); font-size: 0.85em; }
@media (max-width: 600px) { body { padding: 8px; font-size: 14px; } th, td { padding: 3px 4px; } }
"""

_BREAK_AFTER = re.compile(r"([/_.:,])(?=[^\s/_.:,])")  # where a long name may break: after its separators
_UNSEEN = re.compile(r"[^\x20-\x7e\n]")  # what may be invisible; JSON escapes the controls it holds already


def page(title: str, subtitle: str, body: Sequence[str], data: str) -> str:
    """The document: its title, a line under it, the sections, and the json format's document embedded."""
    # JSON as data: no "</script>" or "<!--" inside can end the element, no invisible character hides in the page
    embedded = _UNSEEN.sub(
        lambda c: c[0] if c[0].isprintable() else json.dumps(c[0])[1:-1], data.replace("<", "\\u003c")
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html_text(title)}</title><style>{STYLE}</style></head><body>"
        f'<header><h1>{html_text(title)}</h1><p class="sub">{html_text(subtitle)}</p></header>'
        f"<main>{''.join(body)}</main>"
        f"<footer>perftool {html_text(__version__)}: this file is self-contained and works offline.</footer>"
        f'<script type="application/json" id="perftool-data">{embedded}</script>'
        "</body></html>\n"
    )


def facts(items: Sequence[tuple[str, str]]) -> str:
    """Key figures as a row of boxes: (what, figure)."""
    return '<ul class="facts">' + "".join(f"<li>{html_text(k)}<b>{html_text(v)}</b></li>" for k, v in items) + "</ul>"


@dataclass(frozen=True)
class Name:
    """A name from the trace as a table cell: shown as people read it (:func:`~perftool.common.names.readable`, cut at
    :data:`~perftool.common.names.NAME_IN_TABLE`), whole on hover."""

    full: str


Cell = str | tuple[str, str] | Name  # text, (text, class), or a name from the trace


def table(
    name: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]], numeric: Sequence[int] = (),
    wrapped: Sequence[int] = (),
) -> str:  # fmt: skip
    """A table in a box that scrolls sideways on narrow screens; ``numeric`` columns are right-aligned. Headings
    and the names and paths of ``wrapped`` columns may break after a separator (``/``, ``_``, ``.``, ``::``), and
    those names anywhere at last, so that a long one does not push the other columns off a narrow screen."""

    def cell(tag: str, index: int, value: Cell) -> str:
        hover = f' title="{html_text(value.full)}"' if isinstance(value, Name) else ""
        if isinstance(value, Name):
            value = readable(value.full, NAME_IN_TABLE)
        content, extra = (value, "") if isinstance(value, str) else value
        breaks = tag == "th" or index in wrapped
        kinds = ("num" if index in numeric else "", "wrap" if breaks and tag == "td" else "", extra)
        classes = " ".join(c for c in kinds if c)
        text = _BREAK_AFTER.sub(r"\1<wbr>", html_text(content)) if breaks else html_text(content)
        return f"<{tag}{_class(classes)}{hover}>{text}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    return (
        f'<div class="scroll"><table data-table="{html_text(name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def section(title: str, *parts: str) -> str:
    return f"<section><h2>{html_text(title)}</h2>{''.join(parts)}</section>"


def paragraph(content: str, cls: str = "") -> str:
    return f"<p{_class(cls)}>{html_text(content)}</p>"


def _class(classes: str) -> str:
    return f' class="{classes}"' if classes else ""
