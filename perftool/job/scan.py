"""Scanning a job: every rank's trace analysed on Dask (or here), then the job view from the summaries."""

from __future__ import annotations

from collections.abc import Callable

from perftool.common.version import __version__
from perftool.job.captures import by_rank, of_other_jobs
from perftool.job.cluster import map_tasks
from perftool.job.ranks import job_listing, names_ranks, rank_from_name
from perftool.job.signs import different_jobs
from perftool.job.summary import RankSummary, summarise_rank
from perftool.job.view import job_view
from perftool.pipeline.scan import ReadOptions
from perftool.rules.findings import JobView, ScanReport, UnreadTrace
from perftool.rules.model import Rule
from perftool.trace.loader import json_size_hint
from perftool.trace.seen import seen


def scan_job(
    paths: list[str],
    rules: list[Rule],
    read: ReadOptions,
    scheduler: str | None = None,
    workers: int | None = None,
    done: Callable[[], None] | None = None,
) -> ScanReport:
    """Scan the traces ``paths`` name (files, and the trace files of directories) and, when they are the ranks
    of one job, build the job view: a directory's traces are (but processes alone, below), and several files are
    when each has a rank of its own (``distributedInfo.rank`` in the trace, or ``rank3`` in its name).

    A trace that cannot be read, or that repeats a capture already given, is in the report's ``unread``;
    the other traces are reported all the same. A rank captured several times (a profiler schedule that repeats:
    :mod:`~perftool.job.captures`) takes part in the job view with its latest capture, the others listed; captures
    of processes alone (one process, or processes of no distributed job) are no job, and each is reported in turn;
    so are traces that what they hold shows to be of different jobs (:func:`~perftool.job.signs.different_jobs`),
    each with the rank it states, if any.
    A process beside a job's ranks (no rank, no device work: a serving engine's front end;
    :func:`~perftool.job.captures.beside_the_job`) is named by the job view and left out of it, as is a trace that
    merges several ranks' traces beside them (:func:`~perftool.job.captures.merges_of_the_job`) and a trace of
    another job among them (:func:`~perftool.job.captures.of_other_jobs`).
    Without ``scheduler`` or ``workers``, a job named outright (a directory, files named by rank) runs on local Dask
    workers when it is large enough for them to pay off (:func:`~perftool.job.cluster.cluster_pays_off`); other
    files, and small jobs, are scanned here in turn.
    """
    files, folders_left = job_listing(paths)
    named = names_ranks(paths)
    workers = workers or (None if named or scheduler else 1)
    tasks = [(seen(path), position, rules, read, named) for position, path in enumerate(files)]
    summaries: list[RankSummary] = []
    unread: list[UnreadTrace] = []
    work_bytes = sum(json_size_hint(path) for path in files)
    for position, result in enumerate(map_tasks(summarise_rank, tasks, scheduler, workers, done, work_bytes)):
        if isinstance(result, UnreadTrace):
            result.rank = rank_from_name(files[position], named)
            unread.append(result)
        else:
            summaries.append(result)
    others = of_other_jobs(summaries) if named else []
    captures = by_rank([summary for summary in summaries if all(summary is not other for other in others)])
    job = None
    may_be_job = named or all(s.rank is not None for s in summaries)
    if may_be_job and (unrelated := different_jobs([s.signs for s in captures.latest + captures.earlier])):
        ranks = summaries  # each trace on its own, every capture: a directory's guess at a rank means nothing here
        for summary in ranks:
            summary.scan.rank = summary.stated_rank
        return _report(ranks, unread, None, rules, folders_left, unrelated)
    unread += captures.repeated
    in_turn = captures.no_job and captures.earlier  # processes alone, captured again: their windows in turn
    ranks = captures.in_time_order if in_turn else captures.latest
    named_job = named or all(s.rank is not None for s in ranks)
    if bool(ranks) and named_job and len(files) > 1 and not captures.no_job:
        ranks.sort(key=lambda s: s.rank if s.rank is not None else -1)
        earlier, beside, merged, other = (
            [s.scan.path for s in c] for c in (captures.earlier, captures.beside, captures.merged, others)
        )
        job = job_view(ranks, rules, read.evidence, earlier, beside, merged, other)
    else:  # no job view to set them beside: reported in turn like the others
        ranks += captures.beside + captures.merged + others
    return _report(ranks, unread, job, rules, folders_left)


def _report(
    traces: list[RankSummary],
    unread: list[UnreadTrace],
    job: JobView | None,
    rules: list[Rule],
    folders_left: list[str],
    unrelated: str | None = None,
) -> ScanReport:
    report = ScanReport(tool={"name": "perftool", "version": __version__}, traces=[s.scan for s in traces],
                        unread=unread, job=job, different_jobs=unrelated, folders_not_read=folders_left)  # fmt: skip
    report.rules_run = rules
    return report
