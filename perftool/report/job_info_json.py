"""``perftool info DIR --format json``: a job's ranks summarised, as a versioned document (``perftool schema
job-info``)."""

from __future__ import annotations

from perftool.rules.findings import JobInfoReport, ScanReport


def render(report: ScanReport) -> str:
    assert report.job is not None  # info shows a job's report only
    job = JobInfoReport(tool=report.tool, job=report.job, traces=report.traces, unread=report.unread,
                        folders_not_read=report.folders_not_read)  # fmt: skip
    return job.model_dump_json(by_alias=True, indent=2) + "\n"
