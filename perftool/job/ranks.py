"""Which files make a job, and which rank each one is."""

from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path
from typing import NamedTuple

from perftool.common.errors import PerftoolError, TraceError
from perftool.trace.archives import HEAD_BYTES as ARCHIVE_HEAD_BYTES
from perftool.trace.archives import NAMED_IN_PLACE, not_a_trace, opens_as_json
from perftool.trace.profiler_dirs import (
    ASCEND_OUTPUT,
    CAPTURE_FOLDERS,
    MSPROF_RUN,
    MSPROF_TIMELINES,
    PROFILE_RUNS,
    RANK_METADATA,
    TRACE_SUFFIXES,
    XSPACE_SUFFIX,
    profile_run,
    profiler_trace,
    without_copies,
    xprof_cache_advice,
    xprof_caches,
)

_TRACE_FILES = (*TRACE_SUFFIXES, XSPACE_SUFFIX)  # a directory's files read as traces (a job's ranks, a run's hosts)
# Why two runs of a job whose ranks are process ids share none, and how to name them so that they do.
PROCESS_ID_RANKS = (
    "their traces state no rank, and tensorboard_trace_handler's names give each rank its process id, which differs "
    "from run to run; name each rank's traces by its rank (tensorboard_trace_handler(dir, worker_name=f'rank{rank}'))"
)
_PROFILER_INFO = re.compile(r"profiler_info_(\d+)\.json")
HEAD_BYTES = 4096  # what is read of a file in a job's directory to tell a trace from another document
_RANK_IN_NAME = re.compile(r"(?i)rank[-_ ]?(\d+)")
_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")
_NAMED_AS_TRACE = re.compile(r"(?i)trace|xplane")  # how profilers name their traces: *.pt.trace.json, HOST.xplane.pb
_DEEPER_LEVELS = 4  # the folder named and three below it, where a directory without traces is told of one deeper
_DEEPER_LOOKED_AT = 20_000  # entries listed at most in looking (a home directory is no job's)
# the time torch_npu's handler writes into a rank directory's name (<host>_<pid>_<time>_ascend_pt): no rank
_CAPTURE_TIME = re.compile(r"_\d{8,}(?=_ascend_pt$)")
# what follows the worker in the name tensorboard_trace_handler gives a trace: {worker}.{time}.pt.trace.json[.gz]
_HANDLER_SUFFIX = re.compile(r"\.\d+\.pt\.trace\.json(\.gz)?$")
# the worker tensorboard_trace_handler names by default, {host}_{pid}; the folder torch_npu's writes a rank's output
# into, <host>_<pid>_<time>_ascend_pt
_HOST_AND_PID = re.compile(r"(.+)_\d+")
_ASCEND_HOST_FOLDER = re.compile(r"(.+)_\d+_\d{8,}_ascend_pt")
# the stage SGLang's --profile-by-stage writes each rank's capture of apart: {id}-TP-{rank}-{stage}.trace.json.gz,
# the stage as its forward mode (EXTEND, DECODE), or with SGLANG_PROFILE_V2 in lower case (prefill, decode)
_STAGES = "EXTEND|DECODE|prefill|decode"
_STAGE_SUFFIX = re.compile(rf"-({_STAGES})\.trace\.json(\.gz)?$")
# SGLang's name for a rank's trace: its place in each parallel group, {id}-TP-{tp}[-DP-{dp}][-PP-{pp}][-EP-{ep}]
_SGLANG_PLACE = re.compile(rf"-TP-(\d+)((?:-(?:DP|PP|EP)-\d+)*)(?:-(?:{_STAGES}))?\.trace\.json(\.gz)?$")
# a JSON document that says what it is in its first key: perftool's own reports ("schema": "perftool.findings/1"),
# SARIF and other JSON Schema documents ("$schema"); a trace's first key is its events or its metadata. Or an array
# of anything but events: torch.profiler's export_memory_timeline writes [[times...], [[sizes...]...]] beside a trace
_DOCUMENT = re.compile(rb'^\s*(\{\s*"\$?schema"\s*:|\[\s*[^\s{\]])')
# an array whose first object (flat, nothing nested) names no phase: no event, but a record of files written beside
# traces (TraceLens's execution_details.json: each capture's file, batch size and mode)
_FIRST_FLAT_OBJECT = re.compile(rb"^\s*\[\s*\{[^{}]*\}")


def job_files(paths: list[str]) -> list[str]:
    """The trace files the arguments name (:func:`job_listing`)."""
    return job_listing(paths).files


class JobListing(NamedTuple):
    """What the arguments name: the trace files read, and the folders left unread that hold traces of their own."""

    files: list[str]
    folders_left: list[str]  # folders beside a directory's own traces: its folders are read only where it has none


