"""The names a diff matches across two traces: kernel names normalised across builds, and the op map.

A build changes a kernel's name without changing the kernel: its template arguments' numbers (tile sizes,
vector widths), a launch id, a numeric suffix, an address. :func:`normalise` drops those, so the same
kernel has the same key in both traces, while kernels of different functors or types stay apart. A setting
changes a host span's name without changing the work: PyTorch's DataLoader names each batch's fetch after its
iterator, which ``num_workers`` chooses; the fetch keeps one key whichever it is.

Traces of different vendors share no kernel names. The op map (``rules/maps/op_map.yaml``, extended by
a user's own with ``--op-map``) gives the same work one shared name in every vendor's vocabulary; a
diff across device families compares through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from perftool.common.names import without_parameters
from perftool.common.yamlfile import read_model
from perftool.diff.patterns import backtracking_risk
from perftool.rules.catalog import builtin_dir

_RETURN_TYPE = re.compile(r"^void\s+")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(\.\d+)?[uUlLfF]*")
# A launch id at the end (Foo#12, Foo (3), MatMul-op12, Cast_3, XLA's instance number of an HLO op: fusion.12,
# all-reduce.3), matched on the reversed name from its start: one pass, where the same pattern searched for at the
# end tries every position and is quadratic in the name's length. A version's dot (v1.2) stays: a digit before it.
_LAUNCH_ID_REVERSED = re.compile(r"(\d+#\s*|\)\d+\(\s*|\d+po[-_]|\d+[-_]|\d+\.(?=[A-Za-z_]))+")
# Patterns see a name's first this many characters: what backtracks polynomially stays bounded whatever the trace
# (what backtracks exponentially is refused: perftool.diff.patterns).
MATCHED_CHARS = 1024
_SPACES = re.compile(r"\s+")
# PyTorch's DataLoader records each batch's fetch as enumerate(DataLoader)#<its iterator's class>.__next__:
# _SingleProcessDataLoaderIter loads the batch in the training process (num_workers=0),
# _MultiProcessingDataLoaderIter waits for a worker's (num_workers >= 1).
_LOADER_FETCH = re.compile(r"^enumerate\(DataLoader\)#(\w+)\.__next__$")
LOADER_FETCH = "enumerate(DataLoader)#__next__"  # the fetch's key, whichever iterator
_LOADER_WORKERS = {"_SingleProcessDataLoaderIter": "num_workers=0", "_MultiProcessingDataLoaderIter": "num_workers ≥ 1"}


def normalise(name: str) -> str:
    """The name a kernel keeps across builds: no return type, parameter list, address, launch id or numeric
    suffix, and numbers inside its template arguments replaced by ``N``; a DataLoader's fetch, whichever its
    iterator, :data:`LOADER_FETCH`."""
    if loader_iterator(name) is not None:
        return LOADER_FETCH
    name = _ADDRESS.sub("", _RETURN_TYPE.sub("", name.strip()))
    name = without_parameters(name)
    opening = name.find("<")
    if opening > 0:
        name = name[:opening] + _NUMBER.sub("N", name[opening:])
    return _SPACES.sub(" ", _without_launch_id(name)).strip() or name


def loader_iterator(name: str) -> str | None:
    """The class of the DataLoader iterator whose fetch ``name`` records (``_SingleProcessDataLoaderIter``); None
    where it records none."""
    fetch = _LOADER_FETCH.match(name)
    return fetch.group(1) if fetch else None


def loaders_told(iterators: list[str]) -> str:
    """DataLoader iterators as a user knows them: each class with the ``num_workers`` that chooses it."""
    return " and ".join(
        f"{iterator} ({workers})" if (workers := _LOADER_WORKERS.get(iterator)) else iterator for iterator in iterators
    )


def _without_launch_id(name: str) -> str:
    launch_id = _LAUNCH_ID_REVERSED.match(name[::-1])
    return name[: len(name) - launch_id.end()] if launch_id else name


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    as_: str = Field(alias="as", min_length=1, description="the shared name")
    names: list[str] = Field(default_factory=list, description="exact names (after normalisation) it stands for")
    match: str | None = Field(default=None, description="a regular expression the names it stands for match")

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
            if risk := backtracking_risk(value):
                raise ValueError(f"refused: {risk} can make matching one long name take hours; write it without")
        return value


class _MapFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(1, ge=1, le=1)
    map: list[_Entry]


@dataclass(frozen=True)
class OpMap:
    """Entries in order, the user's first: (exact names, a pattern or None, the shared name they stand for)."""

    entries: tuple[tuple[frozenset[str], re.Pattern | None, str], ...]

    def shared(self, name: str) -> str | None:
        """The shared name of the first entry that lists ``name`` or whose pattern finds it in the name's first
        :data:`MATCHED_CHARS` characters; None when none does."""
        matched = name[:MATCHED_CHARS]
        for names, pattern, shared in self.entries:
            if name in names or (pattern is not None and pattern.search(matched)):
                return shared
        return None


def load_op_map(extra: tuple[str, ...] = ()) -> OpMap:
    """The built-in op map with the files ``extra`` names before it (theirs win)."""
    paths = (*extra, str(builtin_dir() / "maps" / "op_map.yaml"))
    files = [read_model(path, "op map", _MapFile, "an op map is a mapping with a `map:` list of entries")[0]
             for path in paths]  # fmt: skip
    return OpMap(tuple(
        (frozenset(entry.names), re.compile(entry.match) if entry.match is not None else None, entry.as_)
        for file in files
        for entry in file.map
    ))  # fmt: skip
