"""Decode Chrome Trace Event Format JSON into batches of typed events.

Two paths produce batches of the same structs:

* :func:`stream_pieces` reads the file in chunks and cuts the ``traceEvents`` array at object
  boundaries (``}, {``); :func:`decode_piece` decodes each piece with msgspec into
  :class:`RawEvent` structs, in this process or a worker. Memory stays at a few chunks plus the
  columns being built. Any layout it does not expect raises :class:`NeedsExactPath`.
* :func:`exact_batches` decodes the whole document at once. It accepts every valid layout and turns
  every decoding problem into a one-line :class:`~perftool.common.errors.TraceError` naming the line and
  column or the event index.

A cut inside a string or a nested array can never decode as a valid piece (it leaves an
unterminated string or unbalanced brackets), so a piece that decodes is a correct cut.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import msgspec

from perftool.common.errors import TraceError
from perftool.trace.archives import opens_as_json
from perftool.trace.profiler_dirs import ASCEND_OUTPUT, RANK_ENVIRONMENT, RECORDED_VARIABLES

CHUNK_BYTES = 8 << 20  # read at a time
PIECE_BYTES = 4 << 20  # read at a time: Python's work once a piece (its distinct signatures, its Part) is per 4 MiB
NAN = float("nan")
EMPTY_RAW = msgspec.Raw(b"")


class RawEvent(msgspec.Struct, gc=False):
    """The fields perftool reads from one trace event; all others are skipped unparsed."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | str = NAN
    dur: float | str = NAN
    id: int | str | None = None
    args: msgspec.Raw = EMPTY_RAW


def metadata_event(kind: str, pid: int, tid: int, value: object, key: str = "name") -> RawEvent:
    """A metadata event (``M``) a reader of another format makes: a process's or thread's name, labels or sort
    index (``{key: value}`` in its args)."""
    return RawEvent(ph="M", name=kind, pid=pid, tid=tid, args=msgspec.Raw(msgspec.json.encode({key: value})))


class _Document(msgspec.Struct):
    traceEvents: list[RawEvent]


Batch = list[RawEvent]
Metadata = dict[str, Any]

_batch_decoder = msgspec.json.Decoder(list[RawEvent])
_document_decoder = msgspec.json.Decoder(_Document | list[RawEvent])
_object_decoder = msgspec.json.Decoder(dict[str, Any])
_raw_fields_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_raw_document_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw] | list[msgspec.Raw])
_raw_array_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_objects_decoder = msgspec.json.Decoder(dict[str, dict[str, msgspec.Raw]])  # an object of objects
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")

