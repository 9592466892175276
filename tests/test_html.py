"""The HTML reports: self-contained, their figures the json format's, and rendered by a real browser.

The browser tests drive Debian's Chromium headless (``.ci/run`` installs it) with the network cut off: the
page loads with no console message, every chart is drawn, and the screenshot is not blank. Without a
Chromium on the machine they skip, saying so.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import CHROMIUM, chromium, console_messages, screenshot
from conftest import DATA, REPO

from perftool.units import duration, figure, timestamp

SAMPLES = REPO / "sample_traces"
KINETO = SAMPLES / "gpu_training_kineto.pt.trace.json.gz"
REPORTS = {  # report -> the command writing it as html ({out}) and as json
    "scan": ("scan", KINETO),
    "job": ("scan", SAMPLES / "jobs" / "gpu_ddp_straggler", "--workers", "1"),
    "tune": ("tune", REPO / "examples" / "tune" / "ipu.yaml", "--strategy", "exhaustive", "--no-progress"),
    "gate": ("gate", SAMPLES / "gpu" / "healthy.trace.json.gz",
             SAMPLES / "gpu" / "launch_bound_no_cuda_graphs.trace.json.gz", "--allow-mismatch"),
    "diff": ("diff", DATA / "vocab" / "diff_kineto_before.json.gz", DATA / "vocab" / "diff_kineto_after.json.gz"),
}  # fmt: skip
CHARTS = {  # report -> the charts it draws (by the start of their names)
    "scan": {"steps", "breakdown"},
    "job": {"ranks", "rank-breakdown", "steps", "breakdown"},
    "tune": {"sensitivity-"},
    "gate": {"steps-trace", "explanation"},
    "diff": {"steps", "contributions"},
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Each report written as html, with the json format's document for the same input."""
    from click.testing import CliRunner

    from perftool.cli import cli

    folder = tmp_path_factory.mktemp("html")
    written = {}
    for name, command in REPORTS.items():
        out = folder / f"{name}.html"
        args = [str(a) for a in command]
        result = CliRunner().invoke(cli, [*args, "--format", "html", "-o", str(out)], catch_exceptions=False)
        assert result.exit_code in (0, 1), result.output
        document = CliRunner().invoke(cli, [*args, "--format", "json"], catch_exceptions=False).stdout
        written[name] = out, json.loads(document)
    return written


class _Page(HTMLParser):
    """What a test reads off a page: its charts and how many marks each draws, table cells, urls, embedded data."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, int] = {}
        self.cells: list[str] = []
        self.urls: list[str] = []
        self.data = ""
        self._chart: str | None = None
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        found = dict(attrs)
        self._in.append(tag)
        if tag == "figure" and "data-chart" in found:
            self._chart = found["data-chart"]
            self.charts[self._chart] = 0
        elif self._chart and tag in ("rect", "circle", "line", "polyline"):
            self.charts[self._chart] += 1
        self.urls += [value for key, value in attrs if key in ("src", "href") and value]
        if tag == "link" or (tag == "script" and found.get("type") != "application/json"):
            self.urls.append(f"<{tag}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._chart = None
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] in ("td", "b"):
            self.cells.append(data)
        if self._in and self._in[-1] == "script":
            self.data += data


def read(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


@pytest.mark.parametrize("name", REPORTS)
def test_a_report_is_one_self_contained_file_carrying_the_json_document(reports, name):
    path, document = reports[name]
    page = read(path)
    assert page.urls == []  # no stylesheet, script, image or link to fetch
    assert not re.search(r"url\(\s*['\"]?https?:", path.read_text())
    embedded = json.loads(page.data)
    assert embedded | {"seconds": 0} == document | {"seconds": 0} if name == "tune" else embedded == document
    assert path.stat().st_size < 3_000_000
    for chart in CHARTS[name]:
        drawn = {key: marks for key, marks in page.charts.items() if key.startswith(chart)}
        assert drawn and all(marks > 0 for marks in drawn.values()), (chart, page.charts)


def test_the_scan_report_shows_the_json_figures(reports):
    path, document = reports["scan"]
    trace = document["traces"][0]
    cells = read(path).cells
    assert duration(trace["step_time_us"]) in cells and trace["device"] in cells
    for finding in trace["findings"]:
        for evidence in finding["evidence"]:  # as Perfetto shows it: from the trace's start, its display unit
            assert timestamp(evidence["at_us"], trace["time_unit"]) in cells
    text = path.read_text()
    assert all(f'data-rule="{f["rule_id"]}"' in text for f in trace["findings"])


def test_the_gate_report_shows_each_check_and_what_the_change_is_made_of(reports):
    path, document = reports["gate"]
    cells = read(path).cells
    for check in document["checks"]:
        baseline = figure(check["baseline"], check["unit"])
        assert check["name"] in cells and baseline in cells and check["verdict"] in cells
    (explained,) = document["explanations"]
    assert explained["headline"] in path.read_text()


def test_the_diff_report_lists_the_contributors_of_the_json(reports):
    path, document = reports["diff"]
    cells = read(path).cells
    changed = [r for r in document["diffs"][0]["rows"] if abs(r["contribution_us"]) >= 0.05]
    assert {"ampere_sgemm_128x64_tn", "at::native::index_put_kernel_impl<at::native::OpaqueType<N> > (new)"} <= set(
        cells
    )
    assert len(changed) == 3


def test_the_tune_report_recommends_the_json_best(reports):
    path, document = reports["tune"]
    cells = read(path).cells
    assert all(str(value) in cells for value in document["best"]["knobs"].values())
    assert 'class="shaded"' in path.read_text()  # too few IO tiles and an out-of-memory batch size are hatched


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
@pytest.mark.parametrize("name", REPORTS)
def test_chromium_renders_each_report_with_the_network_off(reports, tmp_path, name):
    from PIL import Image

    path, _ = reports[name]
    dom = chromium(path, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom) == []  # no error, no warning, nothing at all
    shown = _Page()
    shown.feed(dom.stdout)
    assert all(shown.charts.get(chart) for chart in read(path).charts), shown.charts  # every chart drawn
    picture = tmp_path / "shot.png"
    screenshot(path, picture, tmp_path / "profile")
    with Image.open(picture) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000) or []
    assert len(colours) > 20  # text, tables and charts: not a blank page


def test_a_page_that_logs_to_the_console_is_caught(tmp_path):
    """The console check is real: a page whose script fails is seen to."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    assert any("undefinedFunction" in line for line in console_messages(chromium(page, tmp_path / "p", "--dump-dom")))


def test_names_from_the_trace_stay_text(run, tmp_path, write_trace):
    """A kernel named like markup ends nothing: not the embedded data, not a table cell."""
    from conftest import complete, process_name, thread_name

    name = "</script><!-- <b>bold</b>"
    events = [process_name(1, "python"), thread_name(1, 1, "thread 1"), process_name(2, "GPU 0"),
              thread_name(2, 7, "stream 7")]  # fmt: skip
    for i in range(6):
        events += [complete(f"ProfilerStep#{i}", i * 100, 99, 1, 1, "user_annotation"),
                   complete(name, i * 100 + 10, 80, 2, 7, "kernel")]  # fmt: skip
    trace = write_trace({"traceEvents": events}, "markup.json")
    out = tmp_path / "diff.html"
    assert run("diff", trace, trace, "--format", "html", "-o", out).exit_code == 0
    page = read(out)
    document = json.loads(run("diff", trace, trace, "--format", "json").stdout)
    assert json.loads(page.data) == document and document["diffs"][0]["rows"][0]["key"] == name
    assert name in page.cells and "<b>bold</b>" not in out.read_text() and page.urls == []
