"""``perftool tune --results FILE.csv``: one line per configuration looked at, knobs then figures."""

from __future__ import annotations

import csv
import io

from perftool.tune.documents import status
from perftool.tune.evaluator import ROW_FIGURES
from perftool.tune.explain import shown
from perftool.tune.result import TuneResult


def render(result: TuneResult) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*result.space.names, "status", "reason", *ROW_FIGURES])
    figures = [result.rows.figures[name].tolist() for name in ROW_FIGURES]
    for row in range(len(result.rows.reason)):
        knobs = [shown(value) for value in result.knobs(row).values()]
        values = ["" if value != value else repr(value) for value in (column[row] for column in figures)]
        writer.writerow([*knobs, status(result, row), result.rows.reason[row], *values])
    return out.getvalue()
