"""perftool: performance tuning and profiling for training jobs on ML accelerators.

``import perftool`` gives the Python API (:mod:`perftool.api`): ``load_trace``, ``info``, ``scan``, ``gate``,
``diff``, ``calibrate``, ``emulate``, ``tune`` and ``roofline``, and what they raise and warn (``PerftoolError``,
``NothingRead``, ``PerftoolWarning``). ``perftool.gate``, ``perftool.diff`` and ``perftool.tune`` are those
functions; their packages are imported by their full names (``from perftool.gate.verdict import ...``).

The API is loaded when first used, so a module of perftool (or the command line) loads only what it needs.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from perftool.common import startup  # light: the standard library only
from perftool.common.version import __version__

startup.loading()  # before the command's modules load: Ctrl-C is one line, the cycle collector waits

if TYPE_CHECKING:
    from perftool.api import (
        NothingRead,
        calibrate,
        diff,
        emulate,
        gate,
        info,
        load_trace,
        roofline,
        scan,
        tune,
    )
    from perftool.common.errors import PerftoolError, PerftoolWarning

__all__ = [
    "NothingRead",
    "PerftoolError",
    "PerftoolWarning",
    "__version__",
    "calibrate",
    "diff",
    "emulate",
    "gate",
    "info",
    "load_trace",
    "roofline",
    "scan",
    "tune",
]
_ERRORS = ("PerftoolError", "PerftoolWarning")


class _Package(ModuleType):
    """The ``perftool`` package, whose API functions ``gate``, ``diff``, ``tune``, ``calibrate`` and ``roofline``
    share their names with its subpackages: loading such a subpackage does not bind it here over the function (it is
    reached by its full name, ``perftool.gate.verdict``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in __all__ and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    """The API's functions and errors, loaded on first use (PEP 562)."""
    if name in _ERRORS:
        from perftool.common import errors

        return getattr(errors, name)
    if name in __all__:
        from perftool import api

        return getattr(api, name)
    raise AttributeError(f"module 'perftool' has no attribute {name!r}")
