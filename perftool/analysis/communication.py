"""Collective communication: which collectives ran, how long, how much they moved, how much compute hid.

Collectives are recognised in every dialect: NCCL/RCCL kernels and HCCL tasks on device streams (their
kind is :attr:`Kind.COMMUNICATION`), and, in a trace without device collectives, collectives a host
thread runs itself (``gloo:all_reduce``). What each moved comes from the args profilers write: Kineto's
``Collective name``, ``In/Out msg nelems``, ``dtype``, ``Group size`` and ``Process Group`` fields on
collective kernels and on ``record_param_comms``, or ``Input Dims`` and ``Input type`` on the backend's
own annotations (``nccl:all_reduce``); msprof's ``data_type`` and ``count`` (HCCL's elements, each rank's) on an
HCCL op. Where a device collective carries no args, the host records of the same collective type lend it theirs,
one to one when the counts agree, else their mean.

Bandwidths follow nccl-tests: algorithm bandwidth is bytes / time, bus bandwidth scales it by the
collective's traffic per rank (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
import numpy as np

from perftool.analysis import intervals, peer_waits
from perftool.analysis.intervals import overlaps_any
from perftool.dialects.hlo import collective_messages
from perftool.dialects.vocabulary import COLLECTIVE_ARGS, HOST_COLLECTIVE
from perftool.trace.model import Kind, Phase, Role, Trace

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "send_recv", "barrier")
OTHER = "other"
_TYPE_TESTS = (  # (collective, what its squashed lower-case name contains), the more specific first
    ("all_reduce", "allreduce"),
    ("reduce_scatter", "reducescatter"),
    ("all_gather", "allgather"),
    ("all_to_all", "alltoall"),
    ("all_to_all", "allall"),  # all2all, its digit gone
    ("all_to_all", "deepep"),  # expert parallelism's dispatch and combine: each rank's tokens to their experts' ranks
    ("all_to_all", "morimoe"),
    ("all_to_all", "pplx"),
    ("all_reduce", "crossdevicereduce"),  # serving engines' own all-reduce kernels
    ("all_reduce", "quickreduce"),
    ("broadcast", "broadcast"),
    ("send_recv", "sendrecv"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
)
PART_SKEW_US = 5.0  # how far a collective's task may reach past the collective's span as recorded
_POINT_TO_POINT = ("send", "recv", "receive")  # as the name's start only: an RDMASend task is no send
# The tasks an HCCL op runs on its planes (msprof's names): parts of a collective, never one of their own.
_HCCL_TASKS = frozenset(
    {"notifywait", "notifyrecord", "memcpy", "memcpyasync", "reduceinline", "reducetbe", "rdmasend"}
)
_PREFIX = re.compile(r"(?i)^(ncclDevKernel_|ncclKernel_|rcclKernel_|nccl:|gloo:|mpi:|ucc:|hcom_|hccl_?)")
_NOT_LETTERS = re.compile(r"[^a-z]")
_ANONYMOUS = "(anonymous namespace)::"  # a demangled kernel's namespace, whose parenthesis is not its arguments
BUS_FACTOR = {  # bus bytes per algorithm byte, for n ranks (nccl-tests' PERFORMANCE.md)
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}
DTYPE_BYTES = {
    "float": 4, "float32": 4, "int": 4, "int32": 4, "uint32": 4, "complexhalf": 4,
    "half": 2, "float16": 2, "bfloat16": 2, "short": 2, "int16": 2,
    "double": 8, "float64": 8, "long": 8, "int64": 8, "complexfloat": 8, "uint64": 8,
    "byte": 1, "char": 1, "bool": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}  # fmt: skip
# msprof's names of an HCCL op's data type (its ``data_type`` arg; ENUM_HCCL_DATA_TYPE in the db export), lower-cased
_HCCL_DTYPE_BYTES = DTYPE_BYTES | {"fp16": 2, "bfp16": 2, "fp32": 4, "fp64": 8, "uint16": 2, "int128": 16}
# A process group's description says which parallelism it serves (torch DeviceMesh names, Megatron's groups; the
# default group as Kineto and torch_npu name it).
_PARALLELISM = (
    ("tensor", re.compile(r"(?i)(^|[^a-z])(tp|tensor|model_parallel|mp)([^a-z]|$)")),
    ("pipeline", re.compile(r"(?i)(^|[^a-z])(pp|pipe|pipeline)([^a-z]|$)")),
    ("expert", re.compile(r"(?i)(^|[^a-z])(ep|expert|moe)([^a-z]|$)")),
    ("context", re.compile(r"(?i)(^|[^a-z])(cp|context|sequence|sp)([^a-z]|$)")),
    ("data", re.compile(r"(?i)(^|[^a-z])(dp\w*|data\w*|fsdp|ddp|shard|replicate|default_pg|default_group)([^a-z]|$)")),
)


def collective_type(name: str) -> str:
    """The collective an event or args name stands for (``all_reduce``, …), or ``other``."""
    squashed = _NOT_LETTERS.sub("", _PREFIX.sub("", name.replace(_ANONYMOUS, "")).split("(")[0].lower())
    if squashed in _HCCL_TASKS:
        return OTHER
    found = next((kind for kind, part in _TYPE_TESTS if part in squashed), OTHER)
    return "send_recv" if found == OTHER and squashed.startswith(_POINT_TO_POINT) else found


def parallelism(group: str) -> str:
    """The parallelism a process group's name or description implies: data, tensor, pipeline, expert,
    context, or ``unknown``."""
    return next((kind for kind, pattern in _PARALLELISM if pattern.search(group)), "unknown")


@dataclass
class CollectiveStat:
    """One collective type's calls in the analysis window."""

    name: str
    count: int
    time_us: float  # summed durations
    exposed_us: float  # wall time with one of them running and no compute (calls at once count once)
    bytes: float | None  # summed message sizes where known
    group_size: int | None
    algbw_gbps: float | None  # bytes / time, GB/s
    busbw_gbps: float | None  # algbw scaled to the traffic on each rank's links


