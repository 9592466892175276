"""msprof's measured use of each NPU pipe, per kernel type: ``kernel_details.csv`` beside a torch_npu trace.

With ``aic_metrics=PipeUtilization`` (torch_npu's default at profiler level 1 and 2) msprof reads the AI Core's and
the vector core's counters for every kernel and writes, per pipe, the time it was busy (``aic_mac_time(us)``: the
cube unit; ``aiv_vec_time(us)``: the vector unit; ``mte1``/``mte2``/``mte3``: the memory transfer engines;
``fixpipe``; ``scalar``) beside the time the kernel held the core (``aicore_time(us)``, ``aiv_time(us)``). Summed over
a kernel type's kernels, a pipe's time over the core's time is the share of the type's core time that pipe was busy:
the measured counterpart of the roofline's compute- or memory-bound, where no shapes or peaks are needed.
Other metric sets (``ArithmeticUtilization``, ``Memory``...) write other columns; they give no pipe shares here.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TextIO

from perftool.trace.profiler_dirs import MsprofTable, msprof_csv

MSPROF_KERNELS = "kernel_details.csv"
KERNEL_DETAILS = "msprof.kernel_details"  # the trace metadata key a reader keeps them in
CORES = {"aic": "aicore_time(us)", "aiv": "aiv_time(us)"}  # each core's time column, in whose units pipes are busy
PIPES = ("mac", "cube", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")  # "cube" is "mac" in newer CANN


def msprof_kernels(trace_file: str) -> MsprofTable:
    """Per kernel type and accelerator core, the most device time first: how many kernels, their device time (µs)
    and each measured pipe's busy share of the core's time (``{"aic_mac": 0.15, "aic_mte2": 0.98, ...}``); empty
    where the profiler wrote no ``kernel_details.csv`` beside the trace, or one without pipe counters. Rows that do
    not read as numbers are left out (msprof writes ``N/A`` where it measured nothing); a file that cannot be read
    is left out, and the table says why. The file is read a row at a time: only the sums per type are held."""
    return msprof_csv(trace_file, MSPROF_KERNELS, _kernels_in)


def _kernels_in(lines: TextIO) -> list[dict[str, Any]]:
    """:func:`msprof_kernels`' rows from the open CSV, each kernel's cells found by their column's position."""
    rows = csv.reader(lines)
    at = {name: position for position, name in enumerate(next(rows, []))}
    kind_at = [at[name] for name in ("Type", "Name") if name in at]  # the kernel's type, else its name
    core_at, duration_at = at.get("Accelerator Core"), at.get("Duration(us)")
    columns = [
        (
            held,
            at[column],
            [(f"{held}_{pipe}", at[f"{held}_{pipe}_time(us)"]) for pipe in PIPES if f"{held}_{pipe}_time(us)" in at],
        )
        for held, column in CORES.items()
        if column in at
    ]

    def cell(row: list[str], position: int | None) -> str | None:
        return row[position] if position is not None and position < len(row) else None

    def counters(row: list[str]) -> dict[str, float]:
        found: dict[str, float] = {}
        for held, column, pipes in columns:
            if not (time := _number(cell(row, column))):
                continue
            found[held] = time
            for pipe, position in pipes:
                if (busy := _number(cell(row, position))) is not None:
                    found[pipe] = busy
        return found

    return kernel_types(
        (
            (next((kind for position in kind_at if (kind := cell(row, position))), None) or "").strip(),
            (cell(row, core_at) or "").strip(),
            _number(cell(row, duration_at)),
            counters(row),
        )
        for row in rows
    )


def kernel_types(kernels: Iterable[tuple[str, str, float | None, dict[str, float]]]) -> list[dict[str, Any]]:
    """:func:`msprof_kernels`' rows from each kernel's type, core, device time (µs) and counters (each core's time
    and its pipes' busy times, keyed ``aic``, ``aic_mac``..., in one unit); a kernel without them is left out."""
    count: dict[tuple[str, str], int] = defaultdict(int)
    device_us: dict[tuple[str, str], float] = defaultdict(float)
    busy: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for kernel_type, core, duration, counters in kernels:
        if not kernel_type or duration is None or len(counters) <= sum(held in counters for held in CORES):
            continue
        key = (kernel_type, core)
        count[key] += 1
        device_us[key] += duration
        for column, value in counters.items():
            busy[key][column] += value
    found = []
    for key, times in busy.items():
        shares = {
            f"{held}_{pipe}": times[f"{held}_{pipe}"] / times[held]
            for held in CORES
            for pipe in PIPES
            if times.get(held, 0.0) > 0 and f"{held}_{pipe}" in times
        }
        if shares:
            found.append({
                "type": key[0], "core": key[1], "kernels": count[key], "device_us": device_us[key], "pipes": shares,
            })  # fmt: skip
    return sorted(found, key=lambda row: -row["device_us"])


def _number(text: str | None) -> float | None:
    """A finite number from a CSV cell (msprof writes ``N/A`` where it has none); None otherwise."""
    try:
        value = float((text or "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