_WHITESPACE = re.compile(rb"[ \t\r\n]*")
# a cut between two events: the next one opens with a key, which no '}, {' inside a string can (its quote would be
# escaped), so JSON held in a string arg or a name such as "a }, { b" is never cut
_KEY_FOLLOWS = rb'[ \t\r\n]*"'
_SEPARATOR = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{(?=" + _KEY_FOLLOWS + rb")")
_OPENS_WITH_KEY = re.compile(_KEY_FOLLOWS)
_TAIL_BYTES = 1 << 20
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_BOM = b"\xef\xbb\xbf"
_SPACE_BYTES = frozenset(b" \t\r\n")
# an escaped UTF-16 surrogate pair, or a surrogate alone, each after an even run of backslashes (a real escape)
_SURROGATE_ESCAPES = re.compile(
    rb"(?<!\\)((?:\\\\)*)(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)
_REPLACEMENT_ESCAPE = rb"\ufffd"
# A number JSON cannot write (NaN, an infinity), bare where a value stands, as writers that do not refuse them put it:
# Python's json module (NaN, Infinity, -Infinity), C and C++ formatting (nan, -nan, inf, -inf, their capitals; Kineto's
# zero-length copies' "memory bandwidth (GB/s)": inf). A string is matched whole first, so one holding such a word is
# kept.
_NONFINITE = re.compile(rb'("(?:[^"\\]|\\.)*")|(?<=[:,\[])([ \t\r\n]*)-?(?i:nan|inf(?:inity)?)(?![\w.])')
_MAYBE_NONFINITE = re.compile(rb"[:,\[][ \t\r\n]*-?(?i:nan|inf(?:inity)?)(?![\w.])")
_UNREAD = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)  # msgspec's errors (UTF-8: before 0.23)


class NeedsExactPath(Exception):
    """The streaming path met a layout it does not handle; decode the whole document instead."""


class _Buffer:
    """A sliding window over a binary stream."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self.data = b""
        self.pos = 0
        self.base = 0  # stream offset of data[0]
        self.eof = False

    def fill(self, wanted: int) -> None:
        """Make at least ``wanted`` bytes available after ``pos`` unless the stream ends first."""
        if self.available >= wanted or self.eof:
            return
        parts = [self.data[self.pos :]]
        have = len(parts[0])
        while have < wanted and not self.eof:
            chunk = self._read(CHUNK_BYTES)
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.data = b"".join(parts)
        self.base += self.pos
        self.pos = 0

    def skip_space(self) -> None:
        self.pos = _WHITESPACE.match(self.data, self.pos).end()  # type: ignore[union-attr]  # \s* always matches

    @property
    def available(self) -> int:
        return len(self.data) - self.pos


def _last_boundary(data: bytes, lo: int, hi: int) -> tuple[int, int] | None:
    """The last ``}`` ``,`` ``{`` separator in ``data[lo:hi]`` whose ``{`` opens with a key (as :data:`_SEPARATOR`
    cuts): (end of one event, start of the next)."""
    while True:
        start = data.rfind(b"{", lo, hi)
        if start <= lo:
            return None
        if not _OPENS_WITH_KEY.match(data, start + 1):
            hi = start
            continue
        k = start - 1
        while k > lo and data[k] in _SPACE_BYTES:
            k -= 1
        if data[k] == 0x2C:  # ','
            k -= 1
            while k > lo and data[k] in _SPACE_BYTES:
                k -= 1
            if data[k] == 0x7D:  # '}'
                return k + 1, start
        hi = start


def decode_piece(piece: bytes | memoryview) -> Batch:
    """Decode the events between two cuts (a comma-separated run of event objects); a string holding an escaped
    surrogate alone reads as holding U+FFFD there (:func:`lone_surrogates_replaced`), a bare NaN or infinity as null
    (:func:`nonfinite_numbers_replaced`)."""
    try:
        return _first_read(_batch_decoder.decode, b"".join((b"[", piece, b"]")))
    except _UNREAD:
        raise NeedsExactPath from None


def _first_read(decode: Callable[[bytes], Any], data: bytes) -> Any:
    """``decode``'s reading of ``data`` as written, else of the first of its repairs that reads (:func:`_repaired`);
    the error of the data as written where none does."""
    try:
        return decode(data)
    except _UNREAD as exc:
        error = exc
    for repaired in _repaired(data, lone_surrogates_replaced(data)):
        try:
            return decode(repaired)
        except _UNREAD:
            continue
    raise error


def _repaired(data: bytes, surrogates: bytes | None) -> Iterator[bytes]:
    """``data`` (JSON msgspec refused) as the readers it was written for would read it: its lone surrogate escapes
    replaced (``surrogates``, made by the caller); its bare non-finite numbers replaced; both. Only the versions that
    change something."""
    if surrogates is not None:
        yield surrogates
    numbers = nonfinite_numbers_replaced(data)
    if numbers is not None:
        yield numbers
        if surrogates is not None and (both := lone_surrogates_replaced(numbers)) is not None:
            yield both


def plain_document(data: bytes) -> Any:
    """The JSON document ``data`` as plain values (objects as dicts), read as the exact decoder reads a trace: its
    BOM skipped, its lone surrogates and bare non-finite numbers repaired where it does not read as written. Raises
    msgspec's error where it does not read either way."""
    return _first_read(msgspec.json.decode, data.removeprefix(_BOM))


def strict_json(piece: bytes | memoryview) -> bytes | memoryview:
    """A run of whole events (as :func:`stream_pieces` cuts them) as strict JSON, for readers that take nothing else:
    as written where it reads so (checked by msgspec without building its values: the usual case), else with its bare
    non-finite numbers written as null (:func:`nonfinite_numbers_replaced`)."""
    try:
        _raw_array_decoder.decode(b"".join((b"[", piece, b"]")))
    except msgspec.DecodeError:
        return nonfinite_numbers_replaced(piece) or piece
    return piece


def nonfinite_numbers_replaced(data: bytes | memoryview) -> bytes | None:
    """``data`` (JSON) with each bare NaN or infinity where a value stands (``"x": NaN``, ``[inf, 1]``) written as
    null, strings left as they are; None where it holds none. JSON's grammar has no such number, but Python's json
    module writes them and reads them back, and so do C and C++ writers that format a double as it is (a rate over
    a zero duration); such a value says nothing, which is what null says."""
    if not _MAYBE_NONFINITE.search(data):
        return None
    replaced = False

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal replaced
        if match[1] is not None:  # a string: as written
            return match[1]
        replaced = True
        return match[2] + b"null"

    written = _NONFINITE.sub(replace, data)
    return written if replaced else None


def lone_surrogates_replaced(data: bytes) -> bytes | None:
    """``data`` (JSON) with each escaped UTF-16 surrogate that is not half of a pair (``\\ud800`` alone) written as
    the escape of U+FFFD, the replacement character; None where it holds none. JSON's grammar allows such an escape,
    and the readers of JavaScript and Python (Chrome's and Perfetto's viewers) take it; msgspec refuses it, and text
    that holds it cannot be written as UTF-8."""
    replaced = False

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal replaced
        if len(match[2]) == 12:  # a pair: one character, as written
            return match[0]
        replaced = True
        return match[1] + _REPLACEMENT_ESCAPE

    written = _SURROGATE_ESCAPES.sub(replace, data)
    return written if replaced else None


def _split_tail(rest: bytes, is_object: bool) -> tuple[bytes, Metadata]:
    """Split what follows the last batch into the remaining events and the trailing metadata: where the events array
    closes is found in one pass, whatever the metadata after it holds."""
    end = len(rest.rstrip())
    if not is_object and not rest[:end].endswith(b"]"):
        if (events := _open_array_events(rest[:end])) is None:
            raise NeedsExactPath
        return events, {}
    if not rest[:end].endswith(b"}" if is_object else b"]"):
        raise NeedsExactPath
    close = _array_end(rest[:end])
    if not is_object:
        if close != end - 1:
            raise NeedsExactPath
        return rest[:close], {}
    tail = rest[close + 1 : end - 1].strip()
    if not tail:
        return rest[:close], {}
    if not tail.startswith(b","):
        raise NeedsExactPath
    return rest[:close], _metadata_object(b"{" + tail[1:] + b"}")


def _metadata_object(data: bytes) -> Metadata:
    """The top-level keys written before or after the events (``data``, one object), read as the exact decoder reads
    them (:func:`_first_read`); NeedsExactPath where they do not read."""
    try:
        return _first_read(_object_decoder.decode, data)
    except _UNREAD:
        raise NeedsExactPath from None


def _open_array_events(data: bytes) -> bytes | None:
    """``data`` to the end of its last event, where it ends as a JSON Array Format document left open after a whole
    event would (the format lets a writer that cannot finish, a process exiting, leave off the array's ``]``): without
    the comma after that event. None where it ends otherwise (no ``]`` could close it)."""
    body = data.rstrip().removesuffix(b",").rstrip()
    return body if body.endswith(b"}") else None


def _array_end(events: bytes) -> int:
    """Where the run of events at the start of ``events`` ends, in ``events``: its ``]``. msgspec reads it as one
    array (its events as raw spans, not decoded) and says where its trailing characters begin."""
    try:
        _raw_array_decoder.decode(b"[" + events)
    except msgspec.DecodeError as exc:
        trailing = _TRAILING.search(str(exc))
        if trailing is None:  # not an array of events: the exact decoder names the problem
            raise NeedsExactPath from None
        following = int(trailing.group(1)) - 2  # msgspec counts from 1, in "[" + events: the first byte after ']'
        return len(events[:following].rstrip()) - 1
    return len(events) - 1


def _open_events(buf: _Buffer, metadata: Metadata) -> bool:
    """Move ``buf`` to the first byte inside the events array; return whether the document is an object."""
    buf.fill(CHUNK_BYTES)
    if buf.data.startswith(_BOM):
        buf.pos = len(_BOM)
    buf.skip_space()
    if not buf.available:
        raise NeedsExactPath
    is_object = buf.data[buf.pos] == 0x7B  # '{'
    if is_object:
        match = _EVENTS_KEY.search(buf.data, buf.pos)
        while match is None and not buf.eof:
            buf.fill(buf.available + CHUNK_BYTES)
            match = _EVENTS_KEY.search(buf.data, buf.pos)
        if match is None:
            raise NeedsExactPath
        head = buf.data[buf.pos + 1 : match.start()].rstrip()
        if head:
            if not head.endswith(b","):
                raise NeedsExactPath
            metadata.update(_metadata_object(b"{" + head[:-1] + b"}"))
        buf.pos = match.end()
    elif buf.data[buf.pos] == 0x5B:  # '['
        buf.pos += 1
    else:
        raise NeedsExactPath
    return is_object


def stream_pieces(read: Callable[[int], bytes], metadata: Metadata) -> Iterator[bytes | memoryview]:
    """Yield runs of whole events of about PIECE_BYTES (for :func:`decode_piece`), filling ``metadata``
    with the top-level keys.

    A piece inside one chunk of the stream is a view of it; only a piece that spans two chunks is
    copied, so the stream is never copied as a whole (fresh memory costs page faults).
    """
    buf = _Buffer(read)
    is_object = _open_events(buf, metadata)
    chunk, pos, eof = buf.data, buf.pos, buf.eof
    head: list[bytes] = []  # the start of the next piece, from the end of earlier chunks (joined once, when cut)
    while not eof:
        if head:
            cut = _SEPARATOR.search(chunk)
            if cut:  # the piece ends at the first cut of this chunk
                yield b"".join((*head, chunk[: cut.start() + 1]))
                head, pos = [], cut.end() - 1
                continue
        elif len(chunk) - pos > PIECE_BYTES:
            bounds = _last_boundary(chunk, pos, pos + PIECE_BYTES) or _first_boundary(chunk, pos + PIECE_BYTES)
            if bounds:
                yield memoryview(chunk)[pos : bounds[0]]
                pos = bounds[1]
                continue
        head.append(chunk[pos:])  # what is left of this chunk starts the next piece
        chunk, pos = read(CHUNK_BYTES), 0
        eof = not chunk
    events, tail = _split_tail(b"".join((*head, chunk[pos:])), is_object)
    metadata.update(tail)
    if events.strip():
        yield events


def _first_boundary(data: bytes, lo: int) -> tuple[int, int] | None:
    """The first ``}`` ``,`` ``{`` separator at or after ``lo``: (end of one event, start of the next)."""
    match = _SEPARATOR.search(data, lo)
    return (match.start() + 1, match.end() - 1) if match else None


def locate_events(path: str, metadata: Metadata) -> tuple[int, int]:
    """Byte range of the events array's contents in an uncompressed file, filling ``metadata``."""
    with open(path, "rb") as fh:
        buf = _Buffer(fh.read)
        is_object = _open_events(buf, metadata)
        start = buf.base + buf.pos
        rest_start, rest = _last_events(fh, start, os.fstat(fh.fileno()).st_size)
    events, tail = _split_tail(rest, is_object)
    metadata.update(tail)
    return start, rest_start + len(events)


def _last_events(fh: BinaryIO, start: int, size: int) -> tuple[int, bytes]:
    """Where the file's last events begin (at an event's start, or the array's), and the bytes from there to its end:
    the last :data:`_TAIL_BYTES`, or twice as many while no cut between events is in them."""
    wanted = _TAIL_BYTES
    while True:
        at = max(start, size - wanted)
        fh.seek(at)
        data = fh.read()
        if at == start:
            return at, data
        cut = _SEPARATOR.search(data)
        if cut:
            return at + cut.end() - 1, data[cut.end() - 1 :]
        wanted *= 2


def read_events_range(
    path: str, start: int, end: int, lo: int, hi: int, into: Callable[[int], memoryview] | None = None
) -> bytes | memoryview:
    """The whole events that begin in [lo, hi) of the events range [start, end) of a file: fresh bytes, or read
    into the view ``into(size)`` gives (memory used before costs no page faults).

    Both ends move forward to the next ``}, {`` separator, so neighbouring ranges meet at the
    same cut and every event lands in exactly one range.
    """
    with open(path, "rb") as fh:
        if lo == start:
            first = lo
        elif (cut := _next_separator(fh, lo, end, before=hi)) is not None:
            first = cut[1]
        else:
            return b""  # no event begins here: the one before runs through the whole range
        last = end if hi >= end else (_next_separator(fh, hi, end) or (end, end))[0]
        if last <= first:
            return b""
        if into is None:
            return os.pread(fh.fileno(), last - first, first)
        view = into(last - first)
        return view[: os.preadv(fh.fileno(), [view], first)]


def _next_separator(fh: BinaryIO, pos: int, end: int, before: int | None = None) -> tuple[int, int] | None:
    """(end of one event, start of the next) for the first separator at or after ``pos``; None when there is
    none before ``end``, or none that starts before ``before``.

    A range's start looks no further than the range itself: where one event or a run of whitespace spans
    many ranges, only the range it begins in reads to its end, so a file is read about once, not once a range.
    """
    limit = end if before is None else min(before, end)
    window = 1 << 16
    while pos < limit:
        data = os.pread(fh.fileno(), min(window, end - pos), pos)
        match = _SEPARATOR.search(data)
        if match:
            return (pos + match.start() + 1, pos + match.end() - 1) if pos + match.start() < limit else None
        if pos + len(data) >= end:
            break
        pos += len(data) - 64  # a separator may straddle the window's edge
        window *= 2
    return None


def opens_container(head: bytes) -> bool:
    """Whether a document's first bytes open a JSON object or array, or are all whitespace so far."""
    return head.removeprefix(_BOM).lstrip(b" \t\r\n")[:1] in (b"{", b"[", b"")


def check_opening(path: str, head: bytes, whole: bool) -> None:
    """Raise the exact decoder's error for a document's first bytes (all of it when ``whole``), unless
    they are a valid start of a document longer than they are."""
    try:
        next(exact_batches(path, head, {}))
    except TraceError as exc:
        if whole or not exc.problem.startswith("truncated"):
            raise


def exact_batches(path: str, data: bytes, metadata: Metadata) -> Iterator[Batch]:
    """Decode a whole document; every problem becomes a TraceError naming the place."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if not data.strip():
        raise TraceError(path, "empty file")
    if (encoding := _wide_encoding(data)) is not None:
        why = " (Windows PowerShell's > writes it)" if encoding.startswith("UTF-16") else ""
        raise TraceError(
            path, f"{encoding} text{why}, where a JSON trace is UTF-8: convert it first (iconv -f {encoding} -t UTF-8)"
        )
    try:
        data, document = _decoded_document(data)
        if not isinstance(document, list):  # the other top-level keys are metadata
            for key, raw in _raw_fields_decoder.decode(data).items():
                if key != "traceEvents":
                    metadata[key] = msgspec.json.decode(raw)
    except msgspec.ValidationError as exc:
        raise TraceError(path, _other_document(data) or _describe_validation(str(exc))) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # msgspec < 0.23 raises the latter for bad UTF-8
        bad = _invalid_utf8_at(data) if _says_invalid_utf8(exc) else None
        if bad is None:
            raise TraceError(path, _describe_syntax(str(exc), data)) from None
        raise TraceError(path, f"not valid UTF-8 at {_line_column(data, bad)}: byte 0x{data[bad]:02x}") from None
    yield document if isinstance(document, list) else document.traceEvents


_WIDE_MARKS = (  # byte-order marks, the longer first: UTF-32's little-endian mark starts as UTF-16's does
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)
_JSON_OPENING = frozenset(b"{[ \t\r\n")  # what a JSON trace's first character is


def _wide_encoding(data: bytes) -> str | None:
    """The encoding of ``data`` where it is JSON in UTF-16 or UTF-32 rather than UTF-8, as iconv names it (UTF-16LE):
    by its byte-order mark, or, without one, by the NUL bytes beside its first character (an opening brace or bracket,
    or space: ASCII, one byte in UTF-8); None otherwise."""
    for mark, encoding in _WIDE_MARKS:
        if data.startswith(mark):
            return encoding
    head = data[:4]
    if len(head) < 4 or not any(byte in _JSON_OPENING for byte in head):
        return None
    if head[:3] == b"\x00\x00\x00" and head[3]:
        return "UTF-32BE"
    if head[0] and head[1:] == b"\x00\x00\x00":
        return "UTF-32LE"
    if not head[0] and head[1]:
        return "UTF-16BE"
    return "UTF-16LE" if head[0] and not head[1] else None


def _decoded_document(data: bytes) -> tuple[bytes, Any]:
    """The document, and the bytes it was read from: as written; else with each surrogate escaped alone read as
    U+FFFD (their error, where they hold another problem), each bare NaN or infinity as null, or both
    (:func:`_repaired`); else, where it is an array left open after its last whole event, closed (the bytes as
    written give the error, where that does not read either)."""
    try:
        return data, _document_decoder.decode(data)
    except msgspec.DecodeError as exc:
        error = exc
    surrogates = lone_surrogates_replaced(data)
    for repaired in _repaired(data, surrogates):
        try:
            return repaired, _document_decoder.decode(repaired)
        except msgspec.DecodeError as still:
            if repaired is surrogates:  # read, they hold another problem: its error, at the offsets as written
                error = still
    if (events := _open_array_events(data)) is not None:
        closed = events + b"]"
        try:
            return closed, _document_decoder.decode(closed)
        except msgspec.DecodeError:
            pass
    raise error


_PATH = re.compile(r"^(?P<msg>.*?) - at `\$(?:\.traceEvents)?(?:\[(?P<index>\d+)\])?(?:\.(?P<field>\w+))?.*`$")


# PyTorch's execution trace (torch.profiler.ExecutionTraceObserver, read by Chakra and HTA beside the profiler's
# trace): the ops' graph, their inputs and dependencies, without their timing
_EXECUTION_TRACE_KEYS = frozenset({"schema", "pid", "start_ts", "nodes"})
_CONFIG_SECTIONS = frozenset({"workload", "knobs"})  # beside "device", an emulator config's top-level keys


def _other_document(data: bytes) -> str | None:
    """What a JSON document that holds no trace is, where it is one written beside traces (a profiler's other
    outputs, a report of one): said in one line with the trace to give instead; None for any other."""
    try:
        document = _raw_document_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if isinstance(document, list):
        if document and bytes(document[0]).lstrip().startswith(b"["):
            return (
                "not a trace: an array of arrays, not of events (torch.profiler's export_memory_timeline writes "
                "one); scan the profiler's trace written with it (*.pt.trace.json)"
            )
        return None
    schema = _schema(document)
    if schema is not None:  # perftool's own reports ("schema"), SARIF and other JSON Schema documents ("$schema")
        made = "perftool's own report" if schema.startswith("perftool.") else "a report"
        return f"not a trace: {made} (schema {schema}); scan the trace it was made from"
    if "device" in document and document.keys() & _CONFIG_SECTIONS:  # an emulator config written as JSON
        return _EMULATOR_CONFIG
    if _EXECUTION_TRACE_KEYS <= document.keys():
        return (
            "not a trace: PyTorch's execution trace (ExecutionTraceObserver), the ops' graph without their timing; "
            "scan the profiler's trace written with it (*.pt.trace.json)"
        )
    if (told := _ascend_output(document, data)) is not None:
        return f"not a trace: {told}; {_ASCEND_TRACE}"
    return None


# torch_npu's and msprof's outputs beside the trace: JSON objects by the keys that tell them
_ASCEND_TRACE = f"scan the rank's directory it belongs to (…_ascend_pt), or its {ASCEND_OUTPUT}/trace_view.json"
_RUN_INFO_KEYS = frozenset({"config", "start_info", "end_info"})  # profiler_info_N.json: the profiler's config
_COMMUNICATION_KEYS = frozenset({"collective", "p2p"})  # communication(_matrix).json: per step, per kind of op


def _ascend_output(document: dict[str, msgspec.Raw], data: bytes) -> str | None:
    """Which of torch_npu's other outputs a JSON object (``document``, its fields undecoded, of ``data``) is, in words;
    None where it is none of them."""
    if _RUN_INFO_KEYS <= document.keys():
        return "torch_npu's record of the profiler's run (profiler_info_N.json)"
    if RECORDED_VARIABLES in document:
        return f"torch_npu's record of the run's environment ({RANK_ENVIRONMENT})"
    try:
        steps = _objects_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if steps and all(step.keys() & _COMMUNICATION_KEYS for step in steps.values()):
        return "msprof's summary of the collectives per step (communication.json or communication_matrix.json)"
    return None


def _schema(fields: dict[str, msgspec.Raw]) -> str | None:
    """The schema a document names for itself: a string under ``$schema``, or ``schema`` where it is perftool's."""
    for key in ("$schema", "schema"):
        try:
            named = msgspec.json.decode(fields[key]) if key in fields else None
        except msgspec.DecodeError:
            named = None
        if isinstance(named, str) and (key == "$schema" or named.startswith("perftool.")):
            return named
    return None


def _describe_validation(message: str) -> str:
    if message.startswith("Object missing required field `traceEvents`"):
        return "not a trace: a JSON object without a 'traceEvents' array"
    match = _PATH.match(message)
    if not match:
        return f"not a trace: {message.replace('`', '')}"
    text = match["msg"].replace("`", "")
    text = text[:1].lower() + text[1:]
    if match["index"] is None:
        return f"not a trace: {text} (a trace is an object with 'traceEvents' or an array of events)"
    where = f"event {match['index']}"
    if match["field"]:
        where += f", field '{match['field']}'"
    return f"{where}: {text}"


_BYTE_OFFSET = re.compile(r"^JSON is malformed: (?P<what>.*) \(byte (?P<offset>\d+)\)$")


def _describe_syntax(message: str, data: bytes) -> str:
    if message.startswith("Input data was truncated"):
        return "truncated JSON: the file ends before the trace is complete"
    match = _BYTE_OFFSET.match(message)
    if not match:
        return f"not valid JSON: {message}"
    if not opens_as_json(data) and (text := _text_begun(data)) is not None:
        return text  # no object nor array from its first character: another kind of file
    return f"not valid JSON at {_line_column(data, int(match['offset']))}: {match['what']}"


_TEXT_SHOWN = 60  # characters of a text file's first line an error quotes
_SPACES = re.compile(rb"\s*")
_TEXT_KINDS = (
    ("<!doctype html", "an HTML page"),
    ("<html", "an HTML page"),
    ("<?xml", "an XML document"),
    ("hlomodule ", "an XLA program's HLO as text (XLA_FLAGS=--xla_dump_to writes them)"),
)
# an emulator config (a sample's, calibrate's fit, a tune config): YAML whose top-level keys name a device and a
# workload or knobs (_CONFIG_SECTIONS), read within its first _CONFIG_BYTES (a config is a few kilobytes)
_CONFIG_KEYS = (re.compile(rb"^device:[ \t]*\w", re.MULTILINE), re.compile(rb"^(?:workload|knobs):", re.MULTILINE))
_CONFIG_BYTES = 1 << 16
_EMULATOR_CONFIG = (
    "an emulator config, not a trace: perftool emulate runs it, and with --trace FILE writes the trace of its run, "
    "which scan reads"
)


def _text_begun(data: bytes) -> str | None:
    """What a file of text whose first character opens no JSON object or array is: an emulator config, with the way
    to its run's trace; else, quoting how it begins, an HTML page (a report, a viewer's page, torch.profiler's memory
    timeline as HTML), an XML document (a JUnit report) or other text (a log); None where its first line is not
    printable text."""
    if all(key.search(data, 0, _CONFIG_BYTES) for key in _CONFIG_KEYS):
        return _EMULATOR_CONFIG
    start = spaces.end() if (spaces := _SPACES.match(data)) else 0  # found in place: the file may be large
    head = data[start : start + 4 * _TEXT_SHOWN].decode("utf-8", "ignore")
    first = head.splitlines()[0] if head else ""
    if not first.isprintable():
        return None
    kind = next((kind for opening, kind in _TEXT_KINDS if first.lower().startswith(opening)), "text")
    shown = first if len(first) <= _TEXT_SHOWN else first[: _TEXT_SHOWN - 1] + "…"
    return f"{kind}, not a JSON trace: it begins {shown!r}"


def _says_invalid_utf8(exc: Exception) -> bool:
    """Whether msgspec's error is about bytes that are not UTF-8 (its own DecodeError since 0.23, Python's before)."""
    return isinstance(exc, UnicodeDecodeError) or str(exc).startswith("Invalid UTF-8")


def _invalid_utf8_at(data: bytes) -> int | None:
    """Offset of the first byte that is not valid UTF-8, or None; decoded a chunk at a time to hold little memory."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    for start in range(0, len(data), CHUNK_BYTES):
        pending = len(decoder.getstate()[0])  # the bytes of a character the last chunk cut
        try:
            decoder.decode(data[start : start + CHUNK_BYTES])  # msgspec names only closed strings: no cut at the end
        except UnicodeDecodeError as exc:
            return start - pending + exc.start
    return None


def _line_column(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"
