"""What a command shows, when a format needs more than its result: each renderer takes one of these (or the
result itself: a ``ScanReport``, ``GateResult`` or ``DiffResult``) as its one argument.

Light on purpose: the command line names these before it has loaded what they hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perftool.analysis.metrics import Metrics
    from perftool.emulator.full_run import Run
    from perftool.roofline.figures import Roofline
    from perftool.trace.model import Trace
    from perftool.tune.calibration import Calibration
    from perftool.tune.result import TuneResult


@dataclass(frozen=True)
class InfoView:
    trace: Trace
    metrics: Metrics
    roofline: Roofline
    folders_not_read: list[str] = field(default_factory=list)  # beside the trace in the directory named for it


@dataclass(frozen=True)
class CalibrateView:
    calibration: Calibration
    written: str | None  # where -o wrote the fitted config


@dataclass(frozen=True)
class EmulateView:
    run: Run
    trace_file: str | None  # where --trace wrote the run's trace, and its size


@dataclass(frozen=True)
class TuneView:
    result: TuneResult
    source: str  # the config file swept
    top: int = 10  # configurations listed
