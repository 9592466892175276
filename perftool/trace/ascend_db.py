"""torch_npu's db export (``ascend_pytorch_profiler_N.db``, sqlite) read as the events its text export writes; msprof's
own (``msprof_<time>.db``, from ``msprof --type=db``) has the same tables less the framework's, and reads alike.

The profiler's analysis writes the same run either as ``trace_view.json`` or as tables: names are ids into
``STRING_IDS``, times are nanoseconds. Read through the standard library's ``sqlite3``, each table becomes the
events of the process the text export gives it, so the Ascend dialect reads both alike:

* ``PYTORCH_API`` (framework ops, the Python tracer's frames, the task queue) on ``Python``;
* ``CANN_API`` (``AscendCL@``, ``Runtime@``, ``Node@``, ``Hccl@`` calls) on ``CANN``;
* ``TASK`` (what the NPU ran, per stream) on ``Ascend Hardware``, named after ``COMPUTE_TASK_INFO`` where the task
  computes, else by its task type (``Notify Wait``, ``SDMA``, ``EVENT_WAIT``), the compute type in its args;
* ``COMMUNICATION_OP`` (``hcom_allReduce_...``, its elements and their type in args) on ``HCCL``, and each of its
  tasks on the plane it ran on, with the ranks it signals or moves data between;
* a launch flow (``HostToDevice``) from each CANN call to the tasks it started, by their connection id, and one
  from each framework op to the tasks it queued (``CONNECTION_IDS``), as the text export's ``async_npu`` flows.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

import msgspec

from perftool.common.errors import TraceError
from perftool.trace.archives import PROFILE_INSTEAD
from perftool.trace.decode import RawEvent, metadata_event
from perftool.trace.msprof_kernels import CORES, KERNEL_DETAILS, PIPES, kernel_types
from perftool.trace.profiler_dirs import ENVIRONMENT, recorded_environment

T = TypeVar("T")  # what an optional table's read gives

BATCH_ROWS = 50_000  # rows read and turned into events at a time
PYTHON, CANN, HARDWARE, HCCL = 1, 2, 3, 4  # the processes, numbered as the text export names them
_PROCESSES = {PYTHON: "Python", CANN: "CANN", HARDWARE: "Ascend Hardware", HCCL: "HCCL"}
_NO_PLANE = 0xFFFF  # a plane id this large is HCCL's mark of none: a communicator's links are far fewer
_OPS_THREAD = 0  # HCCL's thread of the first communicator's collectives; its planes are 1 + the plane's id after it
_CANN_PREFIX = {"acl": "AscendCL@", "runtime": "Runtime@", "node": "Node@", "model": "Model@", "hccl": "Hccl@"}
_PYTORCH_CATEGORY = {"op": "cpu_op", "queue": "enqueue", "trace": "python_function", "mstx": "user_annotation"}
_ENCODE = msgspec.json.encode
_QUEUED = 1 << 40  # the flows from a framework op to the tasks it queued, apart from the CANN calls' connection ids
_RPD_TABLES = {"rocpd_op", "rocpd_api"}  # rocmProfileData's own database, which it converts to Chrome JSON
_ROCPD_TABLE = "rocpd_info_"  # rocprofv3's database (rocpd, its default output): rocpd_info_agent<uuid>, ..._node<uuid>
_NSIGHT_TABLE = "StringIds"  # the one table every Nsight Systems sqlite export holds (the others are made as needed)
# torch_npu's record of the job's HCCL communicators (a row of META_DATA, JSON): by communicator name, as
# COMMUNICATION_OP.groupName gives it, its process group's name (``group_name``) and the global ranks in it
PARALLEL_GROUPS = "parallel_group_info"
_SHAPES = re.compile(r"[\d,;\s]*\d[\d,;\s]*")  # torch_npu's recorded shapes: "32,3,224,224;\r\n64;\r\n;"


def batches(path: str, metadata: dict[str, Any]) -> Iterator[list[RawEvent]]:
    """The export's events in batches, the processes' and threads' names first; ``metadata`` gets the schema's
    version and the NPU's name."""
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TraceError(path, f"cannot open the sqlite database: {exc}") from None
    try:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if foreign := _other_profilers(tables):
            raise TraceError(path, foreign)
        if "STRING_IDS" not in tables or not tables & {"TASK", "PYTORCH_API"}:
            raise TraceError(
                path,
                "an sqlite database without the tables torch_npu's and msprof's db exports write (STRING_IDS, TASK "
                "or PYTORCH_API)",
            )
        metadata |= _metadata(connection)
        reader = _Reader(connection, tables)
        yield reader.names()
        yield from reader.events()
    except sqlite3.Error as exc:
        raise TraceError(path, f"cannot read torch_npu's tables: {exc}") from None
    finally:
        connection.close()


