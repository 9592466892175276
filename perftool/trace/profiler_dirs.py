"""Where a profiler's own output directory keeps its trace, so that a user can name the directory as they hold it."""

from __future__ import annotations

import csv
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from perftool.common.errors import TraceError

TRACE_SUFFIXES = (".json", ".json.gz")  # the files of a job's directory that may be its ranks' traces
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"  # torch_npu's analysed output, inside each rank's directory
ASCEND_TRACES = ("trace_view.json", "trace_view.json.gz")
DATABASE_SUFFIX = ".db"  # what torch_npu and msprof name their db exports (sqlite)
ASCEND_DATABASE = f"ascend_pytorch_profiler*{DATABASE_SUFFIX}"  # the db export's trace
# torch_npu's metadata of a rank's run, written before analysis: profiler_info_N.json (N: its rank), or
# profiler_info.json where the job is not distributed
RANK_METADATA = "profiler_info*.json"
RANK_RAW_DATA = "FRAMEWORK"  # the framework's raw data in a rank's directory, beside msprof's PROF_*/
MSPROF_RUN = "PROF_"  # how msprof names a run's directory (PROF_<number>_<time>_<id>)
MSPROF_RAW = "device_*"  # a run's raw data (with host/): what msprof exports from
MSPROF_TIMELINES = ("mindstudio_profiler_output", "timeline")  # where a run's exported timeline is (newer, older CANN)
MSPROF_NOT_TIMELINES = ("msprof_tx", "msprof_slice.json")  # beside the timeline: msproftx's part of it, a config
PROFILE_RUNS = ("plugins", "profile")  # where jax.profiler (and TensorFlow) keep a log directory's runs, a folder each
_RUN_NAME = re.compile(r"\d{4}(_\d{2}){5}")  # how jax.profiler names a run: the time it started, 2026_11_30_19_40_01
JAX_TRACE_SUFFIXES = (".trace.json.gz", ".trace.json")  # a host's trace JSON in a jax.profiler run: HOST.trace.json.gz
# a serving engine's folders of its device graphs' capture traces, beside the profile: no traces of the profile's
CAPTURE_FOLDERS = ("capture_traces", "graph_capture_profile")
XSPACE_SUFFIX = ".xplane.pb"  # a run's raw XSpace, one per host; its trace.json.gz, where written, holds the same
RUNS_BESIDE = "jax.profiler.runs"  # the trace metadata key of the other runs in its log directory (RunsBeside)
# jax.profiler's JSON export keeps at most this many events, the earliest by start (its trace container's cap): one
# holding as many was cut, and the XSpace it was made from holds the rest
JAX_EXPORT_MAX_EVENTS = 1_000_000
EXPORT_CAPPED = "jax.profiler.export_capped"  # the trace metadata key of a capped export, and the XSpace read instead
XPROF_CACHE_SUFFIX = ".SSTABLE"  # XProf's trace-viewer cache of a host's events (a LevelDB table), made from its XSpace
MSPROF_STEPS = "step_trace_time.csv"  # msprof's own breakdown of each step, beside the trace (µs)
MSPROF_LEFT_OUT = "msprof.left_out"  # the trace metadata key of what of msprof's CSVs a reader left out, and why
RANK_ENVIRONMENT = "profiler_metadata.json"  # torch_npu's record of the job's environment, per rank
RECORDED_VARIABLES = "ENV_VARIABLES"  # the field of that record that holds the variables
ENVIRONMENT = "torch_npu.environment"  # the trace metadata key of the variables the profiler recorded set
SCHEDULE = "torch_npu.schedule"  # the trace metadata key of the schedule the profiler ran with (RecordedSchedule)
# torch_npu.profiler.schedule's arguments, in the order it takes them
SCHEDULE_FIELDS = ("wait", "active", "warmup", "repeat", "skip_first")