@dataclass
class GroupStat:
    """The collectives of one process group in the window."""

    name: str
    parallelism: str
    count: int
    time_us: float
    exposed_us: float


@dataclass
class Collectives:
    """Every collective the trace ran (device collectives, else host ones): one entry per call, in time order."""

    rows: np.ndarray  # event rows
    on: str  # "device" or "host"
    type: np.ndarray  # index into COLLECTIVES + (OTHER,)
    nbytes: np.ndarray  # float64, NaN where unknown
    group_size: np.ndarray  # float64, NaN where unknown
    group: np.ndarray  # index into ``groups``
    groups: list[str] = field(default_factory=list)

    @property
    def names(self) -> tuple[str, ...]:
        return (*COLLECTIVES, OTHER)


def find_collectives(trace: Trace) -> Collectives:
    """The trace's collectives with what their args (or their host records) say they moved; found once per trace
    (a scan finds them beside the steps, before the metrics read them)."""
    return trace.derive("communication.collectives", lambda: _find_collectives(trace))


def _find_collectives(trace: Trace) -> Collectives:
    rows, on = _collective_rows(trace)
    if on == "device":
        rows = _outermost(trace, rows)
    found = _without_parts(trace, _described(trace, rows, on))
    if on == "device":
        _lend_host_records(trace, found)
    return found


def collective_tasks(trace: Trace) -> np.ndarray:
    """Per event: a communication task on the device that is no collective of a named type (HCCL's ``Notify_Wait``,
    ``Memcpy``, a stream's ``SDMA``), whether or not a named collective is drawn over it."""
    tasks = _device_communication(trace)
    comm = np.flatnonzero(tasks)
    tasks[comm[_types_by_name(trace, comm) != len(COLLECTIVES)]] = False
    return tasks


def runs_collectives(trace: Trace, in_window: np.ndarray) -> bool:
    """Whether a collective runs where ``in_window`` (per event) is set: what :func:`find_collectives` finds, without
    reading what each moved."""
    rows, _ = _collective_rows(trace)
    return bool(in_window[rows].any())


def _collective_rows(trace: Trace) -> tuple[np.ndarray, str]:
    """The events that run collectives and where: the device's communication, else (where the device runs none) the
    collectives host threads run themselves (gloo, MPI)."""
    rows = np.flatnonzero(_device_communication(trace))
    if rows.size:
        return rows, "device"
    host_run = trace.name_matches(HOST_COLLECTIVE) & trace.on_roles(Role.HOST, Role.INPUT)
    return np.flatnonzero((trace.phase == Phase.COMPLETE) & host_run), "host"


