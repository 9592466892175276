"""What an NPU's own counters say limits each kernel type: the pipe busy the largest share of the core's time, from
msprof's ``kernel_details.csv`` (:mod:`perftool.trace.msprof_kernels`), kept in the trace's metadata when it was
read (``msprof.kernel_details``). Measured, so it needs neither shapes nor the device's peaks, and it covers every
kernel msprof lists."""

from __future__ import annotations

from typing import Any

from perftool.common.results import MeasuredPipes

BUSY = 0.5  # a pipe busy at least this share of the core's time is what the kernel waits on
PIPE_BOUNDS = {  # what a busy pipe does: the cube's MACs, vector maths, scalar control, the memory transfer engines
    "mac": "cube compute",
    "cube": "cube compute",
    "vec": "vector compute",
    "scalar": "scalar (control flow)",
    "mte1": "L1 to L0 moves",
    "mte2": "HBM reads",
    "mte3": "HBM writes",
    "fixpipe": "L0C result writes",
}
NO_PIPE_BUSY = "none: waits, few blocks"  # no pipe busy half the core's time: pipes wait on each other, or few blocks


def measured_pipes(kernel_types: list[dict[str, Any]]) -> list[MeasuredPipes]:
    """Per kernel type msprof measured (:func:`~perftool.trace.msprof_kernels.msprof_kernels`' rows, the most
    device time first): its busiest pipe and what that says limits it."""
    found = []
    for row in kernel_types:
        pipes: dict[str, float] = row["pipes"]
        busiest = max(pipes, key=lambda pipe: pipes[pipe])
        bound = PIPE_BOUNDS[busiest.split("_", 1)[1]] if pipes[busiest] >= BUSY else NO_PIPE_BUSY
        found.append(MeasuredPipes(**row, busiest=busiest, bound=bound))
    return found
