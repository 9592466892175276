"""Debian's Chromium, headless and with the network cut off: what the HTML tests and the README's screenshot use."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # the network off: no name resolves
    "--enable-logging=stderr", "--v=0",  # console messages on stderr, as CONSOLE lines
]  # fmt: skip


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Chromium on ``page`` with a profile of its own (``args``: --dump-dom, --screenshot=FILE, ...)."""
    if CHROMIUM is None:
        raise RuntimeError("no Chromium on this machine (Debian: apt-get install chromium)")
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def console_messages(run: subprocess.CompletedProcess) -> list[str]:
    """What the page wrote to the console (errors, warnings, anything)."""
    return [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


def screenshot(page: Path, out: Path, profile: Path, width: int = 1280, height: int = 1600) -> None:
    """A PNG of the page as a window of ``width`` × ``height`` shows it."""
    run = chromium(page, profile, f"--window-size={width},{height}", f"--screenshot={out}")
    if run.returncode != 0 or not out.is_file():
        raise RuntimeError(f"chromium made no screenshot of {page}: {run.stderr[-500:]}")


def layout(page: Path, profile: Path, width: int) -> dict:
    """How Chromium lays ``page`` out in a window ``width`` px wide (see ``layout.js``): ``width``,
    ``scroll_width``, and the elements that reach past the window (``wide``), chart labels past their chart
    (``outside``) and chart labels over one another (``overlapping``)."""
    probe = (Path(__file__).parent / "layout.js").read_text()
    measured = page.with_name(page.stem + f".measured-{width}.html")
    measured.write_text(page.read_text().replace("</body>", f"<script>{probe}</script></body>"))
    run = chromium(measured, profile, f"--window-size={width},2000", "--dump-dom")
    found = re.search(r'<pre id="layout">(.*?)</pre>', run.stdout, re.S)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"chromium measured nothing on {page}: {run.stderr[-500:]}")
    return json.loads(html.unescape(found.group(1)))
