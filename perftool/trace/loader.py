"""Load a Chrome Trace Event Format file (``.json`` or gzip-compressed) into a :class:`Trace`."""

from __future__ import annotations

import functools
import gc
import itertools
import math
import os
import queue
import shutil
import stat
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from perftool.common import limits
from perftool.common.cores import free_cores
from perftool.common.errors import TraceError, parameter
from perftool.common.units import plural
from perftool.trace import decode, xspace
from perftool.trace.archives import GZIP_MAGIC, HEAD_BYTES, SQLITE_MAGIC, not_a_trace, opens_as_json
from perftool.trace.columns import ColumnBuilder
from perftool.trace.decode import (
    CHUNK_BYTES,
    NeedsExactPath,
    RawEvent,
    exact_batches,
    locate_events,
    read_events_range,
    stream_pieces,
)
from perftool.trace.events import PieceError, events_of, read_piece
from perftool.trace.kept_args import KEEP_NO_ARGS, KeepArgs
from perftool.trace.model import Trace
from perftool.trace.parts import Part, make_part
from perftool.trace.profiler_dirs import DATABASE_SUFFIX, XPROF_CACHE_SUFFIX, XSPACE_SUFFIX, xprof_cache_advice
from perftool.trace.seen import FileSeen, seen
from perftool.trace.store import spill_directory
from perftool.trace.workers import WorkerDied, Workers
from perftool.trace.workers import processes as worker_processes

STDIN = "-"  # the name that reads a trace from standard input
SPOOL_CHUNK_BYTES = 1 << 20
SPOOL_FREE_SHARE = 0.05  # a stream's copy leaves this share of its disk free, or SPOOL_FREE_BYTES where less
SPOOL_FREE_BYTES = 1 << 30
PARALLEL_MIN_BYTES = 32 << 20  # below this, starting worker processes costs more than it saves
MAX_DECODERS = 4  # decoding processes at most, one per free core up to this
XSPACE_PARALLEL_MIN_BYTES = 4 << 20  # an XSpace's events decode at about 8 MB/s: from this size, processes pay
NO_LIMIT = 1 << 62  # the trace-size limit where none is set

# what decodes a file's byte ranges: called as ``processes(count, function, *fixed)`` is, giving Workers
Decoders = Callable[..., AbstractContextManager[Workers]]


def read_trace(
    path: str | os.PathLike[str],
    workers: int | None = None,
    max_bytes: int | None = None,
    keep_args: KeepArgs = KEEP_NO_ARGS,
    decoders: Decoders | None = None,
    memory: int | None = None,
    analysis: str = "info",
) -> Trace:
    """Read a trace file's events into columns; roles and kinds are the dialect's (:mod:`perftool.pipeline.read`).

    ``workers`` decoding processes are used for large files (default: one per CPU, at most 4), or ``decoders``
    where given (a cluster's workers, :func:`perftool.job.cluster.cluster_decoders`), whatever the file's size:
    they read the byte ranges of an uncompressed file themselves, and only each range's columns come back. A
    trace of more than ``max_bytes`` of JSON (default :func:`perftool.common.limits.max_trace_bytes`: none) is
    refused. Columns that would take more for the ``analysis`` the trace is read for (``info``, ``scan``, ``diff``
    or ``calibrate``: :func:`perftool.common.limits.memory_to_scan`) than the ``memory`` budget (default
    :func:`perftool.common.limits.memory_budget`) leaves beside perftool's own
    (:data:`perftool.common.limits.PROCESS_MEMORY`) are kept on disk (:mod:`perftool.trace.store`); fewer processes
    decode where theirs would take over half of that. Events ``keep_args`` selects keep their ``args``. Raises
    :class:`~perftool.common.errors.TraceError` with a one-line message for any unreadable input.
    """
    path = os.fspath(path)
    max_bytes = max_bytes or limits.max_trace_bytes() or NO_LIMIT
    memory = memory or limits.memory_budget()
    if path == STDIN or _is_stream(path):
        return _read_spooled(path, workers, max_bytes, keep_args, memory, analysis)
    _check_readable(path)
    if (batches := _other_format(path)) is not None:
        if os.path.getsize(path) > max_bytes:  # a protobuf's or a database's bytes, held to the limit as JSON is
            raise _too_large(path, f"is larger ({limits.size_text_as(os.path.getsize(path), max_bytes)})", max_bytes)
        if batches is xspace.batches:
            return _load_xspace(path, workers, keep_args, memory, analysis)
        return _load_events(path, batches, keep_args, memory, analysis)
    if not _is_gzip(path) and os.path.getsize(path) > max_bytes:
        raise _too_large(path, f"holds more JSON ({limits.size_text_as(os.path.getsize(path), max_bytes)})", max_bytes)
    try:
        return _load(path, workers, max_bytes, keep_args, decoders, memory, analysis)
    except RecursionError:
        raise TraceError(
            path, f"JSON nested too deeply (over {limits.MAX_JSON_DEPTH} levels of arrays or objects)"
        ) from None


