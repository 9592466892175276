"""``scan --format perfetto``: the capture's own events unchanged, and perftool's findings on tracks of their own,
in the Chrome Trace Event Format that Perfetto UI and chrome://tracing open."""

from __future__ import annotations

import gzip
import html
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import DATA, REPO

from perftool.analysis.graph_captures import CAPTURES_FROM
from perftool.dialects.hlo import PROGRAMS_FROM
from perftool.dialects.vocabulary import FINDINGS_CATEGORY, FINDINGS_PROCESS, MERGED_RANK_PIDS
from perftool.report.scan_perfetto import PID, Placement, _placed

REAL = DATA / "real"
NCCL = REAL / "nccl_a100_rank.json.gz"


def annotate(run, trace, out) -> dict:
    result = run("scan", trace, "--format", "perfetto", "-o", out, "--fail-on", "never")
    assert result.exit_code == 0, result.output
    assert f"perftool: wrote {out}" in result.stderr
    opener = gzip.open if str(out).endswith(".gz") else open
    with opener(out, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def findings(run, trace) -> tuple[list[tuple], dict]:
    """A scan's findings, and its metrics."""
    document = json.loads(run("scan", trace, "--format", "json", "--fail-on", "never").stdout)
    (scanned,) = document["traces"]
    return [(f["fingerprint"], f["severity"], f["impact"], f["message"]) for f in scanned["findings"]], scanned[
        "metrics"
    ]


def ours(event: dict) -> bool:
    return event.get("cat") == FINDINGS_CATEGORY or event.get("pid") == PID


def canonical(events: list[dict]) -> Counter:
    return Counter(json.dumps(event, sort_keys=True) for event in events)


@pytest.fixture(scope="module")
def annotated(tmp_path_factory):
    from click.testing import CliRunner

    from perftool.cli.main import cli

    out = tmp_path_factory.mktemp("perfetto") / "annotated.json.gz"
    args = ["scan", str(NCCL), "--format", "perfetto", "-o", str(out), "--fail-on", "never"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    return out, json.loads(gzip.decompress(out.read_bytes()))


def test_the_capture_s_own_events_and_top_level_keys_are_kept_unchanged(annotated):
    _, document = annotated
    original = json.loads(gzip.decompress(NCCL.read_bytes()))
    kept = [event for event in document["traceEvents"] if not ours(event)]
    assert canonical(kept) == canonical(original["traceEvents"])
    assert {k: v for k, v in document.items() if k != "traceEvents"} == {
        k: v for k, v in original.items() if k != "traceEvents"
    }


def test_each_occurrence_is_a_slice_over_what_it_blames_with_the_finding_in_its_args(run, annotated):
    _, document = annotated
    report = json.loads(run("scan", NCCL, "--format", "json", "--fail-on", "never").stdout)["traces"][0]
    slices = [e for e in document["traceEvents"] if e.get("pid") == PID and e["ph"] == "X"]
    for finding in report["findings"]:
        drawn = [s for s in slices if s["args"].get("fingerprint") == finding["fingerprint"]]
        assert sorted((s["ts"], s["dur"]) for s in drawn) == sorted(
            (e["ts_us"], e["dur_us"]) for e in finding["evidence"]
        )
        assert all(s["name"].startswith(f"{finding['rule_id']} {finding['rule_name']}") for s in drawn)
        assert {(s["args"]["message"], s["args"]["fix"], s["args"]["gain"]) for s in drawn} == {
            (finding["message"], finding["fix"]["text"], finding["gain"]["text"])
        }
    names = {e["args"].get("name") for e in document["traceEvents"] if e["ph"] == "M" and e.get("pid") == PID}
    assert FINDINGS_PROCESS in names and "steady window and steps" in names
    steps = [s for s in slices if s["name"].startswith("steady step ")]
    assert len(steps) == report["steps"] and [s["dur"] for s in steps] == report["step_durations_us"]


def test_an_arrow_leads_from_an_occurrence_to_the_trace_event_it_names(annotated):
    _, document = annotated
    events = document["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s" and ours(e)}
    ends = {e["id"]: e for e in events if e["ph"] == "f" and ours(e)}
    assert starts and starts.keys() == ends.keys()
    spans = {(e["pid"], e["tid"], e["ts"]) for e in events if e.get("ph") == "X" and not ours(e)}
    for flow, end in ends.items():
        assert end["bp"] == "e" and (end["pid"], end["tid"], end["ts"]) in spans  # binds to the very event
        assert starts[flow]["pid"] == PID


def test_the_format_s_documented_fields_and_nesting_hold(annotated):
    """Every event of perftool's process has the fields the Trace Event Format requires of its phase, and the slices
    of one thread nest (none overlaps another only in part), as viewers draw them."""
    _, document = annotated
    mine = [e for e in document["traceEvents"] if ours(e)]
    for event in mine:
        assert {"ph", "pid", "tid"} <= event.keys()
        assert {"X": {"name", "ts", "dur"}, "M": {"name", "args"}, "s": {"id", "ts"}, "f": {"id", "ts", "bp"}}[
            event["ph"]
        ] <= event.keys()
    by_thread: dict[int, list[tuple[float, float]]] = {}
    for event in mine:
        if event["ph"] == "X":
            by_thread.setdefault(event["tid"], []).append((event["ts"], event["ts"] + event["dur"]))
    for spans in by_thread.values():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda span: (span[0], -span[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], "slices on one thread overlap in part"
            open_ends.append(end)


@pytest.mark.parametrize(
    "capture",
    [
        NCCL,
        REAL / "jax08_mi300x_attention_opbyop.trace.json.gz",  # its event list ends with an empty {}
        REAL / "mi300_resnet_actckpt_ddp8_rank0.json.gz",
        REAL / "rocm_mi250_minitoy.json.gz",
    ],
)
def test_a_scan_of_the_annotated_trace_finds_what_the_original_gave(run, tmp_path, capture):
    out = tmp_path / "annotated.json"
    annotate(run, capture, out)
    assert findings(run, out) == findings(run, capture)


def test_a_trace_written_as_a_bare_array_is_annotated_as_an_object(run, tmp_path, write_trace):
    """torch_npu's trace_view.json is a JSON array: the annotated trace is an object holding its events."""
    events = json.loads(gzip.decompress((REAL / "sglang_mi300x_qwen3_8b_decode_window.json.gz").read_bytes()))
    path = write_trace(events["traceEvents"], "bare.json")
    document = annotate(run, path, tmp_path / "annotated.json")
    assert canonical([e for e in document["traceEvents"] if not ours(e)]) == canonical(events["traceEvents"])
    assert findings(run, tmp_path / "annotated.json") == findings(run, path)


@pytest.mark.parametrize("layout", ["metadata first", "metadata last", "read whole"])
def test_a_bare_infinity_in_the_capture_is_written_as_null_so_the_annotated_trace_is_json(run, tmp_path, layout):
    """perftool reads a bare ``inf`` (Kineto's zero-length copies once wrote one) as a missing value; the annotated
    copy writes it so, for viewers whose reader is strict JSON (``JSON.parse``): copied as the events stream, with the
    document's other keys (a NaN among them) before or after them, or written back from the whole document where its
    layout sends the reader there (its events' key spelt with an escape), a name with a surrogate alone kept."""
    document = json.loads(gzip.decompress(NCCL.read_bytes()))
    events = document["traceEvents"]
    copies = [i for i, e in enumerate(events) if e.get("cat") == "gpu_memcpy"]
    for i in copies[:3]:
        events[i]["args"]["memory bandwidth (GB/s)"] = float("inf")
    events[copies[3]]["args"]["note"] = "half a pair: \ud800"
    if layout == "metadata first":
        document = {"note": float("nan"), **document}
    else:
        document["note"] = float("nan")
    written = json.dumps(document)  # Python's json writes Infinity and NaN bare
    if layout == "read whole":
        written = written.replace('"traceEvents"', '"trace\\u0045vents"')
    path = tmp_path / "inf.json"
    path.write_text(written)
    assert b"Infinity" in path.read_bytes() and b"\\ud800" in path.read_bytes()
    out = tmp_path / "annotated.json"
    result = run("scan", str(path), "--format", "perfetto", "-o", str(out), "--fail-on", "never")
    assert result.exit_code == 0, result.output

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    annotated = json.loads(out.read_text(), parse_constant=refuse)
    kept = [e for e in annotated["traceEvents"] if not ours(e)]
    assert len(kept) == len(events) and annotated["note"] is None
    assert [kept[i]["args"]["memory bandwidth (GB/s)"] for i in copies[:3]] == [None] * 3
    assert findings(run, out) == findings(run, path)


def test_files_a_trace_names_that_the_system_cannot_look_up_are_not_there(run, tmp_path, write_trace):
    """An annotated trace names the files it was read with (graph captures, an XSpace's programs); names too long
    for the file system, or holding a NUL byte, name no file: the annotation is written, not refused as if its own
    output could not be."""
    document = json.loads(gzip.decompress(NCCL.read_bytes()))
    document[CAPTURES_FROM] = [str(tmp_path / ("x" * 300)), "a\x00b"]
    document[PROGRAMS_FROM] = str(tmp_path / ("y" * 300))
    out = tmp_path / "annotated.json"
    annotated = annotate(run, write_trace(document, "named.json"), out)
    assert len([e for e in annotated["traceEvents"] if not ours(e)]) == len(document["traceEvents"])


def test_names_from_the_trace_are_data(run, tmp_path, write_trace):
    hostile = 'k"</script><b>\\u0000'
    events = [
        {"ph": "X", "name": hostile, "cat": "kernel", "pid": 0, "tid": 7, "ts": 10 + 100 * i, "dur": 50}
        for i in range(5)
    ]
    document = annotate(run, write_trace({"traceEvents": events}), tmp_path / "annotated.json")
    assert hostile in {e.get("name") for e in document["traceEvents"]}


def test_a_job_opens_as_one_timeline_on_the_reference_rank_s_clock(run, tmp_path):
    """The emulated straggler job: eight ranks whose clocks differ by up to 768 ms. Merged, every rank's all-reduces
    end at one instant, as collectives do; each rank's processes carry its name and offset; the straggler's finding
    is drawn on that clock."""
    job = REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler"
    report = json.loads(run("scan", job, "--format", "json", "--fail-on", "never").stdout)
    document = annotate(run, job, tmp_path / "job.json.gz")
    offsets = {int(rank): offset for rank, offset in report["job"]["alignment"]["offsets_us"].items()}
    assert max(offsets.values()) - min(offsets.values()) > 700_000  # the clocks really do differ
    ends: dict[int, list[float]] = {}
    for event in document["traceEvents"]:
        if event.get("ph") == "X" and "AllReduce" in event["name"] and not ours(event):
            ends.setdefault(event["pid"] // MERGED_RANK_PIDS - 1, []).append(event["ts"] + event["dur"])
    assert sorted(ends) == list(range(8))
    first = [sorted(ends[rank])[:20] for rank in range(8)]
    assert all(abs(a - b) < 0.01 for rank in range(1, 8) for a, b in zip(first[0], first[rank]))
    named = [e for e in document["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name" and not ours(e)]
    assert {(e["args"]["rank"], e["args"]["clock_offset_us"]) for e in named} == set(offsets.items())
    assert all(e["args"]["name"].startswith(f"rank {e['args']['rank']} · ") for e in named)
    straggler = [e for e in document["traceEvents"] if ours(e) and e["ph"] == "X" and e["name"].startswith("PT013")]
    (finding,) = report["job"]["findings"]
    shift = offsets[finding["values"]["rank"]]
    assert sorted(e["ts"] for e in straggler) == sorted(item["ts_us"] - shift for item in finding["evidence"])
    original = sum(len(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]) for path in job.glob("rank*"))
    assert len([e for e in document["traceEvents"] if not ours(e)]) == original


@pytest.mark.parametrize(
    "trace",
    [REAL / "jax08_mi300x_attention_opbyop.xplane.pb", REAL / "torch_npu_db_l2_job" / "rank0_ascend_pt"],
    ids=["XSpace", "torch_npu db export"],
)
def test_a_trace_that_is_not_json_is_written_as_read_and_its_scan_finds_the_same(run, tmp_path, trace):
    """An XSpace or a db export holds no JSON to copy: its events are written as perftool reads them, with what its
    reader found beside them (the device, msprof's kernels), and the annotated file scans as the original does."""
    document = annotate(run, trace, tmp_path / "annotated.json.gz")
    theirs = [e for e in document["traceEvents"] if not ours(e)]
    assert theirs and all(isinstance(e["pid"], int | str) and e["ph"] in ("X", "M", "s", "f") for e in theirs)
    assert document["deviceProperties"]
    assert findings(run, tmp_path / "annotated.json.gz") == findings(run, trace)


def test_a_trace_annotated_again_is_annotated_once(run, tmp_path):
    first = annotate(run, REAL / "rocm_mi250_minitoy.json.gz", tmp_path / "once.json")
    again = annotate(run, tmp_path / "once.json", tmp_path / "twice.json")
    assert canonical(again["traceEvents"]) == canonical(first["traceEvents"])


def test_standard_input_is_refused_before_a_byte_is_written(run):
    result = run("scan", "-", "--format", "perfetto", input=gzip.decompress(NCCL.read_bytes()))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        "perftool: error: -: its events are copied from its file, and a stream is read only once: save it first\n"
    )


def _unaligned_job(folder: Path) -> Path:
    """Two ranks that trace no collective: neither can be put on the other's clock."""
    folder.mkdir()
    for rank in (0, 1):
        shutil.copy(REAL / "rocm_mi250_minitoy.json.gz", folder / f"rank{rank}.json.gz")
    return folder


@pytest.mark.parametrize("scanned", [NCCL, REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler", "unaligned job"])
def test_the_html_report_names_the_track_each_finding_is_drawn_on(run, tmp_path, scanned):
    """What the HTML report says to look for in Perfetto is a track the annotated trace of the same scan has; a rank
    not aligned says so in both."""
    unaligned = scanned == "unaligned job"
    scanned = _unaligned_job(tmp_path / "job") if unaligned else scanned
    page = run("scan", scanned, "--format", "html", "--fail-on", "never").stdout
    said = re.findall(r"In the annotated trace: the track “([^”]+)” of “perftool findings”", page)
    named = {html.unescape(name) for name in said}  # the page's text, as a reader sees it
    document = annotate(run, scanned, tmp_path / "annotated.json")
    tracks = {e["args"]["name"] for e in document["traceEvents"] if ours(e) and e["name"] == "thread_name"}
    assert named and named <= tracks
    assert all(("(its own clock: not aligned): " in name) == unaligned for name in named)


def test_a_rank_s_time_written_as_a_string_moves_to_the_nanosecond_and_stays_a_string():
    """torch_npu writes microseconds since the epoch to the nanosecond as strings (1.7e15: a double keeps a quarter
    microsecond there): moved onto the job's clock, they keep every digit; times written as numbers move as numbers;
    a string that is no number, or no finite one, is left as written."""
    place = Placement(rank=1, offset_us=12.345678, aligned_on=4)
    moved = [_placed({"ph": "X", "pid": 3, "ts": ts, "dur": 1}, place)["ts"] for ts in
             ("1700000000123456.789", "1700000000123456", 1_700_000_000_123.5, "soon", "NaN")]  # fmt: skip
    assert moved == ["1700000000123444.443", "1700000000123443.654", 1_700_000_000_123.5 - 12.345678, "soon", "NaN"]
