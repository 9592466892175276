"""The raw XSpace a JAX or TensorFlow profile holds (``*.xplane.pb``, what TensorBoard and XProf read), decoded here
from its protobuf (the schema of ``xplane.proto``) into the events the profiler's own exporter writes as
``HOST.trace.json.gz`` beside it, which the xla dialect reads: the same events, names, times and args.

An XSpace holds planes: ``/host:CPU`` (a line per host thread), one ``/device:GPU:N`` (a line per stream) or
``/device:TPU:N`` (op and module lines) per device, and planes of metadata. A line's events name an entry of their
plane's event metadata and carry stats (named through the plane's stat metadata); an event's time is its line's
start (ns) plus its own offset (ps). As the exporter does: the host plane is process 701, device N process N + 1;
a line is the thread of its display id (a uint32), named by its display name; an event is named by its display
name (its full name then in ``long_name``) or by its ``step_name`` stat, its args are its metadata's stats then its
own, each as text; the allocator's and tf.data's bookkeeping events, the stats that only link events, and the
``Async XLA Ops`` line are left out."""

from __future__ import annotations

import math
import mmap
import os
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import msgspec
import numpy as np

from perftool.common.errors import TraceError
from perftool.trace.decode import EMPTY_RAW, RawEvent, metadata_event

try:  # the compiled readers of a line's events and of a stat (perftool/trace/_scan.c), where they were built
    from perftool.trace._scan import line_events as _compiled_line_events
    from perftool.trace._scan import stat_value as _compiled_stat_value
except ImportError:  # an install without a C compiler reads them in Python
    _compiled_line_events = _compiled_stat_value = None  # type: ignore[assignment]

GPU_PLANE = "/device:GPU:"  # an XSpace's plane of one GPU's work
TPU_PLANE = "/device:TPU:"  # an XSpace's plane of one TPU's work
_DEVICE_PLANES = (GPU_PLANE, TPU_PLANE, "/device:CUSTOM:")  # the first of these an XSpace has are its devices
TPU_TYPE = "device_type_string"  # the stat a TPU plane names its generation by ("TPU v4", "TPU v5 lite")
# the peaks a TPU plane records for its chip, as XProf's roofline takes them: TFLOP/s, and its HBM's GB/s
TPU_PEAK_FLOPS, TPU_PEAK_BANDWIDTH = "peak_teraflops_per_second", "peak_hbm_bw_gigabytes_per_second"
# a TPU's TensorCore plane, "/device:TPU:0"; its SparseCores' planes ("/device:TPU:0 SparseCore 0") name no generation
_TENSOR_CORE = re.compile(r"/device:TPU:\d+")
HOST_PLANE = "/host:CPU"
HOST_PROCESS = 701  # the host plane's process: past the 500 devices and 200 custom planes the exporter numbers first
FIRST_DEVICE_PROCESS = 1  # device plane N's process is N + 1
ASYNC_OPS_LINE = "Async XLA Ops"  # a TPU's asynchronous ops, drawn again from its ops line: left out, as exported
# the allocator's and tf.data's bookkeeping, not work: left out, as exported
INTERNAL_EVENTS = frozenset({
    "MemoryAllocation", "MemoryDeallocation", "PrefetchProduce", "PrefetchConsume", "ParallelInterleaveProduce",
    "ParallelInterleaveConsume", "ParallelInterleaveInitializeInput", "ParallelMapProduce", "ParallelMapConsume",
    "MapAndBatchProduce", "MapAndBatchConsume", "ParseExampleProduce", "ParseExampleConsume",
})  # fmt: skip
# stats that link events to each other (producer, consumer, root) or that the exporter leaves out
INTERNAL_STATS = frozenset({"_pt", "_p", "_ct", "_c", "_r", "flops", "symbol_id"})
# kept though the exporter leaves it out: which of the programs of one name (a jax.jit per input shape) a kernel ran
PROGRAM_ID = "program_id"
CORRELATION_ID = "correlation_id"  # the stat that links a launch and the kernel it launched (the event's id here)
MAX_ID_DIGITS = 18  # a correlation id of more digits is no tracer's counter (and may not fit an int64)
METADATA_PLANE = "/host:metadata"  # a plane of each program's HLO: an event per program, MODULE(ID)
HLO_STAT = "Hlo Proto"  # the stat holding a program's HloProto (bytes)
STEP_NAME = "step_name"  # a stat that names its event
PIECE_BYTES = 1 << 20  # a task's bytes of events: small, so that the decoding processes finish together
CACHED_STATS = 1 << 16  # stats decoded once per distinct encoding, at most this many held at a time
_UINT32 = 0xFFFFFFFF
_INT64_SIGN = 1 << 63
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5  # protobuf's wire types
_FIXED_SIZES = {_FIXED64: 8, _FIXED32: 4}
# an XEvent's fields as their one-byte tags (field number << 3 | wire type), and a line's field that holds one
_METADATA_TAG, _OFFSET_TAG, _DURATION_TAG, _STAT_TAG, _OCCURRENCES_TAG = 0x08, 0x10, 0x18, 0x22, 0x28
_EVENT_NUMBERS = frozenset({_METADATA_TAG, _OFFSET_TAG, _DURATION_TAG, _OCCURRENCES_TAG})
_EVENT_TAG = 0x22  # XLine.events, field 4
_DOUBLE = struct.Struct("<d")
_ENCODE = msgspec.json.encode
_Bytes = bytes | mmap.mmap  # an XSpace's bytes: its file mapped, or (in tests) bytes
ProtoFields = dict[int, list[tuple[int, int]]]  # a message's fields by number (see :func:`message`)

