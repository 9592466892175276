"""Ctrl-C: the parent process handles it, so worker processes ignore it and leave without tracebacks."""

from __future__ import annotations

import signal

EXIT_CODE = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C


def ignore_in_worker() -> None:
    """For worker processes: SIGINT is the parent's to handle; it then stops its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
