"""Which device work each host launch started, from the flows that link them (Kineto's ``ac2g``), or from the
correlation id both ends carry (XLA's traces, which write no flows, and Kineto's whose flows were left out).

A profiler that records launches writes a flow from the runtime call on a host thread (``s``) to the
device event it started (``f``, at the event's start on its stream). Pairing the two ends by id gives,
for every launch, when the host made it and when the device work it started ended. jax.profiler's trace (made from
the XSpace by XProf) writes no flows: the launch call (``cuLaunchKernel``, ``hipModuleLaunchKernel``) and the kernel
it started each hold the tracer's ``correlation_id`` in their args. Kineto writes its tracer's id in both ends' args
too (``correlation``, the flow's id), so a trace filtered of its flows (to lighten it for a viewer) still pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from perftool.analysis import intervals
from perftool.analysis.intervals import Intervals
from perftool.analysis.nesting import owners
from perftool.dialects.kineto import Kineto
from perftool.dialects.vocabulary import GRAPH_LAUNCH, MEMCPY
from perftool.trace.flows import paired_flows
from perftool.trace.model import Kind, Phase, Role, Trace

GRAPH_SHARE = 10  # a host launches by device graphs where one launch call in this many or more is a graph's


@dataclass
class Launches:
    """One row per host→device flow: when the host launched, and when the device work it started ended."""

    host_ts: np.ndarray
    device_end: np.ndarray


def launches(trace: Trace) -> Launches:
    """Flows from a host track to a device track, paired by id, with the device event each one reaches."""
    sources, spans = launch_rows(trace)
    return Launches(trace.ts[sources], trace.end[spans])


def launch_rows(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per host→device flow paired by id: the row of its start on the host (at the launching call), and the row
    of the device span it reaches (found once per trace)."""
    return trace.derive("launch_rows", lambda: _launch_rows(trace))