# The vendor an XSpace's device plane records, as the name the device table knows a vendor's devices by where the
# name says no model (perftool.hardware.identify tells the model apart by compute units and memory)
_VENDOR_NAMES = {"amd": "AMD Instinct", "nvidia": "NVIDIA GPU"}


class MalformedProtobuf(Exception):
    """The bytes are not the protobuf the schema describes; ``at``: the offset where that showed; ``runs_to``: where
    the field (or, with ``number``, the number) there says it ends, if it says (past the file's end: the file was cut
    short)."""

    def __init__(self, at: int, runs_to: int = 0, number: bool = False) -> None:
        super().__init__(at)
        self.at, self.runs_to, self.number = at, runs_to, number


class _Line(NamedTuple):
    thread: int  # the display id, as the uint32 the exporter keeps
    name: str
    start_ns: int
    pieces: list[tuple[int, int]]  # where its bytes are, cut between fields into runs of events


class _Plane(NamedTuple):
    """A plane's id and name, the lines the exporter writes (the ``Async XLA Ops`` line left out) and its event and
    stat metadata."""

    id: int
    name: str
    lines: list[_Line]
    events: dict[int, tuple[str, str, list[tuple[int, int]]]]  # id: (name, display name, its stats' ranges)
    stat_names: dict[int, str]
    stats: list[tuple[int, int]]


Planes = list[tuple[int, _Plane]]  # the planes exported, each with its process


class Task(NamedTuple):
    """Runs of one plane's events to decode, about :data:`PIECE_BYTES` of them: a piece of a long line, or several
    short lines whole."""

    plane: int  # the plane's position among those exported (:attr:`Layout.planes`)
    runs: tuple[tuple[int, tuple[int, int]], ...]  # each run's line (its position among the plane's) and bytes

    @property
    def size(self) -> int:
        """The bytes of its runs."""
        return sum(end - begin for _, (begin, end) in self.runs)


class Layout(NamedTuple):
    """What an XSpace's events are read from: the events naming its processes and threads, the planes exported
    (each with its process), and the runs of events to decode, in the exporter's order."""

    names: list[RawEvent]
    planes: Planes
    tasks: list[Task]


def layout(path: str, metadata: dict[str, Any]) -> Layout:
    """The :class:`Layout` of the XSpace at ``path``, its events left to decode (:func:`task_events`, in any process);
    the devices' properties the planes record (:func:`device_properties`) in ``metadata``."""
    with _mapped(path) as data:
        planes = _planes(path, data)
        metadata.setdefault("displayTimeUnit", "ns")  # as the exporter writes it: times in µs, to the picosecond
        if properties := _properties(data, planes):
            metadata.setdefault("deviceProperties", properties)
        exported = _exported(planes)
    tasks = [task for at_plane, (_, plane) in enumerate(exported) for task in _tasks(at_plane, plane)]
    names = [event for process, plane in exported for event in _names(process, plane)]
    return Layout(names, exported, tasks)


