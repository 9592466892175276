"""What a serving engine's annotations say beyond their time: the tokens and the sequences an iteration runs, the
batch a graph was captured for, the time between its iterations; and how SGLang keeps its scheduler's work beside
the device's."""

from __future__ import annotations

import re

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.nesting import innermost_around
from perftool.common.arrays import distinct
from perftool.dialects.op_families import StepLengths
from perftool.dialects.vocabulary import ENGINE_STEP, ENGINE_STEP_LENGTHS, ENGINE_STEP_MODE, SPEC_V1_WORKER
from perftool.trace.model import Kind, Phase, Role, Trace


def _named_around(trace: Trace, rows: np.ndarray, pattern: re.Pattern[str]) -> list[re.Match[str] | None]:
    """Per row (a host event): ``pattern``'s match of the innermost annotation (or step) it names around the row on
    its thread; None where none around it matches."""
    named = np.flatnonzero(trace.of_kinds(Kind.ANNOTATION, Kind.STEP) & trace.name_matches(pattern))
    if not (named.size and rows.size):
        return [None] * rows.size
    around = innermost_around(trace, named, rows)
    matches = {row: pattern.match(trace.names[trace.name[row]]) for row in distinct(around[around >= 0]).tolist()}
    return [matches[row] if row >= 0 else None for row in around.tolist()]


def iteration_modes(trace: Trace, rows: np.ndarray) -> list[str] | None:
    """Per step marker (``rows``, an engine's iterations): which kind of iteration it is, in the engine's words
    (:data:`~perftool.dialects.vocabulary.ENGINE_STEP_MODE`: SGLang's EXTEND or DECODE; vLLM's prefill, decode or
    both, or new requests or running ones); None unless every marker names its kind and there are two kinds or more.
    A prefill runs other kernels than a decode, and for longer: neither is the other's warm-up."""
    modes = []
    for name in (trace.names[n] for n in trace.name[rows].tolist()):
        match = ENGINE_STEP_MODE.match(name)
        if match is None:
            return None
        if match["mode"]:
            modes.append(match["mode"])
        elif match["new"] is not None:
            modes.append("new requests" if match["new"].strip("0") else "running requests")  # a count above 0
        else:
            runs = (("prefill", match["context"]), ("decode", match["generation"]))
            modes.append(" and ".join(part for part, count in runs if count.strip("0")) or "no request")
    return modes if len(set(modes)) > 1 else None


def named_numbers(trace: Trace, rows: np.ndarray, pattern: re.Pattern[str]) -> list[int | None]:
    """Per row: the number the innermost annotation around it names by ``pattern`` (the sum of its groups that
    matched: an iteration's tokens, its prefills' and decodes' where counted apart; a capture's batch); None where none
    does."""
    return [sum(int(group) for group in match.groups() if group) if match else None
            for match in _named_around(trace, rows, pattern)]  # fmt: skip


def step_lengths(trace: Trace, rows: np.ndarray) -> list[StepLengths | None]:
    """Per row (a host event): the sequence lengths of the engine iteration whose step annotation holds it on its
    thread, its prefills' and decodes' together; None where no annotation around it counts them."""
    found: list[StepLengths | None] = []
    for match in _named_around(trace, rows, ENGINE_STEP_LENGTHS):
        counts = [int(n) for n in match.groups()] if match else []
        found.append(StepLengths(*(a + b for a, b in zip(counts[:4], counts[4:]))) if match else None)
    return found


def between_iterations(trace: Trace, lo: float, hi: float) -> intervals.Intervals:
    """The stretches of [lo, hi] between a serving engine's iterations, as its annotations on the host mark them
    (:data:`~perftool.dialects.vocabulary.ENGINE_STEP`, nested ones merged): from the end of one to the start of the
    next, while the engine schedules the next batch and handles the last one's outputs; none where fewer than two
    are marked."""
    rows = np.flatnonzero(trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE) & trace.name_matches(ENGINE_STEP))
    if rows.size < 2:
        return np.empty(0), np.empty(0)
    marked = intervals.union(trace.ts[rows], trace.end[rows])
    return intervals.clip(intervals.gaps(marked, float(marked[0][0]), float(marked[1][-1])), lo, hi)


# what a detector's value of :func:`sglang_overlap` holds, as its values are described
OVERLAP_SCHEDULER = "SGLang: how it schedules the next iteration while the device computes, in words (empty elsewhere)"


def sglang_overlap(trace: Trace, contexts: tuple[str, ...]) -> str:
    """How SGLang schedules its next iteration while the device runs this one, in words for a fix (a trace whose
    ``contexts``, what fixes are told in terms of, include SGLang; empty for others): its overlap scheduler kept on;
    where the capture runs speculative decoding on SGLang's first workers
    (:data:`~perftool.dialects.vocabulary.SPEC_V1_WORKER`), which turn that scheduler off whatever the flags, its v2
    workers, which keep it."""
    if "sglang" not in contexts:
        return ""
    if trace.name_matches(SPEC_V1_WORKER).any():
        return (
            "run speculative decoding on SGLang's v2 workers, which keep the overlap scheduler (this capture's run on "
            "the first ones, which turn it off; v2 is the default in recent releases, SGLANG_ENABLE_SPEC_V2=1 in those "
            "before)"
        )
    return "keep the overlap scheduler on (no --disable-overlap-schedule)"
