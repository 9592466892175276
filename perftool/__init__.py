"""perftool: performance tuning and profiling for training jobs on ML accelerators.

``import perftool`` gives the Python API (:mod:`perftool.api`): ``load_trace``, ``scan``, ``gate``,
``diff``, ``emulate`` and ``tune``, and what they raise and warn (``PerftoolError``, ``NothingRead``,
``PerftoolWarning``). ``perftool.gate``, ``perftool.diff`` and ``perftool.tune`` are those
functions; their packages are imported by their full names (``from perftool.gate.verdict import ...``).
"""

from perftool import interrupts  # light: the standard library only
from perftool.version import __version__

interrupts.one_line_while_starting()  # before the API's modules load: Ctrl-C then is one line, as later

from perftool.api import NothingRead, diff, emulate, gate, load_trace, roofline, scan, tune  # noqa: E402 - after the start-up's Ctrl-C handling
from perftool.errors import PerftoolError, PerftoolWarning  # noqa: E402

__all__ = [
    "NothingRead",
    "PerftoolError",
    "PerftoolWarning",
    "__version__",
    "diff",
    "emulate",
    "gate",
    "load_trace",
    "roofline",
    "scan",
    "tune",
]
