"""What the detectors share: the event that overlaps an idle stretch most, read only where it can be; the evidence
a detection shows (its longest events, idle stretches named after the host's calls), another fix for one problem,
and names in short lists."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from builders import NCCL, meta, span

from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.rules.detectors.base import Detection, Scope, distinct_names, kernel_runs, overlapping_most
from perftool.rules.findings import EventRef
from perftool.trace.model import Kind, Role


def _directly(begin: np.ndarray, finish: np.ndarray, start: float, end: float) -> int | None:
    shared = np.minimum(finish, end) - np.maximum(begin, start)
    return int(np.argmax(shared)) if shared.size and shared.max() > 0 else None


@pytest.mark.parametrize("seed", range(20))
def test_the_span_sharing_most_time_is_found_between_two_searches_where_the_spans_are_in_order(seed):
    rng = np.random.default_rng(seed)
    begin = np.sort(rng.integers(0, 200, 40)).astype(float)  # top-level calls: ends in order too, some touching
    finish = np.maximum.accumulate(begin + rng.integers(0, 12, 40))
    for start, end in rng.integers(-10, 220, (30, 2)).astype(float):
        start, end = min(start, end), max(start, end)
        expected = _directly(begin, finish, start, end)
        assert overlapping_most(begin, finish, True, start, end) == expected
        backwards = overlapping_most(begin[::-1], finish[::-1], False, start, end)  # not in order: every span read
        assert backwards == _directly(begin[::-1], finish[::-1], start, end)


def test_ties_go_to_the_first_and_no_overlap_is_none():
    begin, finish = np.array([0.0, 10.0, 20.0]), np.array([10.0, 20.0, 30.0])
    assert overlapping_most(begin, finish, True, 5.0, 15.0) == 0  # 5 µs in each of the first two
    assert overlapping_most(begin, finish, True, 30.0, 40.0) is None  # touching is not sharing
    assert overlapping_most(np.zeros(0), np.zeros(0), True, 0.0, 1.0) is None


# --- the evidence a detection shows ---


def _scoped(tmp_path, host: list[tuple[str, float, float]], start_us: float = 50.0) -> Scope:
    """Two steps from ``start_us`` with a kernel each on stream 7, and the host's calls (name, start, end) µs."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0"),
              meta("thread_name", 0, 7, name="stream 7")]  # fmt: skip
    for step in range(2):
        t = start_us + step * 1000.0
        events += [span(f"ProfilerStep#{step}", 100, 1, t, 999, "user_annotation"),
                   span(f"gemm_{step}", 0, 7, t + 900, 50 + step, "kernel")]  # fmt: skip
    events += [span(name, 100, 1, begin, end - begin, "cpu_op") for name, begin, end in host]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return analyse_trace(load_trace(str(path)), [])[1]


def test_the_longest_events_are_the_evidence_where_perfetto_shows_them(tmp_path):
    scope = _scoped(tmp_path, [])
    trace = scope.trace
    kernels = np.flatnonzero(trace.name_matches(re.compile("^gemm")))
    assert scope.steps.first == 50.0
    first, second = scope.events(kernels)
    assert (first.name, first.ts_us, first.at_us, first.dur_us) == ("gemm_1", 1950.0, 1900.0, 51.0)
    assert (second.name, second.at_us) == ("gemm_0", 900.0)
    assert first.track == trace.tracks[trace.track[kernels[0]]].label
    assert first.event == EventRef(pid=0, tid=7, ts_us=1950.0)
    assert len(replace(scope, evidence_count=1).events(kernels)) == 1


def test_an_idle_stretch_is_named_after_the_host_call_overlapping_it_most(tmp_path):
    """The longest stretches first, on the device's track; each named after what the host ran through most of it
    (a nested call's caller where the caller covers more), or plain idle where it ran nothing."""
    host = [("aten::linear", 100.0, 300.0), ("Optimizer.step", 400.0, 900.0), ("aten::add_", 420.0, 500.0)]
    scope = _scoped(tmp_path, host)
    trace = scope.trace
    calls = np.flatnonzero(trace.on_roles(Role.HOST) & (trace.kind != Kind.STEP))
    pieces = (np.array([150.0, 450.0, 1500.0]), np.array([260.0, 800.0, 1530.0]))
    found = scope.idle_stretches(pieces, calls)
    device = trace.tracks[int(trace.tracks_with_role(Role.DEVICE)[0])].label
    assert [(e.ts_us, e.at_us, e.dur_us, e.track) for e in found] == [
        (450.0, 400.0, 350.0, device), (150.0, 100.0, 110.0, device), (1500.0, 1450.0, 30.0, device)
    ]  # fmt: skip
    assert [e.name for e in found] == [
        "idle while host runs Optimizer.step", "idle while host runs aten::linear", "idle"
    ]  # fmt: skip
    assert [e.event for e in found] == [
        EventRef(pid=100, tid=1, ts_us=400.0),
        EventRef(pid=100, tid=1, ts_us=100.0),
        None,
    ]
    assert scope.idle_stretches(pieces, calls[::-1]) == found  # in any order