def _device_communication(trace: Trace) -> np.ndarray:
    return (trace.phase == Phase.COMPLETE) & (trace.kind == Kind.COMMUNICATION) & trace.on_roles(Role.DEVICE)


def collective_parts(trace: Trace) -> np.ndarray:
    """Per event: a task of a collective drawn over it on the device. msprof draws an HCCL op (``hcom_allReduce_*``)
    on a track of its own over the tasks it runs (``Notify_Wait``, ``Memcpy``, ``Reduce_Inline``), and those tasks
    twice, on its planes and on the stream that runs them; a communication event of no collective type that lies
    within a named collective's span (give or take :data:`PART_SKEW_US`: the db export records an op's own task on its
    stream a microsecond or so wider than the op) is such a task, whose time the collective holds. An NCCL
    kernel is its collective's whole work: it has no parts."""
    untyped = collective_tasks(trace)
    named = np.flatnonzero(_device_communication(trace) & ~untyped)
    tasks = np.flatnonzero(untyped)
    parts = np.zeros(len(trace), dtype=bool)
    if named.size == 0 or tasks.size == 0:
        return parts
    order = np.argsort(trace.ts[named], kind="stable")
    starts = trace.ts[named][order] - PART_SKEW_US
    reach = np.maximum.accumulate(trace.end[named][order]) + PART_SKEW_US
    before = np.searchsorted(starts, trace.ts[tasks], side="right") - 1  # the last collective starting at or before
    parts[tasks] = (before >= 0) & (reach[np.maximum(before, 0)] >= trace.end[tasks])
    return parts


def _without_parts(trace: Trace, found: Collectives) -> Collectives:
    """Without the untyped events inside a named collective: an HCCL op's tasks on its planes (``Notify_Wait``,
    ``Memcpy``, ``RDMASend``) are parts of the op, not collectives of their own."""
    other = found.type == len(COLLECTIVES)
    named = found.rows[~other]
    if not other.any() or named.size == 0:
        return found
    rows = found.rows[other]
    inside = overlaps_any(trace.ts[rows], trace.end[rows], trace.ts[named], trace.end[named])
    keep = ~other
    keep[np.flatnonzero(other)[~inside]] = True
    return Collectives(
        found.rows[keep], found.on, found.type[keep], found.nbytes[keep], found.group_size[keep], found.group[keep],
        found.groups,
    )  # fmt: skip


