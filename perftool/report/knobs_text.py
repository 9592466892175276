"""``perftool knobs``: a paragraph a knob (its name and facts, then what it does), readable at 80 columns."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.text import Text

from perftool.common.results import KnobsReport


def render(report: KnobsReport) -> Group:
    parts: list[Text | Padding] = []
    for knob in report.knobs:
        takes = f"{knob.unit}: {knob.accepts}" if knob.unit else knob.accepts
        swept = "" if knob.swept else " Fixes set it; tune does not sweep it."
        parts.append(Text.assemble((knob.name, "bold"), f"  ({takes}; on {', '.join(knob.families)})"))
        parts.append(Padding(f"{knob.meaning}.{swept}", (0, 0, 0, 4), expand=False))
    return Group(*parts)
