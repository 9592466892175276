"""Where a profiler's own output directory keeps its trace, so that a user can name the directory as they hold it."""

from __future__ import annotations

import os
from pathlib import Path

from perftool.errors import PerftoolError

ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"  # torch_npu's analysed output, inside each rank's directory
ASCEND_TRACES = ("trace_view.json", "trace_view.json.gz")
ASCEND_DATABASE = "ascend_pytorch_profiler*.db"  # the db export's trace (sqlite)


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