def _outermost(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The rows not nested in another of ``rows`` on the same track (HCCL writes an op and its sub-tasks)."""
    if rows.size == 0:
        return rows
    order = rows[np.lexsort((-trace.dur[rows], trace.ts[rows], trace.track[rows]))]
    track, end = trace.track[order], trace.end[order]
    new_track = np.r_[True, track[1:] != track[:-1]]
    keep = np.ones(order.size, dtype=bool)
    segments = np.flatnonzero(new_track).tolist() + [order.size]
    for start, stop in zip(segments[:-1], segments[1:]):
        reach = np.maximum.accumulate(end[start:stop])
        keep[start + 1 : stop] = end[start + 1 : stop] > reach[:-1]
    kept = order[keep]
    return kept[np.argsort(trace.ts[kept], kind="stable")]


def _described(trace: Trace, rows: np.ndarray, on: str) -> Collectives:
    """Type, size, group size and group of each row, from its name and kept args."""
    names = (*COLLECTIVES, OTHER)
    types = _types_by_name(trace, rows)
    nbytes = np.full(rows.size, math.nan)
    size = np.full(rows.size, math.nan)
    group = np.zeros(rows.size, dtype=np.int32)
    groups: list[str] = []
    with_args = np.flatnonzero(trace.args_ref[rows] >= 0)
    for i, record in zip(with_args.tolist(), _records(trace, rows[with_args])):
        if record.collective is not None:
            types[i] = names.index(record.collective)
        nbytes[i], size[i] = record.nbytes, record.group_size
        if record.per_rank:
            nbytes[i] = _whole_message(names[types[i]], record.nbytes, record.group_size)
        if record.group:
            if record.group not in groups:
                groups.append(record.group)
            group[i] = groups.index(record.group) + 1
    found = Collectives(rows, on, types, nbytes, size, group, ["default", *groups])
    _programs_say(trace, found)
    _job_defaults(trace, found)
    return found


def _programs_say(trace: Trace, found: Collectives) -> None:
    """What an XLA trace's programs say of the collectives whose args do not: XLA's kernels name the op of the program
    they run, and the program's HLO gives its operands and its groups (:func:`collective_messages`)."""
    unknown = np.flatnonzero(np.isnan(found.nbytes) | np.isnan(found.group_size))
    nbytes, ranks = collective_messages(trace, found.rows[unknown])
    found.nbytes[unknown] = np.where(np.isnan(found.nbytes[unknown]), nbytes, found.nbytes[unknown])
    found.group_size[unknown] = np.where(np.isnan(found.group_size[unknown]), ranks, found.group_size[unknown])


def _whole_message(collective: str, per_rank: float, ranks: float) -> float:
    """A collective's message from what each rank gives (HCCL's count): the same for an all-reduce or a broadcast,
    that times the ranks for a gather or a scatter (NaN where the ranks are unknown); an all-to-all's counts differ
    by peer, so its message is not said."""
    if collective in ("all_gather", "reduce_scatter"):
        return per_rank * ranks
    return math.nan if collective == "all_to_all" else per_rank


def _types_by_name(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Each row's collective type by its name (an index into ``COLLECTIVES + (OTHER,)``), each distinct name looked at
    once."""
    used, name_of_row = np.unique(trace.name[rows], return_inverse=True)
    names = (*COLLECTIVES, OTHER)
    type_of_name = np.array([names.index(collective_type(trace.names[n])) for n in used.tolist()], np.int8)
    return type_of_name[name_of_row.reshape(-1)] if rows.size else np.zeros(0, np.int8)


@dataclass
class _Record:
    collective: str | None = None
    nbytes: float = math.nan
    group_size: float = math.nan
    group: str = ""
    per_rank: bool = False  # nbytes is what each rank gives (an HCCL op's count), not the whole message


class _RecordFields(msgspec.Struct, omit_defaults=True):
    """The fields of an event's args that :func:`_record` reads, each as its raw JSON (absent ones left out)."""

    collective: msgspec.Raw = msgspec.field(name="Collective name", default=msgspec.Raw(b""))
    dtype: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""))
    in_elements: msgspec.Raw = msgspec.field(name="In msg nelems", default=msgspec.Raw(b""))
    out_elements: msgspec.Raw = msgspec.field(name="Out msg nelems", default=msgspec.Raw(b""))
    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    types: msgspec.Raw = msgspec.field(name="Input type", default=msgspec.Raw(b""))
    group_size: msgspec.Raw = msgspec.field(name="Group size", default=msgspec.Raw(b""))
    group: msgspec.Raw = msgspec.field(name="Process Group Description", default=msgspec.Raw(b""))
    group_name: msgspec.Raw = msgspec.field(name="Process Group Name", default=msgspec.Raw(b""))
    hccl_dtype: msgspec.Raw = msgspec.field(name="data_type", default=msgspec.Raw(b""))
    hccl_count: msgspec.Raw = msgspec.field(name="count", default=msgspec.Raw(b""))


_RECORD_FIELDS = msgspec.json.Decoder(list[_RecordFields])


def _records(trace: Trace, rows: np.ndarray) -> list[_Record]:
    """:func:`_record` of each of ``rows`` (rows with kept args), made once per distinct set of the fields it reads:
    a trace repeats a few collectives thousands of times, each with its own ids beside the same fields."""
    joined = b"[" + b",".join([trace.kept_args[ref] for ref in trace.args_ref[rows].tolist()]) + b"]"
    try:
        joined.decode()  # args not valid UTF-8 anywhere read as none (Trace.args), even in a field no record reads
        fields = _RECORD_FIELDS.decode(joined)
    except (msgspec.DecodeError, UnicodeDecodeError):  # such args, or args that are no object: one by one
        return [_record(args or {}) for args in trace.args_of(rows)]
    made: dict[bytes, _Record] = {}
    return [
        made[key] if key in made else made.setdefault(key, _record(msgspec.json.decode(key)))
        for key in map(msgspec.json.encode, fields)
    ]