def profiler_trace(directory: str) -> str | None:
    """The trace a profiler's own output directory holds, or None where ``directory`` is not one.

    torch_npu (and MindSpore) write one directory per rank (``<host>_<pid>_<time>_ascend_pt``): its metadata
    (``profiler_info_N.json``, ``profiler_metadata.json``), the raw data (``FRAMEWORK/``, ``PROF_*/``) and, once the
    profiler's analysis has run, ``ASCEND_PROFILER_OUTPUT/``, which holds the trace (``trace_view.json`` in the text
    export, ``ascend_pytorch_profiler*.db`` in the db export) and msprof's CSV and JSON summaries; that folder named
    itself reads the same. msprof's own ``PROF_*`` directory reads as its exported timeline (:func:`_msprof_trace`).
    A profiler directory that holds no trace to read raises a :class:`TraceError` saying how to make one.
    """
    path = Path(directory)
    output = path if path.name == ASCEND_OUTPUT else path / ASCEND_OUTPUT
    if output.is_dir():
        return _analysed_trace(directory, output)
    if (exported := _msprof_trace(path)) is not None:
        return exported
    if any(path.glob(RANK_METADATA)) or (path / RANK_RAW_DATA).is_dir():
        raise TraceError(
            directory,
            f"a torch_npu profiler directory whose analysis has not run (no {ASCEND_OUTPUT}/ in it): "
            "torch_npu.profiler.profiler.analyse(directory) runs it",
        )
    return None


def _analysed_trace(directory: str, output: Path) -> str:
    """The trace in a rank's ``ASCEND_PROFILER_OUTPUT/``: the text export's, else the db export's."""
    for name in ASCEND_TRACES:
        if (output / name).is_file():
            return str(output / name)
    databases = sorted(output.glob(ASCEND_DATABASE))
    if databases:
        return str(databases[0])
    raise TraceError(
        directory,
        f"a torch_npu profiler directory without a trace in {ASCEND_OUTPUT}/ (trace_view.json or {ASCEND_DATABASE}): "
        "the profiler's analysis did not run, or was cut short (torch_npu.profiler.profiler.analyse(directory) runs "
        "it again)",
    )


def _msprof_trace(directory: Path) -> str | None:
    """The timeline msprof exported into its ``PROF_*`` directory, or None where ``directory`` is not one.

    msprof writes its timeline as ``mindstudio_profiler_output/msprof_<time>.json`` (``timeline/msprof*.json`` in
    older CANN), the same events as a torch_npu trace less the framework's, and with ``--type=db`` (or beside it) the
    same run as ``msprof_<time>.db``. A timeline sliced into several files (``msprof_slice_N_<time>.json``) is read
    from the db where there is one; raw data that was never exported is refused, saying how to export it."""
    timelines = sorted(
        file
        for folder in MSPROF_TIMELINES
        for file in (directory / folder).glob("msprof*.json")
        if not file.name.startswith(MSPROF_NOT_TIMELINES) and file.is_file()
    )
    databases = sorted(file for file in directory.glob("msprof_*.db") if file.is_file())
    if len(timelines) == 1:
        return str(timelines[0])
    if databases:
        return str(databases[0])
    if timelines:
        shown = ", ".join(file.name for file in timelines[:3]) + (", …" if len(timelines) > 3 else "")
        raise TraceError(
            str(directory),
            f"msprof sliced its timeline into {len(timelines):,} files ({shown}) and wrote no msprof_*.db: export it "
            'again unsliced ("slice_switch": "off" in msprof_slice.json) or as a db (msprof --export=on --type=db '
            "--output=DIR)",
        )
    if directory.name.startswith(MSPROF_RUN) and any(directory.glob(MSPROF_RAW)):
        raise TraceError(
            str(directory),
            "msprof's raw data with no exported timeline (mindstudio_profiler_output/msprof_*.json or msprof_*.db): "
            "msprof --export=on --output=DIR exports it",
        )
    return None