def _is_stream(path: str) -> bool:
    """A FIFO, a terminal, ``/dev/stdin`` or ``<(...)``: input read once, from start to end, never sized."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _read_spooled(
    path: str, workers: int | None, max_bytes: int, keep_args: KeepArgs, memory: int, analysis: str
) -> Trace:
    """Copy a stream (``-`` for standard input) once into a temporary file, then load that like any file.

    The copy stops at the trace-size limit (for gzip, at the limit on compressed bytes as well), before it would
    leave its disk less free than :data:`SPOOL_FREE_SHARE` of it or :data:`SPOOL_FREE_BYTES`, the smaller (a stream
    that never ends fills no disk, limit or none),
    and at once for a stream that does not begin as a JSON document or gzip file does; errors and the trace's
    ``source`` name the stream, not the temporary file.
    """
    with _spool_folder(path) as folder:
        spooled = os.path.join(folder, "trace")
        try:
            source = sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
        try:
            with open(spooled, "wb") as out:
                copied = 0
                while chunk := source.read(SPOOL_CHUNK_BYTES):
                    if not copied and not chunk.startswith(GZIP_MAGIC) and not decode.opens_container(chunk):
                        decode.check_opening(path, chunk, whole=False)
                    copied += len(chunk)
                    if copied > max_bytes:
                        read = limits.size_text_as(copied, max_bytes)
                        raise _too_large(path, f"holds more data ({read} read so far)", max_bytes)
                    _write_copy(path, out, chunk, folder)
        finally:
            if source is not sys.stdin.buffer:
                source.close()
        try:
            trace = read_trace(spooled, workers, max_bytes, keep_args, memory=memory, analysis=analysis)
        except TraceError as exc:
            raise TraceError(path, exc.problem) from None
    trace.source = path
    return trace


@contextmanager
def _spool_folder(path: str) -> Iterator[str]:
    """A temporary folder for the copy of the stream ``path``, removed after."""
    directory = spill_directory()
    try:
        folder = tempfile.TemporaryDirectory(prefix="perftool-", dir=directory)
    except OSError as exc:
        raise _no_copy(path, directory, exc) from None
    with folder as name:
        yield name


def _write_copy(path: str, out: BinaryIO, chunk: bytes, folder: str) -> None:
    try:
        disk = shutil.disk_usage(folder)
        kept_free = min(disk.total * SPOOL_FREE_SHARE, SPOOL_FREE_BYTES)
        if disk.free - len(chunk) < kept_free:
            raise TraceError(
                path,
                f"its copy in {os.path.dirname(folder)} stopped after {limits.size_text(out.tell())}, before the disk "
                f"had less than {limits.size_text(int(kept_free))} free; {parameter('max_bytes')} (or "
                f"{limits.MAX_TRACE_SIZE_ENV}) bounds a stream, {limits.SPILL_DIR_ENV} or TMPDIR chooses where its "
                "copy is kept",
            )
        out.write(chunk)
    except OSError as exc:  # a full disk, most likely
        raise _no_copy(path, os.path.dirname(folder), exc) from None


def _no_copy(path: str, directory: str, exc: OSError) -> TraceError:
    return TraceError(
        path,
        f"cannot keep a copy of it in {directory}: {exc.strerror or exc} ({limits.SPILL_DIR_ENV} or TMPDIR chooses "
        "where)",
    )


def _too_large(path: str, what: str, max_bytes: int) -> TraceError:
    return TraceError(
        path,
        f"{what} than the trace-size limit of {limits.size_text(max_bytes)} allows; {parameter('max_bytes')} "
        f"(or {limits.MAX_TRACE_SIZE_ENV}) raises it",
    )


def _load(
    path: str,
    workers: int | None,
    max_bytes: int,
    keep_args: KeepArgs,
    decoders: Decoders | None,
    memory: int,
    analysis: str,
) -> Trace:
    if workers is None:
        workers = min(free_cores(), MAX_DECODERS) if json_size_hint(path) >= PARALLEL_MIN_BYTES else 1
    if memory <= limits.PROCESS_MEMORY:
        raise TraceError(
            path,
            f"the memory budget of {limits.size_text(memory)} is less than perftool itself takes before reading an "
            f"event ({limits.size_text(limits.PROCESS_MEMORY)}); {parameter('memory')} (or {limits.MEMORY_ENV}) "
            "raises it",
        )
    budget = memory - limits.PROCESS_MEMORY  # what the columns and the analysis's arrays may take
    if not decoders:
        workers = _workers_within(budget, workers)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived structs; none of them form cycles
    try:
        try:
            builder, metadata = ColumnBuilder(path, analysis, json_size_hint(path)), dict[str, Any]()
            if (workers > 1 or decoders) and not _is_gzip(path):  # each process reads its own byte ranges
                events = locate_events(path, metadata)
                decoding = decoders or worker_processes  # a cluster's decoders check they read the file seen here
                with decoding(workers, _part_of_range, seen(path), events, keep_args) as pool:
                    _add_all(builder, pool.run((piece,) for piece in _pieces(*events)), budget)
            else:  # processes are started before the reading thread, as forking a threaded process is unsafe
                decoders = worker_processes(workers, _part_of_piece, keep_args, piece_bytes=decode.PIECE_BYTES)
                with decoders as pool, _reader(path, max_bytes) as read:
                    _add_all(builder, pool.run_pieces(stream_pieces(read, metadata)), budget)
        except NeedsExactPath:
            _check_whole_fits(path, memory)
            with _reader(path, max_bytes) as read:
                data = _whole_document(path, read)
            return _load_events(path, lambda p, found: exact_batches(p, data, found), keep_args, memory, analysis)
        except WorkerDied as exc:
            raise TraceError(path, str(exc)) from None
        return builder.finish(metadata)
    finally:
        if gc_was_enabled:
            gc.enable()


def _check_whole_fits(path: str, memory: int) -> None:
    """Refuse a trace that must be decoded whole (a layout the pieces cannot be cut from) where that would take more
    than the memory budget: that path holds every event at once."""
    need = limits.PROCESS_MEMORY + int(json_size_hint(path) * limits.MEMORY_PER_EXACT_BYTE)
    if need > memory:
        raise TraceError(
            path,
            f"its events cannot be cut into pieces (a string that reads like the cut between two events), and decoding "
            f"it whole needs about {limits.size_text_as(need, memory)}, more than the memory budget of "
            f"{limits.size_text(memory)}; {parameter('memory')} (or {limits.MEMORY_ENV}) raises it",
        )


def _other_format(path: str) -> Callable[[str, dict[str, Any]], Iterable[list[RawEvent]]] | None:
    """The reader of a trace that is not JSON, by its content or its name: torch_npu's or msprof's db export
    (sqlite; its module loads only when one is read), an XSpace; None for JSON. An archive, a compressed file other
    than gzip or another profiler's report is refused, with the way to the trace it holds."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    if (instead := not_a_trace(path, head)) is not None:
        raise TraceError(path, instead)
    if head.startswith(SQLITE_MAGIC):
        from perftool.trace import ascend_db

        return ascend_db.batches
    if path.lower().endswith(DATABASE_SUFFIX) and not opens_as_json(head):
        raise TraceError(
            path,
            "named a database but not an sqlite one (its first bytes are not sqlite's header): a damaged or "
            "half-copied db export? Export the profile again, or scan its text export",
        )
    if path.lower().endswith(XSPACE_SUFFIX):
        return xspace.batches
    if path.endswith(XPROF_CACHE_SUFFIX):
        raise TraceError(path, xprof_cache_advice(Path(path)))
    return None