def _other_profilers(tables: set[str]) -> str | None:
    """Whose database another profiler's is, by its tables, and how to get a trace perftool reads; None otherwise."""
    if _RPD_TABLES <= tables:
        return (
            "a rocmProfileData database (its rocpd_op and rocpd_api tables): perftool reads its Chrome JSON "
            "(python rpd2tracing.py FILE.rpd FILE.json, from rocmProfileData's tools; SGLang writes it as "
            "rpd-*.trace.json.gz)"
        )
    if any(table.startswith(_ROCPD_TABLE) for table in tables):
        return f"a rocprofv3 database (rocpd), which perftool does not read: {PROFILE_INSTEAD}"
    if _NSIGHT_TABLE in tables:
        return f"an Nsight Systems export (nsys export --type sqlite), which perftool does not read: {PROFILE_INSTEAD}"
    return None


def _metadata(connection: sqlite3.Connection) -> dict[str, Any]:
    """The export's schema version and the variables the profiler recorded set (``META_DATA``), the NPU it ran on
    (``NPU_INFO``) and its kernels' measured pipe use (``TASK_PMU_INFO``), as the trace's metadata. Each is
    optional: a table the export lacks, or lays out otherwise (another schema's columns), is passed over."""
    found: dict[str, Any] = {"perftool.source": "torch_npu db export"}
    rows = _optional(lambda: dict(connection.execute("SELECT name, value FROM META_DATA"))) or {}
    found |= {f"torch_npu.{k}": v for k, v in rows.items() if k != "ENV_VARIABLES"}
    if environment := recorded_environment(rows.get("ENV_VARIABLES")):
        found[ENVIRONMENT] = environment
    names = _optional(lambda: [name for (name,) in connection.execute("SELECT name FROM NPU_INFO") if name]) or []
    if len(set(names)) == 1:  # the NPU the rank ran on, named as a device's properties are (Kineto's)
        found["deviceProperties"] = [{"id": pid, "name": names[0]} for pid in (HARDWARE, HCCL)]
    if measured := _optional(lambda: _kernel_types(connection)):
        found[KERNEL_DETAILS] = measured
    return found


class _ProcessGroup(NamedTuple):
    """What torch_npu recorded of an HCCL communicator's process group: the args its collectives get, in Kineto's
    words (``Group size``: its global ranks counted; ``Process Group Description``: its name, ``dp``, ``tp``, the
    default group's ``default_group``), and its global ranks by their rank in it, where each is a number."""

    args: dict[str, Any]
    global_ranks: tuple[int, ...]


def _process_groups(connection: sqlite3.Connection) -> dict[str, _ProcessGroup]:
    """Per HCCL communicator (its name), what torch_npu recorded of its process group (``parallel_group_info``); none
    where no such row is recorded or it does not read as that record."""
    query = "SELECT value FROM META_DATA WHERE name = ?"
    rows = _optional(lambda: connection.execute(query, (PARALLEL_GROUPS,)).fetchall()) or []
    try:
        recorded = json.loads(rows[0][0]) if rows else {}
    except (TypeError, ValueError, RecursionError):
        return {}
    found: dict[str, _ProcessGroup] = {}
    for communicator, group in recorded.items() if isinstance(recorded, dict) else []:
        if not isinstance(group, dict):
            continue
        ranks, name = group.get("global_ranks"), group.get("group_name")
        args: dict[str, Any] = {}
        if isinstance(ranks, list):
            args["Group size"] = len(ranks)  # none listed: no size (a group has one rank at least)
        if isinstance(name, str):
            args["Process Group Description"] = name  # "": no name
        numbered = tuple(ranks) if isinstance(ranks, list) and all(type(rank) is int for rank in ranks) else ()
        found[str(communicator)] = _ProcessGroup(args, numbered)
    return found


def _optional(read: Callable[[], T]) -> T | None:
    """What ``read`` reads of an optional table, or None where its columns are not the ones asked for."""
    try:
        return read()
    except sqlite3.OperationalError:
        return None


