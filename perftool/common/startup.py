"""The ``perftool`` command's start (``perftool …`` or ``python -m perftool …``; code that imports perftool as a
library keeps its own settings).

While the command's modules load (:func:`loading`), Ctrl-C is one line (:mod:`perftool.common.interrupts`) and Python's
cycle collector is paused: loading makes a few hundred thousand objects that live as long as the process, and the
collector would go over them again and again as they are made. Once loaded (:func:`loaded`), they are frozen out of
the collections that follow, which then look only at what the command makes. Ctrl-C stays the one line until the
command itself runs (:func:`perftool.common.interrupts.started`, where the CLI invokes it): while click reads the
options it would take the ``KeyboardInterrupt`` as its own "Aborted!" and exit 1.

The command also asks numpy's OpenBLAS for no threads of its own (``OPENBLAS_NUM_THREADS=1``, unless the environment
sets it): perftool calls no BLAS routine, yet the threads OpenBLAS starts with numpy spin on the cores for a while
(a tenth of a second of CPU on a 2-core machine, taken from the decoding processes). The setting must be made before
numpy loads, so it is made here, first thing; the processes the command starts inherit it.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys

from perftool.common import interrupts

_collector_paused = False
BLAS_THREADS = "OPENBLAS_NUM_THREADS"  # read once, when numpy loads OpenBLAS


def _is_command() -> bool:
    """Whether this process is the command's own: named so, and not one that multiprocessing started for it (a
    spawned process, as Dask's local workers are, is handed the command's arguments and imports perftool afresh)."""
    command = os.path.basename(sys.argv[0]) if sys.argv else ""
    started_for_it = multiprocessing.current_process().name != "MainProcess"
    return command in ("perftool", "-m") and not started_for_it  # "-m" while `python -m perftool` imports the package


def loading() -> None:
    """Called first thing by the package: when the command is starting, pause what its start needs paused."""
    global _collector_paused
    if not _is_command():
        return
    interrupts.one_line_while_starting()
    os.environ.setdefault(BLAS_THREADS, "1")
    if gc.isenabled():
        gc.disable()
        _collector_paused = True


def loaded() -> None:
    """The command's modules are loaded: the collector runs over what is made from here on."""
    global _collector_paused
    if _collector_paused:
        gc.freeze()
        gc.enable()
        _collector_paused = False
