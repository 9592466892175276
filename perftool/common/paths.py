"""What a path names, asked of the system without a traceback: a name it refuses to look up (longer than its file
system takes, or holding a NUL byte) is a one-line error where the user gave the path, and names nothing where
perftool only looks for a file (beside a trace, or named in one)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Literal

from perftool.common.errors import PerftoolError

Kind = Literal["file", "directory", "other"]


def kind_of(path: str | Path, what: str) -> Kind | None:
    """What the user-given ``path`` (a ``what``: "project config", "rule directory") names, or None where nothing is
    there; PerftoolError where the system cannot look the name up."""
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # a part of the path is a file
        return None
    except (OSError, ValueError) as exc:  # too long, a loop of links, a NUL byte
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PerftoolError(f"{path}: cannot read {what}: {reason}") from None
    return "file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "other"


def names_file(path: str | Path) -> bool:
    """Whether ``path`` names a regular file; a name the system cannot look up names none."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False
