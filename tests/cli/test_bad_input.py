"""Bad input: exit code 2 and one line naming the file and the problem, never a traceback."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import TORCH_FIXTURE, complete, error_line

from perftool.common.errors import TraceError
from perftool.pipeline.read import load_trace

GOOD = {"traceEvents": [complete("a", 1, 2), complete("b", 4, 2)]}

CASES = {
    "not-json": (b"this is not json", "text, not a JSON trace: it begins 'this is not json'"),
    "html": (b"<!DOCTYPE html>\n<html><body>memory</body></html>", "an HTML page, not a JSON trace: it begins"),
    "not-json-inside": (b'{"traceEvents": [x]}', "not valid JSON at line 1, column 18: invalid character"),
    "truncated-json": (json.dumps(GOOD).encode()[:-12], "truncated JSON"),
    "garbage-midway": (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2},\n {"ph": ]}', "not valid JSON at line 2"),
    "bad-utf8-in-metadata-key": (b'{"a\xff": 1, "traceEvents": []}', "not valid UTF-8 at line 1, column 4: byte 0xff"),
    "bad-utf8-in-metadata-value": (b'{"a": "\xff", "traceEvents": []}', "not valid UTF-8 at line 1, column 8"),
    "bad-utf8-in-counter-args": (
        b'[{"ph": "C", "name": "mem", "ts": 1, "pid": 1, "tid": 1, "args": {"\xff": 3}}]',
        "event 0: counter 'args' is not valid JSON in UTF-8",
    ),
    "number": (b"42", "not a trace"),
    "string": (b'"trace"', "not a trace"),
    "object-without-events": (b'{"events": []}', "without a 'traceEvents' array"),
    "record-of-files": (  # TraceLens's execution_details.json, beside the capture traces it lists
        b'[\n  {\n    "file": "capture_trace_rank_0.json.gz",\n    "batch_size": 1,\n    "mode": "FULL"\n  }\n]',
        "not a trace: it holds 1 object and no trace event (none has a phase 'ph', a name or a time 'ts')",
    ),
    "execution-trace": (  # torch.profiler.ExecutionTraceObserver's document, as torch 2.14 writes it, nodes left out
        b'{"schema": "1.1.1-chakra.0.0.4", "pid": 11835, "time": "2026-11-30 13:32:34", "start_ts": 889295,'
        b' "nodes": [], "finish_ts": 889342}',
        "not a trace: PyTorch's execution trace (ExecutionTraceObserver), the ops' graph without their timing; "
        "scan the profiler's trace written with it (*.pt.trace.json)",
    ),
    "perftool-report": (
        b'{"schema": "perftool.findings/1", "tool": {"name": "perftool"}, "traces": []}',
        "not a trace: perftool's own report (schema perftool.findings/1); scan the trace it was made from",
    ),
    "sarif-log": (
        b'{"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": []}',
        "not a trace: a report (schema https://json.schemastore.org/sarif-2.1.0.json); scan the trace it was made from",
    ),
    "memory-timeline": (  # torch.profiler's export_memory_timeline, as torch 2.14 writes it (its raw .json.gz alike)
        b"[[1796047838145560, 1796047838145688], [[32768, 0, 0], [40960, 256, 0]]]",
        "not a trace: an array of arrays, not of events (torch.profiler's export_memory_timeline writes one); scan "
        "the profiler's trace written with it (*.pt.trace.json)",
    ),
    "torch-npu-run-record": (  # profiler_info_0.json, its fields as torch_npu 2.x writes them, their values left out
        b'{"config": {}, "start_info": {}, "end_info": {}, "rank_id": 0}',
        "not a trace: torch_npu's record of the profiler's run (profiler_info_N.json); scan the rank's directory it "
        "belongs to (…_ascend_pt), or its ASCEND_PROFILER_OUTPUT/trace_view.json",
    ),
    "torch-npu-environment": (b'{"ENV_VARIABLES": {"ASCEND_LAUNCH_BLOCKING": ""}}', "(profiler_metadata.json); scan"),
    "msprof-communication": (  # communication.json: per step, the collectives and the point-to-point ops
        b'{"step50": {"p2p": {}, "collective": {"hcom_allReduce__271_0_1@1": {}}}}',
        "not a trace: msprof's summary of the collectives per step (communication.json or communication_matrix.json)",
    ),
    "objects-of-other-fields": (b'{"step50": {"ops": {}}}', "not a trace: a JSON object without a 'traceEvents' array"),
    "events-not-a-list": (b'{"traceEvents": {"ph": "X"}}', "not a trace"),
    "event-not-an-object": (b'{"traceEvents": [1, 2]}', "event 0"),
    "ts-wrong-type": (json.dumps([complete("a", 1, 1), complete("b", True, 1)]).encode(), "event 1, field 'ts'"),
    "name-wrong-type": (json.dumps([complete(5, 1, 1)]).encode(), "event 0, field 'name'"),
    "pid-wrong-type": (json.dumps([complete("a", 1, 1, pid=[1])]).encode(), "event 0, field 'pid'"),
    "ts-not-numeric-string": (
        json.dumps([complete("a", 1, 1), complete("b", "soon", 1)]).encode(),
        "event 1, field 'ts': expected a number",
    ),
    "ts-string-of-non-ascii-digits": (
        json.dumps([complete("a", "1", 1), complete("b", "١٢", 1)]).encode(),
        "event 1, field 'ts': expected a number, got '١٢'",
    ),
    "ts-string-with-underscore": (
        json.dumps([complete("a", "1", 1), complete("b", "1_0", 1)]).encode(),
        "event 1, field 'ts': expected a number, got '1_0'",
    ),
    "ts-string-with-spaces": (json.dumps([complete("a", " 1 ", 1)]).encode(), "event 0, field 'ts': expected a number"),
    "ts-string-empty": (json.dumps([{"ts": ""}]).encode(), "event 0, field 'ts': expected a number, got ''"),
    "ts-string-empty-after-a-number": (
        json.dumps([complete("a", "1", 1), complete("b", "", 1)]).encode(),
        "event 1, field 'ts': expected a number, got ''",
    ),
    "dur-string-infinite": (
        json.dumps([complete("a", "1", "inf")]).encode(),
        "event 0, field 'dur': expected a number, got 'inf'",
    ),
    "missing-ts": (json.dumps([complete("a", 1, 1), {"ph": "X", "name": "b", "dur": 1}]).encode(), "event 1: missing"),
    "missing-dur": (json.dumps([{"ph": "X", "name": "b", "ts": 1}]).encode(), "without a finite 'dur'"),
    "negative-duration": (
        json.dumps([complete("a", 1, 1), complete("b", 5, -3)]).encode(),
        "event 1: negative duration -3",
    ),
    "absurd-duration": (
        json.dumps([complete("a", 1, 1), complete("b", 5, 1e300)]).encode(),
        "event 1: duration 1e+300 µs is longer than any run",
    ),
    "absurd-timestamp": (json.dumps([complete("a", 1e29, 1)]).encode(), "event 0: 'ts' 1e+29 µs is beyond any clock"),
    "absurd-counter-timestamp": (
        json.dumps(
            [{"ph": "C", "name": "m", "pid": 1, "tid": 1, "ts": -2e17, "args": {"v": 1}}, complete("a", 1, 1)]
        ).encode(),
        "event 0: 'ts' -2e+17 µs is beyond any clock",
    ),
    "counter-value-past-any-double": (
        b'[{"ph": "C", "name": "m", "pid": 1, "tid": 1, "ts": 1, "args": {"v": 1, "w": 1' + b"0" * 400 + b"}}]",
        "event 0: counter 'w' is a number beyond any double",
    ),
    "counter-exponent-past-any-double": (
        b'[{"ph": "C", "name": "m", "pid": 1, "tid": 1, "ts": 1, "args": {"v": 1, "x": 1e999}}]',
        "event 0: counter 'x' is a number beyond any double",
    ),
    "end-without-begin": (
        json.dumps(
            [
                {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1},
                {"ph": "E", "pid": 1, "tid": 1, "ts": 2},
                {"ph": "E", "pid": 1, "tid": 1, "ts": 3},
            ]
        ).encode(),
        "event 2: 'E' (end) without a matching 'B'",
    ),
    "empty-array": (b"[]", "empty trace"),
    "empty-events": (b'{"traceEvents": []}', "empty trace"),
    "only-metadata": (
        json.dumps([{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}}]).encode(),
        "only metadata",
    ),
    "not-utf8": (
        b'[{"ph": "X", "name": "ok", "ts": 1, "dur": 1},\n {"ph": "X", "name": "\xff\xfe", "ts": 2, "dur": 1}]',
        "not valid UTF-8 at line 2, column 23: byte 0xff",
    ),
    "not-utf8-after-valid-accent": (
        b'[{"ph": "X", "name": "caf\xc3\xa9", "ts": 1, "dur": 1},\n {"name": "x\xc3(", "ts": 2}]',
        "not valid UTF-8 at line 2, column 13: byte 0xc3",
    ),
    "empty-file": (b"", "empty file"),
    "whitespace-file": (b"  \n ", "empty file"),
}


def _check_one_line(result, path, expected):
    assert error_line(result, expected).startswith(f"perftool: error: {path}: ")


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_trace_is_exit_2_with_one_line(write_trace, run, case):
    data, expected = CASES[case]
    path = write_trace(data, f"{case}.json")
    _check_one_line(run("info", path), path, expected)


@pytest.mark.parametrize("case", ["truncated-json", "ts-wrong-type", "negative-duration", "end-without-begin"])
def test_bad_gzipped_trace_reports_the_same(write_trace, run, case):
    data, expected = CASES[case]
    path = write_trace(data, f"{case}.json.gz")
    _check_one_line(run("info", path), path, expected)


def test_bad_utf8_in_a_track_name_leaves_the_track_unnamed(write_trace, run):
    events = b'[{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "\xff"}},'
    events += b' {"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]'
    result = run("info", write_trace(events, "names.json"), "--format", "json")
    assert result.exit_code == 0
    (track,) = json.loads(result.stdout)["tracks"]
    assert not track.get("thread_name")


def test_a_surrogate_escaped_alone_in_a_name_reads_as_the_replacement_character(write_trace, run):
    """``\\ud800`` alone is JSON the viewers open: the trace is read, not refused, the name with U+FFFD in its place."""
    events = rb'[{"ph": "X", "name": "a\ud800b", "cat": "kernel", "ts": 1, "dur": 2, "pid": 1, "tid": 7}]'
    result = run("info", write_trace(events, "surrogate.json"), "--format", "json")
    assert result.exit_code == 0, result.output
    assert [op["name"] for op in json.loads(result.stdout)["top_ops"]["ops"]] == ["a\ufffdb"]


def test_truncated_gzip(write_trace, run, tmp_path):
    whole = gzip.compress(json.dumps(GOOD).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    _check_one_line(run("info", path), path, "truncated gzip")


def test_corrupt_gzip(run, tmp_path):
    whole = bytearray(gzip.compress(json.dumps(GOOD).encode() * 50))
    whole[20:40] = b"\xff" * 20
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(bytes(whole))
    _check_one_line(run("info", path), path, "corrupt gzip")


def test_gzip_whose_checksum_does_not_match(run, tmp_path):
    whole = bytearray(gzip.compress(json.dumps(GOOD).encode()))
    whole[-8] ^= 0xFF  # the CRC-32 of the data, in the gzip trailer
    path = tmp_path / "crc.json.gz"
    path.write_bytes(bytes(whole))
    _check_one_line(run("info", path), path, "corrupt gzip data")


def test_missing_file(run, tmp_path):
    path = tmp_path / "nowhere.json"
    _check_one_line(run("info", path), path, "no such file")


def test_directory(run, tmp_path):
    _check_one_line(run("info", tmp_path), tmp_path, "a directory with no trace files")


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("report1.nsys-rep", bytes(64), "report1.nsys-rep is an Nsight Systems report, which perftool does not read"),
        ("profile.zip", b"PK\x03\x04" + bytes(60), "profile.zip is a zip archive, not a trace: extract it (unzip"),
        (  # msprof's summary, as a directory of its tables holds it (copied out of the profiler's output)
            "step_trace_time.csv",
            b"Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free\n,8827,81516,4001,85517,259\n",
            "step_trace_time.csv is a CSV table, not a trace: profilers write their summaries as tables beside",
        ),
    ],
)
def test_a_directory_without_traces_names_what_it_holds_in_their_place(run, tmp_path, name, content, said):
    (tmp_path / "notes.txt").write_text("run 3")
    (tmp_path / name).write_bytes(content)
    _check_one_line(run("scan", tmp_path), tmp_path, f"in it or in its folders; {said}")


def test_library_raises_trace_error_with_event_index(write_trace):
    path = write_trace([complete("a", 1, 1)] * 3 + [complete("b", 1, -1)])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert info.value.path == str(path) and "event 3" in info.value.problem


def test_errors_in_worker_pieces_name_the_global_event(tmp_path, monkeypatch):
    from perftool.trace import decode

    monkeypatch.setattr(decode, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(decode, "PIECE_BYTES", 1024)
    events = [complete(f"op{i}", i, 1) for i in range(400)]
    events[333]["ts"] = "later"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events, indent=1))
    for workers in (1, 2):
        with pytest.raises(TraceError, match="event 333, field 'ts'"):
            load_trace(path, workers=workers)


@pytest.mark.parametrize(
    ("codec", "named"),
    [
        ("utf-16", "UTF-16LE"),  # with its byte-order mark, as Windows PowerShell's > writes it
        ("utf-16-le", "UTF-16LE"),  # without one
        ("utf-16-be", "UTF-16BE"),
        ("utf-32", "UTF-32LE"),
        ("utf-32-be", "UTF-32BE"),
    ],
)
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_trace_in_utf16_or_utf32_is_one_line_saying_how_to_convert_it(run, write_trace, codec, named, gzipped):
    text = json.dumps({"traceEvents": [complete("a", 1, 2)]})
    path = write_trace(text.encode(codec), "wide.json.gz" if gzipped else "wide.json")
    error_line(run("scan", path), f"{named} text", f"convert it first (iconv -f {named} -t UTF-8)")


def test_bytes_that_open_no_json_are_not_taken_for_utf16(run, write_trace):
    """A NUL beside a byte that opens no JSON value (binary data) is no UTF-16 text: the error is the syntax's."""
    error_line(run("scan", write_trace(b"\x01\x00\x02\x03 garbage")), "not valid JSON at line 1, column 1")