def job_listing(paths: list[str]) -> JobListing:
    """The trace files the arguments name: each file as given, each profiler output directory's trace, and each
    directory's ``*.json``/``*.json.gz``/``*.xplane.pb`` files that hold a trace (an XSpace only where no JSON trace
    beside it holds the same host) and the traces of the profiler output directories in it (one per rank, as
    torch_npu writes them), in name order; a jax.profiler log directory is read as its one run's folder. A
    directory that holds none of these is read one level down: the traces its folders hold in the same way (a rank
    each, ``rank0/``, ``rank1/``, as a job gives each rank a log directory of its own; or a capture each), of their
    files only those named as traces or in a folder named for a rank (:func:`_traces_in`), hidden folders and a
    serving engine's folders of graph-capture traces left out. A directory that holds traces itself is not read
    further down: its other folders that hold traces are said to be left unread."""
    found: list[str] = []
    left: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            found.append(path)
        elif (own := profiler_trace(path)) is not None:
            found.append(own)
        else:
            held = _traces_in(path, Path(path))
            if held and profile_run(path) is None:  # a jax.profiler log directory's folders hold its runs
                left += [str(folder) for folder in _subfolders(Path(path)) if _left_unread(path, folder)]
            else:
                held = [trace for folder in _subfolders(Path(path))
                        for trace in _traces_in(path, folder, named_as_traces=True)]  # fmt: skip
            if not held:
                raise PerftoolError(
                    f"{path}: a directory with no trace files (*.json, *.json.gz, *.xplane.pb), profiler output "
                    f"directories (with {ASCEND_OUTPUT}/, msprof's {MSPROF_RUN}*/) or jax.profiler runs "
                    f"({'/'.join(PROFILE_RUNS)}/RUN/) in it or in its folders{_held_instead(path)}"
                )
            found += _once_each(path, held)
    return JobListing(found, left)


def _left_unread(path: str, folder: Path) -> bool:
    """Whether ``folder``, of the directory ``path`` whose own traces are read, holds traces that are not read: it is
    no profiler output directory (those are read as the directory's traces) and holds traces, read as a job's
    folders are (:func:`_traces_in`; one holding files perftool could not read counts as holding traces)."""
    if _rank_trace(folder) is not None:
        return False
    try:
        return bool(_traces_in(path, folder, named_as_traces=True))
    except PerftoolError:
        return True


def _held_instead(directory: str) -> str:
    """What a directory without traces holds in their place, where perftool can say: XProf's cache of a run, a trace
    further down, or another profiler's report or an archive (the first of them, by name), with the way to a trace;
    "" otherwise."""
    if cached := xprof_caches(directory):
        return f"; {cached[0].name} is {xprof_cache_advice(cached[0])}"
    if (deeper := _deeper_trace(Path(directory))) is not None:
        return f"; traces lie further down ({deeper.relative_to(directory)}): scan {deeper.parent.parent}"
    for file in _listing(Path(directory)):
        if file.name.lower().endswith(NAMED_IN_PLACE) and file.is_file():
            try:
                with open(file, "rb") as raw:
                    what = not_a_trace(str(file), raw.read(ARCHIVE_HEAD_BYTES))
            except OSError:  # one that cannot be read says nothing of the others
                continue
            if what is not None:
                return f"; {file.name} is {what}"
    return ""


def _deeper_trace(directory: Path) -> Path | None:
    """The first file named as a trace (:data:`_NAMED_AS_TRACE`) two or three folders down, where a job's captures lie
    below the directory named (``outputs/profile_traces/iteration_10/rank0_trace.json``), looked for breadth first
    among :data:`_DEEPER_LOOKED_AT` entries at most, in the folders :func:`_may_hold_traces`; None where there is
    none."""
    folders, looked_at = [directory], 0
    for level in range(_DEEPER_LEVELS):
        below = []
        for folder in folders:
            try:
                entries = sorted(folder.iterdir())
            except OSError:  # a folder that cannot be listed hides nothing to say here
                continue
            looked_at += len(entries)
            if looked_at > _DEEPER_LOOKED_AT:
                return None
            below += [p for p in entries if _may_hold_traces(p)]
            if level >= 2 and (found := next((p for p in entries if _is_named_trace(p)), None)):
                return found  # one folder down, the files were read already, or left out on purpose
        folders = below
    return None


def _is_named_trace(path: Path) -> bool:
    return path.name.lower().endswith(_TRACE_FILES) and bool(_NAMED_AS_TRACE.search(path.name)) and path.is_file()


