"""Dialects: how each source's conventions map onto track roles and event kinds.

Detection tries the registered dialects in order; a trace none recognises loads with the generic
dialect, whose tracks keep the role ``unknown``.
"""

from __future__ import annotations

import numpy as np

from perftool.common.errors import PerftoolError
from perftool.dialects.ascend import Ascend
from perftool.dialects.base import Dialect, Generic
from perftool.dialects.emulator import Emulator
from perftool.dialects.graphcore import Graphcore
from perftool.dialects.kineto import Kineto
from perftool.dialects.op_families import MODELLED_NAMES
from perftool.dialects.vocabulary import COLLECTIVE_ARGS, FINDINGS_CATEGORY, FINDINGS_PROCESS, INPUT_WORKER_THREAD
from perftool.dialects.xla import Xla
from perftool.trace.kept_args import KeepArgs
from perftool.trace.model import Kind, Role, Trace, rows_at

REGISTERED: tuple[Dialect, ...] = (Emulator(), Ascend(), Graphcore(), Xla(), Kineto())
GENERIC = Generic()


def names() -> list[str]:
    return [d.name for d in REGISTERED] + [GENERIC.name]


def kept_args() -> KeepArgs:
    """The events whose ``args`` some dialect or analysis reads: the loader keeps args for these only (what
    collectives moved; the input shapes of ops the roofline models; the launch configuration of long kernels)."""
    names = f"(?i:{COLLECTIVE_ARGS.pattern})|{MODELLED_NAMES.pattern}"
    return KeepArgs(
        frozenset().union(*(d.args_categories for d in REGISTERED)),
        names,
        MODELLED_NAMES.pattern,
        frozenset().union(*(d.launch_categories for d in REGISTERED)),
    )


def _input_workers(trace: Trace, roles: dict[int, Role]) -> dict[int, Role]:
    """Host threads named as the input pipeline's workers are input workers, whatever the dialect said."""
    return {
        t.id: Role.INPUT
        for t in trace.tracks
        if INPUT_WORKER_THREAD.search(t.thread_name) and roles.get(t.id, t.role) in (Role.HOST, Role.UNKNOWN)
    }


def apply(trace: Trace, forced: str | None = None) -> Trace:
    """Assign roles and kinds with the named dialect, or the first that recognises the trace."""
    if forced is not None:
        by_name = {d.name: d for d in (*REGISTERED, GENERIC)}
        if forced not in by_name:
            raise PerftoolError(f"unknown dialect '{forced}' (choose from {', '.join(names())})")
        dialect = by_name[forced]
    else:
        dialect = next((d for d in REGISTERED if d.detect(trace)), GENERIC)
    roles = dialect.roles(trace)
    trace.with_roles(roles | _input_workers(trace, roles) | _findings_tracks(trace))
    trace.kind = dialect.kinds(trace)
    # A span the capture never closed says where something began, not how long it ran: a marker, not work.
    trace.kind[rows_at(trace.unclosed, trace.skipped)] = Kind.ANNOTATION
    _leave_out_findings(trace)
    trace.dialect = dialect.name
    return trace


def _findings_tracks(trace: Trace) -> dict[int, Role]:
    """The tracks of the findings perftool drew on a trace it annotated: derived from the trace, never analysed."""
    return {t.id: Role.SUMMARY for t in trace.tracks if t.process_name == FINDINGS_PROCESS}


def _leave_out_findings(trace: Trace) -> None:
    """perftool's own annotations (``scan --format perfetto``) are of no kind an analysis reads (not even an
    annotation, whose name may say warm-up), and their arrows link nothing: a scan of the annotated trace finds what
    the original gave."""
    if FINDINGS_CATEGORY not in trace.cats:
        return
    ours = trace.cat == trace.cats.index(FINDINGS_CATEGORY)
    trace.kind[ours] = Kind.OTHER
    trace.flow_id = np.where(ours, -1, trace.flow_id)
