"""Every output format, registered by (what is shown, format name), each a function of one argument.

A command hands :func:`emit` what it produced, wrapped in one of the views below when a format needs
more than the result itself (the rules a SARIF file describes, the config a tune ran). A renderer
returns text (written as it is) or a rich renderable (printed for people, or flattened to text
for ``-o``); :func:`emit` writes either to stdout or atomically to the output file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console, RenderableType

from perftool.analysis.metrics import Metrics
from perftool.calibrate import Calibration
from perftool.diff.files import DiffResult
from perftool.emulator.full_run import Run
from perftool.gate.verdict import GateResult
from perftool.output import write_text
from perftool.report import (
    calibrate_text,
    console,
    diff_html,
    diff_json,
    diff_markdown,
    diff_text,
    emulate_json,
    emulate_text,
    gate_github,
    gate_html,
    gate_json,
    gate_junit,
    gate_markdown,
    gate_sarif,
    gate_text,
    info_html,
    info_json,
    info_markdown,
    info_text,
    job_text,
    scan_github,
    scan_html,
    scan_json,
    scan_markdown,
    scan_sarif,
    scan_text,
    tune_html,
    tune_json,
    tune_markdown,
    tune_text,
)
from perftool.roofline.figures import Roofline
from perftool.rules.findings import ScanReport
from perftool.trace.model import Trace
from perftool.tune.result import TuneResult


@dataclass(frozen=True)
class InfoView:
    trace: Trace
    metrics: Metrics
    roofline: Roofline


@dataclass(frozen=True)
class JobInfoView:
    """``info`` on a job: the ranks' scan without rules, for its job view."""

    report: ScanReport


@dataclass(frozen=True)
class CalibrateView:
    calibration: Calibration
    written: str | None  # where -o wrote the fitted config


@dataclass(frozen=True)
class EmulateView:
    run: Run
    trace_file: str | None  # where --trace wrote the run's trace, and its size


@dataclass(frozen=True)
class TuneView:
    result: TuneResult
    source: str  # the config file swept
    top: int  # configurations listed


Renderer = Callable[[Any], "str | RenderableType"]
RENDERERS: dict[tuple[type, str], Renderer] = {
    (ScanReport, "text"): scan_text.render,
    (ScanReport, "json"): scan_json.render,
    (ScanReport, "markdown"): scan_markdown.render,
    (ScanReport, "sarif"): lambda report: scan_sarif.render(report, report.rules_run),
    (ScanReport, "github"): scan_github.render,
    (ScanReport, "html"): scan_html.render,
    (GateResult, "text"): gate_text.render,
    (GateResult, "json"): gate_json.render,
    (GateResult, "markdown"): gate_markdown.render,
    (GateResult, "junit"): gate_junit.render,
    (GateResult, "sarif"): gate_sarif.render,
    (GateResult, "github"): gate_github.render,
    (GateResult, "html"): gate_html.render,
    (DiffResult, "text"): diff_text.render,
    (DiffResult, "json"): diff_json.render,
    (DiffResult, "markdown"): diff_markdown.render,
    (DiffResult, "html"): diff_html.render,
    (InfoView, "text"): lambda v: info_text.render(v.trace, v.metrics, v.roofline),
    (InfoView, "json"): lambda v: info_json.render(v.trace, v.metrics, v.roofline),
    (InfoView, "markdown"): lambda v: info_markdown.render(v.trace, v.metrics, v.roofline),
    (InfoView, "html"): lambda v: info_html.render(v.trace, v.metrics, v.roofline),
    (JobInfoView, "text"): lambda v: job_text.render(v.report, v.report.job, command="info"),
    (JobInfoView, "json"): lambda v: scan_json.render(v.report),
    (JobInfoView, "markdown"): lambda v: scan_markdown.render(v.report, command="info"),
    (JobInfoView, "html"): lambda v: scan_html.render(v.report, command="info"),
    (EmulateView, "text"): lambda v: emulate_text.render(v.run, v.trace_file),
    (EmulateView, "json"): lambda v: emulate_json.render(v.run, v.trace_file),
    (TuneView, "text"): lambda v: tune_text.render(v.result, v.source, v.top),
    (CalibrateView, "text"): lambda v: calibrate_text.render(v.calibration, v.written),
    (CalibrateView, "json"): lambda v: json.dumps(v.calibration.document(), indent=2) + "\n",
    (TuneView, "json"): lambda v: tune_json.render(v.result, v.source, v.top),
    (TuneView, "html"): lambda v: tune_html.render(v.result, v.source, v.top),
    (TuneView, "markdown"): lambda v: tune_markdown.render(v.result, v.source, v.top),
}


def formats(kind: type) -> list[str]:
    """The format names registered for ``kind``, text first."""
    return [fmt for shown, fmt in RENDERERS if shown is kind]


def emit(shown: Any, fmt: str, output: str | None = None) -> None:
    """Render ``shown`` in ``fmt`` and write it: to stdout, or atomically to ``output``."""
    rendered = RENDERERS[type(shown), fmt](shown)
    if isinstance(rendered, str):
        write_text(rendered, output)
    elif output:
        write_text(console.plain(rendered), output)
    else:
        Console().print(rendered)