def test_the_longest_plausible_values_still_load(write_trace):
    """A Unix-time timestamp in µs and a 100-day span are real; only values past the bounds are refused."""
    trace = load_trace(write_trace([complete("a", 1.7e15, 8.6e12)]))
    assert trace.ts[0] == 1.7e15 and trace.dur[0] == 8.6e12


YAML_FILES = {  # kind of file -> how a command reads it (the file at `path`)
    "config": lambda path: ("emulate", path),
    "budget": lambda path: ("gate", TORCH_FIXTURE, "--budget", path),
    "project": lambda path: ("scan", TORCH_FIXTURE, "--config", path),
    "rule": lambda path: ("scan", TORCH_FIXTURE, "--rules", path.parent),
}


@pytest.mark.parametrize("kind", YAML_FILES)
def test_a_control_character_in_any_yaml_file_is_one_line_with_its_position(run, tmp_path, kind):
    path = tmp_path / "rules" / "file.yaml"
    path.parent.mkdir()
    path.write_bytes(b"device: npu\nname: \x1b[31mred\n")
    line = error_line(run(*YAML_FILES[kind](path)), f"{path}:2:7", "control character U+001B")
    assert "\x1b" not in line


@pytest.mark.parametrize("kind", YAML_FILES)
def test_a_key_given_twice_in_any_yaml_file_names_the_key_and_both_lines(run, tmp_path, kind):
    path = tmp_path / "rules" / "file.yaml"
    path.parent.mkdir()
    path.write_text("device: npu\nfail_on: error\ndevice: gpu\n")
    error_line(run(*YAML_FILES[kind](path)), f"{path}:3: key 'device' is given twice (lines 1 and 3)")


