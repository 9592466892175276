"""A piece of a trace's events as columns: per event its signature, timestamp and duration, its args, flow id and
correlation id on demand. Two readers give the same :class:`Events`:

* :func:`scan_piece` reads the piece's bytes with the compiled scanner (``perftool/trace/_scan.c``) straight into
  arrays, no Python object per event, and decodes each distinct signature once;
* :func:`events_of` takes the structs msgspec decoded (:func:`perftool.trace.decode.decode_piece`, and the exact
  decoder's batches).

The scanner accepts only what msgspec accepts and gives the same values; where it is not sure (or was not built, as
where no C compiler was found at install), :func:`read_piece` lets msgspec decode the piece, which then decides.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from itertools import count, islice
from typing import Any, Protocol

import msgspec
import numpy as np

from perftool.trace.decode import Batch, decode_piece

try:  # the compiled scanner (a leaf: it imports nothing of perftool), where it was built
    from perftool.trace._scan import scan as _scan
    from perftool.trace._scan import slices as _slices
    from perftool.trace._scan import tail_groups as _tail_groups
    from perftool.trace._scan import tails as _tails
except ImportError:  # an install without a C compiler reads every piece with msgspec
    _scan = _slices = _tails = _tail_groups = None  # type: ignore[assignment]

COMPILED = _scan is not None
Signature = tuple[str, str, str, "int | str", "int | str"]  # (ph, name, cat, pid, tid) of an event
_SIGNATURE = operator.attrgetter("ph", "name", "cat", "pid", "tid")
_ID_INT, _ID_OTHER = 1, 2  # the scanner's kinds of flow id: an integer, or a string or null left as its JSON
_STRING = msgspec.json.Decoder(str)
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"  # JSON's grammar: ASCII digits, no spaces
_JSON_NUMBER = re.compile(_NUMBER)
_JSON_NUMBERS = re.compile(rf"(?:{_NUMBER}\n)*{_NUMBER}")  # numbers joined by newlines, none empty
_INT_OR_STRING = msgspec.json.Decoder(int | str)
_ID = msgspec.json.Decoder(int | str | None)
_CORRELATION_DIGITS = re.compile(rb"0|[1-9][0-9]{0,17}")
_UNDECIDED = -2  # the scanner's correlation id where an escaped key may hold one: msgspec reads it


class Interner:
    """Maps hashable values to dense integer ids."""

    def __init__(self) -> None:
        self.ids: dict[Hashable, int] = {}

    def __call__(self, values: Iterable[Hashable], length: int) -> np.ndarray:
        """Ids of the ``length`` ``values``, adding the new ones, in one dictionary pass in C.

        A value seen for the first time is stored as ``-1 - position`` (where it first occurs) and
        given its dense id afterwards, so each value is hashed once.
        """
        ids = self.ids
        known = len(ids)
        found = np.fromiter(map(ids.setdefault, values, count(-1, -1)), dtype=np.int64, count=length)
        added = list(islice(ids, known, None))
        if not added:
            return found.astype(np.int32)
        first = -1 - np.fromiter(map(ids.__getitem__, added), dtype=np.int64, count=len(added))
        ids.update(zip(added, range(known, known + len(added))))
        dense = np.empty(length, dtype=np.int64)
        dense[first] = np.arange(known, known + len(added))
        is_new = found < 0
        found[is_new] = dense[-1 - found[is_new]]
        return found.astype(np.int32)

    def remap(self, values: Iterable[Hashable]) -> np.ndarray:
        """Ids of a few ``values`` (such as another table's entries), adding the new ones."""
        ids = self.ids
        return np.array([ids.setdefault(v, len(ids)) for v in values], dtype=np.int32)

    @property
    def values(self) -> list[Any]:
        return list(self.ids)


class PieceError(Exception):
    """Bad event inside one piece; ``index`` counts from the piece's first event."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(index, message)
        self.index = index
        self.message = message


class ArgsReader(Protocol):
    """The args and flow ids of a piece's events, by position (``rows``: an int64 array)."""

    def has_args(self, rows: np.ndarray) -> np.ndarray:
        """Whether each of the events has args."""

    def args(self, rows: np.ndarray) -> list[bytes]:
        """The raw JSON of each one's args (empty where it has none)."""

    def tails(self, rows: np.ndarray, keys: tuple[bytes, ...]) -> list[bytes]:
        """Each one's args from the first occurrence of any of ``keys`` on (empty where none occurs)."""

    def tail_groups(self, rows: np.ndarray, keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The events grouped by their :meth:`tails`, equal tails alike: per event its group (int32, numbered in order
        of first occurrence), and per group the position in ``rows`` of its first event (int64)."""

    def ids(self, rows: np.ndarray) -> np.ndarray | list[int | str | None]:
        """Each one's flow id: as int64 where the reader knows all of them to be integers, else a list."""

    def correlations(self, rows: np.ndarray) -> np.ndarray:
        """Each one's correlation id (int64): the integer of 0 to 18 digits its args' top-level ``correlation`` holds
        (the last, where the key repeats); -1 where it holds another value or none."""


@dataclass
class Events:
    """A piece's events, each by position: its signature (an index into ``distinct``, in order of first
    occurrence), timestamp and duration (NaN where it has none). Their args and flow ids are read only for the rows
    asked for."""

    signature: np.ndarray  # int32
    distinct: list[Signature]
    ts: np.ndarray  # float64
    dur: np.ndarray  # float64
    reader: ArgsReader
    # each event's correlation id (int64, -1 where it has none) where the reader knew them all as it read (an
    # XSpace's); None: read from the args of the spans in the categories a dialect names (Kineto's)
    correlation: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.signature)


def read_piece(piece: bytes | memoryview) -> Events:
    """The events of a comma-separated run of event objects: by the compiled scanner, else by msgspec (which raises
    :class:`~perftool.trace.decode.NeedsExactPath` where the piece is not a run of valid events)."""
    scanned = scan_piece(piece)
    if scanned is not None:
        return scanned
    return events_of(decode_piece(piece) if bytes(piece).strip() else [])


def scan_piece(piece: bytes | memoryview) -> Events | None:
    """The events the compiled scanner reads from ``piece``; None where it leaves the piece to msgspec, or was not
    built."""
    if _scan is None:
        return None
    scanned = _scan(piece)
    if scanned is None:
        return None
    raw_signatures, ts, dur, signature, id_kind, id_value, id_span, args_span, correlation = scanned
    try:
        decoded = [_signature(raw) for raw in raw_signatures]
        other_ids = _other_ids(piece, np.frombuffer(id_kind, np.int8), np.frombuffer(id_span, np.int64))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None  # a value msgspec reads otherwise than the scanner checked (such as a string of bad UTF-8)
    distinct = Interner()
    remap = distinct(decoded, len(decoded))  # raw signatures that decode alike (escapes) become one
    return Events(
        signature=remap[np.frombuffer(signature, np.int32)],
        distinct=distinct.values,
        ts=np.frombuffer(ts, np.float64),
        dur=np.frombuffer(dur, np.float64),
        reader=_ScannedArgs(piece, args_span, id_kind, id_value, other_ids, correlation),
    )


class _ScannedArgs:
    """Args, flow ids and correlation ids from the scanner's spans and values of them."""

    def __init__(
        self, piece: bytes | memoryview, spans: bytes, kinds: bytes, values: bytes, others: dict, correlation: bytes
    ) -> None:
        self.piece = piece
        self.spans = np.frombuffer(spans, np.int64).reshape(-1, 2)
        self.kinds = np.frombuffer(kinds, np.int8)
        self.values = np.frombuffer(values, np.int64)
        self.others = others  # the ids that are strings or null, by position
        self.correlation = np.frombuffer(correlation, np.int64)

    def has_args(self, rows: np.ndarray) -> np.ndarray:
        spans = self.spans[rows]
        return spans[:, 1] > spans[:, 0]

    def args(self, rows: np.ndarray) -> list[bytes]:
        return _slices(self.piece, np.ascontiguousarray(self.spans[rows]))

    def tails(self, rows: np.ndarray, keys: tuple[bytes, ...]) -> list[bytes]:
        return _tails(self.piece, np.ascontiguousarray(self.spans[rows]), keys)

    def tail_groups(self, rows: np.ndarray, keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
        groups, firsts = _tail_groups(self.piece, np.ascontiguousarray(self.spans[rows]), keys)
        return np.frombuffer(groups, np.int32), np.frombuffer(firsts, np.int64)

    def correlations(self, rows: np.ndarray) -> np.ndarray:
        values = self.correlation[rows]
        undecided = np.flatnonzero(values == _UNDECIDED)  # args with an escaped key: msgspec reads them
        values[undecided] = list(map(_correlation, self.args(rows[undecided])))
        return values

    def ids(self, rows: np.ndarray) -> np.ndarray | list[int | str | None]:
        if not self.others and (self.kinds[rows] == _ID_INT).all():
            return self.values[rows]
        others, kinds, values = self.others, self.kinds, self.values
        return [others[i] if i in others else int(values[i]) if kinds[i] == _ID_INT else None for i in rows.tolist()]


def _signature(raw: tuple[bytes | None, ...]) -> Signature:
    """A signature from the raw JSON of its five values (None for a field the event does not have)."""
    ph, name, cat, pid, tid = raw
    return (
        "" if ph is None else _STRING.decode(ph),
        "" if name is None else _STRING.decode(name),
        "" if cat is None else _STRING.decode(cat),
        0 if pid is None else _INT_OR_STRING.decode(pid),
        0 if tid is None else _INT_OR_STRING.decode(tid),
    )


def _other_ids(piece: bytes | memoryview, kinds: np.ndarray, spans: np.ndarray) -> dict[int, int | str | None]:
    """The flow ids that are not integers (strings, null), by event position."""
    rows = np.flatnonzero(kinds == _ID_OTHER).tolist()
    return {i: _ID.decode(bytes(piece[spans[2 * i] : spans[2 * i + 1]])) for i in rows}


def events_of(batch: Batch) -> Events:
    """The events of a batch msgspec decoded."""
    distinct = Interner()
    signature = distinct(map(_SIGNATURE, batch), len(batch))
    return Events(
        signature=signature,
        distinct=distinct.values,
        ts=_numbers(batch, "ts"),
        dur=_numbers(batch, "dur"),
        reader=_DecodedArgs(batch),
    )


class _DecodedArgs:
    """Args and flow ids from the structs msgspec decoded."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch

    def has_args(self, rows: np.ndarray) -> np.ndarray:
        batch = self.batch
        return np.fromiter((len(batch[i].args) > 0 for i in rows.tolist()), dtype=bool, count=len(rows))

    def args(self, rows: np.ndarray) -> list[bytes]:
        return [bytes(self.batch[i].args) for i in rows.tolist()]

    def tails(self, rows: np.ndarray, keys: tuple[bytes, ...]) -> list[bytes]:
        return [_from_first_key(raw, keys) for raw in self.args(rows)]

    def tail_groups(self, rows: np.ndarray, keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
        groups = Interner()
        group = groups(self.tails(rows, keys), len(rows))
        return group, np.unique(group, return_index=True)[1]

    def correlations(self, rows: np.ndarray) -> np.ndarray:
        return np.fromiter(map(_correlation, self.args(rows)), np.int64, rows.size)

    def ids(self, rows: np.ndarray) -> list[int | str | None]:
        return [self.batch[i].id for i in rows.tolist()]


class _Correlation(msgspec.Struct):
    correlation: msgspec.Raw = msgspec.Raw(b"")


_READ_CORRELATION = msgspec.json.Decoder(_Correlation)


def _correlation(args: bytes) -> int:
    """The correlation id in ``args`` (raw JSON) as the scanner reads it: their top-level ``correlation`` where it
    holds an integer of 0 to 18 digits, else -1."""
    try:
        value = bytes(_READ_CORRELATION.decode(args).correlation)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return -1
    return int(value) if _CORRELATION_DIGITS.fullmatch(value) else -1


def _from_first_key(written: bytes, keys: tuple[bytes, ...]) -> bytes:
    """``written`` from where the first occurrence of any of ``keys`` begins (empty when none occurs), as the scanner's
    ``tails`` cuts it."""
    found = [at for key in keys if (at := written.find(key)) >= 0]
    return written[min(found) :] if found else b""


def _numbers(batch: Batch, field: str) -> np.ndarray:
    """Timestamps and durations: numbers, or strings holding a JSON number as Ascend tools write them (never a
    number in other digits, with spaces or underscores, or ``inf``, which Python's ``float`` would read)."""
    values = list(map(operator.attrgetter(field), batch))
    strings = [v for v in values if type(v) is str]
    if strings and not _JSON_NUMBERS.fullmatch("\n".join(strings)):  # all checked in one match
        i, value = next((i, v) for i, v in enumerate(values) if type(v) is str and not _JSON_NUMBER.fullmatch(v))
        raise PieceError(i, f"field '{field}': expected a number, got {value!r:.40}")
    return np.array(values, dtype=np.float64)