def _tasks(at_plane: int, plane: _Plane) -> Iterator[Task]:
    """``plane``'s runs of events in the exporter's order, gathered into tasks of about :data:`PIECE_BYTES`."""
    runs: list[tuple[int, tuple[int, int]]] = []
    size = 0
    for at_line, line in enumerate(plane.lines):
        for begin, end in line.pieces:
            if runs and size + end - begin > PIECE_BYTES:
                yield Task(at_plane, tuple(runs))
                runs, size = [], 0
            runs.append((at_line, (begin, end)))
            size += end - begin
    if runs:
        yield Task(at_plane, tuple(runs))


def task_events(path: str, planes: Planes, task: Task) -> list[RawEvent]:
    """The events of ``task`` (one of :func:`layout`'s, ``planes`` its planes) as the exporter writes them."""
    process, plane = planes[task.plane]
    with _mapped(path) as data, _read(path, data):
        return [event for line, at in task.runs for event in _events(data, process, plane, plane.lines[line], at)]


def batches(path: str, metadata: dict[str, Any]) -> Iterator[list[RawEvent]]:
    """The events of the XSpace at ``path`` as its profiler exports them, in batches, decoded in this process: the
    processes' and threads' names first; the devices' properties in ``metadata`` (:func:`layout`)."""
    found = layout(path, metadata)
    yield found.names
    for task in found.tasks:
        yield task_events(path, found.planes, task)


class _Linked(msgspec.Struct):
    correlation: str = msgspec.field(name="correlation_id", default="")
    program: str = msgspec.field(name=PROGRAM_ID, default="")


_DECODE_LINKED = msgspec.json.Decoder(_Linked)


def device_programs(path: str) -> dict[tuple[int, str], int]:
    """The program id of each device op of the XSpace at ``path`` that names one, by its process and correlation id
    (which the JSON export keeps where it leaves the program id out); none where the file cannot be read."""
    found: dict[tuple[int, str], int] = {}
    try:
        space = layout(path, {})
        for task in space.tasks:
            process = space.planes[task.plane][0]
            if process == HOST_PROCESS:
                continue
            for event in task_events(path, space.planes, task):
                linked = _DECODE_LINKED.decode(event.args) if event.args else _Linked()
                if linked.correlation and linked.program.isdigit():
                    found[process, linked.correlation] = int(linked.program)
    except (TraceError, msgspec.DecodeError):
        return {}
    return found


def device_properties(path: str) -> list[dict[str, Any]]:
    """The device the XSpace's device planes ran on, as Kineto's ``deviceProperties`` would give it: for GPUs a
    vendor's name, ``numSms`` and ``totalGlobalMem`` (and the ``memoryBandwidth`` the planes record, bytes/s, which
    Kineto does not give), where every GPU plane records the same vendor, compute units and memory; for TPUs the
    generation every TPU plane names (``TPU v5 lite``). None where they differ, say nothing, or the file cannot be
    read (its events are read all the same)."""
    try:
        with _mapped(path) as data:
            return _properties(data, _planes(path, data))
    except TraceError:
        return []


@contextmanager
def _mapped(path: str) -> Iterator[mmap.mmap]:
    """The file's bytes, mapped rather than read: the pages the reading passes over are the system's to drop."""
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                raise TraceError(path, "empty file")
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise TraceError(path, f"cannot read it: {exc.strerror or exc}") from None
    try:
        yield data
    finally:
        data.close()


@contextmanager
def _read(path: str, data: _Bytes) -> Iterator[None]:
    """Bytes that are not the protobuf the schema describes, read in the block, as the one-line error naming the byte
    where that showed."""
    try:
        yield
    except MalformedProtobuf as exc:
        if exc.runs_to > len(data):
            inside = (
                "a number" if exc.number else f"a field that starts at byte {exc.at:,} and runs to byte {exc.runs_to:,}"
            )
            raise _cut_short(path, len(data), inside) from None
        raise _not_an_xspace(path, exc.at) from None
    except IndexError:  # a number that runs past the file's end
        raise _cut_short(path, len(data), "a number") from None