def profile_run(directory: str) -> str | None:
    """The run folder a jax.profiler (TensorBoard, XProf) log directory is read as (``LOG_DIR/plugins/profile/RUN/``,
    one ``HOST.xplane.pb`` and perhaps ``HOST.trace.json.gz`` or ``perfetto_trace.json.gz`` per host): its latest
    run (jax.profiler adds one each time it traces into the directory), the directory named as the log directory
    or as its ``plugins`` or ``plugins/profile`` folder; None where ``directory`` is none of these."""
    runs = _profile_runs(Path(directory))
    return str(runs[-1]) if runs else None


class RunsBeside(NamedTuple):
    """A run of a jax.profiler log directory among the others there, each named as the profiler names its folder."""

    run: str
    earlier: list[str]
    later: list[str]


def sibling_runs(trace_file: str) -> RunsBeside | None:
    """Where ``trace_file`` lies in a run of a jax.profiler log directory that holds other runs too: its run and the
    others, earlier and later; None otherwise (a file elsewhere, a log directory of one run)."""
    run = Path(trace_file).parent
    if run.parent.name != PROFILE_RUNS[-1] or run.parent.parent.name != PROFILE_RUNS[0]:
        return None
    names = [other.name for other in _profile_runs(run.parent.parent.parent)]
    if run.name not in names or len(names) < 2:
        return None
    at = names.index(run.name)
    return RunsBeside(run.name, names[:at], names[at + 1 :])


def _profile_runs(log_dir: Path) -> list[Path]:
    """The runs of a jax.profiler log directory that hold a trace, earliest first: jax.profiler names each by the
    time it started (``2026_11_30_19_40_01``), so name order is time order; runs named otherwise, by when their folder
    last changed."""
    root = _runs_folder(log_dir)
    if not root.is_dir():
        return []
    runs = [run for run in root.iterdir() if run.is_dir() and any(_profile_files(run))]
    if all(_RUN_NAME.fullmatch(run.name) for run in runs):
        return sorted(runs)
    return sorted(runs, key=lambda run: (run.stat().st_mtime, run.name))


def _runs_folder(directory: Path) -> Path:
    """The folder where the jax.profiler log directory ``directory`` keeps its runs (``LOG_DIR/plugins/profile``),
    ``directory`` naming the log directory or a folder on the way to its runs (``plugins``, ``plugins/profile``)."""
    plugins, profile = PROFILE_RUNS
    if directory.name == profile and directory.parent.name == plugins:
        return directory
    return directory / profile if directory.name == plugins else directory / plugins / profile


def xprof_caches(directory: str) -> list[Path]:
    """The XProf trace-viewer caches (``HOST.SSTABLE``) in ``directory`` or in the runs of the jax.profiler log
    directory it is: what XProf keeps of a run once it has shown it, which perftool does not read."""
    runs = _runs_folder(Path(directory))
    folders = [Path(directory), *(sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else [])]
    return [cache for folder in folders for cache in sorted(folder.glob(f"*{XPROF_CACHE_SUFFIX}")) if cache.is_file()]


def xprof_cache_advice(cache: Path) -> str:
    """What an XProf trace-viewer cache is, and what to read instead, in words."""
    made_from = f"{cache.stem}{XSPACE_SUFFIX}"
    return f"XProf's trace-viewer cache, which perftool does not read: scan the {made_from} it was made from"


def _profile_files(run: Path) -> list[Path]:
    return [p for p in run.iterdir() if p.is_file() and p.name.lower().endswith((*TRACE_SUFFIXES, XSPACE_SUFFIX))]


