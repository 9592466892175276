"""Where a profiler's own output directory keeps its trace, so that a user can name the directory as they hold it."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from perftool.common.errors import PerftoolError

TRACE_SUFFIXES = (".json", ".json.gz")  # the files of a job's directory that may be its ranks' traces
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"  # torch_npu's analysed output, inside each rank's directory
ASCEND_TRACES = ("trace_view.json", "trace_view.json.gz")
ASCEND_DATABASE = "ascend_pytorch_profiler*.db"  # the db export's trace (sqlite)
MSPROF_STEPS = "step_trace_time.csv"  # msprof's own breakdown of each step, beside the trace (µs)


def profiler_trace(directory: str) -> str | None:
    """The trace a profiler's own output directory holds, or None where ``directory`` is not one.

    torch_npu writes one directory per rank (``<host>_<pid>_<time>_ascend_pt``): its metadata (``profiler_info_N.json``,
    ``profiler_metadata.json``) beside ``ASCEND_PROFILER_OUTPUT/``, which holds the trace (``trace_view.json`` in
    the text export, ``ascend_pytorch_profiler*.db`` in the db export) and msprof's CSV and JSON summaries.
    """
    output = Path(directory, ASCEND_OUTPUT)
    if not output.is_dir():
        return None
    for name in ASCEND_TRACES:
        if (output / name).is_file():
            return str(output / name)
    databases = sorted(output.glob(ASCEND_DATABASE))
    if databases:
        return str(databases[0])
    raise PerftoolError(
        f"{directory}: a torch_npu profiler directory without a trace in {ASCEND_OUTPUT}/ (trace_view.json or "
        f"{ASCEND_DATABASE}): the profiler's analysis did not run, or was cut short (torch_npu.profiler.profiler."
        "analyse(directory) runs it again)"
    )


def trace_path(path: str) -> str:
    """The trace file ``path`` names: itself, or the trace of the profiler output directory it names."""
    return (profiler_trace(path) or path) if os.path.isdir(path) else path


def msprof_steps(trace_file: str) -> list[dict[str, float]]:
    """msprof's own breakdown of each step (``step_trace_time.csv`` beside a torch_npu trace: computing,
    communication and how much of it overlapped nothing, free time, in µs), where the profiler wrote one; a row
    that does not read as numbers is left out, as is a file that cannot be read."""
    return [row for row in map(_numbers, msprof_csv(trace_file, MSPROF_STEPS)) if row]


def msprof_csv(trace_file: str, name: str) -> list[dict[str, str]]:
    """The rows of msprof's CSV ``name`` beside a torch_npu trace (in ``ASCEND_PROFILER_OUTPUT/``); none where
    there is no such file beside it or it cannot be read as CSV."""
    path = Path(trace_file).with_name(name)
    if Path(trace_file).parent.name != ASCEND_OUTPUT or not path.is_file():
        return []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def _numbers(row: dict[str, str]) -> dict[str, float]:
    try:
        found = {str(key): float(value) for key, value in row.items() if key}
    except (TypeError, ValueError):
        return {}
    return found if all(math.isfinite(v) for v in found.values()) else {}