@pytest.mark.parametrize("kind", YAML_FILES)
def test_a_yaml_file_named_longer_than_the_system_allows_is_one_line(run, tmp_path, kind):
    """A name of 300 characters (past the 255 a Linux file system takes for one): the system refuses to look it
    up, and the command says so in one line, whichever file it is."""
    path = tmp_path / ("x" * 300) / "file.yaml" if kind == "rule" else tmp_path / ("x" * 300 + ".yaml")
    error_line(run(*YAML_FILES[kind](path)), "x" * 300, "File name too long")


def test_yaml_merge_keys_may_repeat_but_merged_keys_may_not_clash_with_given_ones():
    from perftool.common.yamlfile import parse_yaml

    document, _ = parse_yaml("a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: *a\n  <<: *b\n  z: 3\n", "inline.yaml")
    assert document["c"] == {"x": 1, "y": 2, "z": 3}


EVIL = "\x1b[31mred\x1b[0m\x00 \u202egnp.exe [bold]markup[/bold] <b>html</b>"


def _evil_trace():
    """A host-bound Kineto trace whose host op, and so the finding's message and evidence, carry EVIL."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": EVIL}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    for i in range(6):
        t = i * 1000.0
        events += [
            complete(f"ProfilerStep#{i}", t, 999, cat="user_annotation"),
            complete(EVIL, t + 5, 500, cat="cpu_op"),
            complete("kernel", t + 520, 470, pid=0, tid=7, cat="kernel"),
        ]
    return {"schemaVersion": 1, "traceEvents": events}


@pytest.mark.parametrize("fmt", ["text", "markdown", "github"])
def test_names_from_the_trace_cannot_reach_the_terminal_or_ci_raw(run, write_trace, fmt):
    output = run("scan", write_trace(_evil_trace()), "--format", fmt, "--fail-on", "never").stdout
    assert "red" in output and "gnp.exe" in output  # the name is shown...
    for raw in ("\x1b", "\x00", "\u202e"):  # ...but none of its control or bidi characters
        assert raw not in output
    assert "\\x1b" in output and "\\u202e" in output
    if fmt == "markdown":
        assert "<b>" not in output and "\\<b\\>html\\</b\\>" in output  # Markdown's escapes: shown as written
    if fmt == "text":
        assert "[bold]markup[/bold]" in output  # rich markup stays literal text


def test_info_shows_track_and_op_names_escaped(run, write_trace):
    output = run("info", write_trace(_evil_trace())).stdout
    assert "\x1b" not in output and "\u202e" not in output and "\\x1b[31mred" in output


def test_bytes_after_the_gzip_stream_are_called_trailing_data(run, tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(GOOD).encode()) + b"garbage after the stream")
    error_line(run("scan", path), str(path), "trailing data after the gzip stream")


def test_a_loop_of_symbolic_links_says_so(run, tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.symlink_to(second)
    second.symlink_to(first)
    error_line(run("info", first), str(first), "a symbolic link that leads nowhere", "Too many levels")