def _cut_short(path: str, size: int, inside: str) -> TraceError:
    return TraceError(path, f"an XSpace cut short: it ends at byte {size:,}, inside {inside} (copied or written in "
                            "part?)")  # fmt: skip


def _not_an_xspace(path: str, at: int) -> TraceError:
    return TraceError(path, f"not an XSpace protobuf: its bytes break off or make no sense at byte {at:,} (a "
                            "truncated file, or another format named .xplane.pb?)")  # fmt: skip


def _properties(data: _Bytes, planes: list[_Plane]) -> list[dict[str, Any]]:
    """:func:`device_properties` of the decoded ``planes``."""
    kind = _device_kind(planes)
    if kind == TPU_PLANE:
        return _tpu_generation(data, planes)
    if kind != GPU_PLANE:
        return []
    recorded = [_plane_stats(data, plane) for plane in planes if plane.name.startswith(GPU_PLANE)]
    devices = {
        (
            str(s.get("device_vendor") or "").lower(),
            s.get("core_count"),
            s.get("memory_size"),
            s.get("memory_bandwidth"),
        )
        for s in recorded
    }
    if len(devices) != 1:
        return []
    ((vendor, units, memory, bandwidth),) = devices
    if vendor not in _VENDOR_NAMES or not str(units).isdigit() or not str(memory).isdigit():
        return []
    found = {"id": 0, "name": _VENDOR_NAMES[vendor], "numSms": int(str(units)), "totalGlobalMem": int(str(memory))}
    return [found | ({"memoryBandwidth": int(str(bandwidth))} if str(bandwidth).isdigit() else {})]


def _tpu_generation(data: _Bytes, planes: list[_Plane]) -> list[dict[str, Any]]:
    """The TPU generation every TensorCore plane names, as a device's properties (its SparseCores' planes name none),
    with the peaks they record where all record the same (``peakTflops``, and ``memoryBandwidth`` in bytes/s); none
    where they differ or one is silent."""
    recorded = [_plane_stats(data, plane) for plane in planes if _TENSOR_CORE.fullmatch(plane.name)]
    generations = {str(stats.get(TPU_TYPE) or "") for stats in recorded}
    if len(generations) != 1 or "" in generations:
        return []
    found: dict[str, Any] = {"id": 0, "name": generations.pop()}
    peaks = {(_positive(stats.get(TPU_PEAK_FLOPS)), _positive(stats.get(TPU_PEAK_BANDWIDTH))) for stats in recorded}
    if len(peaks) == 1:
        ((flops, bandwidth),) = peaks
        if flops is not None and bandwidth is not None:
            found |= {"peakTflops": flops, "memoryBandwidth": bandwidth * 1e9}
    return [found]


def _positive(value: str | None) -> float | None:
    """A stat's value as a positive number; None where it is none."""
    try:
        number = float(value or "")
    except ValueError:
        return None
    return number if number > 0 and math.isfinite(number) else None


def _plane_stats(data: _Bytes, plane: _Plane) -> dict[str, str | None]:
    """A plane's own stats, by name, as text."""
    return dict(_stat(data, at, plane.stat_names) for at in plane.stats)


def _exported(planes: list[_Plane]) -> Planes:
    """The planes the exporter writes, each with its process: the host's, and the devices' (of the first kind of
    device plane the XSpace holds: GPUs, else TPUs, else custom devices); planes of metadata are left out."""
    kind = _device_kind(planes)
    found = []
    for plane in planes:
        if plane.name == HOST_PLANE:
            found.append((HOST_PROCESS, plane))
        elif kind is not None and plane.name.startswith(kind):
            found.append((FIRST_DEVICE_PROCESS + plane.id, plane))
    return found


def _device_kind(planes: list[_Plane]) -> str | None:
    """The kind of device plane an XSpace's devices are: the first of GPUs, TPUs and custom devices it holds."""
    return next((prefix for prefix in _DEVICE_PLANES if any(p.name.startswith(prefix) for p in planes)), None)