def _load_events(
    path: str,
    batches: Callable[[str, dict[str, Any]], Iterable[list[RawEvent]]],
    keep_args: KeepArgs,
    memory: int,
    analysis: str,
) -> Trace:
    """A trace from events decoded in this process, a batch at a time (``batches(path, metadata)``, which fills the
    trace's metadata as it reads): what msgspec's exact decoder reads from a JSON document, or what a database
    export holds."""
    builder, metadata = ColumnBuilder(path, analysis), dict[str, Any]()
    _add_all(
        builder,
        (make_part(events_of(batch), keep_args) for batch in batches(path, metadata)),
        memory - limits.PROCESS_MEMORY,
    )
    return builder.finish(metadata)


def _load_xspace(path: str, workers: int | None, keep_args: KeepArgs, memory: int, analysis: str) -> Trace:
    """A trace from an XSpace, its lines' events decoded by ``workers`` processes (default: one per free core, at
    most :data:`MAX_DECODERS`, where the file holds :data:`XSPACE_PARALLEL_MIN_BYTES`), a run of events each
    (:func:`perftool.trace.xspace.layout`); in this process where one."""
    size = os.path.getsize(path)
    if workers is None:
        workers = min(free_cores(), MAX_DECODERS) if size >= XSPACE_PARALLEL_MIN_BYTES else 1
    budget = memory - limits.PROCESS_MEMORY
    builder, metadata = ColumnBuilder(path, analysis, size), dict[str, Any]()
    found = xspace.layout(path, metadata)
    try:
        with worker_processes(_workers_within(budget, workers), _part_of_xspace, seen(path), found.planes,
                              keep_args) as pool:  # fmt: skip
            names = make_part(events_of(found.names), keep_args)
            _add_all(builder, itertools.chain([names], pool.run((task,) for task in found.tasks)), budget)
    except WorkerDied as exc:
        raise TraceError(path, str(exc)) from None
    return builder.finish(metadata)


