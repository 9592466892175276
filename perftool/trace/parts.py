"""A piece's events made into a :class:`Part`, compact for the trip from a worker process: per timed event only
its times and a signature id; the few metadata, counter, flow and kept-args events listed apart."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perftool.trace.events import Events, Interner, Signature
from perftool.trace.kept_args import ArgsKept, KeepArgs, kept_args_of
from perftool.trace.model import Phase

BEGIN, END = 100, 101  # phase codes that exist only until B/E pairs are matched
INT64_MAX = 2**63 - 1
PHASE_CODES = {
    "X": Phase.COMPLETE,
    "B": BEGIN,
    "E": END,
    "i": Phase.INSTANT,
    "I": Phase.INSTANT,
    "C": Phase.COUNTER,
    "s": Phase.FLOW_START,
    "t": Phase.FLOW_STEP,
    "f": Phase.FLOW_END,
    "b": Phase.ASYNC,
    "e": Phase.ASYNC,
    "n": Phase.ASYNC,
    "S": Phase.ASYNC,
    "T": Phase.ASYNC,
    "p": Phase.ASYNC,
    "F": Phase.ASYNC,
}
METADATA_PHASE = 200
PHASE_LOOKUP = {**PHASE_CODES, "M": METADATA_PHASE}.get
_BLANK = ("", "", "", 0, 0)  # the signature of an event without phase, name, category, pid or tid


@dataclass
class Part:
    """One piece of the trace, compact for the trip from a worker process.

    Per timed event (all but metadata and counter events) only the times and a signature id
    travel; the strings live in the piece's table of distinct signatures. Flow ids (and the
    correlation ids of launches and their work), kept args, metadata and counters are listed for the
    events that have them, by position in the piece.
    """

    count: int  # events in the piece, metadata and counter events included
    ts: np.ndarray  # float64 per timed event
    dur: np.ndarray  # float64 per timed event
    signature: np.ndarray  # int32 per timed event: index into ``signatures``
    signatures: list[Signature]
    untimed: np.ndarray  # positions of the metadata and counter events
    flow_events: np.ndarray  # positions of the events that carry a flow or async id, or a launch's correlation id
    flow_ids: np.ndarray  # int64: the ids; string ids as -2 - index into ``flow_keys``
    flow_keys: list[str]
    args_events: np.ndarray  # positions of the events whose args are kept
    args_refs: np.ndarray  # int32 per such event: its args' index into ``kept_args`` (equal inputs share one)
    kept_args: list[bytes]
    metadata_events: list[tuple[int | str, int | str, str, bytes]]  # pid, tid, name, args
    counter_events: list[tuple[int, float, int, bytes]]  # position, ts, signature, args
    size: int = 0  # bytes of JSON the piece held (0 where not known)


def make_part(events: Events, keep_args: KeepArgs, size: int = 0) -> Part:
    """The Part of one piece's events (``size``: the piece's bytes, where known). Runs in worker processes too, so
    it takes and returns plain data.

    Events repeat a few dozen signatures, so phases, categories and tracks are looked at once per distinct
    signature, and only the few events that need them have their args or flow ids read.
    """
    n = len(events)
    signature, distinct, ts, dur = events.signature, events.distinct, events.ts, events.dur
    phase_of = np.array([PHASE_LOOKUP(s[0], Phase.OTHER) for s in distinct], dtype=np.uint8)
    untimed_of = (phase_of == METADATA_PHASE) | (phase_of == Phase.COUNTER)
    blank_of = np.array([s == _BLANK for s in distinct], dtype=bool)

    # jax.profiler ends its event list with an empty object: an event with no phase, name or time says nothing
    blank = blank_of[signature] & np.isnan(ts) & np.isnan(dur)
    untimed = np.flatnonzero(untimed_of[signature] | blank)
    metadata_events, counter_events = [], []
    untimed_rows = untimed.tolist()
    for i, raw, sig, when in zip(untimed_rows, events.reader.args(untimed), signature[untimed].tolist(), ts[untimed]):
        ph, name, _, pid, tid = distinct[sig]
        if ph == "M":
            metadata_events.append((pid, tid, name, raw))
        elif ph:
            counter_events.append((i, float(when), sig, raw))

    kept_of = keep_args.of(distinct)
    instant = phase_of == Phase.INSTANT
    kept_of[instant & ((kept_of == ArgsKept.NONE) | (kept_of == ArgsKept.LAUNCH))] = ArgsKept.ALL
    kept_of[untimed_of] = ArgsKept.NONE
    keeping = kept_of[signature]
    keeping[blank] = ArgsKept.NONE
    if keep_args.launch_categories:
        keeping[(keeping == ArgsKept.LAUNCH) & ~(dur >= keep_args.launch_min_us)] = ArgsKept.NONE
    args_events, args_refs, kept_args = kept_args_of(events, keeping)

    flow_events = np.flatnonzero(((phase_of >= Phase.FLOW_START) & (phase_of <= Phase.ASYNC))[signature])
    flow_ids, flow_keys = _flow_ids(events.reader.ids(flow_events))
    # a launch's and its device work's correlation id: what pairs them where flows are left out
    if events.correlation is not None:
        correlated = np.flatnonzero(events.correlation >= 0)
        ids = events.correlation[correlated]
    else:
        correlated = np.flatnonzero(keep_args.correlated_of(distinct)[signature])
        ids = events.reader.correlations(correlated) if correlated.size else np.empty(0, np.int64)
    found = ids >= 0
    flow_events, flow_ids = np.concatenate([flow_events, correlated[found]]), np.concatenate([flow_ids, ids[found]])

    if untimed.size:
        timed = np.ones(n, dtype=bool)
        timed[untimed] = False
        ts, dur, signature = ts[timed], dur[timed], signature[timed]
    return Part(
        count=n,
        ts=ts,
        dur=dur,
        signature=signature,
        signatures=distinct,
        untimed=untimed,
        flow_events=flow_events,
        flow_ids=flow_ids,
        flow_keys=flow_keys,
        args_events=args_events,
        args_refs=args_refs,
        kept_args=kept_args,
        metadata_events=metadata_events,
        counter_events=counter_events,
        size=size,
    )


def _flow_ids(ids: np.ndarray | list[int | str | None]) -> tuple[np.ndarray, list[str]]:
    """Integer ids stay as they are; string ids, and integers past int64 (a uint64 such as 2^64 - 1 is valid JSON),
    get local numbers (negative, below -1) to remap."""
    try:
        numbers = np.asarray(ids, dtype=np.int64)
        if not numbers.size or numbers.min() >= 0:
            return numbers, []
    except (ValueError, TypeError, OverflowError):
        pass
    ids = ids.tolist() if isinstance(ids, np.ndarray) else ids
    strings = Interner()
    keyed = [i if isinstance(i, int) and 0 <= i <= INT64_MAX else str(i) for i in ids]  # past int64: a name
    string_keys = [k for k in keyed if isinstance(k, str)]
    local = strings(string_keys, len(string_keys))
    out = np.array([k if isinstance(k, int) else 0 for k in keyed], dtype=np.int64)
    is_str = np.fromiter((isinstance(k, str) for k in keyed), dtype=bool, count=len(keyed))
    out[is_str] = -2 - local
    return out, strings.values
