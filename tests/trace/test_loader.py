"""The Chrome Trace Event Format loader: every phase, both layouts, both decode paths."""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import threading
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest
from conftest import DATA, TORCH_FIXTURE, complete, error_line, process_name, thread_name
from hypothesis import example, given
from hypothesis import strategies as st

from perftool.common import limits
from perftool.common.errors import TraceError
from perftool.pipeline.read import load_trace
from perftool.trace import Phase, columns, model
from perftool.trace import decode as decode_module
from perftool.trace.model import Kind


def names_of(trace, rows):
    return [trace.names[trace.name[i]] for i in rows]


def test_complete_events_become_rows_with_interned_names(write_trace):
    trace = load_trace(write_trace([complete("a", 10, 5), complete("b", 20, 1.5), complete("a", 30, 2)]))
    assert len(trace) == 3
    assert trace.ts.tolist() == [10, 20, 30]
    assert trace.dur.tolist() == [5, 1.5, 2]
    assert trace.names.count("a") == 1
    assert names_of(trace, range(3)) == ["a", "b", "a"]
    assert (trace.phase == Phase.COMPLETE).all()


def test_object_and_bare_array_layouts_load_the_same(write_trace):
    events = [complete("a", 1, 2), complete("b", 3, 4, tid=2)]
    as_object = load_trace(write_trace({"traceEvents": events}, "o.json"))
    as_array = load_trace(write_trace(events, "a.json"))
    for column in ("ts", "dur", "track", "name"):
        assert getattr(as_object, column).tolist() == getattr(as_array, column).tolist()


def test_gzip_is_detected_by_content(write_trace):
    events = {"traceEvents": [complete("a", 1, 2)]}
    plain = load_trace(write_trace(events, "t.json"))
    packed = load_trace(write_trace(events, "t.json.gz"))
    assert packed.ts.tolist() == plain.ts.tolist() and packed.names == plain.names


def test_gzip_of_several_members_with_padding_reads_as_one_stream(write_trace, tmp_path):
    """As `cat a.gz b.gz` makes, with the zero padding some tools leave between members."""
    data = json.dumps({"traceEvents": [complete(f"op{i}", i, 1) for i in range(500)]}).encode()
    path = tmp_path / "members.json.gz"
    path.write_bytes(gzip.compress(data[:3000]) + b"\0" * 512 + gzip.compress(data[3000:]))
    assert names_of(load_trace(path), range(500)) == [f"op{i}" for i in range(500)]


def test_nested_begin_end_pairs_per_thread(write_trace):
    events = [
        {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "B", "name": "other-thread", "pid": 1, "tid": 2, "ts": 3},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "B", "name": "inner2", "pid": 1, "tid": 1, "ts": 6},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 7},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 9},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 10},
    ]
    trace = load_trace(write_trace(events))
    spans = {trace.names[n]: (t, d) for n, t, d in zip(trace.name, trace.ts, trace.dur)}
    assert spans == {"outer": (0, 10), "inner": (2, 3), "inner2": (6, 1), "other-thread": (3, 6)}
    assert (trace.phase == Phase.COMPLETE).all()


def test_begin_end_out_of_file_order_pair_by_time(write_trace):
    events = [
        {"ph": "E", "pid": 1, "tid": 1, "ts": 4},
        {"ph": "B", "name": "late-in-file", "pid": 1, "tid": 1, "ts": 1},
    ]
    trace = load_trace(write_trace(events))
    assert trace.dur.tolist() == [3]


def test_unclosed_begin_runs_to_the_end_and_is_counted(write_trace):
    events = [
        thread_name(1, 2, "worker"),  # no row: the open span's row is not its position in the file
        {"ph": "B", "name": "closed", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 1},
        {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 2},
        complete("x", 5, 10, tid=2),
    ]
    trace = load_trace(write_trace(events))
    row = trace.names.index("open")
    assert trace.dur[trace.name == row].tolist() == [13]
    assert trace.metadata["perftool.unclosed_begin_events"] == 1
    annotations = trace.name[trace.kind == Kind.ANNOTATION]  # a span never closed is a marker, not work
    assert [trace.names[n] for n in annotations] == ["open"]


def test_instant_events_of_both_spellings(write_trace):
    events = [
        {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 3, "s": "t", "args": {"note": "hello"}},
        {"ph": "I", "name": "old-mark", "pid": 1, "tid": 1, "ts": 4},
    ]
    trace = load_trace(write_trace(events))
    assert (trace.phase == Phase.INSTANT).all() and trace.dur.tolist() == [0, 0]
    assert trace.args(0) == {"note": "hello"}


def test_counter_events_become_series(write_trace):
    events = [
        {"ph": "C", "name": "Memory", "pid": 1, "tid": 0, "ts": 1, "args": {"allocated": 10, "reserved": 20}},
        {"ph": "C", "name": "Memory", "pid": 1, "tid": 0, "ts": 2, "args": {"allocated": 15, "reserved": 20}},
        complete("work", 0, 3),
    ]
    trace = load_trace(write_trace(events))
    assert len(trace) == 1  # counters are not spans
    counters = trace.counters
    series = {name: counters.value[counters.series == i].tolist() for i, name in enumerate(counters.names)}
    assert series == {"Memory.allocated": [10, 15], "Memory.reserved": [20, 20]}
    assert counters.ts.tolist() == [1, 1, 2, 2]