def _kernel_types(connection: sqlite3.Connection) -> list[dict[str, Any]]:
    """The compute tasks' pipe counters (``TASK_PMU_INFO``: ``aic_total_time``, ``aic_mac_time``..., per task) per
    kernel type and core, as the text export's ``kernel_details.csv`` gives them. The counters come ordered by task,
    one task's at a time: only the sums per type are held, however many tasks the capture ran."""
    wanted = {f"{held}_total_time": held for held in CORES} | {
        f"{held}_{pipe}_time": f"{held}_{pipe}" for held in CORES for pipe in PIPES
    }
    strings = dict(connection.execute("SELECT id, value FROM STRING_IDS"))
    ids = {id_: wanted[name] for id_, name in strings.items() if name in wanted}
    rows = connection.execute(
        "SELECT p.globalTaskId, c.opType, c.taskType, t.endNs - t.startNs, p.name, p.value FROM TASK_PMU_INFO p "
        "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = p.globalTaskId JOIN TASK t ON t.globalTaskId = p.globalTaskId "
        "ORDER BY p.globalTaskId"
    )

    def kernels() -> Iterator[tuple[str, str, float | None, dict[str, float]]]:
        for _, counted in itertools.groupby(rows, key=lambda row: row[0]):
            first, *rest = counted
            _, kind, core, ns, _, _ = first
            counters = {
                ids[name]: float(value)
                for *_, name, value in (first, *rest)
                if name in ids and isinstance(value, int | float) and math.isfinite(value) and value >= 0
            }
            if counters:
                yield (
                    str(strings.get(kind) or ""),
                    str(strings.get(core) or ""),
                    _us(ns) if ns is not None else None,
                    counters,
                )

    return kernel_types(kernels())


