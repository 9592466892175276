"""Which events keep their ``args``, and how much of them: all, just an op's recorded inputs, or just a kernel's
launch configuration, decided once per distinct signature; reduced args are written compactly, so that calls with the
same inputs or launch share one copy."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import msgspec
import numpy as np

from perftool.trace.events import Events, Interner, Signature

LAUNCH_MIN_US = 10.0  # kernels shorter than this keep no launch configuration: a few µs lose little to a small grid


class ArgsKept(enum.IntEnum):
    """How much of an event's ``args`` the loader keeps."""

    NONE = 0
    ALL = 1
    INPUTS = 2  # just its recorded inputs (:class:`RecordedInputs`)
    LAUNCH = 3  # just its launch configuration (:class:`LaunchConfig`), and only for long kernels


@dataclass(frozen=True)
class KeepArgs:
    """Which events keep their ``args``: those in ``categories``, and those whose name ``names`` matches
    (a regular expression; empty for none). Of those kept for their name alone, events whose name ``inputs_only``
    matches keep just their recorded inputs (``Input Dims``, ``Input dims``, ``Input type``, ``Concrete Inputs``).
    Events in ``launch_categories`` that run at least ``launch_min_us`` keep just their launch configuration.
    Reduced args are written compactly, so calls with the same inputs or launch keep the same bytes. The spans whose
    category ``correlated`` matches (a regular expression, whole and without regard to case; empty for none) give
    the correlation id their args hold (Kineto's ``correlation``) as their flow id. Decided once per distinct
    signature, never per event."""

    categories: frozenset[str] = frozenset()
    names: str = ""
    inputs_only: str = ""
    launch_categories: frozenset[str] = frozenset()
    launch_min_us: float = LAUNCH_MIN_US
    correlated: str = ""

    def of(self, signatures: list[Signature]) -> np.ndarray:
        """Per signature: how much of its events' args is kept (an :class:`ArgsKept`). The answer for each name and
        category is kept for the pieces after (a trace's repeat theirs): the dialects' patterns run once a name."""
        keys = [(name, category) for _, name, category, _, _ in signatures]
        answers = _answers(_KEPT_BY_NAME.setdefault(self, {}), keys, lambda key: self._kept(*key))
        return np.fromiter(answers, np.uint8, len(keys))

    @cached_property
    def _patterns(self) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        """``names`` and ``inputs_only`` compiled, once (None where empty): a trace of many steps has a new name
        a step (``ProfilerStep#N``), each matched against both."""
        return (
            re.compile(self.names) if self.names else None,
            re.compile(self.inputs_only) if self.inputs_only else None,
        )

    def correlated_of(self, signatures: list[Signature]) -> np.ndarray:
        """Per signature: whether its events are spans in a category that ``correlated`` matches (each category
        matched once, the answers kept for the pieces after as :meth:`of` keeps its own)."""
        if not self.correlated:
            return np.zeros(len(signatures), dtype=bool)
        categories = list({category for _, _, category, _, _ in signatures})
        pattern = self._correlated_pattern
        known = _CORRELATED_BY_CATEGORY.setdefault(self, {})
        matched = dict(zip(categories, _answers(known, categories, lambda category: bool(pattern.fullmatch(category)))))
        return np.fromiter(
            (ph == "X" and matched[category] for ph, _, category, _, _ in signatures), bool, len(signatures)
        )

    @cached_property
    def _correlated_pattern(self) -> re.Pattern[str]:
        return re.compile(self.correlated, re.IGNORECASE)

    def _kept(self, name: str, category: str) -> int:
        if category in self.categories:  # an event a dialect keeps for its category keeps all its args
            return ArgsKept.ALL
        names, inputs_only = self._patterns
        if names and names.search(name):
            return ArgsKept.INPUTS if inputs_only and inputs_only.search(name) else ArgsKept.ALL
        if category in self.launch_categories:
            return ArgsKept.LAUNCH
        return ArgsKept.NONE


_KEPT_BY_NAME: dict[KeepArgs, dict[tuple[str, str], int]] = {}  # KeepArgs.of's answers, per process
_CORRELATED_BY_CATEGORY: dict[KeepArgs, dict[str, bool]] = {}  # KeepArgs.correlated_of's, per process
_KEPT_NAMES = 1 << 16  # a trace of more distinct keys than this gains nothing from keeping their answers
Key = TypeVar("Key", bound=Hashable)
Answer = TypeVar("Answer")


