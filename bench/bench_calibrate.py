"""The calibration list: every real capture the repo holds, fitted, and checked on what the fit did not use.

    python bench/bench_calibrate.py

For each real capture the repo holds (``tests/data/real``, the CUDA captures in ``tests/data`` and the bundled
Kineto sample): the device model the fit names, the
steady steps it saw, each check's error against its limit (the held-out steps' mean and busy share, the
step-to-step spread), how far the fit misses what it took (its expected step, where the time goes: "fitted", which
agrees by construction unless the fit cannot reach the trace), and the interval its predictions are given with. A
capture that cannot be fitted says why. The list of captures in docs/calibrate.md
that calibrate within the stated error is this table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from perftool.common.errors import PerftoolError
from perftool.tune.calibration import calibrate

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
CAPTURES = [  # real profilers' captures: public ones (tests/data/real), ours on an H100, the bundled Kineto sample
    *sorted((DATA / "real").glob("*.json.gz")),
    *sorted(DATA.glob("cuda_*.pt.trace.json.gz")),
    REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz",
]


COLUMNS = ("held-out step", "held-out busy", "spread", "fitted")


def row(capture: Path) -> str:
    """One capture's line: the device model the fit names and each kind of check's error against its limit (the
    worst where a kind has several), or why there is no fit."""
    name = capture.name.removesuffix(".json.gz").removesuffix(".pt.trace")
    try:
        fitted = calibrate(str(capture))
    except PerftoolError as exc:
        return f"{name:28} not fitted: {str(exc).split(': ', 1)[-1]}"
    worst: dict[str, str] = {}
    ranked: dict[str, float] = {}
    for check in [*fitted.checks, *fitted.fitted]:
        kind = "fitted" if check in fitted.fitted else _kind(check.figure)
        if check.error / check.limit >= ranked.get(kind, -1.0):
            ranked[kind] = check.error / check.limit
            shown = (
                f"{check.error:.1f}/{check.limit:.0f} pts" if check.points else f"{check.error:.1%}/{check.limit:.0%}"
            )
            worst[kind] = shown
    cells = " ".join(f"{worst.get(kind, '-'):>14}" for kind in COLUMNS)
    verdict = "passes" if not fitted.warnings else "FAILS: " + "; ".join(fitted.warnings)
    return f"{name:28} {fitted.config.device_model:16} {cells} {fitted.interval:>9.1%}  {verdict}"


def _kind(figure: str) -> str:
    """Which column a check's figure belongs to."""
    if figure.startswith("step-to-step"):
        return "spread"
    return "held-out busy" if figure.startswith("device busy") else "held-out step"


def main() -> int:
    lines = [row(capture) for capture in CAPTURES]
    headers = " ".join(f"{kind:>14}" for kind in COLUMNS)
    print(f"{'capture':28} {'device model':16} {headers} {'interval':>9}  (error/limit; interval: ± of a prediction)")
    print("\n".join(lines))
    passing = sum(line.endswith("passes") for line in lines)
    print(f"{passing} of {len(lines)} captures pass every check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
