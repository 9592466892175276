"""The HTML reports: self-contained, their figures the json format's, and rendered by a real browser.

The browser tests drive Debian's Chromium headless (``.ci/run`` installs it) with the network cut off: the
page loads with no console message, every chart is drawn, and the screenshot is not blank. Without a
Chromium on the machine they skip, saying so.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import CHROMIUM, chromium, console_messages, layout, screenshot
from conftest import DATA, REPO

from perftool.common.units import duration, figure, timestamp

SAMPLES = REPO / "sample_traces"
KINETO = SAMPLES / "gpu_training_kineto.pt.trace.json.gz"
REPORTS = {  # report -> the command writing it as html ({out}) and as json
    "scan": ("scan", KINETO),
    "job": ("scan", SAMPLES / "jobs" / "gpu_ddp_straggler", "--workers", "1"),
    "tune": ("tune", REPO / "examples" / "tune" / "ipu.yaml", "--strategy", "exhaustive", "--no-progress"),
    "gate": ("gate", SAMPLES / "gpu" / "healthy.trace.json.gz",
             SAMPLES / "gpu" / "launch_bound_no_cuda_graphs.trace.json.gz", "--allow-mismatch"),
    "diff": ("diff", DATA / "vocab" / "diff_kineto_before.json.gz", DATA / "vocab" / "diff_kineto_after.json.gz"),
    "real": ("scan", DATA / "real" / "ddp_v100_rank1.json.gz"),  # a real capture: steps numbered from 1009
    "real-amd": ("scan", DATA / "real" / "mi300_resnet_actckpt_ddp8_rank0.json.gz"),  # templated kernel names
    "real-info": ("info", DATA / "real" / "ddp_v100_rank1.json.gz"),  # a real roofline
    "info": ("info", KINETO),
    "job-info": ("info", SAMPLES / "jobs" / "gpu_ddp_straggler", "--workers", "1"),
}  # fmt: skip
CHARTS = {  # report -> the charts it draws (by the start of their names)
    "scan": {"steps", "breakdown"},
    "job": {"ranks", "rank-breakdown", "steps", "breakdown"},
    "tune": {"sensitivity-"},
    "gate": {"steps-trace", "explanation"},
    "diff": {"steps", "contributions"},
    "real": {"steps", "breakdown"},
    "real-amd": {"steps", "breakdown"},
    "real-info": {"steps", "roofline"},
    "info": {"steps"},
    "job-info": {"ranks", "rank-breakdown", "steps", "breakdown"},
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Each report written as html, with the json format's document for the same input."""
    from click.testing import CliRunner

    from perftool.cli.main import cli

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


VOID = {"wbr", "br", "meta", "img", "input", "link", "hr"}  # elements with no end tag


class _Page(HTMLParser):
    """What a test reads off a page: its charts and how many marks each draws, table cells, urls, embedded data."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, int] = {}
        self.cells: list[str] = []
        self.urls: list[str] = []
        self.data = ""
        self._chart: str | None = None
        self._cell: list[str] | None = None  # the text of the table cell or figure being read
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        found = dict(attrs)
        if tag == "figure" and "data-chart" in found:
            self._chart = found["data-chart"]
            self.charts[self._chart] = 0
        elif self._chart and tag in ("rect", "circle", "line", "polyline", "path"):
            self.charts[self._chart] += 1
        self.urls += [value for key, value in attrs if key in ("src", "href") and value]
        if tag == "link" or (tag == "script" and found.get("type") != "application/json"):
            self.urls.append(f"<{tag}>")
        if tag not in VOID:
            self._in.append(tag)
        if tag in ("td", "b"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._chart = None
        if tag in ("td", "b") and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in and self._in[-1] == "script":
            self.data += data


def read(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


@pytest.mark.parametrize("name", REPORTS)
@pytest.mark.slow
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
@pytest.mark.slow
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


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
@pytest.mark.parametrize("width", [800, 1400])
@pytest.mark.parametrize("name", REPORTS)
@pytest.mark.slow
def test_each_report_fits_the_window_and_its_chart_labels_stand_clear(reports, tmp_path, name, width):
    """At a laptop's half screen and a wide one: nothing reaches past the window (a long path or kernel name
    breaks instead of pushing a table's last column off), no chart label is cut off by its chart's edge, and
    no two labels are drawn over one another."""
    path, _ = reports[name]
    found = layout(path, tmp_path / "profile", width)
    assert found["width"] == width and found["scroll_width"] <= width
    assert found["wide"] == []
    assert found["outside"] == []
    assert found["overlapping"] == []


@pytest.mark.slow
def test_the_layout_check_sees_what_it_looks_for(tmp_path):
    """The layout check is real: a table too wide, a label past its chart and two labels on one spot are seen."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    page = tmp_path / "crowded.html"
    page.write_text(
        "<!DOCTYPE html><html><body><table><tr><td>" + "x" * 400 + "</td></tr></table>"
        '<svg viewBox="0 0 200 50" width="200"><text x="10" y="20">one</text><text x="12" y="21">two</text>'
        '<text x="190" y="40">past the edge</text></svg></body></html>'
    )
    found = layout(page, tmp_path / "profile", 800)
    assert any(item.startswith("table") for item in found["wide"]) and found["scroll_width"] > 800
    assert found["outside"] == ["text: past the edge"]
    assert found["overlapping"] == ["text: one | text: two"]


