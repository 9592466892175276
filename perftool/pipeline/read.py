"""Loading a trace: read its events (:mod:`perftool.trace`), then interpret them through the dialect of the
tool that wrote it (:mod:`perftool.dialects`): track roles and event kinds. Every command starts here."""

from __future__ import annotations

import os

from perftool import dialects
from perftool.analysis.device_clock import align_device_clock
from perftool.analysis.in_process_input import mark_preparation
from perftool.trace.loader import Decoders, read_trace
from perftool.trace.model import Trace
from perftool.trace.msprof_kernels import KERNEL_DETAILS, msprof_kernels
from perftool.trace.profiler_dirs import (
    ENVIRONMENT,
    EXPORT_CAPPED,
    JAX_EXPORT_MAX_EVENTS,
    MSPROF_LEFT_OUT,
    RUNS_BESIDE,
    SCHEDULE,
    XSPACE_SUFFIX,
    msprof_steps,
    rank_environment,
    rank_schedule,
    sibling_runs,
    trace_path,
    xspace_beside,
)
from perftool.trace.xspace import device_properties

RULES_RUN = frozenset({"scan"})  # the analyses that run rules: only rules read kernels' launch configurations


def load_trace(
    path: str | os.PathLike[str],
    dialect: str | None = None,
    workers: int | None = None,
    max_bytes: int | None = None,
    decoders: Decoders | None = None,
    memory: int | None = None,
    analysis: str = "info",
) -> Trace:
    """Read a trace file (or the trace of a profiler's output directory: :func:`~perftool.trace.profiler_dirs.
    trace_path`) and assign track roles and event kinds through its dialect (the loop's own Python preparing inputs
    counted as loading: :mod:`~perftool.analysis.in_process_input`), a device's events moved onto the host's
    clock where they start before their launches (:mod:`~perftool.analysis.device_clock`); msprof's own step
    breakdown beside a torch_npu trace is kept in its metadata (``msprof.step_trace_time``), as are its kernels'
    measured pipe use (``msprof.kernel_details``), why either was left out (``msprof.left_out``), and the variables
    the profiler recorded set in the job's environment (``torch_npu.environment``) and the schedule it ran with
    (``torch_npu.schedule``); a jax.profiler JSON's device is read from the XSpace beside it, which records what the
    JSON leaves out, the whole XSpace where the JSON was cut at the export's cap (``jax.profiler.export_capped``),
    and the other runs of its log directory are named (``jax.profiler.runs``).

    ``dialect`` forces one by name; by default it is detected. ``workers``, ``max_bytes``, ``decoders``, ``memory``
    (the budget past which the columns are kept on disk) and ``analysis`` (what the trace is read for) are
    :func:`~perftool.trace.loader.read_trace`'s; the args the dialects read are kept.
    """
    file = trace_path(os.fspath(path))
    trace = dialects.apply(
        read_trace(file, workers, max_bytes, dialects.kept_args(analysis in RULES_RUN), decoders, memory, analysis),
        dialect,
    )
    mark_preparation(trace)
    align_device_clock(trace)
    if trace.dialect == "xla" and len(trace) == JAX_EXPORT_MAX_EVENTS and not file.lower().endswith(XSPACE_SUFFIX):
        space = xspace_beside(file)  # the export was cut at its cap: the XSpace it was made from holds every event
        capped = {"export": file, "events": JAX_EXPORT_MAX_EVENTS, "read": space}
        if space is not None:
            trace = load_trace(space, dialect, workers, max_bytes, decoders, memory, analysis)
            trace.metadata[EXPORT_CAPPED] = capped
            return trace
        trace.metadata[EXPORT_CAPPED] = capped
    steps, kernels = msprof_steps(file), msprof_kernels(file)
    if steps.rows:
        trace.metadata["msprof.step_trace_time"] = steps.rows
    if kernels.rows:
        trace.metadata[KERNEL_DETAILS] = kernels.rows
    if left_out := [table.left_out for table in (steps, kernels) if table.left_out]:
        trace.metadata[MSPROF_LEFT_OUT] = left_out
    if runs := sibling_runs(file):
        trace.metadata[RUNS_BESIDE] = runs._asdict()
    if environment := rank_environment(file):
        trace.metadata[ENVIRONMENT] = environment
    if schedule := rank_schedule(file):
        trace.metadata[SCHEDULE] = schedule._asdict()
    if trace.dialect == "xla" and "deviceProperties" not in trace.metadata and (space := xspace_beside(file)):
        if properties := device_properties(space):  # what the JSON export left out of the planes it was made from
            trace.metadata["deviceProperties"] = properties
    trace.store.loaded()
    return trace