def test_counters_decoded_in_batches_are_the_counters_decoded_at_once(write_trace, monkeypatch):
    """Counter events are decoded COUNTER_BATCH at a time: series first met in a later batch, events without a sample
    and a batch without any give the counters of one batch; a bad event in a later batch is named as in one."""
    events = [complete("work", 0, 3)]
    for i in range(40):
        args = {"allocated": i, "reserved": 2 * i} if i % 3 else {"note": "none"}  # every third: no sample
        if i >= 17:
            args[f"late{i % 2}"] = i / 2
        events.append({"ph": "C", "name": "Memory" if i % 5 else "Pool", "pid": 1, "tid": i % 2, "ts": i, "args": args})
    path = write_trace(events)
    at_once = load_trace(path).counters
    monkeypatch.setattr(columns, "COUNTER_BATCH", 3)  # the batch of events 0, 3 and 6 has no sample
    batched = load_trace(path).counters
    assert batched.names == at_once.names and len(at_once.names) == 8
    for field in ("ts", "value", "series", "track"):
        np.testing.assert_array_equal(getattr(batched, field), getattr(at_once, field), err_msg=field)
    events[30]["args"] = [1, 2]
    with pytest.raises(TraceError, match="event 30: counter 'args' must be an object"):
        load_trace(write_trace(events))


def test_metadata_names_labels_and_sort_indices(write_trace):
    events = [
        process_name(7, "trainer"),
        {"ph": "M", "name": "process_labels", "pid": 7, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "process_sort_index", "pid": 7, "tid": 0, "args": {"sort_index": 3}},
        thread_name(7, 70, "stream 70"),
        {"ph": "M", "name": "thread_sort_index", "pid": 7, "tid": 70, "args": {"sort_index": 9}},
        complete("k", 1, 1, pid=7, tid=70),
    ]
    trace = load_trace(write_trace(events))
    (track,) = trace.tracks  # tracks exist only where events are
    assert (track.pid, track.tid, track.process_name, track.thread_name) == (7, 70, "trainer", "stream 70")
    assert (track.process_labels, track.process_sort_index, track.thread_sort_index) == ("GPU 0", 3, 9)


def test_flow_events_keep_their_ids(write_trace):
    events = [
        complete("launch", 0, 2),
        {"ph": "s", "id": 41, "pid": 1, "tid": 1, "ts": 1, "cat": "ac2g", "name": "ac2g"},
        {"ph": "t", "id": "0x2a", "pid": 1, "tid": 1, "ts": 1.5, "cat": "flow", "name": "hop"},
        {"ph": "f", "id": 41, "pid": 2, "tid": 7, "ts": 3, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "f", "id": "0x2a", "pid": 2, "tid": 7, "ts": 4, "cat": "flow", "name": "hop"},
    ]
    trace = load_trace(write_trace(events))
    assert trace.phase.tolist() == [Phase.COMPLETE, Phase.FLOW_START, Phase.FLOW_STEP, Phase.FLOW_END, Phase.FLOW_END]
    ids = trace.flow_id.tolist()
    assert ids[0] == -1 and ids[1] == ids[3] == 41
    assert ids[2] == ids[4] and ids[2] not in (-1, 41)


def test_negative_flow_ids_are_kept_apart_from_no_id(write_trace):
    events = [
        complete("launch", 0, 2),
        {"ph": "s", "id": -1, "pid": 1, "tid": 1, "ts": 1, "cat": "flow", "name": "f"},
        {"ph": "s", "id": -5, "pid": 1, "tid": 1, "ts": 1, "cat": "flow", "name": "f"},
        {"ph": "f", "id": -5, "pid": 1, "tid": 1, "ts": 2, "cat": "flow", "name": "f"},
        {"ph": "f", "id": -1, "pid": 1, "tid": 1, "ts": 2, "cat": "flow", "name": "f"},
    ]
    ids = load_trace(write_trace(events)).flow_id.tolist()
    assert ids[0] == -1 and ids[1] == ids[4] and ids[2] == ids[3]
    assert len({-1, ids[1], ids[2]}) == 3


def test_timestamps_as_integers_floats_and_numeric_strings(write_trace):
    events = [complete("a", 5, 1), complete("b", 6.25, 0.5), complete("c", "1700000000000.125", "2.5")]
    trace = load_trace(write_trace(events))
    assert trace.ts.tolist() == [5, 6.25, 1700000000000.125]
    assert trace.dur.tolist() == [1, 0.5, 2.5]


def test_top_level_keys_are_kept_and_display_unit_honoured(write_trace):
    document = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "GPU"}],
        "traceEvents": [complete("a", 1, 1)],
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": 123,
    }
    trace = load_trace(write_trace(document))
    assert trace.metadata["deviceProperties"] == [{"id": 0, "name": "GPU"}]
    assert trace.metadata["baseTimeNanoseconds"] == 123
    assert trace.display_time_unit == "ns"
    assert trace.ts.tolist() == [1]  # the unit changes display only; timestamps stay in µs


def test_unknown_fields_and_phases_are_ignored(write_trace):
    events = [
        complete("a", 1, 1, weird={"x": [1, 2]}, tts=9),
        {"ph": "P", "name": "sample", "pid": 1, "tid": 1, "ts": 2},
    ]
    trace = load_trace(write_trace(events))
    assert trace.phase.tolist() == [Phase.COMPLETE, Phase.OTHER]


def test_args_are_kept_only_where_needed(write_trace):
    events = [
        complete("kernel", 1, 1, cat="kernel", args={"stream": 7}),
        complete("Memcpy HtoD (Pageable -> Device)", 2, 1, cat="gpu_memcpy", args={"bytes": 1024}),
    ]
    trace = load_trace(write_trace(events))
    assert trace.args(0) is None
    assert trace.args(1) == {"bytes": 1024}
    assert trace.args_of(np.array([1, 0, 1])) == [{"bytes": 1024}, None, {"bytes": 1024}]


def test_args_of_many_rows_are_each_row_s_even_where_one_is_not_utf8(write_trace):
    """Kept args are raw JSON; bad UTF-8 inside one shows only when it is decoded, and makes that row's None."""
    events = b",".join(
        b'{"ph":"X","name":"Memcpy HtoD","cat":"gpu_memcpy","pid":1,"tid":1,"ts":%d,"dur":1,"args":{"bytes":%s}}'
        % (i, b'"\xff"' if i == 1 else b"%d" % i)
        for i in range(3)
    )
    trace = load_trace(write_trace(b'{"traceEvents":[' + events + b"]}"))
    assert trace.args_of(np.arange(3)) == [{"bytes": 0}, None, {"bytes": 2}] == [trace.args(i) for i in range(3)]