class _Reader:
    """The tables of one export, read a batch of rows at a time."""

    def __init__(self, connection: sqlite3.Connection, tables: set[str]) -> None:
        self.connection, self.tables = connection, tables
        self.strings = dict(connection.execute("SELECT id, value FROM STRING_IDS"))
        self.api_types: dict[int, str] = {}
        if "ENUM_API_TYPE" in tables:
            self.api_types = dict(connection.execute("SELECT id, name FROM ENUM_API_TYPE"))
        self.hccl_types: dict[int, str] = {}  # an HCCL op's data type, as the text export names it (FP32, BFP16)
        if "ENUM_HCCL_DATA_TYPE" in tables:
            self.hccl_types = dict(connection.execute("SELECT id, name FROM ENUM_HCCL_DATA_TYPE"))
        self.threads: set[tuple[int, int]] = set()
        self.group_threads = self._group_threads()
        self.process_groups = _process_groups(connection)

    def names(self) -> list[RawEvent]:
        """The processes' and threads' names, as the text export writes them."""
        events = [metadata_event("process_name", pid, 0, name) for pid, name in _PROCESSES.items()]
        events += [
            metadata_event("process_labels", pid, 0, "CPU" if pid == PYTHON else "NPU", key="labels")
            for pid in _PROCESSES
        ]
        for pid, table, column in ((PYTHON, "PYTORCH_API", "globalTid"), (CANN, "CANN_API", "globalTid")):
            if table in self.tables:
                for (tid,) in self.connection.execute(f"SELECT DISTINCT {column} & 4294967295 FROM {table}"):
                    events.append(metadata_event("thread_name", pid, tid, f"Thread {tid}"))
        if "TASK" in self.tables:
            for (stream,) in self.connection.execute("SELECT DISTINCT streamId FROM TASK"):
                events.append(metadata_event("thread_name", HARDWARE, stream, f"Stream {stream}"))
        for index, (thread, planes) in enumerate(self.group_threads.values()):
            events.append(metadata_event("thread_name", HCCL, thread, f"Group {index} Communication"))
            events += [metadata_event("thread_name", HCCL, thread + 1 + plane, f"Plane {plane}") for plane in planes]
        return events

    def _group_threads(self) -> dict[Any, tuple[int, list[int]]]:
        """Per communicator (its group name), the HCCL thread of its ops and the planes of its tasks, laid out as the
        text export lays them out: a group's thread, then a thread per plane (its id + 1 after the group's), then the
        next group's."""
        planes: dict[Any, set[int]] = {}
        if "COMMUNICATION_OP" in self.tables:
            query = f"SELECT DISTINCT {_group(self._columns('COMMUNICATION_OP'))} FROM COMMUNICATION_OP"
            planes |= {group: set() for (group,) in self.connection.execute(query)}
        if "COMMUNICATION_TASK_INFO" in self.tables:
            group = _group(self._columns("COMMUNICATION_TASK_INFO"))
            query = f"SELECT DISTINCT {group}, planeId FROM COMMUNICATION_TASK_INFO"
            for group, plane in self.connection.execute(query):
                planes.setdefault(group, set()).add(_plane(plane))
        threads, thread = {}, _OPS_THREAD
        for group in sorted(planes, key=lambda g: (not isinstance(g, int), g if isinstance(g, int) else 0, repr(g))):
            threads[group] = (thread, sorted(planes[group]))
            thread += 2 + max(planes[group], default=-1)
        return threads

    def events(self) -> Iterator[list[RawEvent]]:
        if "PYTORCH_API" in self.tables:
            columns = self._columns("PYTORCH_API")
            optional = ", ".join(c if c in columns else "NULL" for c in ("inputShapes", "inputDtypes", "connectionId"))
            yield from self._rows(
                "SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER), globalTid & 4294967295, name, type, "
                f"{optional} FROM PYTORCH_API",
                self._pytorch,
            )
        if "CANN_API" in self.tables:
            yield from self._rows(
                "SELECT startNs, endNs, globalTid & 4294967295, name, type, connectionId FROM CANN_API", self._cann
            )
        if "TASK" in self.tables:
            compute = "COMPUTE_TASK_INFO" in self.tables
            op = (  # the framework op that queued the task, through the task's connection id
                "(SELECT MIN(ci.id) FROM CONNECTION_IDS ci WHERE ci.connectionId = t.connectionId)"
                if "CONNECTION_IDS" in self.tables
                else "NULL"
            )
            yield from self._rows(
                f"SELECT t.startNs, t.endNs, t.streamId, t.taskType, t.connectionId, {op}, "
                + (
                    "c.name, c.taskType FROM TASK t LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
                    if compute
                    else "NULL, NULL FROM TASK t"
                ),  # fmt: skip
                self._task,
            )
        if "COMMUNICATION_OP" in self.tables:
            columns = self._columns("COMMUNICATION_OP")
            sized = ", ".join(c if c in columns else "NULL" for c in ("dataType", "count"))
            yield from self._rows(
                f"SELECT startNs, endNs, opName, connectionId, {_group(columns)}, {sized} FROM COMMUNICATION_OP",
                self._collective,
            )
        if {"COMMUNICATION_TASK_INFO", "TASK"} <= self.tables:
            columns = self._columns("COMMUNICATION_TASK_INFO")
            ranks = ", ".join(f"c.{c}" if c in columns else "NULL" for c in ("srcRank", "dstRank"))
            yield from self._rows(
                f"SELECT t.startNs, t.endNs, {_group(columns, 'c.')}, c.planeId, c.taskType, "
                f"{ranks} FROM COMMUNICATION_TASK_INFO c"
                " JOIN TASK t ON t.globalTaskId = c.globalTaskId",
                self._plane_task,
            )

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self.connection.execute(f"PRAGMA table_info({table})")}

    def _rows(self, query: str, event: Any) -> Iterator[list[RawEvent]]:
        cursor = self.connection.execute(query)
        while rows := cursor.fetchmany(BATCH_ROWS):
            yield [e for row in rows for e in event(*row)]

    def _string(self, id_: int | None) -> str:
        return self.strings.get(id_, "") if id_ is not None else ""

    def _pytorch(
        self, start: int, end: int, tid: int, name: int, kind: int, one: int | None, other: int | None, op: int | None
    ) -> list[RawEvent]:
        """A framework op, with its recorded inputs as the text export writes them (``Input Dims``, ``Input type``:
        ``;``-separated strings). The two columns are told apart by what they hold, as exports have been seen with
        the shapes under ``inputDtypes``."""
        category = _PYTORCH_CATEGORY.get(self.api_types.get(kind, ""), "")
        recorded = [self._string(one), self._string(other)]
        shapes = next((text for text in recorded if _SHAPES.fullmatch(text)), "")
        types = next((text for text in recorded if text and text != shapes), "")
        args = {"Input Dims": shapes, "Input type": types} if shapes else None
        call = _span(self._string(name), category, PYTHON, tid, start, end, args)
        return [call, _flow("s", PYTHON, tid, start, _QUEUED + op)] if isinstance(op, int) else [call]

    def _cann(self, start: int, end: int, tid: int, name: int, kind: int, connection: int) -> list[RawEvent]:
        prefix = _CANN_PREFIX.get(self.api_types.get(kind, ""), "")
        call = _span(prefix + self._string(name), "", CANN, tid, start, end)
        return [call, _flow("s", CANN, tid, start, connection)]

    def _task(
        self,
        start: int,
        end: int,
        stream: int,
        task_type: int,
        connection: int,
        op: int | None,
        name: int | None,
        compute: int | None,
    ) -> list[RawEvent]:
        kind = self._string(task_type)
        args = {"Task Type": self._string(compute) if compute is not None else kind}
        task = _span(self._string(name) if name is not None else kind, "", HARDWARE, stream, start, end, args)
        queued = [_flow("f", HARDWARE, stream, start, _QUEUED + op)] if isinstance(op, int) else []
        return [task, _flow("f", HARDWARE, stream, start, connection), *queued]

    def _collective(
        self, start: int, end: int, name: int, connection: int, group: Any, data_type: int | None, count: int | None
    ) -> list[RawEvent]:
        """An HCCL op, with the elements it moves and their type, as the text export's args name them, and its
        process group where torch_npu recorded its communicator's (:func:`_process_groups`)."""
        args: dict[str, Any] = {"connection_id": connection}
        if data_type in self.hccl_types and isinstance(count, int):
            args |= {"data_type": self.hccl_types[data_type], "count": count}
        if (recorded := self._process_group(group)) is not None:
            args |= recorded.args
        return [_span(self._string(name), "", HCCL, self.group_threads[group][0], start, end, args)]

    def _plane_task(
        self, start: int, end: int, group: Any, plane: int, task_type: int, source: int | None, destination: int | None
    ) -> list[RawEvent]:
        """A task of an HCCL op on its plane, with the ranks it signals or moves data between, as the text export's
        args name them (``src rank``, ``dst rank``): each communicator numbers its ranks from 0, and where torch_npu
        recorded the communicator's global ranks, they are the job's ranks."""
        ranks = None if source is None or destination is None else {"src rank": source, "dst rank": destination}
        recorded = self._process_group(group)
        if ranks is not None and recorded is not None:
            ranks = {name: _global(rank, recorded.global_ranks) for name, rank in ranks.items()}
        thread = self.group_threads[group][0] + 1 + _plane(plane)
        return [_span(self._string(task_type), "", HCCL, thread, start, end, ranks)]

    def _process_group(self, group: Any) -> _ProcessGroup | None:
        """What torch_npu recorded of the process group of communicator ``group`` (its name's id), if anything."""
        return self.process_groups.get(self._string(group)) if isinstance(group, int) else None