def _record(args: dict) -> _Record:
    """What one event's args say about its collective."""
    record = _Record()
    name = args.get("Collective name")
    if isinstance(name, str) and collective_type(name) != OTHER:
        record.collective = collective_type(name)
    dtype = _width(args.get("dtype"))
    elements = [args.get(k) for k in ("In msg nelems", "Out msg nelems")]
    counts = [e for e in elements if isinstance(e, (int, float)) and not isinstance(e, bool) and e >= 0]
    hccl_dtype = _width(args.get("data_type"), _HCCL_DTYPE_BYTES)
    hccl_count = args.get("count")
    if dtype and counts:
        record.nbytes = float(max(counts)) * dtype
    elif hccl_dtype and isinstance(hccl_count, int) and not isinstance(hccl_count, bool) and hccl_count >= 0:
        record.nbytes, record.per_rank = float(hccl_count) * hccl_dtype, True  # msprof: HCCL's count of elements
    elif isinstance(args.get("Input Dims"), list):
        record.nbytes = _input_bytes(args["Input Dims"], args.get("Input type"))
    group_size = args.get("Group size")
    if isinstance(group_size, int) and not isinstance(group_size, bool) and group_size > 0:
        record.group_size = float(group_size)
    description = args.get("Process Group Description")
    label = description if isinstance(description, str) and description not in ("", "undefined") else None
    pg_name = args.get("Process Group Name")
    record.group = label or (f"group {pg_name}" if isinstance(pg_name, (str, int)) and pg_name != "" else "")
    return record


def _width(dtype: object, widths: dict[str, int] = DTYPE_BYTES) -> int | None:
    """The bytes of one element of ``dtype`` as a profiler names it (``float``, ``c10::BFloat16``, HCCL's ``FP32``
    in ``widths``), case aside; None where it is not named or not known."""
    return widths.get(str(dtype).lower().removeprefix("c10::")) if dtype is not None else None


def _input_bytes(dims: list, types: object) -> float:
    """The first input tensor's size from ``Input Dims`` and ``Input type`` (NaN when they do not say)."""
    shape = dims[0] if dims and isinstance(dims[0], list) else None
    dtype = types[0] if isinstance(types, list) and types else None
    width = _width(dtype)
    if shape is None or width is None or not all(isinstance(d, int) and d >= 0 for d in shape):
        return math.nan
    return float(np.prod(shape, dtype=np.float64)) * width


def _job_defaults(trace: Trace, found: Collectives) -> None:
    """What Kineto's ``distributedInfo`` says of collectives whose args do not: the world size, and the
    name of the job's only process group."""
    info = trace.metadata.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    world = info.get("world_size")
    if isinstance(world, int) and not isinstance(world, bool) and world > 0:
        found.group_size[np.isnan(found.group_size) & (found.group == 0)] = world
    groups = info.get("pg_config")
    if isinstance(groups, list) and len(groups) == 1 and isinstance(groups[0], dict):
        found.groups[0] = str(groups[0].get("pg_desc") or groups[0].get("pg_name") or found.groups[0])


def _lend_host_records(trace: Trace, found: Collectives) -> None:
    """Sizes and process groups from the host's records of each collective type, for the device collectives whose
    own args do not say: call by call when the counts agree, else the mean size and the one group they share."""
    records = np.flatnonzero(trace.name_matches(COLLECTIVE_ARGS) & trace.on_roles(Role.HOST) & (trace.args_ref >= 0))
    if records.size == 0:
        return
    names = found.names
    host = [(record, trace.names[n]) for record, n in zip(_records(trace, records), trace.name[records])]
    host_types = {r.collective or collective_type(name) for r, name in host}
    if "all_to_all" in host_types and "send_recv" not in host_types:  # NCCL runs all-to-all as grouped send/recv
        found.type[found.type == names.index("send_recv")] = names.index("all_to_all")
    for index, kind in enumerate(names[:-1]):
        mine = [r for r, name in host if (r.collective or collective_type(name)) == kind]
        of_type = np.flatnonzero(found.type == index)
        if not mine or of_type.size == 0:
            continue
        one_to_one = len(mine) == of_type.size
        sizes = np.array([r.nbytes for r in mine])
        unsized = of_type[np.isnan(found.nbytes[of_type])]
        if one_to_one and unsized.size == of_type.size:
            found.nbytes[of_type] = sizes
        elif unsized.size and not np.isnan(sizes).all():
            found.nbytes[unsized] = float(np.nanmean(sizes))
        groups = [r.group for r in mine]
        ungrouped = of_type[found.group[of_type] == 0]
        if one_to_one and ungrouped.size == of_type.size:
            found.group[of_type] = [_group_index(found, g) for g in groups]
        elif ungrouped.size and len(set(groups)) == 1:
            found.group[ungrouped] = _group_index(found, groups[0])


