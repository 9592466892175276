"""``perftool info DIR --format json``: a job's ranks summarised, as a versioned document (``perftool schema
job-info``)."""

from __future__ import annotations

from perftool.results import JobInfoReport
from perftool.rules.findings import ScanReport

SCHEMA = "perftool.job-info/1"


def render(report: ScanReport) -> str:
    assert report.job is not None  # info shows a job's report only
    job = JobInfoReport(schema_=SCHEMA, tool=report.tool, job=report.job, traces=report.traces, unread=report.unread)
    return job.json_text()