def _global(rank: Any, global_ranks: tuple[int, ...]) -> Any:
    """A communicator's rank as the job numbers it; as recorded where it is none of the communicator's (HCCL's "no
    rank")."""
    return global_ranks[rank] if isinstance(rank, int) and 0 <= rank < len(global_ranks) else rank


def _span(name: str, category: str, pid: int, tid: Any, start: Any, end: Any, args: dict | None = None) -> RawEvent:
    """A complete event from nanosecond bounds."""
    raw = msgspec.Raw(_ENCODE(args)) if args else msgspec.Raw(b"")
    ts = _us(start)
    return RawEvent(ph="X", name=name, cat=category, pid=pid, tid=_id(tid), ts=ts, dur=_us(end) - ts, args=raw)


def _flow(phase: str, pid: int, tid: Any, start: Any, connection: Any) -> RawEvent:
    """One end of a launch's flow, from the host call to the task it started (their connection id)."""
    flow = connection if isinstance(connection, int) else None
    return RawEvent(ph=phase, name="HostToDevice", cat="HostToDevice", pid=pid, tid=_id(tid), ts=_us(start), id=flow)


def _group(columns: set[str], alias: str = "") -> str:
    """The column of a table of ``columns`` naming a row's communicator (NULL where the schema has none: one)."""
    return f"{alias}groupName" if "groupName" in columns else "NULL"


def _plane(value: Any) -> int:
    """A task's plane, 0 where it records none (HCCL's invalid plane, as msprof's own timeline takes it)."""
    return value if isinstance(value, int) and 0 <= value < _NO_PLANE else 0


def _us(ns: Any) -> float:
    """A time in ns as µs; NaN where a row holds none (or not a number), which the loader names as a missing time."""
    return ns / 1e3 if isinstance(ns, int | float) else math.nan


def _id(value: Any) -> int:
    """A thread or stream id as a number (0 where a row holds none)."""
    return value if isinstance(value, int) else 0
