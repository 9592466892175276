"""Traces of one rank captured at different times. A profiler whose schedule repeats writes one trace per cycle:
``torch.profiler.tensorboard_trace_handler`` names each ``{worker}.{time}.pt.trace.json`` (the worker is
``{host}_{pid}`` unless given), torch_npu's handler one ``{worker}_{time}_ascend_pt`` directory each. In one directory
they are one process's windows in turn, not ranks of a job, nor the same rank given twice."""

from __future__ import annotations

from dataclasses import dataclass, field

from perftool.analysis.family import HOST_ONLY
from perftool.job.ranks import handler_worker, rank_is_process_id
from perftool.job.signs import differences, of_different_jobs, of_no_job
from perftool.job.summary import RankSummary
from perftool.rules.findings import ScanReport, UnreadTrace


@dataclass
class Captures:
    """A job's summaries sorted out by rank: each rank's latest capture (and every trace without a rank), in the
    order given; the ranks' earlier captures, in time order; traces that repeat a capture already given; traces of
    processes beside the job's ranks (:func:`beside_the_job`); and traces that merge ranks' traces into one
    (:func:`merges_of_the_job`)."""

    latest: list[RankSummary]
    earlier: list[RankSummary]
    repeated: list[UnreadTrace]
    beside: list[RankSummary] = field(default_factory=list)
    merged: list[RankSummary] = field(default_factory=list)

    @property
    def no_job(self) -> bool:
        """Whether the traces are no job's ranks but processes alone, each capture reported in turn: every trace is a
        capture of one rank (one process), or none of them shows a sign of a distributed job
        (:attr:`~perftool.job.signs.JobSigns.of_no_job`: none names a rank, holds the ``distributedInfo`` Kineto
        writes into every trace of a rank, or runs a collective), as a log directory that collected runs one after
        another holds tensorboard_trace_handler's traces, or a folder one job's captures before and after a change.
        Ranks of a PyTorch older than 1.10, which writes no ``distributedInfo``, are a job by their collectives."""
        if len(self.latest) == 1:
            return bool(self.earlier)
        return all(s.signs.of_no_job for s in self.latest + self.earlier)

    @property
    def in_time_order(self) -> list[RankSummary]:
        """Every capture, earliest first (for processes alone: their windows in turn)."""
        return sorted(self.earlier + self.latest, key=_started)


def beside_the_job(summaries: list[RankSummary]) -> list[RankSummary]:
    """Of a directory's traces, those of processes beside a distributed job's ranks: where some trace is a rank of
    one (its ``distributedInfo``), a process alone (:func:`_process_alone`) whose device did nothing is no rank of it,
    but a process that drives the ranks or serves their results: a serving engine's front end (vLLM's AsyncLLM writes
    ``{host}_{pid}.async_llm.{time}.pt.trace.json`` beside its workers' traces), a launcher."""
    if not any(summary.scan.world_size is not None for summary in summaries):
        return []
    return [s for s in summaries if _process_alone(s) and s.scan.device == HOST_ONLY]


def merges_of_the_job(summaries: list[RankSummary]) -> list[RankSummary]:
    """Of a directory's traces, those that merge ranks' traces into one file: no rank of a job, but a job of its
    own. SGLang writes its merged profile (``merged-{id}.trace.json.gz``) beside the ranks' own traces
    (``{id}-TP-N.trace.json.gz``), whose events it repeats."""
    return [summary for summary in summaries if summary.scan.merged_ranks]


def by_rank(summaries: list[RankSummary]) -> Captures:
    """Sort ``summaries`` out by rank. A rank's traces that differ in when they start on its clock or in what they
    hold are its captures (the latest kept for the job view); one alike in both repeats another (the same file, a
    copy), and is set apart as given twice. Traces of processes beside the job's ranks, and merges of its ranks'
    traces, are set apart too."""
    beside, merged = beside_the_job(summaries), merges_of_the_job(summaries)
    summaries = [summary for summary in summaries if all(summary is not other for other in beside + merged)]
    latest: list[RankSummary] = []
    earlier: list[RankSummary] = []
    repeated: list[UnreadTrace] = []
    kept: dict[int, dict[tuple[float, float, int], RankSummary]] = {}  # per rank: its captures by what they are
    for summary in summaries:
        if summary.rank is None:
            latest.append(summary)
            continue
        windows = kept.setdefault(summary.rank, {})
        if (first := windows.get(_capture(summary))) is not None:
            problem = f"rank {summary.rank} is given twice (also by {first.scan.path})"
            repeated.append(UnreadTrace(path=summary.scan.path, problem=problem, rank=summary.rank))
            continue
        windows[_capture(summary)] = summary
    for windows in kept.values():
        *before, last = sorted(windows.values(), key=_started)
        earlier += before
        latest.append(last)
    order = {id(summary): position for position, summary in enumerate(summaries)}
    latest.sort(key=lambda summary: order[id(summary)])
    return Captures(latest, sorted(earlier, key=_started), repeated, beside, merged)


def of_other_jobs(summaries: list[RankSummary]) -> list[RankSummary]:
    """Of a directory's traces, those of other jobs than its ranks': where the traces that say they are ranks agree
    in trace format, world size and model of device, each trace that says no rank and differs from them in one of
    these (a capture of another run left among a job's rank files). None where fewer than two say so, or they disagree
    among themselves: then nothing tells which job the directory is."""
    ranks = [summary.signs for summary in summaries if summary.stated_rank is not None]
    if len(ranks) < 2 or differences(ranks):
        return []
    return [s for s in summaries if s.stated_rank is None and differences([*ranks, s.signs])]


def why_no_job(report: ScanReport) -> str:
    """Why the traces of a report without a job view make no job, in words: traces of different jobs (what tells
    them apart), one process's captures at different times, processes of no distributed job, traces that show no
    sign of one, or traces that name no rank."""
    ranks = {trace.rank for trace in report.traces}
    if report.different_jobs:
        return of_different_jobs(len(report.traces), report.different_jobs)
    if len(report.traces) < 2:
        return "not the ranks of one job"
    if None in ranks:
        return f"{len(report.traces)} traces, not the ranks of one job"
    if len(ranks) == 1:
        return (
            f"{len(report.traces)} captures of one process at different times (a profiler schedule that repeats), "
            "not the ranks of a job"
        )
    if all(handler_worker(trace.path) for trace in report.traces):  # the ranks are the processes' ids
        return (
            f"{len(report.traces)} traces of {len(ranks)} processes in no distributed job (none holds "
            "distributedInfo or runs a collective), not the ranks of a job"
        )
    return of_no_job(len(report.traces))


def _process_alone(summary: RankSummary) -> bool:
    """Whether a trace is tensorboard_trace_handler's of a process in no distributed job: its name the handler's,
    saying no rank, and no ``distributedInfo`` in it."""
    return rank_is_process_id(summary.scan.path, summary.scan.world_size)


def _capture(summary: RankSummary) -> tuple[float, float, int]:
    """What tells one capture of a rank from another: when it starts, its steady window and its steps (a profiler
    whose clock starts with each capture starts them all at one time)."""
    return summary.first_us, summary.scan.window_us, len(summary.scan.step_starts_us)


def _started(summary: RankSummary) -> float:
    """When the capture starts on its rank's clock: its first event."""
    return summary.first_us