def without_copies(files: list[Path]) -> list[Path]:
    """A folder's trace files less those another beside them holds already: each host read once. The XSpaces a
    JSON trace was made from (``HOST.xplane.pb`` beside ``HOST.trace.json.gz``, or a run's one XSpace beside its
    ``perfetto_trace.json.gz``), and the ``perfetto_trace.json.gz`` jax.profiler writes (create_perfetto_trace) as a
    copy of the run's one ``HOST.trace.json.gz`` less its metadata, where that lies beside it."""
    xspaces = [f for f in files if f.name.lower().endswith(XSPACE_SUFFIX)]
    others = [f for f in files if f not in xspaces]
    perfetto = [f for f in others if _is_perfetto_copy(f)]
    if any(f.name.lower().endswith(JAX_TRACE_SUFFIXES) for f in others):
        others = [f for f in others if f not in perfetto]
    elif perfetto:
        return others
    hosts = {_host(f.name) for f in others}
    return sorted(others + [x for x in xspaces if _host(x.name) not in hosts])


def _host(name: str) -> str:
    """The host a jax.profiler run's file is of: its name less ``.trace.json.gz`` or ``.xplane.pb`` (a host's name
    may hold dots, ``ip-10-0-0-1.ec2.internal``); another file's, up to its first dot."""
    end = next((end for end in (*JAX_TRACE_SUFFIXES, XSPACE_SUFFIX) if name.lower().endswith(end)), None)
    return name[: -len(end)] if end else name.split(".")[0]


def _is_perfetto_copy(path: Path) -> bool:
    return path.name.lower().startswith("perfetto_trace.json")


def xspace_beside(trace_file: str) -> str | None:
    """The XSpace a jax.profiler trace JSON was made from, where it lies beside it: ``HOST.xplane.pb`` beside
    ``HOST.trace.json.gz``, the run's one XSpace beside its ``perfetto_trace.json.gz``; None otherwise."""
    path = Path(trace_file)
    if _is_perfetto_copy(path):
        spaces = [p for p in path.parent.iterdir() if p.is_file() and p.name.lower().endswith(XSPACE_SUFFIX)]
        return str(spaces[0]) if len(spaces) == 1 else None
    if not path.name.lower().endswith(JAX_TRACE_SUFFIXES):
        return None
    space = path.with_name(xspace_name(path.name))
    return str(space) if space.is_file() else None


def xspace_name(trace_name: str) -> str:
    """The name of the XSpace a jax.profiler trace JSON named ``trace_name`` is made from: ``HOST.xplane.pb`` for
    ``HOST.trace.json.gz``; ``HOST.xplane.pb`` as it stands for another name (a run's ``perfetto_trace.json.gz``)."""
    host = _host(trace_name) if trace_name.lower().endswith(JAX_TRACE_SUFFIXES) else "HOST"
    return host + XSPACE_SUFFIX


def trace_path(path: str) -> str:
    """The trace file ``path`` names: itself, the trace of the profiler output directory it names, or the one host's
    trace of the jax.profiler log directory it names (the run's folder where it holds several hosts)."""
    if not os.path.isdir(path):
        return path
    if (own := profiler_trace(path)) is not None:
        return own
    if (run := profile_run(path)) is not None:
        hosts = without_copies(_profile_files(Path(run)))
        return str(hosts[0]) if len(hosts) == 1 else run
    return path


class MsprofTable(NamedTuple):
    """A CSV msprof wrote beside a torch_npu trace: its rows, and why some or all were left out ("" where none were)."""

    rows: list[dict[str, Any]]
    left_out: str = ""


def recorded_environment(variables: object) -> dict[str, str]:
    """The variables torch_npu's profiler recorded set (``ENV_VARIABLES``: each it looks at, empty where unset), as
    a JSON object or its text; none where it is neither."""
    if isinstance(variables, str):
        try:
            variables = json.loads(variables)
        except ValueError:
            return {}
    if not isinstance(variables, dict):
        return {}
    return {str(name): str(value) for name, value in variables.items() if value not in ("", None)}


def rank_environment(trace_file: str) -> dict[str, str]:
    """The variables torch_npu's profiler recorded set for the rank whose trace is ``trace_file`` (its directory's
    ``profiler_metadata.json``, beside ``ASCEND_PROFILER_OUTPUT/``); none where there is no such file or it does not
    read."""
    record = _rank_record(trace_file, RANK_ENVIRONMENT)
    return recorded_environment(record[1].get(RECORDED_VARIABLES) if record else None)