def _answers(known: dict[Key, Answer], keys: Iterable[Key], answer: Callable[[Key], Answer]) -> Iterator[Answer]:
    """Each of ``keys``' answer, from ``known`` (this process's answers, emptied past :data:`_KEPT_NAMES`) where it
    was given before. Read with get, not `in` then []: a cluster worker's other thread may empty it in between."""
    if len(known) > _KEPT_NAMES:
        known.clear()
    return (found if (found := known.get(key)) is not None else known.setdefault(key, answer(key)) for key in keys)


class RecordedInputs(msgspec.Struct, omit_defaults=True):
    """An op's recorded inputs, as PyTorch's profiler writes them (``record_shapes=True``), left as raw JSON."""

    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    dims_before_1_10: msgspec.Raw = msgspec.field(name="Input dims", default=msgspec.Raw(b""))
    types: msgspec.Raw = msgspec.field(name="Input type", default=msgspec.Raw(b""))
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=msgspec.Raw(b""))


class LaunchConfig(msgspec.Struct, omit_defaults=True):
    """A kernel's launch configuration, as Kineto records it with each kernel, left as raw JSON."""

    grid: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""))
    block: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""))
    registers: msgspec.Raw = msgspec.field(name="registers per thread", default=msgspec.Raw(b""))
    shared_memory: msgspec.Raw = msgspec.field(name="shared memory", default=msgspec.Raw(b""))


_REDUCERS: dict[int, msgspec.json.Decoder] = {  # by ArgsKept's value
    ArgsKept.INPUTS: msgspec.json.Decoder(RecordedInputs),
    ArgsKept.LAUNCH: msgspec.json.Decoder(LaunchConfig),
}
_KEYS: dict[int, tuple[bytes, ...]] = {  # the keys of the fields each reduction keeps, the first Kineto writes first
    ArgsKept.INPUTS: (b'"Input Dims"', b'"Input dims"', b'"Input type"', b'"Concrete Inputs"'),
    ArgsKept.LAUNCH: (b'"registers per thread"', b'"shared memory"', b'"grid"', b'"block"'),
}


def _reduced(kept: int, raw: bytes) -> bytes:
    """The part of an event's args that ``kept`` names, compactly ({} where there is none or the args do not parse)."""
    try:
        return msgspec.json.encode(_REDUCERS[kept].decode(raw))
    except (msgspec.DecodeError, UnicodeDecodeError):
        return b"{}"


KEEP_NO_ARGS = KeepArgs()  # only instant events keep theirs


def kept_args_of(events: Events, keeping: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    """The events whose args are kept (``keeping`` says how much of each), the index of each one's args in the list
    of kept args, and that list, in order of first use: whole args each their own, reduced ones shared by all whose
    reduction is equal.

    A reduction reads the args from the first field it keeps on (:data:`_KEYS`); profilers write the varying fields
    (ids, correlation) before these, so the calls of one op with the same inputs, or kernels with the same launch,
    share that tail: the events are grouped by it (in C where the scanner read them) and each group reduced once.
    """
    rows = np.flatnonzero(keeping)
    rows = rows[events.reader.has_args(rows)]
    kinds = keeping[rows]
    reductions = Interner()  # the distinct reduced args, of any kind
    key = -1 - np.arange(len(rows))  # per row, what its kept args are: whole ones its own (< 0), else a reduction
    for kind, keys_kept in _KEYS.items():
        of_kind = np.flatnonzero(kinds == kind)
        if not of_kind.size:
            continue
        group, first = events.reader.tail_groups(rows[of_kind], keys_kept)
        firsts = rows[of_kind[first]]
        tails, raws = events.reader.tails(firsts, keys_kept), events.reader.args(firsts)
        reduced = [_reduced(kind, raw) if tail else b"{}" for raw, tail in zip(raws, tails)]
        key[of_kind] = reductions.remap(reduced)[group]
    distinct, first_use, ref = np.unique(key, return_index=True, return_inverse=True)
    by_first_use = np.argsort(first_use)
    rank = np.empty_like(by_first_use)
    rank[by_first_use] = np.arange(by_first_use.size)
    used = distinct[by_first_use].tolist()
    whole_keys = [k for k in used if k < 0]
    whole = dict(zip(whole_keys, events.reader.args(rows[np.array([-1 - k for k in whole_keys], np.int64)])))
    values = reductions.values
    return rows, rank[ref.reshape(-1)].astype(np.int32), [whole[k] if k < 0 else values[k] for k in used]