def _once_each(directory: str, traces: list[str]) -> list[str]:
    """The traces found in ``directory``, each file once where several names lead to it (a folder linked as another,
    ``latest -> run3``; a link beside its file): by a name that goes through no link where one does, else the
    first."""
    root = os.path.realpath(directory)

    def through_link(trace: str) -> bool:
        return os.path.realpath(trace) != os.path.join(root, os.path.relpath(trace, directory))

    kept: dict[str, str] = {}
    for trace in sorted(traces, key=through_link):  # stable: the names through no link first, each in its order
        kept.setdefault(os.path.realpath(trace), trace)
    chosen = set(kept.values())
    return [trace for trace in traces if trace in chosen]


def sole_trace(directory: str) -> str | None:
    """The trace a directory holds where it holds one (a profiler's output directory, tensorboard_trace_handler's log
    directory of one run), which commands read as that trace; None where it holds several."""
    found = job_files([directory])
    return found[0] if len(found) == 1 else None


def _traces_in(path: str, directory: Path, named_as_traces: bool = False) -> list[str]:
    """The traces ``directory`` holds itself (``path``: the directory the user named): its trace files, then the
    traces of the profiler output directories in it; a jax.profiler log directory's are its run's. With
    ``named_as_traces`` (a folder of the directory named), only files whose names say they are traces (``trace``,
    ``xplane``) or whose folder is named for a rank: a project's folders of other JSON (configs, data, reports) are
    no job's."""
    listed = _listing(Path(profile_run(str(directory)) or directory))
    named = [p for p in listed if p.name.lower().endswith(_TRACE_FILES) and not p.is_dir()]
    if named_as_traces:
        named = [p for p in named if _NAMED_AS_TRACE.search(p.name) or _named_rank(p)]
    if odd := next((p for p in named if not p.is_file()), None):  # reading a pipe would wait for a writer
        raise PerftoolError(
            f"{odd}: not a file perftool can read (a pipe, a socket, a device or a broken link) among the "
            f"job's traces: move it out of {path}"
        )
    inside = [str(p) for p in without_copies(named) if _may_hold_a_trace(p)]
    return inside + [trace for p in listed if p.is_dir() and (trace := _rank_trace(p))]


def _subfolders(directory: Path) -> list[Path]:
    """The folders of a directory that may hold a job's traces, in name order."""
    return [p for p in _listing(directory) if _may_hold_traces(p)]


def _may_hold_traces(path: Path) -> bool:
    """Whether ``path`` is a folder that may hold a job's traces: not a hidden one (``.git``, a virtual environment's),
    nor a serving engine's traces of its graphs' capture (no traces of the profile's)."""
    return path.is_dir() and not path.name.startswith(".") and path.name not in CAPTURE_FOLDERS


def _listing(directory: Path) -> list[Path]:
    """What a directory holds, in name order; one that cannot be listed (no permission) is said in one line."""
    try:
        return sorted(directory.iterdir())
    except OSError as exc:
        raise PerftoolError(f"{directory}: cannot list the directory: {exc.strerror or exc}") from None


def _rank_trace(directory: Path) -> str | None:
    """The trace of a profiler directory in a job's directory, None where it is not one; the directory itself where
    it holds no trace to read (analysis not run, a timeline not exported), so that reading it says why among the
    job's unread traces while the other ranks are read."""
    try:
        return profiler_trace(str(directory))
    except TraceError:
        return str(directory)


def _may_hold_a_trace(path: Path) -> bool:
    """Whether a file in a job's directory may be a trace, by what it holds: not when it is JSON whose first key
    names its schema (a report, perftool's own included) or an array of anything but events (a memory timeline, or
    objects that name no phase: a record of files), or is text that is not JSON (HTML, XML, Markdown). A file
    that cannot be read, or holds no text (empty, NUL-filled by a writer that crashed), is kept, so that reading it
    reports the problem."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(HEAD_BYTES)
            if head.startswith(b"\x1f\x8b"):
                raw.seek(0)
                with gzip.GzipFile(fileobj=raw) as unpacked:
                    head = unpacked.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return True
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if opens_as_json(text):
        first = _FIRST_FLAT_OBJECT.match(text)
        return not _DOCUMENT.match(text) and (first is None or b'"ph"' in first.group())
    return not _is_text(text)  # empty, NUL-filled, binary: a trace that failed to be written, which reading says


def _is_text(head: bytes) -> bool:
    """Whether the first bytes of a file are text (a document of another kind: HTML, XML, Markdown), not bytes no
    text holds (NULs, binary, invalid UTF-8), nor nothing."""
    try:
        decoded = head.decode()
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # past a character the cut at HEAD_BYTES may have split
            return False
        decoded = head[: exc.start].decode()
    return bool(decoded) and all(c.isprintable() or c in "\t\r\n" for c in decoded)


def handler_worker(path: str) -> str | None:
    """The worker a trace's name gives where tensorboard_trace_handler named it (``{host}_{pid}`` unless the job
    gave one, dots in the host's name kept), else None."""
    name = Path(path).name
    suffix = _HANDLER_SUFFIX.search(name)
    return name[: suffix.start()] if suffix else None


