"""Writing results: atomically to a file, into a device or FIFO, or to stdout.

A regular file (or a symlink to one) is replaced atomically: a temporary file beside the real file,
then a rename, so the link stays a link. A character device or FIFO (``/dev/null``, ``/dev/stdout``,
a named pipe) is written into as it is, never replaced; any other kind of file is refused. An output
that is one of the command's own inputs, or lies inside an input directory (a job's, whose files are its
ranks), is refused before any work starts.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterable

from perftool.common.errors import PerftoolError


def check_writable(path: str, inputs: Iterable[str | None] = ()) -> None:
    """Fail before any work starts when ``path`` cannot or must not be written (see the module's rules)."""
    for source in inputs:
        if source and _same_file(path, source):
            raise PerftoolError(f"{path}: is also an input of this command ({source}); write the output elsewhere")
        if source and _inside(path, source):
            raise PerftoolError(f"{path}: is inside {source}, an input directory of this command; write it elsewhere")
    kind = _kind(path)
    if kind == "directory":
        raise PerftoolError(f"{path}: is a directory, cannot write output there")
    if kind == "stream":
        if not os.access(path, os.W_OK):
            raise PerftoolError(f"{path}: is not writable")
        return
    if kind == "other":
        raise PerftoolError(f"{path}: is not a regular file, a character device or a FIFO; will not replace it")
    directory = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(directory):
        raise PerftoolError(f"{path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise PerftoolError(f"{path}: directory {directory} is not writable")


def check_directory(path: str) -> None:
    """Fail before any work when ``path`` cannot be a directory to write files into (made if missing)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise PerftoolError(f"{path}: is not a directory; a job's traces are written into one, one file per rank")
    parent = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(parent):
        raise PerftoolError(f"{path}: directory {parent} does not exist")
    if not os.access(path if os.path.isdir(path) else parent, os.W_OK):
        raise PerftoolError(f"{path}: is not writable")


def check_distinct(paths: Iterable[str | None]) -> None:
    """Refuse two outputs of one command that name the same file (the second would replace the first)."""
    given = [path for path in paths if path]
    for i, path in enumerate(given):
        for other in given[i + 1 :]:
            if os.path.realpath(path) == os.path.realpath(other) or _same_file(path, other):
                raise PerftoolError(f"{other}: is already this command's output {path}; give each output its own file")


def write_text(text: str, path: str | None) -> None:
    """Write to ``path`` (see :func:`write_bytes`), or to stdout when no path is given."""
    if path is None:
        sys.stdout.write(text)
        return
    write_bytes(text.encode("utf-8"), path)


def write_bytes(data: bytes, path: str) -> None:
    """Write ``data`` to ``path``: into it when it is a device or FIFO, else atomically through a rename."""
    write_blocks([data], path)


def write_blocks(blocks: Iterable[bytes], path: str | None) -> None:
    """Write ``blocks`` one after another, each as it is made, so a large document is never whole in memory: to
    stdout when no path is given, into ``path`` when it is a device or FIFO, else atomically through a rename
    (nothing is left of a write the blocks fail or Ctrl-C stops)."""
    if path is None:
        sys.stdout.flush()
        for block in blocks:
            sys.stdout.buffer.write(block)
        sys.stdout.buffer.flush()
        return
    try:
        if _kind(path) == "stream":
            with open(path, "wb") as out:
                out.writelines(blocks)
            return
        _replace(blocks, os.path.realpath(path))
    except OSError as exc:
        raise PerftoolError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _replace(blocks: Iterable[bytes], target: str) -> None:
    """A temporary file in ``target``'s directory, then a rename over it."""
    fd, tmp = tempfile.mkstemp(prefix=".perftool-", dir=os.path.dirname(target))
    try:
        os.fchmod(fd, _mode_for(target))  # mkstemp makes 0600; a written file gets the usual permissions
        with os.fdopen(fd, "wb") as out:
            out.writelines(blocks)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def _kind(path: str) -> str:
    """``missing``, ``file``, ``directory``, ``stream`` (character device or FIFO) or ``other``, following links."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "stream" if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) else "other"


def _inside(path: str, directory: str) -> bool:
    """Whether ``path`` lies in ``directory`` (an existing one) or below it, through links and other spellings."""
    if not os.path.isdir(directory):
        return False
    parent = os.path.dirname(os.path.realpath(path))  # where the write lands, through a link too
    top = os.path.realpath(directory)
    return parent == top or parent.startswith(top.rstrip(os.sep) + os.sep)


def _same_file(path: str, other: str) -> bool:
    """Whether two paths name one existing file (through links, other spellings, hard links)."""
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def _mode_for(path: str) -> int:
    """The file's own permissions when it exists, else what the umask gives a new file."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