@pytest.mark.parametrize(
    ("written", "replaced"),
    [
        (rb'"a\ud800b"', rb'"a\ufffdb"'),  # a high surrogate alone
        (rb'"a\uDC00"', rb'"a\ufffd"'),  # a low one, in capitals
        (rb'"\ud800\u0041\ud83d\ude00"', rb'"\ufffd\u0041\ud83d\ude00"'),  # a pair stays as written
        (rb'"\udc00\ud800"', rb'"\ufffd\ufffd"'),  # inverted: two alone
        (rb'"a\\\ud800"', rb'"a\\\ufffd"'),  # after an escaped backslash, a real escape
        (rb'"a\\ud800"', None),  # an escaped backslash, then text: no escape at all
        (rb'"\ud83d\ude00 plain"', None),
    ],
)
def test_a_surrogate_escaped_alone_is_written_as_the_replacement_character(written, replaced):
    assert decode_module.lone_surrogates_replaced(written) == replaced


def test_a_trace_whose_names_hold_a_surrogate_escaped_alone_loads_with_the_replacement_character(write_trace):
    """JSON's grammar allows ``\\ud800`` alone and the viewers (JavaScript's reader) take it; msgspec refuses it. The
    name reads with U+FFFD in its place, the rest of the trace as written."""
    events = (
        rb'{"ph":"X","name":"a\ud800b","cat":"kernel","pid":1,"tid":7,"ts":1,"dur":2},'
        rb'{"ph":"X","name":"\ud83d\ude00","cat":"kernel","pid":1,"tid":7,"ts":5,"dur":2},'
        rb'{"ph":"X","name":"c\\ud800","cat":"kernel","pid":1,"tid":7,"ts":9,"dur":2}'
    )
    trace = load_trace(write_trace(b'{"traceEvents":[' + events + rb'],"note":"x\udc00"}'))
    assert [trace.names[i] for i in trace.name.tolist()] == ["a\ufffdb", "\U0001f600", "c\\ud800"]
    assert trace.metadata["note"] == "x\ufffd"
    streamed = decode_module.decode_piece(events)  # a large trace's pieces, read as they stream, read it so too
    assert [event.name for event in streamed] == ["a\ufffdb", "\U0001f600", "c\\ud800"]


def test_a_surrogate_escaped_alone_in_a_track_name_or_kept_args_reads_as_the_replacement_character(write_trace):
    events = (
        rb'{"ph":"M","name":"thread_name","pid":1,"tid":7,"args":{"name":"main\udc80"}},'
        rb'{"ph":"X","name":"Memcpy HtoD (Pageable -> Device)","cat":"gpu_memcpy","pid":1,"tid":7,"ts":1,"dur":20,'
        rb'"args":{"bytes":1024,"note":"x\ud800"}}'
    )
    trace = load_trace(write_trace(b'{"traceEvents":[' + events + b"]}"))
    assert [track.thread_name for track in trace.tracks] == ["main\ufffd"]
    assert trace.args(0) == {"bytes": 1024, "note": "x\ufffd"}


@pytest.mark.parametrize(
    ("written", "replaced"),
    [
        (rb'{"bw": inf}', rb'{"bw": null}'),  # C++ formatting a rate over a zero duration (Kineto's copies)
        (rb'{"a":NaN,"b":-Infinity}', rb'{"a":null,"b":null}'),  # Python's json module, compact separators
        (b"[nan, -nan,\n Infinity]", b"[null, null,\n null]"),  # a newline before a value
        (rb"[INF, -NAN, Inf]", rb"[null, null, null]"),  # printf's %F, and other writers' capitals
        (rb'{"name": "NaN, inf: -Infinity", "v": 1}', None),  # the words inside a string are text
        (rb'{"a": "x\\", "b": inf}', rb'{"a": "x\\", "b": null}'),  # a string ending in an escaped backslash
        (rb'{"info": 1, "nano": 2e3, "x": [1.5, -2]}', None),  # keys and numbers that start alike
    ],
)
def test_a_bare_nan_or_infinity_where_a_value_stands_is_written_as_null(written, replaced):
    assert decode_module.nonfinite_numbers_replaced(written) == replaced


def _copy_events(bandwidth: bytes) -> bytes:
    """Two copies as Kineto wrote them when one took no time: its bandwidth over a zero duration, unquoted."""
    return (
        rb'{"ph":"X","name":"Memcpy HtoD (Pageable -> Device)","cat":"gpu_memcpy","pid":1,"tid":7,"ts":1,"dur":0,'
        rb'"args":{"bytes":200,"memory bandwidth (GB/s)":' + bandwidth + rb"}},"
        rb'{"ph":"X","name":"copy of NaN, inf","cat":"gpu_memcpy","pid":1,"tid":7,"ts":5,"dur":2,'
        rb'"args":{"bytes":400,"memory bandwidth (GB/s)":0.2}}'
    )


@pytest.mark.parametrize("bandwidth", [b"inf", b"Infinity", b"NaN", b"-nan"])
def test_a_trace_with_a_bare_nan_or_infinity_loads_with_that_value_missing(write_trace, bandwidth):
    """JSON has no NaN or infinity, but Kineto once wrote a zero-length copy's bandwidth as a bare ``inf``
    (pytorch/kineto#105) and Python's json module writes ``NaN`` and ``Infinity``: the trace loads, read whole or as
    it streams, such a value missing (null); a name holding the words keeps them."""
    events = _copy_events(bandwidth)
    trace = load_trace(write_trace(b'{"traceEvents":[' + events + b'],"note":' + bandwidth + b"}"))
    assert [trace.names[i] for i in trace.name.tolist()] == ["Memcpy HtoD (Pageable -> Device)", "copy of NaN, inf"]
    assert trace.args(0) == {"bytes": 200, "memory bandwidth (GB/s)": None}
    assert trace.args(1) == {"bytes": 400, "memory bandwidth (GB/s)": 0.2}
    assert trace.metadata["note"] is None
    streamed = decode_module.decode_piece(events)
    assert [event.name for event in streamed] == ["Memcpy HtoD (Pageable -> Device)", "copy of NaN, inf"]


