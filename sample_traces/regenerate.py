"""Regenerate every emulator sample trace from the config beside it: ``python sample_traces/regenerate.py``.

Each ``<family>/<name>.yaml`` becomes ``<family>/<name>.trace.json.gz``, exactly as
``perftool emulate <family>/<name>.yaml --trace <family>/<name>.trace.json.gz`` writes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from perftool.cli import cli

HERE = Path(__file__).resolve().parent


def main() -> int:
    for config in sorted(HERE.glob("*/*.yaml")):
        trace = config.with_suffix(".trace.json.gz")
        cli(["emulate", str(config), "--trace", str(trace), "--format", "json"], standalone_mode=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