def _part_of_xspace(file: FileSeen, planes: xspace.Planes, keep_args: KeepArgs, task: xspace.Task) -> Part:
    _checked(file)
    events = xspace.task_events(file.path, planes, task)
    read = events_of(events)
    read.correlation = xspace.correlations(events)  # known as the events were read: no args to read them from
    return make_part(read, keep_args, task.size)


def check_copyable(path: str) -> None:
    """Raise TraceError unless ``path`` is a trace file whose events can be written out: not standard input (read
    once, and gone)."""
    if path == STDIN or _is_stream(path):
        raise TraceError(path, "its events are copied from its file, and a stream is read only once: save it first")
    _check_readable(path)


def events_as_written(path: str, metadata: dict[str, Any]) -> Iterator[bytes | memoryview]:
    """A JSON trace's events as its file holds them: runs of whole, comma-separated event objects, in file order,
    read as they stream (gzip or not), as strict JSON (:func:`~perftool.trace.decode.strict_json`: a bare NaN or
    infinity written as null); ``metadata`` holds the document's other top-level keys once the runs end. A
    document whose layout the streaming reader does not follow (it leaves such files to msgspec's exact decoder) is
    read whole and its events written back by msgspec. A database export's or an XSpace's events are written as
    perftool reads them, the metadata its reader found beside them. Raises TraceError where :func:`check_copyable`
    does."""
    check_copyable(path)
    if (other := _other_format(path)) is not None:
        for batch in other(path, metadata):
            if batch:
                yield b",".join(map(_event_json, batch))
        return
    with _reader(path, NO_LIMIT) as read:
        pieces = stream_pieces(read, metadata)
        try:
            first = next(pieces, None)
        except NeedsExactPath:  # found before a byte is given out: read whole instead
            metadata.clear()
        else:
            if first is not None:
                yield decode.strict_json(first)
            try:
                yield from map(decode.strict_json, pieces)
            except NeedsExactPath:
                raise TraceError(path, _CHANGED) from None
            return
    with _reader(path, NO_LIMIT) as read:
        data = _whole_document(path, read)
    try:
        document = decode.plain_document(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise TraceError(path, _CHANGED) from None
    events = document.pop("traceEvents", []) if isinstance(document, dict) else document
    metadata.update(document if isinstance(document, dict) else {})
    if events:
        yield msgspec.json.encode(events)[1:-1]


_CHANGED = "its events could not be copied as written (the file changed?)"


def _whole_document(path: str, read: Callable[[int], bytes]) -> bytes:
    """The document's bytes for the exact decoder; one whose first chunk opens no JSON object or array fails
    there, unread beyond it (a gigabyte of NUL bytes is one error, not a gigabyte in memory)."""
    chunks = [read(CHUNK_BYTES)]
    if not decode.opens_container(chunks[0]):
        chunks.append(read(CHUNK_BYTES))
        decode.check_opening(path, chunks[0], whole=not chunks[1])
    chunks.extend(iter(lambda: read(CHUNK_BYTES), b""))
    return b"".join(chunks)


def _event_json(event: RawEvent) -> bytes:
    """An event a reader made (not copied from a JSON file) as a trace event object: the fields it has."""
    fields: dict[str, Any] = {"ph": event.ph, "name": event.name, "pid": event.pid, "tid": event.tid}
    if event.cat:
        fields["cat"] = event.cat
    for key, value in (("ts", event.ts), ("dur", event.dur)):
        if not isinstance(value, float) or math.isfinite(value):
            fields[key] = value
    if event.id is not None:
        fields["id"] = event.id
    if bytes(event.args):
        fields["args"] = event.args
    return msgspec.json.encode(fields)


def _part_of_piece(keep_args: KeepArgs, piece: bytes) -> Part:
    return make_part(read_piece(piece), keep_args, len(piece))


def _part_of_range(file: FileSeen, events: tuple[int, int], keep_args: KeepArgs, piece: tuple[int, int]) -> Part:
    _checked(file)  # a worker elsewhere may see another file at the path
    data = read_events_range(file.path, *events, *piece, into=_range_buffer)
    return make_part(read_piece(data), keep_args, len(data))


@functools.cache
def _checked(file: FileSeen) -> None:
    """:meth:`FileSeen.check` once per process and file: a check that fails raises, and is not kept."""
    file.check()


_buffers = threading.local()  # a cluster's worker decodes ranges in several threads


def _range_buffer(size: int) -> memoryview:
    """Memory to read a range into, the same for each range a thread reads (fresh memory costs a page fault every
    4 KiB: half the time of the read); what a Part keeps of a range is copied out of it."""
    buffer = getattr(_buffers, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _buffers.buffer = bytearray(max(size, 2 * decode.PIECE_BYTES))
    return memoryview(buffer)[:size]


def _pieces(start: int, end: int) -> Iterator[tuple[int, int]]:
    """Byte ranges of about PIECE_BYTES covering the events array [start, end)."""
    size = decode.PIECE_BYTES
    return ((lo, min(lo + size, end)) for lo in range(start, end, size))


def _workers_within(budget: int, workers: int) -> int:
    """Fewer decoding processes where theirs would take more than half the ``budget`` (they are gone before the
    analysis starts, so they share the budget only with the columns being built)."""
    return max(1, min(workers, budget // 2 // limits.WORKER_MEMORY))


def _add_all(builder: ColumnBuilder, parts: Iterator[Part], budget: int) -> None:
    """Add parts in file order; a bad event inside one becomes an error naming its index in the trace.

    What scanning the parts will need (:func:`perftool.common.limits.memory_to_scan`) is held to the ``budget`` left
    beside perftool's own memory as they arrive: past it, the columns go to disk; what stays in memory even then
    (distinct names, counters, kept args, the analysis's working arrays) past it too, and the trace is refused.
    """
    try:
        for part in parts:
            builder.add(part)
            if builder.memory_needed > budget and not builder.store.on_disk:
                disk = int(json_size_hint(builder.path) * limits.DISK_PER_TRACE_BYTE)
                builder.keep_on_disk(spill_directory(), disk)
            if builder.memory_needed > budget:
                kinds = plural(len(builder.signatures.ids), "kind")
                memory = budget + limits.PROCESS_MEMORY
                need = limits.size_text_as(builder.memory_needed + limits.PROCESS_MEMORY, memory)
                foreseen = builder.memory_foreseen
                remedy = (
                    f"the whole trace needs about {limits.size_text_as(foreseen + limits.PROCESS_MEMORY, memory)} "
                    f"(foreseen from the {builder.bytes / builder.expected_bytes:.0%} read): a budget of "
                    f"{limits.budget_above(foreseen + limits.PROCESS_MEMORY)} holds it ({parameter('memory')} or "
                    f"{limits.MEMORY_ENV})"
                    if foreseen is not None
                    else f"{parameter('memory')} (or {limits.MEMORY_ENV}) raises it"
                )
                raise TraceError(
                    builder.path,
                    f"holds more events ({builder.count:,} of {kinds} so far, needing {need} of memory to scan with "
                    f"its columns on disk) than the memory budget of {limits.size_text(memory)} allows; {remedy}",
                )
    except PieceError as exc:
        raise builder.error(exc) from None


def _check_readable(path: str) -> None:
    if os.path.isdir(path):
        raise TraceError(path, "is a directory, not a trace file")
    if not os.path.exists(path):
        if os.path.islink(path):
            try:
                os.stat(path)
            except OSError as exc:  # a loop of links (ELOOP), or a link to nothing
                raise TraceError(path, f"a symbolic link that leads nowhere: {exc.strerror}") from None
        raise TraceError(path, "no such file")
    if not os.access(path, os.R_OK):
        raise TraceError(path, "permission denied")


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def json_size_hint(path: str) -> int:
    """Bytes of JSON to decode: the file size, or for gzip the size its trailer records (mod 4 GiB); 0 for a file
    that cannot be read (its loading says why)."""
    try:
        return _json_size(path)
    except OSError:
        return 0


def _json_size(path: str) -> int:
    size = os.path.getsize(path)
    if size < 18 or not _is_gzip(path):
        return size
    with open(path, "rb") as fh:
        fh.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(fh.read(4), "little"))


@contextmanager
def _reader(path: str, max_bytes: int) -> Iterator[Callable[[int], bytes]]:
    """A ``read(n)`` over the file's decompressed bytes, filled ahead by a background thread.

    The thread decompresses (zlib releases the GIL) or reads while the caller decodes, so a gzip
    file costs little more than its decompression. Read errors surface as TraceError, and so does
    a gzip stream that decompresses past ``max_bytes`` or far beyond what real traces do.
    """
    compressed = _is_gzip(path)
    chunks: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=2)
    stop = threading.Event()
    file_size = os.path.getsize(path)

    def produce() -> None:
        try:
            total = 0
            with open(path, "rb") as fh:
                for chunk in inflate_gzip(fh) if compressed else iter(lambda: fh.read(CHUNK_BYTES), b""):
                    total += len(chunk)
                    _check_size(path, total, file_size if compressed else None, max_bytes)
                    _put(chunks, chunk, stop)
                    if stop.is_set():
                        return
            _put(chunks, b"", stop)
        except BaseException as exc:  # handed to the consumer, which raises it
            _put(chunks, exc, stop)

    worker = threading.Thread(target=produce, name="perftool-read", daemon=True)
    worker.start()
    done = False

    def read(_size: int) -> bytes:
        nonlocal done
        if done:
            return b""
        item = chunks.get()
        if isinstance(item, BaseException):
            done = True
            raise read_error(path, item)
        done = not item
        return item

    try:
        yield read
    finally:
        stop.set()
        while worker.is_alive():
            try:
                chunks.get(timeout=0.05)
            except queue.Empty:
                pass
        worker.join()


_COMPRESSED_BLOCK = 1 << 20


def inflate_gzip(fh: BinaryIO) -> Iterator[bytes]:
    """The decompressed bytes of a gzip file (members one after another), in chunks of CHUNK_BYTES.

    zlib is called directly on large blocks: each call releases the GIL for megabytes of output,
    where :mod:`gzip` takes it back every few kilobytes and so starves behind a busy decoding thread.
    """
    inflater = zlib.decompressobj(wbits=31)  # gzip header and trailer, CRC checked
    data = b""
    while True:
        if not data:
            data = fh.read(_COMPRESSED_BLOCK)
            if not data:
                if not inflater.eof:
                    raise EOFError
                return
        if inflater.eof:  # another member follows; zero bytes may pad between members
            data = data.lstrip(b"\0")
            if len(data) == 1:  # too little to tell a member's start from anything else: read on
                data += fh.read(_COMPRESSED_BLOCK)
            if data and not data.startswith(GZIP_MAGIC):
                raise TrailingGzipData(len(data))
            if data:
                inflater = zlib.decompressobj(wbits=31)
            continue
        chunk = inflater.decompress(data, CHUNK_BYTES)
        data = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
        if chunk:
            yield chunk


def _check_size(path: str, total: int, compressed_size: int | None, max_bytes: int) -> None:
    """Stop reading past the trace-size limit (a special file such as /dev/zero never ends), and stop a
    gzip stream (``compressed_size`` given) that inflates like a gzip bomb."""
    if total > max_bytes:
        raise _too_large(path, "decompresses to more JSON" if compressed_size else "holds more JSON", max_bytes)
    if compressed_size is None:
        return
    if total > limits.GZIP_RATIO_FROM_BYTES and total > limits.MAX_GZIP_RATIO * compressed_size:
        raise TraceError(
            path,
            f"decompresses to over {limits.MAX_GZIP_RATIO}x its size ({limits.size_text(total)} from "
            f"{limits.size_text(compressed_size)}); real traces compress 5-20x, so this is refused as a gzip bomb",
        )


def _put(chunks: queue.Queue, item: bytes | BaseException, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            chunks.put(item, timeout=0.05)
            return
        except queue.Full:
            continue


class TrailingGzipData(Exception):
    """Bytes after the last gzip member that are neither padding nor another member."""


def read_error(path: str, exc: BaseException) -> BaseException:
    """A reading or inflating failure as the one-line error that names the file (other errors as they are)."""
    if isinstance(exc, TrailingGzipData):
        return TraceError(path, "trailing data after the gzip stream: bytes that are not another gzip member")
    if isinstance(exc, EOFError):
        return TraceError(path, "truncated gzip stream: the file ends before the compressed data does")
    if isinstance(exc, zlib.error):
        return TraceError(path, f"corrupt gzip data: {exc}")
    if isinstance(exc, OSError):
        return TraceError(path, f"cannot read: {exc.strerror or exc}")
    return exc