def _names(process: int, plane: _Plane) -> list[RawEvent]:
    """The metadata events that name ``plane``'s process and threads and set their order."""
    events = [metadata_event("process_name", process, 0, plane.name),
              metadata_event("process_sort_index", process, 0, process, key="sort_index")]  # fmt: skip
    by_ordinal = process == HOST_PROCESS  # the host's threads in the order of their lines; a device's by id
    for ordinal, line in enumerate(_unique_lines(plane), start=1):
        events.append(metadata_event("thread_name", process, line.thread, line.name))
        order = ordinal if by_ordinal else line.thread
        events.append(metadata_event("thread_sort_index", process, line.thread, order, key="sort_index"))
    return events


def _unique_lines(plane: _Plane) -> list[_Line]:
    """``plane``'s exported lines, one per thread (lines of one display id are one timeline, the last one's name)."""
    return list({line.thread: line for line in plane.lines}.values())


def _events(data: _Bytes, process: int, plane: _Plane, line: _Line, at: tuple[int, int]) -> Iterator[RawEvent]:
    """The exported events of ``line`` (of ``plane``) whose bytes are at ``at``. Its metadata's args are decoded once
    per metadata, and a stat once per distinct encoding (a name, a kernel's launch, a stream's id recur; a
    correlation id seldom does), up to :data:`CACHED_STATS` of them at a time."""
    stat_names = plane.stat_names
    decoded: dict[bytes, tuple[str, str] | tuple[()]] = {}  # an encoding's arg, or () where the exporter drops it
    kinds: dict[int, tuple[str, str, dict[str, str]] | None] = {}
    start_ps = line.start_ns * 1000
    for kind, offset_ps, duration_ps, stats in _read_line(data, at):
        if kind not in kinds:
            kinds[kind] = _kind(data, plane, kind)
        if (known := kinds[kind]) is None:
            continue
        name, display, args = known
        if stats:
            args = dict(args)
            for encoded in stats:
                if (arg := decoded.get(encoded)) is None:
                    try:
                        key, value = _event_stat(encoded, stat_names)
                    except MalformedProtobuf as exc:  # where it breaks off, in the file
                        begin = _first_stat(data, at, encoded)
                        raise MalformedProtobuf(begin + exc.at, exc.runs_to and begin + exc.runs_to) from None
                    arg = (key, value) if value is not None and key not in INTERNAL_STATS else ()
                    if len(decoded) == CACHED_STATS:
                        decoded.clear()
                    decoded[encoded] = arg
                if arg:
                    args[arg[0]] = arg[1]
        shown = args[STEP_NAME] if STEP_NAME in args else display or name
        raw = msgspec.Raw(_ENCODE(args)) if args else EMPTY_RAW
        ts, dur = (start_ps + offset_ps) / 1e6, max(duration_ps, 1) / 1e6  # a zero duration is one picosecond
        linked = _correlation(args.get(CORRELATION_ID))
        yield RawEvent(ph="X", name=shown, pid=process, tid=line.thread, ts=ts, dur=dur, id=linked, args=raw)


def _correlation(value: str | None) -> int | None:
    """An event's correlation id, which links a launch to the kernel it launched (its ``correlation_id`` stat, a
    tracer's counter of 18 digits at most), as the event's ``id``; None where it has none."""
    return int(value) if value and len(value) <= MAX_ID_DIGITS and value.isdigit() else None


def correlations(events: list[RawEvent]) -> np.ndarray:
    """Per event of :func:`task_events`: its correlation id (int64), -1 where it has none."""
    return np.fromiter((-1 if e.id is None else e.id for e in events), np.int64, len(events))


def _kind(data: _Bytes, plane: _Plane, kind: int) -> tuple[str, str, dict[str, str]] | None:
    """An event metadata's name, display name and args (``long_name`` where it has a display name, then its stats);
    None for an event the exporter leaves out."""
    name, display, stats = plane.events.get(kind, ("", "", []))
    if name in INTERNAL_EVENTS:
        return None
    args: dict[str, str] = {"long_name": name} if display else {}
    for at in stats:
        _add_stat(args, *_stat(data, at, plane.stat_names))
    return name, display, args