def _group_index(found: Collectives, group: str) -> int:
    """The index of ``group`` among the found groups (added if new); 0, the default group, when unnamed."""
    if not group:
        return 0
    if group not in found.groups:
        found.groups.append(group)
    return found.groups.index(group)


def covered(busy: intervals.Intervals, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per span [start, end]: the time ``busy`` (disjoint, sorted intervals) covers within it."""
    lo, hi = busy
    cumulative = np.r_[0.0, np.cumsum(hi - lo)]

    def before(t: np.ndarray) -> np.ndarray:  # busy time up to t
        i = np.searchsorted(lo, t, side="right")
        partial = np.where(i > 0, np.clip(t - lo[np.maximum(i - 1, 0)], 0, (hi - lo)[np.maximum(i - 1, 0)]), 0.0)
        return cumulative[np.maximum(i - 1, 0)] * (i > 0) + partial

    if lo.size == 0:
        return np.zeros(starts.size)
    return np.maximum(before(ends) - before(starts), 0.0)


@dataclass
class Communication:
    """A trace's communication in the analysis window: the metrics, per-collective and per-group figures, and
    each call's time in the window and exposed time (indexed like ``calls``)."""

    values: dict[str, float]
    busy: intervals.Intervals
    collectives: list[CollectiveStat]
    groups: list[GroupStat]
    calls: Collectives
    in_window_us: np.ndarray
    exposed_us: np.ndarray
    peers: peer_waits.PeerWaits = field(default_factory=peer_waits.PeerWaits)  # whom the collectives waited for

    @classmethod
    def none(cls) -> Communication:
        empty = np.empty(0)
        calls = Collectives(np.empty(0, np.int64), "device", np.empty(0, np.int8), empty, empty, np.empty(0, np.int32))
        return cls({}, (empty, empty), [], [], calls, empty, empty)


METRICS: dict[str, str] = {
    "communication.time_us": "time with a collective running (device collectives, else host ones such as gloo), µs",
    "communication.count": "collectives started in the window",
    "communication.per_step": "collectives per steady-state step",
    "communication.overlap_fraction": "share of communication.time_us with device compute running beside it",
    "communication.exposed_us": "time with a collective running and no device compute: exposed communication, µs",
    "communication.exposed_fraction": "communication.exposed_us / window",
    "communication.bytes": "bytes the collectives in the window moved, where their args say (null if none do)",
    "communication.busbw_gbps": "bus bandwidth the sized collectives achieved, GB/s (nccl-tests' definition)",
    "communication.waiting_us": "time the collectives' tasks waited for peers' signals and moved no data (HCCL's "
    "Notify Wait), µs; 0 where no task says",
    "communication.transfer_us": "time the collectives' tasks moved or reduced data (HCCL's Memcpy, Reduce_Inline, "
    "SDMA), µs; 0 where no task says",
}


def measure(trace: Trace, lo: float, hi: float, compute: intervals.Intervals, steady_steps: int) -> Communication:
    """The communication metrics of the window [lo, hi], given the device's compute intervals."""
    found = find_collectives(trace)
    peers = peer_waits.measure(trace, lo, hi, collective_tasks(trace))
    rows = found.rows
    starts, ends = np.maximum(trace.ts[rows], lo), np.minimum(trace.end[rows], hi)
    inside = ends > starts
    busy = intervals.clip(intervals.union(starts[inside], ends[inside]), lo, hi)
    time = intervals.total(busy)
    exposed = intervals.total(intervals.subtract(busy, compute, lo, hi))
    started = (trace.ts[rows] >= lo) & (trace.ts[rows] < hi)
    span = np.where(inside, ends - starts, 0.0)
    hidden = covered(compute, starts, ends) if compute[0].size else np.zeros(rows.size)
    exposed_each = np.where(inside, np.maximum(span - hidden, 0.0), 0.0)
    sized = inside & ~np.isnan(found.nbytes) & (span > 0)
    bus = bus_bytes(found, sized)
    values = {
        "communication.time_us": time,
        "communication.count": float(np.count_nonzero(started)),
        "communication.per_step": float(np.count_nonzero(started)) / steady_steps if steady_steps else math.nan,
        "communication.overlap_fraction": 1.0 - exposed / time if time > 0 else math.nan,
        "communication.exposed_us": exposed,
        "communication.exposed_fraction": exposed / (hi - lo) if hi > lo else math.nan,
        "communication.bytes": float(found.nbytes[inside & started].sum()) if sized.any() else math.nan,
        "communication.busbw_gbps": _gbps(float(bus.sum()), float(span[sized].sum())) if sized.any() else math.nan,
        "communication.waiting_us": peers.waiting_us,
        "communication.transfer_us": peers.transfer_us,
    }

    def exposed_of(mine: np.ndarray) -> float:
        """The wall time the calls of ``mine`` leave exposed: calls at once on several threads count once."""
        running = intervals.clip(intervals.union(starts[mine], ends[mine]), lo, hi)
        return intervals.total(intervals.subtract(running, compute, lo, hi))

    return Communication(
        values,
        busy,
        _per_type(found, inside, span, exposed_of),
        _per_group(found, inside, span, exposed_of),
        found,
        span,
        exposed_each,
        peers,
    )


def bus_bytes(found: Collectives, calls: np.ndarray) -> np.ndarray:
    """The bytes each of the sized ``calls`` (a mask over ``found``) puts on a rank's links: its message scaled by
    its type's bus factor for its ranks (nccl-tests' bus bandwidth), the message itself where the ranks are unknown
    or the type has no factor."""
    kinds, ranks = found.type[calls], found.group_size[calls]
    scale = np.ones(ranks.size)
    for index, name in enumerate(found.names):
        if (factor := BUS_FACTOR.get(name)) is not None:
            known = (kinds == index) & (ranks > 1)  # NaN ranks compare False
            scale[known] = factor(ranks[known])
    return found.nbytes[calls] * scale


def _gbps(nbytes: float, time_us: float) -> float:
    return nbytes / time_us / 1e3 if time_us > 0 else math.nan


def _per_type(
    found: Collectives, inside: np.ndarray, span: np.ndarray, exposed_of: Callable[[np.ndarray], float]
) -> list[CollectiveStat]:
    stats = []
    for index, name in enumerate(found.names):
        mine = inside & (found.type == index)
        if not mine.any():
            continue
        sized = mine & ~np.isnan(found.nbytes) & (span > 0)
        size = found.group_size[mine]
        ranks = int(np.nanmax(size)) if not np.isnan(size).all() else None
        nbytes = float(found.nbytes[sized].sum()) if sized.any() else None
        time_sized = float(span[sized].sum())
        bus = float(bus_bytes(found, sized).sum())
        stats.append(
            CollectiveStat(
                name=name,
                count=int(np.count_nonzero(mine)),
                time_us=float(span[mine].sum()),
                exposed_us=exposed_of(mine),
                bytes=nbytes,
                group_size=ranks,
                algbw_gbps=_gbps(nbytes, time_sized) if nbytes is not None else None,
                busbw_gbps=_gbps(bus, time_sized) if nbytes is not None else None,
            )
        )
    return sorted(stats, key=lambda s: -s.time_us)


def _per_group(
    found: Collectives, inside: np.ndarray, span: np.ndarray, exposed_of: Callable[[np.ndarray], float]
) -> list[GroupStat]:
    stats = []
    for index, name in enumerate(found.groups):
        mine = inside & (found.group == index)
        if mine.any():
            stats.append(
                GroupStat(
                    name=name,
                    parallelism=parallelism(name),
                    count=int(np.count_nonzero(mine)),
                    time_us=float(span[mine].sum()),
                    exposed_us=exposed_of(mine),
                )
            )
    return sorted(stats, key=lambda s: -s.exposed_us)