def host_from_name(path: str) -> str | None:
    """The host a trace's name gives, where its profiler named it by its host: tensorboard_trace_handler's
    ``{host}_{pid}.{time}.pt.trace.json`` (unless the job named the worker: never one that says a rank), or the
    folder torch_npu's handler writes a rank's output into, ``<host>_<pid>_<time>_ascend_pt``; else None."""
    worker = handler_worker(path)
    if worker is not None:
        found = _HOST_AND_PID.fullmatch(worker)
        return found.group(1) if found and not _RANK_IN_NAME.search(worker) else None
    folders = (Path(path), *list(Path(path).parents)[:2])  # the folder itself, or a trace at most two levels in it
    found = next(filter(None, (_ASCEND_HOST_FOLDER.fullmatch(folder.name) for folder in folders)), None)
    return found.group(1) if found else None


def rank_is_process_id(path: str, world_size: int | None) -> bool:
    """Whether a trace's rank is the process id tensorboard_trace_handler's name gives it (``{host}_{pid}``): its name
    the handler's and saying no rank, and no ``distributedInfo`` in it (``world_size``: what it records)."""
    return handler_worker(path) is not None and not says_rank(path) and world_size is None


def serving_stage(path: str) -> str | None:
    """The serving stage a trace's name says it captures alone (SGLang's ``-EXTEND`` prefill and ``-DECODE``
    captures), else None."""
    found = _STAGE_SUFFIX.search(Path(path).name)
    return found.group(1) if found else None


def says_rank(path: str) -> bool:
    """Whether a file's name says its rank (``rank3``, ``rank_3``), or its folder's (:func:`_named_rank`)."""
    return _named_rank(Path(path)) is not None


def _named_rank(path: Path) -> re.Match[str] | None:
    """The rank a file's name gives (``rank3``, ``rank_3``), else its folder's where that is named for the rank alone
    (``rank3/``, as a job that gives each rank a log directory of its own names them)."""
    return _RANK_IN_NAME.search(path.name) or _RANK_IN_NAME.fullmatch(path.parent.name)


def names_ranks(paths: list[str]) -> bool:
    """Whether the arguments name a job outright: a directory (other than one rank's profiler output), or several
    files whose names say their rank."""
    if any(os.path.isdir(p) and profiler_trace(p) is None for p in paths):
        return True
    ranks = [_named_rank(Path(p)) for p in paths]
    return len(paths) > 1 and all(ranks) and len({int(r.group(1)) for r in ranks if r}) == len(paths)


def rank_from_name(path: str, in_directory: bool = True) -> int | None:
    """The rank a file's name gives: ``rank3``, ``rank_3``, else its folder's (``rank3/``); in a job's directory,
    else its last number (``worker-3.json``; the worker's of tensorboard_trace_handler's
    ``{host}_{pid}.{time}.pt.trace.json``: its pid). A trace in a profiler's output directory has the rank its
    metadata file is named by (torch_npu's ``profiler_info_3.json``), else the one the directory's name gives
    (``<host>_<pid>_<time>_ascend_pt``: its pid, the time is no rank); msprof's timeline, only the one its run
    directory's name gives (``PROF_<number>_<time>``: the number is no rank). SGLang's
    ``{id}-TP-{tp}.trace.json.gz`` (its id the time) is rank ``tp``; where the name places the trace in data-,
    pipeline- or expert-parallel groups too, it gives no rank (their sizes are not in it).
    """
    parent = Path(path).parent
    if Path(path).name.startswith("msprof") and (parent.name in MSPROF_TIMELINES or parent.name.startswith(MSPROF_RUN)):
        run = parent if parent.name.startswith(MSPROF_RUN) else parent.parent
        return rank_from_name(str(run), in_directory=False)
    if parent.name == ASCEND_OUTPUT:
        rank_directory = parent.parent
        info = next(filter(None, (_PROFILER_INFO.fullmatch(p.name) for p in rank_directory.glob(RANK_METADATA))), None)
        return int(info.group(1)) if info else rank_from_name(str(rank_directory), in_directory)
    name = Path(path).name
    if sglang := _SGLANG_PLACE.search(name):  # the rank where the name gives the tensor-parallel place alone
        return None if sglang.group(2) else int(sglang.group(1))
    stem = handler_worker(path) or _CAPTURE_TIME.sub("", name.split(".")[0])
    found = _named_rank(Path(path)) or (_LAST_NUMBER.search(stem) if in_directory else None)
    return int(found.group(1)) if found else None