def _add_stat(args: dict[str, str], key: str, value: str | None) -> None:
    """Put a stat in an event's args, as the exporter does: a stat with a value, and not one it leaves out."""
    if value is not None and key not in INTERNAL_STATS:
        args[key] = value


def _planes(path: str, data: _Bytes) -> list[_Plane]:
    """The XSpace's planes, their lines left as runs of bytes to decode when their events are read."""
    with _read(path, data):
        return [_plane(data, begin, end) for field, _, begin, end in _fields(data, 0, len(data)) if field == 1]


def _plane(data: _Bytes, begin: int, end: int) -> _Plane:
    fields = message(data, begin, end)
    lines = [line for line in (_line(data, at) for at in fields.get(3, [])) if line.name != ASYNC_OPS_LINE]
    plane = _Plane(int_field(fields, 1), text_field(data, fields, 2), lines, {}, {}, fields.get(6, []))
    for entry in fields.get(4, []):  # the event metadata, by id
        if metadata := _map_value(data, entry):
            name, display = text_field(data, metadata, 2), text_field(data, metadata, 4)
            plane.events[int_field(metadata, 1)] = (name, display, metadata.get(5, []))
    for entry in fields.get(5, []):  # the stat metadata, by id
        if metadata := _map_value(data, entry):
            plane.stat_names[int_field(metadata, 1)] = text_field(data, metadata, 2)
    return plane


def _map_value(data: _Bytes, entry: tuple[int, int]) -> ProtoFields:
    """The fields of a map entry's value (an entry is a message of its key, field 1, and its value, field 2); none
    where the entry holds no value."""
    value = message(data, *entry).get(2)
    return message(data, *value[-1]) if value else {}


def message(data: _Bytes, begin: int, end: int) -> ProtoFields:
    """A (small) message's fields by number, each occurrence as :func:`_fields` gives it (a varint's value and 0,
    or the range of its bytes)."""
    found: ProtoFields = {}
    for field, _, start, stop in _fields(data, begin, end):
        found.setdefault(field, []).append((start, stop))
    return found


def int_field(fields: ProtoFields, field: int) -> int:
    """A varint field's value as the int64 it encodes (the last occurrence, as protobuf reads it); 0 where absent."""
    return _signed(fields[field][-1][0]) if field in fields else 0


def packed_ints(data: _Bytes, occurrences: list[tuple[int, int]]) -> list[int]:
    """A repeated integer field's values (as int64), packed (proto3's way) or one per occurrence."""
    values = []
    for start, stop in occurrences:
        if stop == 0:  # a varint of its own: a length-delimited field never ends at byte 0
            values.append(_signed(start))
            continue
        at = start
        while at < stop:
            value, at = _varint(data, at, stop)
            values.append(_signed(value))
    return values


def hlo_protos(path: str) -> list[tuple[str, bytes]]:
    """Each program's name (``MODULE(ID)``) and ``HloProto`` bytes, as the XSpace's metadata plane holds them; none
    where it holds none."""
    with _mapped(path) as data, _read(path, data):
        found = []
        for field, _, begin, end in _fields(data, 0, len(data)):
            plane = message(data, begin, end) if field == 1 else {}
            if not plane or text_field(data, plane, 2) != METADATA_PLANE:
                continue
            stat_ids = {int_field(m, 1) for e in plane.get(5, []) if (m := _map_value(data, e))
                        and text_field(data, m, 2) == HLO_STAT}  # fmt: skip
            for entry in plane.get(4, []):
                metadata = _map_value(data, entry)
                for stat in (message(data, *at) for at in metadata.get(5, [])):
                    if int_field(stat, 1) in stat_ids and 6 in stat:
                        begin, end = stat[6][-1]
                        found.append((text_field(data, metadata, 2), bytes(data[begin:end])))
        return found


def text_field(data: _Bytes, fields: ProtoFields, field: int) -> str:
    """A string field's text (the last occurrence); empty where absent."""
    return _text(data, *fields[field][-1]) if field in fields else ""


