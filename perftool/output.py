"""Writing results: atomically to a file, or to stdout."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from perftool.errors import PerftoolError


def check_writable(path: str) -> None:
    """Fail before any work starts when ``path`` cannot be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise PerftoolError(f"{path}: is a directory, cannot write output there")
    if not os.path.isdir(directory):
        raise PerftoolError(f"{path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise PerftoolError(f"{path}: directory {directory} is not writable")


def write_text(text: str, path: str | None) -> None:
    """Write to ``path`` through a temporary file and a rename, or to stdout when no path is given."""
    if path is None:
        sys.stdout.write(text)
        return
    write_bytes(text.encode("utf-8"), path)


def write_bytes(data: bytes, path: str) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, then a rename."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".perftool-", dir=directory)
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp makes 0600; a written file gets the usual permissions
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _mode_for(path: str) -> int:
    """The file's own permissions when it exists, else what the umask gives a new file."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