def test_a_bare_nan_where_a_time_stands_is_an_error_at_its_place(write_trace):
    """A start time that is no number cannot be read as missing: the error names where it is, as written."""
    written = b'[{"ph":"X","name":"a","pid":1,"tid":1,"ts":NaN,"dur":5}]'
    with pytest.raises(TraceError, match=f"line 1, column {written.index(b'NaN') + 1}: invalid character"):
        load_trace(write_trace(written))


def test_a_document_read_whole_reads_a_surrogate_alone_as_the_replacement_character_and_places_other_problems():
    """The whole-document decoder does the same; a problem elsewhere in the document is still named where it is (the
    replacement is as long as what it replaces)."""
    good = b'{"traceEvents":[{"ph":"X","name":"a\\ud800","pid":1,"tid":1,"ts":1,"dur":2}]}'
    batch = next(decode_module.exact_batches("t.json", good, {}))
    assert [event.name for event in batch] == ["a\ufffd"]
    bad = b'{"traceEvents":[{"ph":"X","name":"a\\ud800","pid":1,"tid":1,"ts":1,"dur":2},{"ph":"X",}]}'
    column = bad.index(b",}") + 2  # the brace after the trailing comma, counted from 1
    with pytest.raises(TraceError, match=f"line 1, column {column}: trailing comma in object"):
        next(decode_module.exact_batches("t.json", bad, {}))


def test_long_kernels_keep_just_their_launch_configuration_shared_between_equal_launches(write_trace):
    """Read for a scan (rules read it), a kernel of 10 µs or more keeps its grid, block, registers and shared memory
    (whatever order Kineto writes them in), and no per-call field; kernels launched alike share one kept entry; a
    short kernel keeps nothing; an instant event in a kernel's category keeps all its args. Read for another command,
    which reads no launch, no kernel keeps one."""
    launch = {"registers per thread": 32, "shared memory": 0, "grid": [4, 2, 1], "block": [128, 1, 1]}
    events = [
        complete("k", 0, 20, cat="kernel", args={"correlation": 1, "stream": 7} | launch),
        complete("k", 30, 20, cat="kernel", args={"correlation": 2, "stream": 7} | launch),
        complete("k", 60, 20, cat="kernel", args={"grid": [4, 2, 1], "correlation": 3, "block": [128, 1, 1]}),
        complete("k", 90, 5, cat="kernel", args={"correlation": 4} | launch),
        {"ph": "i", "name": "mark", "cat": "kernel", "ts": 99, "pid": 0, "tid": 7, "args": {"correlation": 5}},
        complete("k", 100, 20, cat="kernel", args={"grid": [8, 1, 1], "registers per thread": 32}),
        complete("k", 130, 20, cat="kernel", args={"grid": [16, 1, 1], "registers per thread": 32}),
    ]
    trace = load_trace(write_trace(events), analysis="scan")
    assert trace.args(0) == trace.args(1) == launch
    assert trace.args_ref[0] == trace.args_ref[1]
    assert trace.args(2) == {"grid": [4, 2, 1], "block": [128, 1, 1]}
    assert trace.args(3) is None
    assert trace.args(4) == {"correlation": 5}
    assert [trace.args(row)["grid"] for row in (5, 6)] == [[8, 1, 1], [16, 1, 1]]  # equal tails, different grids
    for analysis in ("info", "diff", "calibrate"):
        trace = load_trace(write_trace(events), analysis=analysis)
        assert [trace.args(row) for row in range(len(trace))] == [None] * 4 + [{"correlation": 5}] + [None] * 2
        assert trace.flow_id[:4].tolist() == [1, 2, 3, 4]  # their correlation ids, read all the same


