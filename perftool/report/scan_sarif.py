"""``perftool scan --format sarif``: SARIF 2.1.0 for code-scanning services.

Rule ids are the stable rule ids; each result carries a ``partialFingerprints`` entry computed from
the rule and what the finding is about (not the file's content), so repeated uploads deduplicate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from perftool.common.errors import one_line
from perftool.common.version import __version__
from perftool.rules.findings import ScanReport
from perftool.rules.model import Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def render(report: ScanReport) -> str:
    """The SARIF log of a scan, describing the rules it ran."""
    rules = report.rules_run
    index = {rule.id: i for i, rule in enumerate(rules)}
    results = [
        {
            "ruleId": finding.rule_id,
            "ruleIndex": index[finding.rule_id],
            "level": _LEVEL[finding.severity.value],
            "message": {"text": one_line(f"{finding.message} Fix: {finding.fix.text} Gain: {finding.gain.text}")},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": artifact_uri(trace.path)},
                        "region": {"startLine": 1},
                    }
                }
            ],
            "partialFingerprints": {"perftoolFinding/v1": finding.fingerprint},
            "properties": {
                "share": finding.impact.share,
                "lostMicroseconds": finding.impact.lost_us,
                "deviceFamily": finding.fix.family,
            },
        }
        for trace, finding in report.findings
    ]
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "perftool",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": [_descriptor(rule) for rule in rules],
                    }
                },
                "results": results,
                "invocations": [_invocation(report)],
                "properties": {"together": _overall(report, "together"), "beyond": _overall(report, "beyond")},
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _overall(report: ScanReport, which: str) -> list[dict[str, Any]]:
    """Per trace with such a gain: every predicted fix applied at once (``together``), or the settings a sweep of
    the fitted emulator finds beyond them (``beyond``)."""
    return [
        {"artifact": artifact_uri(trace.path), "text": gain.text, "kind": gain.kind}
        for trace in report.traces
        if (gain := getattr(trace, which)) is not None
    ]


def _invocation(report: ScanReport) -> dict[str, Any]:
    """Whether every trace was scanned, and a notification for each that could not be read."""
    return {
        "executionSuccessful": not report.unread,
        "toolExecutionNotifications": [
            {
                "level": "error",
                "message": {"text": one_line(f"not scanned: {unread.problem}")},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": artifact_uri(unread.path)}}}],
            }
            for unread in report.unread
        ],
    }


def _descriptor(rule: Rule) -> dict[str, Any]:
    descriptor: dict[str, Any] = {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.explain.what},
        "help": {"text": f"{rule.explain.why} Run `perftool rules explain {rule.id}` for the fix per device family."},
        "defaultConfiguration": {"level": _LEVEL[rule.severity.value]},
        "properties": {"tags": ["performance"]},
    }
    if rule.references and rule.references[0].url:
        descriptor["helpUri"] = rule.references[0].url
    return descriptor


def artifact_uri(path: str) -> str:
    """The trace's path relative to the working directory when it lies below it, else a file URI; either
    percent-encoded (RFC 3986), so spaces, ``%``, controls and a ``:`` in its first segment stay a path."""
    absolute = Path(path).resolve()
    try:
        return quote(absolute.relative_to(Path.cwd().resolve()).as_posix(), safe="/")
    except ValueError:
        return absolute.as_uri()
