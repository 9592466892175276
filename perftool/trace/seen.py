"""A file as this process sees it, for a process elsewhere (a Dask worker, in its own working directory, perhaps on
another machine) to open the same file and check that it did: the absolute path, the size and a digest of the
first bytes. A relative path resolved there, or a file of the same name with other contents, is an error naming
the file as the user gave it, never a report on other data."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from perftool.common.errors import TraceError

HEAD_BYTES = 1 << 16  # digested: enough to tell two traces apart, read in well under a millisecond


@dataclass(frozen=True)
class FileSeen:
    """``given``: the path as the user gave it (what reports name); ``path``: where it is, absolute; ``size`` and
    ``head`` (a digest of its first :data:`HEAD_BYTES`), None where this process could not read it (the process
    that opens it then says why)."""

    given: str
    path: str
    size: int | None
    head: str | None

    def check(self) -> None:
        """Raise a :class:`TraceError` naming the file unless this process sees the file as it was seen here."""
        if self.size is None:
            return
        there = _size_and_head(self.path)
        same_paths = "the cluster's workers must see the files given at the same paths"
        if there is None:
            raise TraceError(self.given, f"not found at {self.path} where it is read: {same_paths}")
        if there != (self.size, self.head):
            raise TraceError(
                self.given,
                f"another file is at {self.path} where it is read ({there[0]:,} bytes, not {self.size:,}, or other "
                f"contents): {same_paths}",
            )


def seen(path: str) -> FileSeen:
    """``path`` as this process sees it."""
    size, head = _size_and_head(path) or (None, None)
    return FileSeen(path, os.path.abspath(path), size, head)


def _size_and_head(path: str) -> tuple[int, str] | None:
    try:
        with open(path, "rb") as file:
            return os.fstat(file.fileno()).st_size, hashlib.sha256(file.read(HEAD_BYTES)).hexdigest()
    except OSError:
        return None
