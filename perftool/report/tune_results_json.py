"""``perftool tune --results FILE.json``: every configuration looked at, with its figures or why it did not count."""

from __future__ import annotations

from perftool.tune.documents import every_row
from perftool.tune.result import TuneResult


def render(result: TuneResult) -> str:
    return every_row(result).json_text(indent=1)
