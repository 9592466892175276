"""Which files make a job, and which rank each one is."""

from __future__ import annotations

import os
import re
from pathlib import Path

from perftool.errors import PerftoolError

TRACE_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = re.compile(r"(?i)rank[-_ ]?(\d+)")
_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def job_files(paths: list[str]) -> list[str]:
    """The trace files the arguments name: each file as given, and each directory's ``*.json``/``*.json.gz``
    files (not its subdirectories), in name order."""
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            inside = sorted(
                str(p) for p in Path(path).iterdir() if p.is_file() and p.name.lower().endswith(TRACE_SUFFIXES)
            )
            if not inside:
                raise PerftoolError(f"{path}: a directory with no trace files (*.json, *.json.gz) in it")
            found += inside
        else:
            found.append(path)
    return found


def names_ranks(paths: list[str]) -> bool:
    """Whether the arguments name a job outright: a directory, or several files whose names say their rank."""
    if any(os.path.isdir(p) for p in paths):
        return True
    ranks = [_RANK_IN_NAME.search(Path(p).name) for p in paths]
    return len(paths) > 1 and all(ranks) and len({int(r.group(1)) for r in ranks if r}) == len(paths)


def rank_from_name(path: str, in_directory: bool = True) -> int | None:
    """The rank a file's name gives: ``rank3``, ``rank_3``; in a job's directory, else its last number
    (``worker-3.json``)."""
    name = Path(path).name
    found = _RANK_IN_NAME.search(name) or (_LAST_NUMBER.search(name.split(".")[0]) if in_directory else None)
    return int(found.group(1)) if found else None
