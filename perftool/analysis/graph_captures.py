"""The ops behind a device graph's replayed kernels, from the traces of the graph's capture beside the profile.

A replayed graph's kernels have no op of their own in the trace: the ops ran once, when the graph was captured at
start-up, and a replay is one launch call. Engines profile that capture when asked and write it beside their
profiles: vLLM's ``capture_torch_profiler`` and SGLang's ``--enable-profile-cuda-graph`` under ``capture_traces/``
(SGLang a file per batch size), SGLang's ``SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE`` under
``graph_capture_profile/``; a compiled model's warm-up, profiled while it records its graphs, serves the same where
it is kept there.
In such a trace each kernel launch between a stream's begin and end of capture is a node of the graph, made inside the
op that launched it (its input shapes recorded); a replay runs the nodes as kernels in the order they were captured.
A replay whose kernels are a captured graph's launches one for one (the same kernels by name where the capture names
them, as HIP's runtime calls do; as many, all on one stream, where it does not, as CUDA's do not) takes each kernel's
op from its launch. Batch sizes captured alike are told apart as the engine chooses between them: a step of N tokens
(``execute_N_…``, ``step[DECODE bs=N]``) replays the graph captured for the smallest batch of N or more
(``capture_M_…``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from perftool import dialects
from perftool.analysis.launches import replayed
from perftool.analysis.nesting import HOST_WORK, outermost, owners
from perftool.analysis.serving import named_numbers
from perftool.common.arrays import distinct
from perftool.common.errors import PerftoolError
from perftool.common.paths import names_file
from perftool.dialects.op_families import MODELLED_NAMES
from perftool.dialects.vocabulary import (
    CAPTURE_BEGIN,
    CAPTURE_END,
    ENGINE_STEP_TOKENS,
    GRAPH_CAPTURE_SIZE,
    KERNEL_LAUNCH,
)
from perftool.trace.archives import trace_kind
from perftool.trace.loader import read_trace
from perftool.trace.model import Kind, Phase, Role, Trace
from perftool.trace.profiler_dirs import CAPTURE_FOLDERS

CAPTURE_FILE = re.compile(r"(?i)\.json(\.gz)?$")
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})  # whose args name the kernel a launch made (HIP's)
CAPTURES_FROM = "perftool.graph_captures"  # the top-level key of an annotated trace naming the captures it read
UNSEEN_NODES = 0.01  # of a graph's named launches, the share a replay may show no kernel of (one at least)
ITSELF = "the trace itself"  # where a profile holds its graphs' capture too (a compiled model's first calls in it)


class Launch(NamedTuple):
    """A captured kernel launch: the kernel, as the runtime call names it ('' where it does not); the innermost op of
    a modelled family around it with the args it recorded ('' and none where there is none), and which call of that
    op it is (its row in the capture trace; -1 for none): an op whose call launched several kernels did its work
    once; and the outermost host span around it (diff's op level), and which call of it it is (its row)."""

    kernel: str
    op: str
    inputs: bytes
    call: int = -1
    outer: str = ""
    outer_call: int = -1


@dataclass(frozen=True)
class Graph:
    """The kernel launches of one capture, in the order the stream recorded them."""

    source: str  # the capture trace's file name, within its folder
    launches: tuple[Launch, ...]
    size: int | None = None  # the batch it was captured for, where the engine's annotation around it names one


@dataclass
class ReplayOps:
    """The replayed kernels of a trace whose ops a captured graph beside it gives."""

    # the kernels (rows), each a launch's: replay by replay, each replay's by start
    spans: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    launch: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # each one's, an index into launches
    replayed_by: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # each one's graph launch (row)
    launches: list[Launch] = field(default_factory=list)  # the distinct captured launches
    captures: list[str] = field(default_factory=list)  # the capture traces beside (folder/name)
    used: list[str] = field(default_factory=list)  # those whose graphs the replays are
    replays: int = 0  # the trace's graph replays
    unmatched: int = 0  # of those, how many no captured graph is one for one (or several, with other ops)
    refused: list[str] = field(default_factory=list)  # why capture traces did not read, each naming its file


def capture_files(source: str, metadata: dict[str, Any]) -> list[Path]:
    """The capture traces in the engines' folders beside the trace ``source``, by name; where there are none, those
    an annotated trace (top-level ``metadata``) names."""
    found: list[Path] = []
    for folder in CAPTURE_FOLDERS:
        place = Path(source).parent / folder
        if place.is_dir():
            found.extend(sorted(p for p in place.iterdir() if _capture_trace(p)))
    named = metadata.get(CAPTURES_FROM)
    if not found and isinstance(named, list):
        found = [Path(p) for p in named if isinstance(p, str) and names_file(p)]
    return found


def _capture_trace(path: Path) -> bool:
    """Whether ``path``, in an engine's folder of capture traces, is one: a JSON trace by its name and first bytes,
    not a record the tools write beside them (TraceLens's ``execution_details.json``, an array of the captures'
    files, batch sizes and modes)."""
    return path.is_file() and CAPTURE_FILE.search(path.name) is not None and trace_kind(str(path)) is not None


def captured_graphs(path: Path) -> tuple[Graph, ...]:
    """Each graph a capture trace records: its kernel launches between a stream's begin and end of capture on one
    thread, in order, each with the op it was made in. Read once a process while the file is unchanged: a job's
    ranks share the capture traces beside them."""
    stat = path.stat()
    return _graphs(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _graphs(file: str, mtime_ns: int, length: int) -> tuple[Graph, ...]:
    """:func:`captured_graphs` of ``file`` as it was at ``mtime_ns``, ``length`` bytes long (the cache's key)."""
    path = Path(file)
    kept = dialects.kept_args()
    keep = dataclasses.replace(kept, categories=kept.categories | RUNTIME_CATEGORIES)
    trace = dialects.apply(read_trace(path, keep_args=keep))
    host = trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE)
    launches = np.flatnonzero(host & trace.name_matches(KERNEL_LAUNCH))
    ops = trace.innermost(np.flatnonzero(host & trace.name_matches(MODELLED_NAMES)))
    owner = owners(trace, ops, launches) if ops.size else np.full(launches.size, -1, np.int64)
    spans = outermost(trace, np.flatnonzero(host & trace.of_kinds(*HOST_WORK)))  # by track, then start
    outer = owners(trace, spans, launches) if spans.size else np.full(launches.size, -1, np.int64)
    graphs: list[Graph] = []
    ends = np.flatnonzero(host & trace.name_matches(CAPTURE_END))
    by_thread = np.lexsort((trace.ts[launches], trace.track[launches]))  # launches by thread, then time
    launches, owner, outer = launches[by_thread], owner[by_thread], outer[by_thread]
    threads, times = trace.track[launches], trace.ts[launches]
    begins = np.flatnonzero(host & trace.name_matches(CAPTURE_BEGIN))
    sizes = named_numbers(trace, begins, GRAPH_CAPTURE_SIZE)  # the batch each was captured for, where named
    for begin, size in zip(begins.tolist(), sizes):
        track = trace.track[begin]
        later = ends[(trace.track[ends] == track) & (trace.ts[ends] > trace.ts[begin])]
        until = float(trace.ts[later].min()) if later.size else np.inf
        first, last = np.searchsorted(threads, track), np.searchsorted(threads, track, side="right")
        start = first + np.searchsorted(times[first:last], trace.ts[begin], side="right")
        inside = np.arange(start, first + np.searchsorted(times[first:last], until, side="left"))
        made = []
        # the args decoded at once
        for args, op, around in zip(trace.args_of(launches[inside]), owner[inside].tolist(), outer[inside].tolist()):
            kernel = (args or {}).get("kernel")
            row = int(ops[op]) if op >= 0 else -1
            ref = int(trace.args_ref[row]) if row >= 0 else -1
            span = int(spans[around]) if around >= 0 else -1
            made.append(Launch(kernel if isinstance(kernel, str) else "", trace.names[trace.name[row]] if row >= 0
                               else "", trace.kept_args[ref] if ref >= 0 else b"", row,
                               trace.names[trace.name[span]] if span >= 0 else "", span))  # fmt: skip
        if made:
            graphs.append(Graph(f"{path.parent.name}/{path.name}", tuple(made), size))
    return tuple(graphs)


def replay_ops(trace: Trace, window: tuple[float, float] = (-np.inf, np.inf)) -> ReplayOps:
    """The ops of ``trace``'s replayed kernels, from the graphs captured beside it or in it (found once); none where
    no replayed kernel starts in ``window``, and then no capture is read."""
    _, spans = replayed(trace)
    lo, hi = window
    if not np.any((trace.ts[spans] >= lo) & (trace.ts[spans] < hi) & (trace.kind[spans] == Kind.COMPUTE)):
        return ReplayOps()
    return trace.derive("graph_captures.replay_ops", lambda: _replay_ops(trace))


def _replay_ops(trace: Trace) -> ReplayOps:
    calls, spans = replayed(trace)
    compute = trace.kind[spans] == Kind.COMPUTE
    calls, spans = calls[compute], spans[compute]
    files = capture_files(trace.source, trace.metadata) if spans.size else []
    own = Path(trace.source) if spans.size and trace.name_matches(CAPTURE_BEGIN).any() else None
    found = ReplayOps(captures=[f"{p.parent.name}/{p.name}" for p in files], replays=int(distinct(calls).size))
    graphs: list[Graph] = []
    if own is not None and own.is_file():  # read again, its launches' args kept: HIP's name their kernels
        found.captures.insert(0, ITSELF)
        try:
            graphs.extend(dataclasses.replace(graph, source=ITSELF) for graph in captured_graphs(own))
        except (PerftoolError, OSError) as error:
            found.refused.append(str(error))
    for path in files:
        try:
            graphs.extend(captured_graphs(path))
        except (PerftoolError, OSError) as error:
            found.refused.append(str(error))
    if not found.captures:
        return found
    order = np.lexsort((trace.ts[spans], calls))
    calls, spans = calls[order], spans[order]
    starts = np.flatnonzero(np.r_[True, calls[1:] != calls[:-1]])
    chosen: dict[tuple[int | bool, ...], tuple[str, np.ndarray] | None] = {}  # by kernels, stream, tokens
    seen: dict[Launch, int] = {}  # each distinct launch, numbered
    matched: list[np.ndarray] = []
    launch: list[np.ndarray] = []
    by: list[np.ndarray] = []
    used: set[str] = set()
    steps = named_numbers(trace, calls[starts], ENGINE_STEP_TOKENS)  # the tokens of each replay's step
    for call, tokens, replay in zip(calls[starts].tolist(), steps, np.split(spans, starts[1:])):
        key = (*trace.name[replay].tolist(), distinct(trace.track[replay]).size == 1, tokens or 0)
        if key not in chosen:
            fitted = _graph_of(trace, replay, graphs, tokens)
            chosen[key] = None if fitted is None else (fitted[0].source, np.array(
                [seen.setdefault(fitted[0].launches[at], len(seen)) for at in fitted[1]], np.int64
            ))  # fmt: skip
        if (found_graph := chosen[key]) is None:
            found.unmatched += 1
            continue
        matched.append(replay)
        launch.append(found_graph[1])
        by.append(np.full(replay.size, call, np.int64))
        used.add(found_graph[0])
    if matched:
        found.spans, found.launch = np.concatenate(matched), np.concatenate(launch)
        found.replayed_by = np.concatenate(by)
    found.launches, found.used = list(seen), sorted(used)
    return found


def _graph_of(trace: Trace, replay: np.ndarray, graphs: list[Graph],
              tokens: int | None) -> tuple[Graph, list[int]] | None:  # fmt: skip
    """The captured graph whose launches ``replay``'s kernels are (:func:`_aligned`), and which launch each kernel is.
    Where several fit that give other ops (batches captured alike), the one an engine replays for ``tokens`` (its
    step's, where annotated): captured for the smallest batch of as many or more. None where none fits, or it stays
    unclear which."""
    names = [trace.names[n] for n in trace.name[replay].tolist()]
    one_stream = distinct(trace.track[replay]).size == 1
    fits = [(g, at) for g in graphs if (at := _aligned(g.launches, names, one_stream)) is not None]
    if len(_ops(fits)) > 1 and tokens is not None:
        sizes = [g.size for g, _ in fits if g.size is not None and g.size >= tokens]
        fits = [(g, at) for g, at in fits if sizes and g.size == min(sizes)]
    return fits[0] if len(_ops(fits)) == 1 else None


def _aligned(launches: tuple[Launch, ...], names: list[str], one_stream: bool) -> list[int] | None:
    """Per replayed kernel (``names``, in order), the index of the captured launch it is; None where the replay is not
    the graph. One for one where the replay runs as many kernels: named alike where the capture names them, on one
    stream where it does not (a graph's order holds only there). Where the capture names them, a few of its launches
    (:data:`UNSEEN_NODES`) may show no kernel in the replay, the others in their order (a compiled diffusion model's
    graph on an MI300X: each replay lacks the capture's last GEMM)."""
    unseen = len(launches) - len(names)  # fewer launches than kernels: the alignment below finds none
    if unseen > max(1, int(len(launches) * UNSEEN_NODES)):  # told apart by length first: most graphs
        return None
    if not unseen:
        alike = all(launch.kernel in ("", name) for launch, name in zip(launches, names))
        named = any(launch.kernel for launch in launches)
        return list(range(len(names))) if alike and (named or one_stream) else None
    found, at = [], 0  # unnamed launches align with no kernel
    for name in names:
        while at < len(launches) and launches[at].kernel != name:
            at += 1
        if at == len(launches):
            return None
        found.append(at)
        at += 1
    return found


def _ops(fits: list[tuple[Graph, list[int]]]) -> set[tuple[tuple[str, bytes], ...]]:
    """The distinct sequences of ops the fitting graphs give a replay's kernels."""
    return {tuple((g.launches[i].op, g.launches[i].inputs) for i in at) for g, at in fits}