class RecordedSchedule(NamedTuple):
    """The schedule torch_npu's profiler ran with, as a rank's record of its run holds it: that file's name, and
    each of :data:`SCHEDULE_FIELDS` it records."""

    file: str
    fields: dict[str, int]


def rank_schedule(trace_file: str) -> RecordedSchedule | None:
    """The schedule torch_npu's profiler ran with for the rank whose trace is ``trace_file`` (its directory's
    ``profiler_info_N.json``, ``config.common_config.schedule``); None where there is no such file, or it records
    no step kept active (torch_npu records every step under a schedule with none active)."""
    record = _rank_record(trace_file, RANK_METADATA)
    config = record[1].get("config") if record else None
    common = config.get("common_config") if isinstance(config, dict) else None
    schedule = common.get("schedule") if isinstance(common, dict) else None
    if record is None or not isinstance(schedule, dict):
        return None
    fields = {name: value for name in SCHEDULE_FIELDS if type(value := schedule.get(name)) is int and value >= 0}
    return RecordedSchedule(record[0], fields) if fields.get("active", 0) >= 1 else None


def _rank_record(trace_file: str, pattern: str) -> tuple[str, dict[str, Any]] | None:
    """The name and content of the first file matching ``pattern`` in the torch_npu rank directory whose trace is
    ``trace_file`` (beside its ``ASCEND_PROFILER_OUTPUT/``), a JSON object; None where there is none, or it does not
    read as one."""
    output = Path(trace_file).parent
    path = min(output.parent.glob(pattern), default=None) if output.name == ASCEND_OUTPUT else None
    if path is None:
        return None
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return (path.name, document) if isinstance(document, dict) else None


def msprof_steps(trace_file: str) -> MsprofTable:
    """msprof's own breakdown of each step (``step_trace_time.csv`` beside a torch_npu trace: computing,
    communication and how much of it overlapped nothing, free time, in µs), where the profiler wrote one; a row
    that does not read as numbers is left out, as is a file that cannot be read, and the table says so."""
    table = msprof_csv(trace_file, MSPROF_STEPS)
    rows = [row for row in map(_numbers, table.rows) if row]
    if table.left_out or len(rows) == len(table.rows):
        return MsprofTable(rows, table.left_out)
    return MsprofTable(
        rows, f"{MSPROF_STEPS}: rows that are not numbers, {len(table.rows) - len(rows):,} of {len(table.rows):,}"
    )


def msprof_csv(
    trace_file: str, name: str, digest: Callable[[TextIO], list[dict[str, Any]]] | None = None
) -> MsprofTable:
    """The rows of msprof's CSV ``name`` beside a torch_npu trace (in ``ASCEND_PROFILER_OUTPUT/``); none where
    there is no such file beside it, or it cannot be read as CSV (then the table says why). ``digest`` reads the
    open file into the table's rows, a row at a time (a kernel table holds a row per kernel: millions); by default
    each row is kept, a dict by column name."""
    path = Path(trace_file).with_name(name)
    if Path(trace_file).parent.name != ASCEND_OUTPUT or not path.is_file():
        return MsprofTable([])
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return MsprofTable(digest(fh) if digest else list(csv.DictReader(fh)))
    except OSError as exc:
        return MsprofTable([], f"{name}: not read ({exc.strerror or exc})")
    except UnicodeDecodeError:
        return MsprofTable([], f"{name}: not read (not UTF-8 text)")
    except csv.Error as exc:
        return MsprofTable([], f"{name}: not read (not CSV: {exc})")


def _numbers(row: dict[str, str]) -> dict[str, float]:
    try:
        found = {str(key): float(value) for key, value in row.items() if key}
    except (TypeError, ValueError):
        return {}
    return found if all(math.isfinite(v) for v in found.values()) else {}