def _line(data: _Bytes, at: tuple[int, int]) -> _Line:
    """A line's thread, name and start, and its bytes cut between its fields into runs of about :data:`PIECE_BYTES`
    (its events are read by :func:`_line_events`)."""
    identity = display_id = start_ns = 0
    name = display = ""
    begin, end = at
    pieces, piece = [], begin
    while begin < end:
        if begin - piece >= PIECE_BYTES:
            pieces.append((piece, begin))
            piece = begin
        if data[begin] == _EVENT_TAG:  # an event, passed over
            if begin + 1 < end and data[begin + 1] < 0x80:  # its size in one byte: most events
                begin += 2 + data[begin + 1]
            else:
                size, begin = _varint(data, begin + 1, end)
                begin += size
            continue
        field, _, start, stop, begin = _field(data, begin, end)
        if field == 1:
            identity = start
        elif field == 10:
            display_id = start
        elif field == 2:
            name = _text(data, start, stop)
        elif field == 11:
            display = _text(data, start, stop)
        elif field == 3:
            start_ns = _signed(start)
    if begin > end:
        raise MalformedProtobuf(end)
    pieces.append((piece, end))
    return _Line((display_id or identity) & _UINT32, display or name, start_ns, pieces)


LineEvent = tuple[int, int, int, list[bytes]]  # an event's metadata id, offset and duration (ps), its stats' bytes


def _read_line(data: _Bytes, at: tuple[int, int]) -> list[LineEvent] | Iterator[LineEvent]:
    """The events of the line at ``at``: read by the compiled reader where it was built and the bytes are sound,
    else by :func:`_line_events`, which names where malformed bytes break off."""
    if _compiled_line_events is not None and (events := _compiled_line_events(data, *at)) is not None:
        return events
    read = _line_events(data, at)
    return ((kind, offset, duration, [data[a:b] for a, b in stats]) for kind, offset, duration, stats in read)


def _first_stat(data: _Bytes, at: tuple[int, int], encoded: bytes) -> int:
    """Where in the file the first stat of the line at ``at`` whose bytes are ``encoded`` begins: the one a reader
    of the line's stats in order meets first (to name a byte in it)."""
    stats = (begin for *_, ranges in _line_events(data, at) for begin, end in ranges if data[begin:end] == encoded)
    return next(stats)


def _line_events(data: _Bytes, at: tuple[int, int]) -> Iterator[tuple[int, int, int, list[tuple[int, int]]]]:
    """Each event of the line at ``at``: its metadata id, offset and duration (ps), and its stats' ranges. The loop
    that reads most of the file where the compiled reader was not built: an event's fields are read here, other
    fields passed over by :func:`_field`."""
    begin, end = at
    while begin < end:
        if data[begin] != _EVENT_TAG:  # another field of the line
            begin = _field(data, begin, end)[-1]
            continue
        size, begin = _varint(data, begin + 1, end)
        stop = begin + size
        if stop > end:
            raise MalformedProtobuf(begin, stop)
        kind = offset = duration = 0
        stats = []
        while begin < stop:
            tag = data[begin]
            if tag == _STAT_TAG:
                size, begin = _varint(data, begin + 1, stop)
                if begin + size > stop:
                    raise MalformedProtobuf(begin)
                stats.append((begin, begin + size))
                begin += size
            elif tag in _EVENT_NUMBERS:  # a field of one number: the metadata id, offset, duration, occurrences
                value, shift, begin = 0, 0, begin + 1
                while True:  # the varint, read here: a call per number would double the loop's time
                    byte = data[begin]
                    begin += 1
                    value |= (byte & 0x7F) << shift
                    if byte < 0x80:
                        break
                    shift += 7
                if tag == _OFFSET_TAG:
                    offset = value
                elif tag == _DURATION_TAG:
                    duration = value
                elif tag == _METADATA_TAG:
                    kind = value
            else:
                begin = _field(data, begin, stop)[-1]
        if begin > stop:  # a number ran past its event
            raise MalformedProtobuf(stop)
        yield _signed(kind), _signed(offset), _signed(duration), stats


def _stat(data: _Bytes, at: tuple[int, int], names: dict[int, str]) -> tuple[str, str | None]:
    """A stat's name and its value as text, as the exporter writes it (None where it holds no value)."""
    stat_id, field, value = _stat_fields(data, at)
    return names.get(stat_id, ""), _stat_text(field, value, names)


