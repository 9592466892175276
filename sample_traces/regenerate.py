"""Regenerate every emulator sample and the baselines gated against them: ``python sample_traces/regenerate.py``.

Each ``<family>/<name>.yaml`` becomes ``<family>/<name>.trace.json.gz``, exactly as
``perftool emulate <family>/<name>.yaml --trace <family>/<name>.trace.json.gz`` writes it; each job's
``jobs/<name>/job.yaml`` becomes one ``rank<N>.trace.json.gz`` per rank beside it. Then every baseline in
``baselines/`` (``<family>__<name>.findings.json``, ``jobs__<name>.findings.json``) is the scan of its sample.
"""

from __future__ import annotations

import sys
from pathlib import Path

from perftool.cli.main import cli

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def main() -> int:
    for config in sorted(HERE.glob("*/*.yaml")):
        trace = config.with_suffix(".trace.json.gz")
        cli(["emulate", str(config), "--trace", str(trace), "--format", "json"], standalone_mode=False)
    for job in sorted(HERE.glob("jobs/*/job.yaml")):
        for old in job.parent.glob("rank*.trace.json.gz"):
            old.unlink()
        cli(["emulate", str(job), "--trace", str(job.parent), "--format", "json"], standalone_mode=False)
    for baseline in sorted((HERE / "baselines").glob("*.findings.json")):
        name = baseline.name.removesuffix(".findings.json").replace("__", "/")
        sample = HERE / name if (HERE / name).is_dir() else HERE / f"{name}.trace.json.gz"
        scan = ["scan", str(sample.relative_to(REPO)), "--format", "json", "--fail-on", "never", "--workers", "1"]
        cli([*scan, "-o", str(baseline.relative_to(REPO))], standalone_mode=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