def test_ops_keep_just_their_recorded_inputs_shared_between_calls_with_equal_inputs(write_trace):
    """An op the roofline models keeps its recorded inputs and no per-call id; calls with equal inputs share one kept
    entry whatever ids precede them; a key's text inside a string value does not stand for the key."""
    inputs = {"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]}
    quoted = {"note": 'a "Input Dims" in a value', "Input Dims": [[2, 2], [2, 2]]}
    events = [
        complete("aten::mm", 0, 20, cat="cpu_op", args={"External id": 1, "Ev Idx": 3} | inputs),
        complete("aten::mm", 30, 20, cat="cpu_op", args={"External id": 2, "Record function id": 9} | inputs),
        complete("aten::mm", 60, 20, cat="cpu_op", args={"External id": 3} | inputs | {"Input Dims": [[8, 8]]}),
        complete("aten::mm", 90, 20, cat="cpu_op", args={"External id": 4} | quoted),
        complete("aten::mm", 120, 20, cat="cpu_op", args={"External id": 5, "Sequence number": 7}),
    ]
    trace = load_trace(write_trace(events))
    assert trace.args(0) == trace.args(1) == inputs and trace.args_ref[0] == trace.args_ref[1]
    assert trace.args(2) == inputs | {"Input Dims": [[8, 8]]}
    assert trace.args(3) == {"Input Dims": [[2, 2], [2, 2]]}
    assert trace.args(4) == {}


def test_the_keys_that_share_kept_args_are_the_fields_each_reduction_keeps():
    from perftool.trace.kept_args import _KEYS, _REDUCERS

    for kept, decoder in _REDUCERS.items():
        fields = {msgspec.json.encode(field.encode_name) for field in msgspec.structs.fields(decoder.type)}
        assert set(_KEYS[kept]) == fields, kept


def _columns(trace):
    return {c: getattr(trace, c).tolist() for c in ("ts", "dur", "phase", "order", "flow_id", "kind")} | {
        "names": [trace.names[i] for i in trace.name],
        "tracks": [(trace.tracks[i].pid, trace.tracks[i].tid, trace.tracks[i].role) for i in trace.track],
        "counters": trace.counters.value.tolist(),
        "metadata": trace.metadata,
    }


@pytest.fixture
def small_chunks(monkeypatch):
    """Make the loader read a small file in many chunks and cut it into many pieces."""
    monkeypatch.setattr(decode_module, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(decode_module, "PIECE_BYTES", 1500)


def test_streaming_pieces_match_a_whole_document_decode(tmp_path, small_chunks):
    from kineto_synth import write_trace as synth

    path = tmp_path / "synth.json"
    synth(str(path), 0.3, seed=3)
    streamed = load_trace(path, workers=1)
    document = json.loads(path.read_text())
    assert len(streamed) == sum(e["ph"] not in ("M", "C") for e in document["traceEvents"])
    assert streamed.metadata["traceName"] == "synthetic.pt.trace.json"
    assert streamed.metadata["deviceProperties"][0]["numSms"] == 132

    metadata = {}
    whole = list(decode_module.exact_batches(str(path), path.read_bytes(), metadata))
    assert sum(len(b) for b in whole) == len(document["traceEvents"])
    assert metadata == {k: v for k, v in document.items() if k != "traceEvents"}


@pytest.mark.parametrize("name", ["synth.json", "synth.json.gz"])  # byte ranges per worker; piped pieces
def test_worker_processes_give_the_same_trace(tmp_path, small_chunks, name):
    from kineto_synth import write_trace as synth

    path = tmp_path / name
    synth(str(path), 0.3, seed=5, compress=name.endswith(".gz"))
    assert _columns(load_trace(path, workers=2)) == _columns(load_trace(path, workers=1))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 5, "dur": -1}, "negative duration -1 µs"),
        ({"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1e18, "dur": 1}, "'ts' 1e+18 µs is beyond any clock"),
        ({"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 5}, "complete event ('X') without a finite 'dur'"),
    ],
)
def test_a_bad_event_in_a_later_piece_is_named_where_it_stands(write_trace, small_chunks, workers, bad, problem):
    """Each piece's times are checked as it arrives: the error names the event's place in the whole file (metadata
    events before it included), not in its piece, and the first problem in the checks' order wins across pieces."""
    events = [thread_name(1, 1, "main"), *(complete(f"k{i}", i, 1) for i in range(400))]
    events.insert(100, {"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 7, "dur": 1e14})  # a later check's, earlier
    events.insert(350, bad)
    with pytest.raises(TraceError) as error:
        load_trace(write_trace(json.dumps({"traceEvents": events}), "bad.json"), workers=workers)
    assert f": event 350: {problem}" in str(error.value)


@pytest.mark.parametrize("name", ["big.json", "big.json.gz"])
def test_events_larger_than_a_piece_load_the_same_in_processes(write_trace, small_chunks, name):
    """Pieces longer than a shared slot travel through the pipe instead."""
    events = [
        complete(f"op{i}", i, 1, cat="gpu_memcpy", args={"bytes": i, "pad": "x" * (9000 if i % 7 == 0 else 10)})
        for i in range(120)
    ]
    path = write_trace(events, name)
    in_processes, here = load_trace(path, workers=2), load_trace(path, workers=1)
    assert _columns(in_processes) == _columns(here)
    assert [in_processes.args(row)["bytes"] for row in range(120)] == list(range(120))


def test_a_decoding_process_that_dies_is_one_error(write_trace, small_chunks, monkeypatch):
    monkeypatch.setattr("perftool.trace.loader._part_of_range", lambda *_args: os._exit(9))
    path = write_trace([complete(f"op{i}", i, 1) for i in range(200)])
    with pytest.raises(TraceError, match="a decoding process ended unexpectedly \\(exit code 9\\)"):
        load_trace(path, workers=2)


def test_byte_ranges_meet_at_the_same_cut(tmp_path):
    from perftool.trace.decode import locate_events, read_events_range

    events = [complete(f"op{i}", i, 1) for i in range(300)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}, indent=2))
    metadata = {}
    start, end = locate_events(str(path), metadata)
    assert metadata == {"displayTimeUnit": "ns"}
    pieces = [read_events_range(str(path), start, end, lo, min(lo + 997, end)) for lo in range(start, end, 997)]
    decoded = [json.loads("[" + p.decode() + "]") for p in pieces if p.strip()]
    assert [e for piece in decoded for e in piece] == events


@pytest.fixture
def no_exact_path(monkeypatch):
    """Fail where the loader would decode a document whole."""

    def refuse(*_args):
        raise AssertionError("fell back to the exact path")

    monkeypatch.setattr("perftool.trace.loader.exact_batches", refuse)


@pytest.mark.parametrize("where", ["args", "name"])
def test_text_that_reads_like_a_cut_between_events_is_streamed_as_it_is(
    write_trace, small_chunks, no_exact_path, where
):
    """JSON held in a string arg, or a name such as "a }, { b", cut where a piece ends: decoding the whole document at
    once took 7x the memory budget (hardening round 4, D08). A cut needs the next event to open with a key, which no
    text inside a string can (its quote is escaped), so these stream, each string as it was."""
    tricky = '}, {"ph": "X"}, {' if where == "args" else "a }, { b"
    events = [complete(f"op{i}" + (tricky if where == "name" else ""), i, 1, args={"note": tricky * 40})
              for i in range(200)]  # fmt: skip
    trace = load_trace(write_trace(events), workers=1)
    assert len(trace) == 200
    suffix = tricky if where == "name" else ""
    assert names_of(trace, [0, 199]) == [f"op0{suffix}", f"op199{suffix}"]


def test_many_arrays_in_the_metadata_after_the_events_are_streamed(tmp_path, small_chunks, no_exact_path):
    """More than 64 ']' in the keys after traceEvents made the loader give up streaming (hardening round 4, D08):
    where the events end is found in one pass, whatever follows."""
    events = [complete(f"op{i}", i, 1) for i in range(300)]
    trailing = {f"key{k}": [[k], [k, [k]]] for k in range(70)}
    for compressed in (False, True):
        path = tmp_path / ("t.json.gz" if compressed else "t.json")
        document = json.dumps({"traceEvents": events, **trailing}).encode()
        path.write_bytes(gzip.compress(document) if compressed else document)
        for workers in (1, 2):
            trace = load_trace(path, workers=workers)
            assert len(trace) == 300 and trace.metadata["key69"] == [[69], [69, [69]]], (compressed, workers)


def test_a_trace_that_must_be_decoded_whole_is_refused_past_the_memory_budget(write_trace, small_chunks, run):
    """Names ending in '}, {' right before a key ("a }, {", "cat": ...) still read as a cut: such a trace is decoded
    whole, which needs about 7 bytes of memory per byte of JSON. Past the budget it is refused in one line, never
    read whole past it (1 GB for a 200 MB trace under --memory 150MB); within it, it is read as it is."""
    events = [complete(f"op{i} }}, {{", i, 1, cat="kernel") for i in range(3000)]
    path = write_trace(events)
    need = limits.PROCESS_MEMORY + int(path.stat().st_size * limits.MEMORY_PER_EXACT_BYTE)
    refused = run("info", path, "--memory", str(need - 1))
    error_line(refused, str(path), "cannot be cut into pieces", "more than the memory budget", "--memory")
    trace = load_trace(path, workers=1, memory=2 * need)
    assert len(trace) == 3000 and names_of(trace, [2999]) == ["op2999 }, {"]


def test_events_from_many_pieces_keep_file_order(tmp_path, small_chunks):
    from kineto_synth import write_trace as synth

    path = tmp_path / "synth.json"
    synth(str(path), 0.2, seed=1)
    trace = load_trace(path, workers=1)
    assert (np.diff(trace.order) > 0).all()


def test_real_pytorch_fixture_loads(tmp_path):
    trace = load_trace(TORCH_FIXTURE)
    assert trace.dialect == "kineto"
    assert trace.metadata["schemaVersion"] == 1
    steps = sorted(trace.names[n] for n in trace.name[trace.kind == Kind.STEP])
    assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]


@pytest.mark.parametrize("name", ["synth.json", "synth.json.gz", "fixture"])
def test_well_formed_files_never_need_the_exact_path(tmp_path, small_chunks, no_exact_path, name):
    from kineto_synth import write_trace as synth

    if name == "fixture":
        path = TORCH_FIXTURE
    else:
        path = tmp_path / name
        synth(str(path), 0.2, seed=2, compress=name.endswith(".gz"))

    assert len(load_trace(path, workers=1)) > 100


def _gzipped_sample() -> bytes:
    return (DATA / "vocab" / "zero_workers.json.gz").read_bytes()


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "json"])
def test_standard_input_is_read_as_dash(run, compressed):
    data = _gzipped_sample() if compressed else gzip.decompress(_gzipped_sample())
    result = run("scan", "-", "--format", "json", "--fail-on", "never", input=data)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["traces"][0]
    assert summary["path"] == "-" and summary["steps"] == 8