@pytest.mark.slow
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


def test_a_step_chart_is_scaled_to_the_steady_steps_and_numbered_as_the_trace_numbers_them():
    """A warm-up step 100 times the steady ones is drawn off the scale, not made the scale; the y axis has one
    unit and a tick above the data; the x axis carries the steps' own numbers."""
    from perftool.report import svg

    chart = svg.series("steps", "steps", [800_000.0, 7_000.0, 7_400.0, 6_900.0, 7_100.0], 1, [10, 11, 12, 13, 14])
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", chart)
    axis = [t for t in texts if t.endswith(("ms", "µs", " s"))]
    assert axis == ["0 ms", "2 ms", "4 ms", "6 ms", "8 ms"]  # 8 ms: above the slowest steady step, 7.4 ms
    assert {"10", "11", "12", "13", "14", "warm-up", "steady"} <= set(texts)
    (off_scale,) = re.findall(r'<path class="off-scale".*?<title>([^<]*)</title>', chart)
    assert off_scale == "step 10 (warm-up): 800.000 ms"


def test_a_job_report_draws_each_ranks_compute_communication_and_waits_step_by_step(reports):
    path, document = reports["job"]
    chart = re.search(r'<figure class="chart" data-chart="ranks">.*?</figure>', path.read_text(), re.S)[0]
    ranks = document["job"]["ranks"]
    steps = len(ranks[0]["per_step"]["step"])
    cells = re.findall(r"<title>rank \d+, step \d+: ", chart)
    assert len(cells) == 3 * len(ranks) * steps  # a cell per rank, step and panel
    for panel in ("device compute", "communication", "waiting in collectives for other ranks"):
        assert f">{panel}" in chart
    assert re.search(r'font-weight="bold">rank 5<', chart)  # the straggler's row, named as such
    first = ranks[5]["per_step"]
    assert f"rank 5, step {first['step'][0]}: {duration(first['compute_us'][0])} device compute" in chart


def test_the_diff_report_lists_no_idle_cause_without_time(reports):
    path, document = reports["diff"]
    cells = read(path).cells
    remainders = document["diffs"][0]["remainders"]
    empty = [r["name"] for r in remainders if r["baseline_us"] == r["candidate_us"] == 0]
    timed = [r["name"] for r in remainders if max(r["baseline_us"], r["candidate_us"]) >= 0.05]
    assert empty and timed  # the sample has both kinds
    assert not set(empty) & set(cells) and set(timed) <= set(cells)


@pytest.mark.slow
def test_a_job_of_thousands_of_ranks_draws_fewer_steps_of_each(reports):
    """The heat maps of a huge job stay a page a browser opens: at most 60,000 cells a panel, said in the caption."""
    from perftool.report.scan_html import HEAT_CELLS, rank_steps
    from perftool.rules.findings import JobView

    _, document = reports["job"]
    job = JobView.model_validate(document["job"])
    job.ranks = [row.model_copy(update={"rank": i}) for i in range(3000) for row in job.ranks[i % 8 : i % 8 + 1]]
    chart = rank_steps(job)
    drawn = len(re.findall(r"<title>rank \d+, step \d+: ", chart))
    assert drawn == 3 * 3000 * 20 <= 3 * HEAT_CELLS  # 20 steps of each rank's 39
    assert "the first 20 of 39 steps" in chart


def test_a_diff_of_many_names_embeds_its_largest_rows_and_says_how_many_are_left_out(run, tmp_path, write_trace,
                                                                                     monkeypatch):  # fmt: skip
    """A diff of 300k distinct names made a 116 MB page (hardening round 4, D14): the page's data holds each diff's
    rows that contribute most (the cut made small here), the rest counted and summed, and the page says so."""
    from conftest import complete

    from perftool.report import diff_html

    monkeypatch.setattr(diff_html, "EMBEDDED_ROWS", 5)
    traces = []
    for side, slower in (("base", 0.0), ("new", 1.0)):
        events = []
        for step in range(4):
            events.append(complete(f"ProfilerStep#{step}", step * 1000, 990, 1, 1, "user_annotation"))
            events += [complete(f"kernel_{chr(97 + k)}x", step * 1000 + 10 + 40 * k, 20 + slower * k, 2, 7, "kernel")
                       for k in range(12)]  # fmt: skip
        traces.append(write_trace({"traceEvents": events}, f"{side}.json"))
    out = tmp_path / "diff.html"
    assert run("diff", *traces, "--format", "html", "-o", out).exit_code == 0
    document = json.loads(run("diff", *traces, "--format", "json").stdout)
    (full,) = document["diffs"]
    (embedded,) = json.loads(read(out).data)["diffs"]
    assert embedded["rows"] == full["rows"][:5]
    rest = full["rows"][5:]
    assert embedded["rows_left_out"] == {
        "rows": len(rest), "contribution_us": pytest.approx(sum(r["contribution_us"] for r in rest))
    }  # fmt: skip
    assert f"{len(full['rows']) - 5} more are left out" in " ".join(out.read_text().split())


