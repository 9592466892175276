"""The documentation's picture of the HTML report: ``python docs/make_screenshot.py`` (needs Debian's chromium).

It writes the scan of the bundled Kineto sample as HTML, exactly as ``perftool scan
sample_traces/gpu_training_kineto.pt.trace.json.gz --format html -o scan.html`` does, and has headless
Chromium (the same call the HTML tests make) take a 1280 px wide screenshot of it: ``docs/scan-report.png``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from browser import screenshot  # noqa: E402 - the tests' own browser helper, found above

from perftool.cli.main import cli  # noqa: E402

SAMPLE = "sample_traces/gpu_training_kineto.pt.trace.json.gz"


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        page = Path(work) / "scan.html"
        os.chdir(REPO)  # the sample named as a user in the repository names it
        cli(["scan", SAMPLE, "--format", "html", "-o", str(page)], standalone_mode=False)
        screenshot(page, HERE / "scan-report.png", Path(work) / "profile", height=1500)
    print(f"wrote {HERE / 'scan-report.png'}")


if __name__ == "__main__":
    main()