def test_a_fifo_is_read_once_not_waited_on_forever(tmp_path):
    fifo = tmp_path / "trace.pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(_gzipped_sample()))
    writer.start()
    trace = load_trace(fifo)
    writer.join(timeout=30)
    assert trace.source == str(fifo) and len(trace) > 0


def test_a_bad_stream_is_named_by_the_stream_not_a_temporary_file(run):
    line = error_line(run("scan", "-", input=b'{"traceEvents": ['), "-: truncated JSON")
    assert "perftool-" not in line and "tmp" not in line


def test_a_stream_stops_at_the_trace_size_limit(run):
    error_line(run("info", "-", "--max-trace-size", "1MB", input=b" " * (3 << 20)), "-:", "trace-size limit")


@pytest.mark.parametrize(
    ("total", "free", "copied", "kept"),
    [(100 << 20, 8 << 20, "3 MiB", "5 MiB"), (1 << 40, (1 << 30) + (4 << 20), "4 MiB", "1 GiB")],
    ids=["5% of a small disk", "1 GiB of a large one"],
)
def test_a_stream_that_never_ends_stops_before_its_disk_is_full(run, tmp_path, monkeypatch, total, free, copied, kept):
    """With no size limit, a stream's copy stops while 5% of its disk, or 1 GiB where that is less, is still free (it
    filled the disk)."""
    from perftool.trace import loader

    def disk(folder: str) -> SimpleNamespace:  # ``free`` before the copy
        written = sum(entry.stat().st_size for entry in os.scandir(folder))
        return SimpleNamespace(total=total, used=total - free + written, free=free - written)

    monkeypatch.setenv("PERFTOOL_SPILL_DIR", str(tmp_path))
    monkeypatch.setattr(loader.shutil, "disk_usage", disk)
    line = error_line(run("info", "-", input=b"[" + b" " * (20 << 20)), "-: its copy in " + str(tmp_path))
    assert f"stopped after {copied}, before the disk had less than {kept} free" in line, line
    assert "--max-trace-size" in line and "PERFTOOL_SPILL_DIR" in line
    assert os.listdir(tmp_path) == []  # the copy is removed


def test_the_trace_scanner_is_built_by_the_install():
    """pip install compiles perftool/trace/_scan.c, and on Linux perftool/trace/_filemem.c (hatch_build.py). The tests
    of each skip where it was not built, so this test, outside them, is the one that fails then: the suite never tests
    msgspec alone, or a trace on disk with its analysis in memory, unawares."""
    from perftool.trace import events, store

    assert events.COMPILED
    assert store.ARRAYS_IN_FILES or not sys.platform.startswith("linux")