def test_a_count_of_one_reads_in_the_singular():
    """'(1 keys)' in diff's page: counts are written with their noun's number."""
    from perftool.report.diff_html import _unmatched

    assert _unmatched({"events": 3, "keys": 1}, "baseline") == "3 baseline events (1 key)"
    assert _unmatched({"events": 1, "keys": 2}, "candidate") == "1 candidate event (2 keys)"


def test_the_roofline_reads_in_flop_per_second_with_si_prefixes_never_exponents(run, tmp_path):
    """A V100 capture whose slowest ops reach tens of MFLOP/s and whose roofs reach a hundred TFLOP/s: every axis
    label and every dot's title reads as a person writes the figure (100 k, 1 T, 0.01, 1,000), never 1e-07."""
    from perftool.report.svg import flops_per_s

    assert [flops_per_s(v) for v in (1e5, 7.14e7, 4.26e9, 1.25e14, 1e15)] == [
        "100 k", "71.4 M", "4.26 G", "125 T", "1 P",
    ]  # fmt: skip
    page = tmp_path / "info.html"
    assert run("info", DATA / "real" / "ddp_v100_rank1.json.gz", "--format", "html", "-o", page).exit_code == 0
    chart = page.read_text().split('data-chart="roofline"', 1)[1].split("</figure>", 1)[0]
    labels = re.findall(r'text-anchor="(?:end|middle)">([^<]*)</text>', chart)
    assert "100 k" in labels and "1 P" in labels and "1,000" in labels and "FLOP/s" in chart
    assert not re.search(r"\de-\d", chart), re.search(r".{40}\de-\d.{10}", chart)


def test_a_heat_map_shades_by_size_from_zero_so_close_figures_look_alike():
    """8.81 and 8.83 ms differ by 0.2%: their cells are all but the same shade, not the darkest and the lightest."""
    from perftool.report.svg import heat_maps

    chart = heat_maps("waits", "compute per step", ["rank 0", "rank 1"], [1, 2],
                      [("compute", [[8810.0, 8810.0], [8830.0, 8830.0]])])  # fmt: skip
    fills = re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" height="[^"]+" fill="#([0-9a-f]{6})"><title>', chart)
    low, high = (tuple(int(fill[i : i + 2], 16) for i in (0, 2, 4)) for fill in (fills[0], fills[-1]))
    assert len(fills) == 4 and max(abs(a - b) for a, b in zip(low, high)) <= 3
    assert "0 ms" in chart or "0 µs" in chart  # the scale's key starts at zero


def test_a_mangled_kernel_name_of_thousands_of_characters_is_shortened_in_tables_and_whole_in_json(run, write_trace):
    """A templated kernel whose signature runs to 2,500 characters: the HTML and Markdown tables show it as people
    read it, cut to 160 characters (the HTML whole on hover), the JSON keeps every character."""
    kernel = "void at::native::reduce_kernel<" + ", ".join(["at::native::Functor<float>"] * 90) + ">(float*, int)"
    events = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    for step in range(8):
        events += [
            {"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation", "pid": 1, "tid": 1,
             "ts": step * 1000, "dur": 999},
            {"ph": "X", "name": kernel, "cat": "kernel", "pid": 0, "tid": 7, "ts": step * 1000 + 100, "dur": 500,
             "args": {"grid": [10, 1, 1], "block": [128, 1, 1]}},
        ]  # fmt: skip
    path = write_trace({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": events})
    assert len(kernel) > 2_400
    document = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)
    (grid,) = [f for f in document["traces"][0]["findings"] if f["rule_id"] == "PT019"]
    assert {e["name"] for e in grid["evidence"]} == {kernel}
    page = run("scan", path, "--format", "html", "--fail-on", "never").stdout
    cells = re.findall(r'<td class="wrap" title="([^"]*)">(.*?)</td>', page)
    shown = [(title, text) for title, text in cells if title.startswith("void at::native::reduce_kernel")]
    assert shown and all(len(html.unescape(text.replace("<wbr>", ""))) == 160 for _, text in shown)
    assert all(html.unescape(title) == kernel for title, _ in shown)
    markdown = run("scan", path, "--format", "markdown", "--fail-on", "never").stdout
    rows = [line for line in markdown.splitlines() if "reduce" in line and line.startswith("|")]
    assert rows and all(len(line) < 1_000 for line in rows) and kernel not in markdown  # two names of 160 at most