def _launch_rows(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    sources, spans = _flowing(trace)
    if sources.size == 0:
        sources, spans = _correlated(trace)
    return _own_work(trace, sources, spans) if trace.dialect == Kineto.name else (sources, spans)  # an id a launch


def _flowing(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per flow from a host track to a device track: the row of its start on the host, and of the span it reaches."""
    has_id = trace.flow_id != -1
    # the host's end of a flow: its start, or, where a profiler writes both ends as flow ends (ROCm's Kineto),
    # the end on the host
    host_end = (trace.phase == Phase.FLOW_START) | (trace.phase == Phase.FLOW_END)
    sources = np.flatnonzero(host_end & has_id & trace.on_roles(Role.HOST))
    targets = np.flatnonzero((trace.phase == Phase.FLOW_END) & has_id & trace.on_roles(Role.DEVICE))
    if sources.size == 0 or targets.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    sources, targets = paired_flows(trace, sources, targets)
    spans = _enclosing_span(trace, targets, trace.on_roles(Role.DEVICE))
    found = spans >= 0
    return sources[found], spans[found]


def _own_work(trace: Trace, sources: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of ``sources`` and ``spans`` where the span is the launch's own work. Kineto gives each launch an id
    of its own: a launch reaches the device work it started, several spans for a graph's replay or a copy in
    pieces, one after another on their stream. A profiler that gives later work with no launch of its own a past
    launch's id (torch_npu's MSPTI does) links it to that launch, long after other launches' work has run on the
    stream: of a launch's spans (a graph's all kept), those after another launch's work began on their stream are
    left unlinked."""
    if sources.size < 2 or (np.diff(sources) > 0).all():  # one span a launch, in row order: most traces
        return sources, spans
    _, launch, count = np.unique(sources, return_inverse=True, return_counts=True)
    several = count[launch] > 1
    if not several.any():
        return sources, spans
    calls = _enclosing_span(trace, sources[several], trace.on_roles(Role.HOST) & (trace.kind == Kind.RUNTIME))
    replays = (calls >= 0) & trace.name_matches(GRAPH_LAUNCH)[np.maximum(calls, 0)]
    doubtful = several.copy()
    doubtful[np.flatnonzero(several)[replays]] = False
    if not doubtful.any():
        return sources, spans
    order = np.lexsort((trace.ts[spans], trace.track[spans]))  # each stream's spans in time
    source, track = sources[order], trace.track[spans[order]]
    run = np.cumsum(np.r_[True, (source[1:] != source[:-1]) | (track[1:] != track[:-1])])  # a launch's spans in a row
    _, first, which = np.unique(source, return_index=True, return_inverse=True)
    own = np.empty(sources.size, dtype=bool)
    own[order] = run == run[first][which]  # the launch's first run of spans
    keep = own | ~doubtful
    return sources[keep], spans[keep]


def _correlated(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per runtime call on the host (a launch, or a wait: a stream's sync is device work too) and device span that
    carry the same correlation id: the call's row and the span's, in the span's row order (the first call of an id,
    where a tracer reused one)."""
    complete = trace.phase == Phase.COMPLETE
    calls = np.flatnonzero(complete & trace.of_kinds(Kind.RUNTIME, Kind.SYNC) & trace.on_roles(Role.HOST))
    spans = np.flatnonzero(complete & trace.on_roles(Role.DEVICE))
    call_ids, span_ids = _correlation_ids(trace, calls), _correlation_ids(trace, spans)
    calls, call_ids = calls[call_ids >= 0], call_ids[call_ids >= 0]
    spans, span_ids = spans[span_ids >= 0], span_ids[span_ids >= 0]
    if calls.size == 0 or spans.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ids, first = np.unique(call_ids, return_index=True)
    where = np.minimum(np.searchsorted(ids, span_ids), ids.size - 1)
    found = ids[where] == span_ids
    return calls[first[where[found]]], spans[found]


def _correlation_ids(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per span of ``rows``, its correlation id; -1 where it has none. The loader gave Kineto's spans theirs (their
    args' ``correlation``) as their flow id; XLA's ``correlation_id`` is read from their kept args, once for each
    distinct args, which many events share."""
    ids = trace.flow_id[rows]
    unread = (ids == -1) & (trace.args_ref[rows] >= 0)
    if unread.any():
        refs, index = np.unique(trace.args_ref[rows[unread]], return_inverse=True)
        ids[unread] = np.array([_correlation_id(trace.kept_args[ref]) for ref in refs.tolist()], np.int64)[index]
    return ids


class _Correlated(msgspec.Struct):
    correlation_id: int | str = -1  # a string of digits as XLA writes it


_READ_CORRELATION = msgspec.json.Decoder(_Correlated)
_LARGEST_ID = 2**62  # larger ids are no tracer's counter (and would not fit the column)


def _correlation_id(kept: bytes) -> int:
    try:
        value = _READ_CORRELATION.decode(kept).correlation_id
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return -1
    if isinstance(value, str):
        value = int(value) if value.isdigit() and len(value) <= 18 else -1
    return value if 0 <= value <= _LARGEST_ID else -1


def _enclosing_span(trace: Trace, targets: np.ndarray, among: np.ndarray) -> np.ndarray:
    """The row of the span of ``among`` (a mask) on each flow event's track that starts at or just before it and
    holds it (-1 if none)."""
    spans = np.flatnonzero((trace.phase == Phase.COMPLETE) & among)
    spans = spans[np.lexsort((trace.ts[spans], trace.track[spans]))]  # by track, then start, as owners reads them
    owner = owners(trace, spans, targets)
    return np.where(owner >= 0, spans[np.maximum(owner, 0)], -1) if spans.size else owner


def graphs_in_use(trace: Trace, rows: np.ndarray) -> bool:
    """Whether the host launches its work (among ``rows``, a mask) mostly as device graphs: graph launches at
    least a tenth of its launch calls (a few captured pieces in a step launched op by op do not make it so)."""
    launches = (trace.kind == Kind.RUNTIME) & trace.on_roles(Role.HOST) & ~trace.name_matches(MEMCPY) & rows
    graphs = int(np.count_nonzero(launches & trace.name_matches(GRAPH_LAUNCH)))
    return graphs > 0 and graphs * GRAPH_SHARE >= int(np.count_nonzero(launches))


def replayed(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per device span a graph launch started (linked by flows, as Kineto writes them): the launch call's row, and
    the span's row. A span that starts before its launch call is not that call's work (a flow id used twice, or
    clocks the trace mixes), and would stretch the replay over time it does not take."""

    def found() -> tuple[np.ndarray, np.ndarray]:
        graph_launch = trace.name_matches(GRAPH_LAUNCH)
        sources, spans = launch_rows(trace) if graph_launch.any() else (np.empty(0, np.int64), np.empty(0, np.int64))
        calls = _enclosing_span(trace, sources, trace.on_roles(Role.HOST) & (trace.kind == Kind.RUNTIME))
        graph = (calls >= 0) & graph_launch[calls] & (trace.ts[spans] >= trace.ts[calls])
        return calls[graph], spans[graph]

    return trace.derive("replayed", found)


def graph_replays(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Each device graph replay's span on the device: from the first to the last end of the work one graph launch
    started. The device is not idle inside a replay: the gaps between its kernels are the graph's own dependencies,
    not time the host keeps it waiting."""
    sources, spans = replayed(trace)
    if sources.size == 0:
        return np.empty(0), np.empty(0)
    launch, index = np.unique(sources, return_inverse=True)
    starts, ends = np.full(launch.size, np.inf), np.full(launch.size, -np.inf)
    np.minimum.at(starts, index, trace.ts[spans])
    np.maximum.at(ends, index, trace.end[spans])
    return starts, ends


def with_replays(trace: Trace, busy: Intervals, lo: float, hi: float) -> Intervals:
    """``busy`` (the device's work in [lo, hi]) with each device graph replay from its first kernel to its last: the
    gaps inside a replay are the graph's own dependencies, not time the device waits."""
    replays = graph_replays(trace)
    if not replays[0].size:
        return busy
    return intervals.clip(intervals.union(np.r_[busy[0], replays[0]], np.r_[busy[1], replays[1]]), lo, hi)