@given(st.lists(st.sampled_from("XXBEMCi"), min_size=1, max_size=60))
def test_each_row_s_order_is_its_event_s_position_in_the_file(tmp_path_factory, kinds):
    """Rows are the complete, instant and begin events; metadata and counter events, and the ends of B/E pairs, are
    none: each row's order (worked out from those gaps) is still where its event stands in the file."""
    events, open_begins, rows_at = [], 0, []
    for position, kind in enumerate(kinds):
        if kind == "E" and not open_begins:
            kind = "X"  # an end needs a begin before it
        open_begins += {"B": 1, "E": -1}.get(kind, 0)
        if kind == "M":
            events.append(thread_name(1, 1, "main"))
        elif kind == "C":
            events.append({"ph": "C", "name": "memory", "ts": position, "pid": 1, "args": {"bytes": position}})
        else:
            events.append({"ph": kind, "name": f"e{position}", "ts": position, "dur": 1, "pid": 1, "tid": 1})
        if kind in "XBi":
            rows_at.append(position)
    if not rows_at:
        return
    path = tmp_path_factory.mktemp("order") / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(path, workers=1)
    assert sorted(trace.order.tolist()) == rows_at
    assert [trace.names[n] for n in trace.name[np.argsort(trace.order)]] == [f"e{p}" for p in rows_at]
    assert model.rows_at(trace.order, trace.skipped).tolist() == list(range(len(trace)))  # and back


def test_of_kinds_is_each_event_s_kind_among_those_given():
    trace = load_trace(TORCH_FIXTURE)
    assert len(set(trace.kind.tolist())) > 3  # a trace of many kinds
    for chosen in ([], [Kind.SYNC], [Kind.HOST_OP, Kind.RUNTIME], list(Kind)):
        np.testing.assert_array_equal(trace.of_kinds(*chosen), np.isin(trace.kind, chosen))


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 14, 64])
def test_bad_utf8_is_placed_at_its_byte_wherever_the_chunks_of_its_search_fall(monkeypatch, chunk):
    # "é" (bytes 13-14) before the bad byte (16): chunks of 7 and 14 cut it, and 7 holds its end and 0xff at once
    monkeypatch.setattr(decode_module, "CHUNK_BYTES", chunk)
    data = b'[\n{"name": "a\xc3\xa9b\xff", "ph": "X", "ts": 1, "dur": 1}]'
    with pytest.raises(TraceError) as caught:
        next(decode_module.exact_batches("t.json", data, {}))
    assert caught.value.problem == "not valid UTF-8 at line 2, column 15: byte 0xff"


def test_a_document_cut_inside_a_character_is_truncated_not_bad_utf8():
    with pytest.raises(TraceError) as caught:
        next(decode_module.exact_batches("t.json", b'[{"name": "a\xc3', {}))
    assert caught.value.problem.startswith("truncated JSON")


def test_what_two_threads_derive_at_once_is_computed_once_and_both_get_it():
    trace = load_trace(str(TORCH_FIXTURE))
    started, release, calls = threading.Event(), threading.Event(), []

    def first() -> str:
        started.set()
        release.wait()
        calls.append("first")
        return "first's"

    def second() -> str:
        calls.append("second")
        return "second's"

    got: dict[str, str] = {}
    one = threading.Thread(target=lambda: got.setdefault("one", trace.derive("key", first)))
    one.start()
    started.wait()
    two = threading.Thread(target=lambda: got.setdefault("two", trace.derive("key", second)))
    two.start()
    two.join(0.2)  # a second thread that does not wait for the first computes its own value meanwhile
    release.set()
    one.join()
    two.join()
    assert calls == ["first"] and got == {"one": "first's", "two": "first's"}


def test_names_match_a_pattern_per_event_and_tables_combine_before_they_are_read(write_trace):
    path = write_trace(
        [complete(name, i, 1) for i, name in enumerate(["cudaMalloc", "aten::add", "cudaFree", "aten::add"])]
    )
    trace = load_trace(path)
    alloc, free = re.compile(r"^cudaMalloc"), re.compile(r"^cudaFree")
    assert trace.name_matches(alloc).tolist() == [True, False, False, False]
    assert len(trace.name_table(alloc)) == len(trace.names) == 3  # one entry per distinct name
    either = trace.by_name(trace.name_table(alloc) | trace.name_table(free))
    assert (
        either.tolist() == (trace.name_matches(alloc) | trace.name_matches(free)).tolist() == [True, False, True, False]
    )
    assert trace.by_name(trace.name_table(re.compile("absent"))).tolist() == [False] * 4
    rows = np.array([2, 0, 0])  # asked of a few rows: those rows only, in their order
    assert trace.name_matches(alloc, rows).tolist() == [False, True, True]
    assert trace.name_matches(re.compile("absent"), rows).tolist() == [False] * 3


DIGIT_PATTERNS = [  # searched among the names with their digits written 0 (the first four), or among the names
    r"^ProfilerStep#\d+$",
    r"(?i)\bstep\b",
    r"^.{15}$",  # as long as "ProfilerStep#17": a digit in the pattern, so searched among the names themselves
    r"ab?c",
    r"#1\b",
    r"[^0]$",
    r"\N{DIGIT ONE}",
    r"(?P<digit>\d)(?P=digit)",
    r"\x31",
]


@given(
    st.lists(st.text(alphabet="ab#ProfilerStep0129 \0", min_size=1, max_size=18), min_size=1, max_size=12, unique=True),
    st.sampled_from(DIGIT_PATTERNS),
)
@example(["a\0b1", "ac2", "b\0"], r"ab?c")  # names holding NUL, which the shapes are otherwise joined by
@example(["s12", "s11"], r"(?P<digit>\d)(?P=digit)")  # each pattern that tells digits apart, on names it tells apart
@example(["k1", "k2"], r"\N{DIGIT ONE}")
@example(["#1", "#2"], r"\x31")
@example(["a0", "a1"], r"[^0]$")
def test_a_name_table_is_what_the_pattern_says_of_each_name_whatever_its_digits(tmp_path_factory, names, pattern):
    """Names that differ only in their digits (one a step) are searched once, as their shape, where the pattern
    cannot tell one digit from another; a pattern that can (a digit, \\N{...}, a named group matched again) is
    searched in every name (names may hold any character, NUL too)."""
    path = tmp_path_factory.mktemp("shapes") / "trace.json"
    path.write_text(json.dumps({"traceEvents": [complete(name, i, 1) for i, name in enumerate(names)]}))
    trace = load_trace(path, workers=1)
    compiled = re.compile(pattern)
    assert trace.name_table(compiled).tolist() == [bool(compiled.search(name)) for name in trace.names]