@pytest.mark.parametrize(
    ("spans", "piece", "name"),
    [
        ([("a", 100.0, 150.0), ("b", 300.0, 350.0), ("c", 120.0, 400.0)], (200.0, 290.0), "c"),  # starts out of order
        ([("a", 100.0, 900.0), ("b", 200.0, 300.0)], (400.0, 800.0), "a"),  # ends out of order
        ([("a", 100.0, 150.0), ("b", 200.0, 1000.0), ("c", 300.0, 350.0), ("d", 400.0, 450.0)], (500.0, 600.0), "b"),
    ],
)
def test_calls_out_of_order_are_all_read(tmp_path, spans, piece, name):
    scope = _scoped(tmp_path, spans)
    trace = scope.trace
    calls = np.array([np.flatnonzero(trace.name_matches(re.compile(f"^{name}$")))[0] for name, _, _ in spans])
    (found,) = scope.idle_stretches((np.array([piece[0]]), np.array([piece[1]])), calls)
    assert found.name == f"idle while host runs {name}"


def test_another_fix_for_the_same_problem_has_no_alternatives_of_its_own():
    other = Detection(1.0, {"a": 1}, [], alternatives=[Detection(2.0, {}, [])]).instead("v", {"k": 2}, b=3)
    assert (other.variant, other.changes, other.values, other.alternatives) == ("v", {"k": 2}, {"a": 1, "b": 3}, [])


def test_names_most_time_first_in_a_short_list(tmp_path):
    host = [
        ("x", 100.0, 110.0),
        ("y", 120.0, 200.0),
        ("x", 210.0, 300.0),
        ("z", 310.0, 320.0),
        ("w", 330.0, 340.0),
        ("v", 350.0, 355.0),
    ]
    scope = _scoped(tmp_path, host)
    trace = scope.trace
    rows = np.flatnonzero(trace.name_matches(re.compile("^[vwxyz]$")))
    assert distinct_names(trace, rows) == "x, y, w, z and 1 more"  # x 100 µs in all, y 80, then w and z (10) by name
    assert distinct_names(trace, rows, 2, str.upper) == "X, Y and 3 more"
    given = np.where(trace.name[rows] == trace.name[rows[-1]], 500.0, 1.0)  # v's time given as the most
    assert distinct_names(trace, rows, 2, time=given) == "v, x and 3 more"
    summed = np.array([0.1, 0.0, 0.2, 0.0, 0.3, 0.0])  # x's 0.1 + 0.2 is w's 0.3 but for the last bit: a tie, by name
    assert [trace.names[i] for i in trace.name[rows].tolist()] == ["x", "y", "x", "z", "w", "v"]
    assert distinct_names(trace, rows, 2, time=summed) == "w, x and 3 more"
    kernels = np.flatnonzero(trace.name_matches(re.compile("^gemm")))
    assert kernel_runs(scope, kernels) == {"names": "gemm_1, gemm_0", "per_step": 1.0, "kernel_ms_per_step": 0.0505}


def test_kernel_runs_name_three_kernels_shortened(tmp_path):
    kernel = "void at::native::vectorized_elementwise_kernel<4, at::native::{}<float>>(int, at::native::{}<float>)"
    host = [(kernel.format(op, op), 100.0 + 100 * k, 150.0 + 100 * k + k) for k, op in enumerate("ABCD")]
    scope = _scoped(tmp_path, host)
    rows = np.flatnonzero(scope.trace.name_matches(re.compile("vectorized")))
    names = kernel_runs(scope, rows)["names"]
    assert (
        names == "vectorized_elementwise_kernel<4, D<…>>, vectorized_elementwise_kernel<4, C<…>>, "
        "vectorized_elementwise_kernel<4, B<…>> and 1 more"
    )


def test_of_equally_long_events_the_earliest_are_the_evidence_whatever_the_file_s_order(tmp_path):
    host = [(f"aten::copy_{n}", begin, begin + 20.0) for n, begin in enumerate([700.0, 500.0, 300.0, 100.0])]
    scope = _scoped(tmp_path, host)  # listed latest first
    rows = np.flatnonzero(scope.trace.name_matches(re.compile("^aten::copy_")))
    assert [e.ts_us for e in replace(scope, evidence_count=2).events(rows)] == [100.0, 300.0]
    assert [e.ts_us for e in scope.events(rows[::-1])] == [100.0, 300.0, 500.0, 700.0]


def test_an_idle_stretch_is_drawn_on_the_stream_that_computes_most(tmp_path):
    """Not on whichever device track the file lists first: here a stream of collectives, listed before the compute
    stream and busier than it."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0"),
              meta("thread_name", 0, 20, name="stream 20"), meta("thread_name", 0, 7, name="stream 7")]  # fmt: skip
    for step in range(3):
        t = 50.0 + step * 1000.0
        events += [span(f"ProfilerStep#{step}", 100, 1, t, 999, "user_annotation"),
                   span(NCCL, 0, 20, t + 10, 800, "kernel"),
                   span(f"gemm_{step}", 0, 7, t + 900, 50, "kernel")]  # fmt: skip
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    scope = analyse_trace(load_trace(str(path)), [])[1]
    trace = scope.trace
    assert trace.tracks[int(trace.tracks_with_role(Role.DEVICE)[0])].label.endswith("stream 20")
    (found,) = scope.idle_stretches((np.array([100.0]), np.array([200.0])), np.zeros(0, dtype=np.int64))
    assert found.track.endswith("stream 7")