def _event_stat(encoded: bytes, names: dict[int, str]) -> tuple[str, str | None]:
    """:func:`_stat` of a stat's bytes, read by the compiled reader where it was built and the bytes are as the
    schema gives them."""
    read = _compiled_stat_value(encoded) if _compiled_stat_value is not None else None
    stat_id, field, value = read if read is not None else _stat_fields(encoded, (0, len(encoded)))
    return names.get(stat_id, ""), _stat_text(field, value, names)


def _stat_fields(data: _Bytes, at: tuple[int, int]) -> tuple[int, int, Any]:
    """A stat's metadata id, and its last value field's number and value (0 and None where it holds none): a double
    (2), a uint64 (3), an int64 (4), a string's bytes (5), bytes (6, as None), a stat metadata id (7)."""
    stat_id, field, value = 0, 0, None
    begin, end = at
    while begin < end:  # the message's fields, read here: a generator would cost a third of the time
        number, wire, start, stop, begin = _field(data, begin, end)
        if number == 1:
            stat_id = _signed(start)
        elif number == 2 and wire == _FIXED64:
            field, value = number, _DOUBLE.unpack_from(data, start)[0]
        elif number in (3, 7):
            field, value = number, start
        elif number == 4:
            field, value = number, _signed(start)
        elif number == 5:
            field, value = number, data[start:stop]
        elif number == 6:
            field, value = number, None
    return stat_id, field, value


def _stat_text(field: int, value: Any, names: dict[int, str]) -> str | None:
    """A stat's value (:func:`_stat_fields`) as the exporter writes it: numbers as text, a string decoded, bytes as
    ``<opaque bytes>``, a reference as the name it refers to; None where it holds none."""
    if field in (3, 4):
        return str(value)
    if field == 2:
        return _number(value)
    if field == 5:
        return value.decode("utf-8", "replace")
    if field == 7:
        return names.get(value, "")
    return "<opaque bytes>" if field == 6 else None


def _number(value: float) -> str:
    """A double as the exporter writes it: at most six significant digits."""
    return f"{value:.6g}"


def _text(data: _Bytes, start: int, stop: int) -> str:
    return data[start:stop].decode("utf-8", "replace")


def _signed(value: int) -> int:
    """A varint read as the int64 it encodes (negative numbers are ten bytes of two's complement)."""
    return value - (1 << 64) if value >= _INT64_SIGN else value


def _fields(data: _Bytes, begin: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Each field of the message in ``data[begin:end]``: its number, wire type and either its value (a varint:
    ``start``, ``stop`` 0) or the range of its bytes (the other wire types)."""
    at = begin
    while at < end:
        field, wire, start, stop, at = _field(data, at, end)
        yield field, wire, start, stop


def _field(data: _Bytes, at: int, end: int) -> tuple[int, int, int, int, int]:
    """The field that starts at ``at``: its number, wire type, value or range (as :func:`_fields` gives them), and
    where it ends."""
    tag = data[at]  # a field's tag is one byte but for numbers past 15
    if tag < 0x80:
        at += 1
    else:
        tag, at = _varint(data, at, end)
    field, wire = tag >> 3, tag & 7
    if field == 0:  # no field has number 0
        raise MalformedProtobuf(at)
    if wire == _VARINT:
        value, at = _varint(data, at, end)
        return field, wire, value, 0, at
    if wire == _LENGTH:
        size, at = _varint(data, at, end)
    elif wire in _FIXED_SIZES:
        size = _FIXED_SIZES[wire]
    else:
        raise MalformedProtobuf(at)
    if at + size > end:
        raise MalformedProtobuf(at, at + size)
    return field, wire, at, at + size, at + size


def _varint(data: _Bytes, at: int, end: int) -> tuple[int, int]:
    """The varint at ``at`` (not past ``end``), and where it ends."""
    if at < end and data[at] < 0x80:
        return data[at], at + 1
    value = shift = 0
    while at < end:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise MalformedProtobuf(at)
    raise MalformedProtobuf(at, at + 1, number=True)  # it goes on past ``end``