def test_names_alike_but_for_their_digits_are_searched_once(write_trace):
    names = ["ProfilerStep#7", "ProfilerStep#42", "ProfilerStep#3", "k11"]
    trace = load_trace(write_trace([complete(name, i, 1) for i, name in enumerate(names)]))
    assert trace.names == names
    shapes, of_name = trace._name_shapes
    assert shapes == ["ProfilerStep#0", "ProfilerStep#00", "k00"] and of_name.tolist() == [0, 1, 0, 2]
    searched: list[str] = []

    class Probe:  # a pattern that says which names it is searched in
        pattern = "Step"

        def search(self, name: str) -> bool:
            searched.append(name)
            return "Step" in name

    assert trace.name_table(Probe()).tolist() == [True, True, True, False] and searched == shapes


FEW = model.FEW_ENTRIES


@pytest.mark.parametrize("named", [0, 1, 3, FEW, FEW + 1, 20 - FEW - 1, 20 - FEW, 19, 20])
def test_a_table_of_few_names_or_many_reads_each_event_s_entry(write_trace, named):
    """A table naming a few names (or all but a few) is read by comparing names, one of many by looking each
    event's name up: the same per event either way, for every event or a few rows."""
    trace = load_trace(write_trace([complete(f"op{i % 20}", i, 1) for i in range(60)]))
    table = np.zeros(len(trace.names), dtype=bool)
    table[np.random.default_rng(named).choice(len(trace.names), named, replace=False)] = True
    assert trace.by_name(table).tolist() == table[trace.name].tolist() and trace.by_name(table).sum() == 3 * named
    rows = np.array([59, 3, 3, 40])
    assert trace.by_name(table, rows).tolist() == table[trace.name[rows]].tolist()


def _open_array(events: list, ending: bytes) -> bytes:
    """A JSON Array Format document of ``events`` whose writer stopped after the last one: no closing ``]``."""
    return json.dumps(events).encode()[:-1] + ending


@pytest.mark.parametrize("ending", [b"", b",", b",\n", b"\n"], ids=["bare", "comma", "comma newline", "newline"])
@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gzip"])
def test_an_array_left_open_after_its_last_event_reads_as_closed(tmp_path, small_chunks, no_exact_path, ending,
                                                                  compressed):  # fmt: skip
    """The Trace Event Format lets a writer that cannot finish (a process exiting) leave off the array format's
    closing ']': the events before read as they would closed, streamed (by byte ranges, and piped pieces)."""
    events = [complete(f"op{i}", i * 10, 5, args={"note": "x" * 50}) for i in range(300)]
    data = _open_array(events, ending)
    path = tmp_path / ("open.json.gz" if compressed else "open.json")
    path.write_bytes(gzip.compress(data) if compressed else data)
    trace = load_trace(path, workers=1)
    assert len(trace) == 300 and names_of(trace, [0, 299]) == ["op0", "op299"]


def test_a_small_array_left_open_reads_and_one_cut_inside_its_last_event_is_truncated(tmp_path, run):
    """Read by its one piece, or decoded whole (the path every layout the streaming does not expect takes), the open
    array reads too; an array that ends inside its last event (after an args object closes) is no array left open but
    a truncated file: one line, exit 2, as before. An object left open is truncated whatever it ends with."""
    event = complete("op", 0, 5, args={"a": {"b": 1}})
    (path := tmp_path / "one.json").write_bytes(_open_array([event], b",\n"))
    assert names_of(load_trace(path), [0]) == ["op"]
    assert len(next(decode_module.exact_batches(str(path), path.read_bytes(), {}))) == 1
    cut = json.dumps([event, event]).encode()
    (path := tmp_path / "cut.json").write_bytes(cut[: cut.rindex(b"}}") + 1])  # the last event's args closed, not it
    error_line(run("info", path), str(path), "truncated JSON")
    (path := tmp_path / "object.json").write_bytes(json.dumps({"traceEvents": [event]}).encode()[:-2])
    error_line(run("info", path), str(path), "truncated JSON")


_WINDOW_START = {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "tid": "PyTorch "
                 "Profiler", "ts": 100}  # fmt: skip
_SESSION = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
            "ts": 100, "dur": 4_000}  # fmt: skip
_WINDOW_END = {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 5_000}


@pytest.mark.parametrize("marks", [[_WINDOW_START, _SESSION, _WINDOW_END], [_WINDOW_END]], ids=["all", "end alone"])
def test_a_trace_of_the_profiler_s_own_marks_alone_is_empty(write_trace, run, marks):
    """Kineto writes its marks of the recording window whatever it recorded: a trace of nothing else (the code to
    profile ran outside the profiler's context) is empty, one line and exit 2, not a trace with no findings."""
    path = write_trace({"schemaVersion": 1, "traceEvents": marks})
    error_line(run("scan", path), str(path), "empty trace: only the profiler's own marks of its window")
    recorded = write_trace({"schemaVersion": 1, "traceEvents": [*marks, complete("aten::mm", 200, 50)]})
    assert len(load_trace(recorded)) == len(marks) + 1
    counter = {"ph": "C", "name": "Memory", "pid": 1, "tid": 1, "ts": 200, "args": {"bytes": 5}}  # a reading is data
    assert len(load_trace(write_trace({"schemaVersion": 1, "traceEvents": [*marks, counter]}))) == len(marks)
