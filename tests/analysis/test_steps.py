"""analysis/steps.py at its edges: the device's span after a wait for work the capture does not hold, warm-up's signs
and its count, start-up's end, a cut-off last step, and host steps timed on the device. Each case is small and built
by hand, its answer worked out from the rule it tests."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import complete, thread_name

from perftool.analysis.launches import Launches
from perftool.analysis.steps import Steps, detect_steps, device_steps, startup_end, warmup_signs, warmup_steps
from perftool.pipeline.read import load_trace
from perftool.trace.model import Trace


def _read(write_trace, *events: dict) -> Trace:
    return load_trace(str(write_trace({"traceEvents": list(events)})))


def _kernel(ts: float, dur: float) -> dict:
    return complete("gemm_kernel", ts, dur, pid=0, tid=7, cat="kernel")


def _sync(ts: float, dur: float, tid: int = 1) -> dict:
    return complete("cudaDeviceSynchronize", ts, dur, tid=tid, cat="cuda_runtime")


def _copy_call(ts: float, dur: float) -> dict:
    """CUDA's asynchronous copy: it blocks where the host's memory is pageable (the runtime syncs the stream first)."""
    return complete("cudaMemcpyAsync", ts, dur, tid=1, cat="cuda_runtime")


def _device_copy(ts: float, memory: str) -> dict:
    return complete(f"Memcpy DtoH (Device -> {memory})", ts, 2, pid=0, tid=7, cat="gpu_memcpy")


def _marker(step: int, ts: float, dur: float) -> dict:
    return complete(f"ProfilerStep#{step}", ts, dur, cat="user_annotation")


@pytest.mark.parametrize("longest_first", [True, False])
def test_of_markers_starting_together_the_longest_is_the_step_whatever_the_file_s_order(write_trace, longest_first):
    """Two host threads mark each step from the same instant, one for longer: the step ends with the longer one,
    as it did only when the file listed it first."""
    events = []
    for step in range(4):
        pair = [
            complete(f"ProfilerStep#{step}", step * 1000, 950, tid=2, cat="user_annotation"),
            complete(f"ProfilerStep#{step}", step * 1000, 900, cat="user_annotation"),
        ]
        events += pair if longest_first else pair[::-1]
    steps = detect_steps(_read(write_trace, *events))
    assert steps.end.tolist() == [950, 1950, 2950, 3950] and steps.numbers().tolist() == [0, 1, 2, 3]


# The device's span: a host wait at the start covering an idle stretch of at least a fifth of the span, after device
# work of at most 5% of its busy time, all of it inside the wait give or take 1% of the stretch, is for unseen work.
SPANS = {
    "the wait covers the stretch": ([_kernel(0, 10), _kernel(300, 700), _sync(5, 300)], (300, 1000)),
    "a wait elsewhere": ([_kernel(0, 10), _kernel(300, 700), _sync(400, 300)], (0, 1000)),
    "an input worker's wait": (
        [thread_name(1, 2, "pt_data_worker"), _kernel(0, 10), _kernel(300, 700), _sync(5, 300, tid=2)],
        (0, 1000),
    ),
    "over 5% of the work before": ([_kernel(0, 50), _kernel(300, 700), _sync(5, 300)], (0, 1000)),
    "5% of the work before": ([_kernel(0, 10), _kernel(810, 190), _sync(5, 810)], (810, 1000)),
    "after the second piece of work": ([_kernel(0, 5), _kernel(10, 5), _kernel(300, 700), _sync(5, 300)], (300, 1000)),
    "the longest stretch, not the longest work after one": (
        [_kernel(0, 10), _kernel(300, 10), _kernel(320, 680), _sync(5, 300)],
        (300, 1000),
    ),
    "a stretch under a fifth": ([_kernel(0, 10), _kernel(205, 795), _sync(5, 205)], (0, 1000)),
    "a stretch of a fifth": ([_kernel(0, 10), _kernel(210, 790), _sync(5, 210)], (210, 1000)),
    "a wait a fifth long": ([_kernel(0, 10), _kernel(215, 785), _sync(11, 203)], (215, 1000)),
    "a wait starting past the slack": ([_kernel(0, 10), _kernel(300, 700), _sync(13, 290)], (0, 1000)),
    "a wait starting at the slack's edge": ([_kernel(0, 10), _kernel(1010, 990), _sync(20, 1000)], (1010, 2000)),
    "a wait ending at the slack's edge": ([_kernel(0, 10), _kernel(1010, 990), _sync(5, 995)], (1010, 2000)),
    "under a microsecond": ([_kernel(0, 0.002), _kernel(0.9, 0.1), _sync(0.001, 0.9)], (0.9, 1.0)),
    "a copy to pageable memory waits": (
        [_kernel(0, 10), _device_copy(300, "Pageable"), _kernel(302, 698), _copy_call(5, 299)],
        (300, 1000),
    ),
    "a copy to pinned memory does not": (
        [_kernel(0, 10), _device_copy(300, "Pinned"), _kernel(302, 698), _copy_call(5, 299)],
        (0, 1000),
    ),
}


@pytest.mark.parametrize(("events", "span"), list(SPANS.values()), ids=list(SPANS))
def test_the_device_s_span_starts_after_a_wait_for_work_the_capture_does_not_hold(write_trace, events, span):
    assert detect_steps(_read(write_trace, *events)).device_span == pytest.approx(span)


def test_a_first_step_the_wait_reaches_into_starts_when_the_device_resumes(write_trace):
    device = [_kernel(0, 10), _kernel(300, 700), _sync(5, 300)]
    inside = detect_steps(_read(write_trace, *device, _marker(0, 0, 400), _marker(1, 400, 600)))
    assert inside.start.tolist() == [300, 400]
    at_its_end = detect_steps(_read(write_trace, *device, _marker(0, 0, 300), _marker(1, 300, 700)))
    assert at_its_end.start.tolist() == [0, 300]  # the device resumes as the step ends: the step is the host's


# Warm-up's signs, per step, of four steps of a millisecond; the last step never has any.
STARTS, ENDS = np.array([0.0, 1000, 2000, 3000]), np.array([1000.0, 2000, 3000, 4000])


def _op(name: str, ts: float) -> dict:
    return complete(name, ts, 10, cat="cpu_op")


def _every_step(name: str = "aten::add") -> list[dict]:
    return [_op(name, at + 500) for at in STARTS]


def _signs(write_trace, *events: dict, startup: float | None = None) -> list[bool]:
    trace = _read(write_trace, *[_marker(i, at, 1000) for i, at in enumerate(STARTS)], *events)
    return warmup_signs(trace, STARTS, ENDS, startup).tolist()


def test_a_step_calling_an_op_no_later_step_calls_shows_warm_up(write_trace):
    """aten::conv at the first step's very start, and once more as the last step ends (after the steps)."""
    events = [*_every_step(), _op("aten::conv", 0), _op("aten::conv", 4000)]
    assert _signs(write_trace, *events) == [True, False, False, False]


def test_a_first_runtime_call_shows_warm_up(write_trace):
    events = [*_every_step(), complete("cudaFuncGetAttributes", 1200, 5, cat="cuda_runtime")]
    assert _signs(write_trace, *events) == [False, True, False, False]


def test_an_op_at_a_step_s_very_start_is_that_step_s(write_trace):
    assert _signs(write_trace, *_every_step(), _op("aten::mm", 1000)) == [False, True, False, False]


def test_an_instant_mark_is_not_a_call(write_trace):
    mark = {"ph": "i", "s": "t", "name": "aten::conv", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 100}
    assert _signs(write_trace, *_every_step(), mark) == [False, False, False, False]


def test_compiles_allocations_and_start_up_each_show_warm_up(write_trace):
    """Start-up ends inside step 0, step 1 compiles, steps 0 and 2 allocate (step 2 last)."""
    compiling = complete("compile_inner", 1100, 300, cat="cpu_op")
    allocating = [complete("cudaMalloc", at, 50, cat="cuda_runtime") for at in (100, 2100)]
    assert _signs(write_trace, *_every_step(), compiling, startup=500) == [True, True, False, False]
    assert _signs(write_trace, *_every_step(), compiling, *allocating) == [True, True, True, False]
    assert _signs(write_trace, *_every_step(), startup=0) == [False, False, False, False]  # ended as step 0 starts


def test_a_step_starting_inside_start_up_is_warm_up_when_slower_than_the_steady_steps_agree(write_trace):
    warmup = complete("warmup", 0, 500, cat="user_annotation")
    steps = [_marker(0, 100, 1200), *(_marker(i, 300 + i * 1000, 1000) for i in range(1, 5))]
    found = detect_steps(_read(write_trace, warmup, *steps))
    assert (found.startup_end, found.warmup) == (500, 1)


# How many leading steps are warm-up, from their durations and signs.
def test_warm_up_is_judged_against_the_median_of_the_later_half():
    durations = np.array([25.0, 10, 10, 10, 10, 20, 20, 20])  # the later half's median 20, the later 2/3's 15
    assert warmup_steps(durations, np.zeros(8, bool)) == 0


@pytest.mark.parametrize(
    ("first", "sign", "warmup"),
    [(15.0, False, 0), (15.5, False, 1), (11.0, True, 0), (11.5, True, 1)],
    ids=["1.5x", "over 1.5x", "1.1x with a sign", "over 1.1x with a sign"],
)
def test_a_leading_step_is_warm_up_past_its_ratio_to_the_typical_step(first, sign, warmup):
    durations = np.array([first, 10, 10, 10])
    assert warmup_steps(durations, np.array([sign, False, False, False])) == warmup


def test_warm_up_is_counted_per_run_and_at_least_one_step_stays():
    runs = np.array([[10.0, 10, 10, 10], [100, 100, 100, 100]])
    assert warmup_steps(runs, np.zeros((2, 4), bool)).tolist() == [0, 0]  # each run against its own typical step
    slow = np.array([[20.0, 20, 20], [20, 10, 10]])
    assert warmup_steps(slow, np.zeros((2, 3), bool), typical=np.array([[10.0], [10.0]])).tolist() == [2, 1]
    assert warmup_steps(np.array([30.0, 30, 30]), np.zeros(3, bool), typical=np.array([10.0])) == 2


# A last step cut off by the end of the capture: under half the median of the (up to) eight steps before it.
@pytest.mark.parametrize(
    ("durations", "truncated"),
    [([20, 20, 20, 20, 10], 0), ([20, 20, 20, 20, 9.5], 1), ([10, 10, 10, 10, 10, 30, 30, 30, 30, 9.5], 1)],
    ids=["half", "under half", "of the eight before"],
)
def test_a_last_step_under_half_the_typical_one_was_cut_off(write_trace, durations, truncated):
    starts = np.r_[0, np.cumsum(durations)[:-1]] * 100
    markers = [_marker(i, float(at), d * 100) for i, (at, d) in enumerate(zip(starts, durations))]
    steps = detect_steps(_read(write_trace, *markers))
    assert (steps.truncated, steps.count) == (truncated, len(durations) - truncated)


def test_start_up_of_half_the_capture_is_most_of_it():
    steps = Steps(np.array([]), np.array([]), 0, first=0.0, last=100.0, startup_end=50.0)
    assert steps.mostly_startup
    assert not Steps(np.array([]), np.array([]), 0, first=0.0, last=100.0, startup_end=49.0).mostly_startup


def test_a_trace_without_steps_reports_none_cut_off(write_trace):
    assert detect_steps(_read(write_trace, _kernel(0, 10))).truncated == 0


def test_a_trace_of_counters_alone_has_no_steps_and_no_span(write_trace):
    samples = [{"ph": "C", "name": "memory", "pid": 1, "tid": 1, "ts": 5 + i, "args": {"used": i}} for i in range(3)]
    steps = detect_steps(_read(write_trace, *samples))
    assert (steps.count, steps.first, steps.last, steps.window) == (0, 0.0, 0.0, (0.0, 0.0))


# Host steps timed on the device: a launch belongs to the step whose span holds its host time, start included.
def test_a_launch_at_a_step_s_start_is_that_step_s():
    launched = Launches(np.array([50.0, 100, 250]), np.array([90.0, 190, 290]))
    starts, ends = device_steps(launched, np.array([0.0, 100, 200]), np.array([100.0, 200, 300]))
    assert (starts.tolist(), ends.tolist()) == ([0, 100, 200], [100, 200, 290])  # the host starts each next step


def test_a_launch_as_a_step_ends_is_not_that_step_s():
    launched = Launches(np.array([50.0, 100, 250]), np.array([90.0, 400, 290]))
    starts, ends = device_steps(launched, np.array([0.0, 200]), np.array([100.0, 300]))
    assert (starts.tolist(), ends.tolist()) == ([0, 200], [200, 290])  # not 400: the launch at 100 is no step's


@pytest.mark.parametrize(
    ("next_host_start", "boundary"),
    [(150.0, 190.0), (250.0, 250.0)],  # the host ahead of the device: its work's end; behind it: the host's start
)
def test_a_step_on_the_device_ends_with_its_work_and_not_before_the_host_starts_the_next(next_host_start, boundary):
    """A host that runs ahead starts step 2 while step 1's work runs: the step ends where that work ends. A host that
    falls behind leaves the device idle until it starts step 2 (a pause of the host's, between steps): that idle
    time is still step 1's, as the host's own clock says, not the next step's."""
    launched = Launches(np.array([10.0, next_host_start + 10]), np.array([190.0, next_host_start + 300]))
    starts, ends = device_steps(launched, np.array([0.0, next_host_start]), np.array([100.0, next_host_start + 100]))
    assert (starts.tolist(), ends.tolist()) == ([0, boundary], [boundary, next_host_start + 300])


def test_steps_marked_on_the_device_are_not_timed_again_by_the_host_s_launches(write_trace):
    """Markers on the GPU's annotation track only: they are the device's times already, flows or none."""
    events = []
    for step in range(4):
        t = step * 1000
        events += [
            complete(f"ProfilerStep#{step}", t, 999, pid=0, tid=8, cat="gpu_user_annotation"),
            complete("cudaLaunchKernel", t + 10, 5, cat="cuda_runtime"),
            _kernel(t + 100, 500),
            {"ph": "s", "id": step + 1, "name": "ac2g", "cat": "ac2g", "pid": 1, "tid": 1, "ts": t + 10},
            {"ph": "f", "bp": "e", "id": step + 1, "name": "ac2g", "cat": "ac2g", "pid": 0, "tid": 7, "ts": t + 100},
        ]
    steps = detect_steps(_read(write_trace, *events))
    assert (steps.start.tolist(), steps.clock) == ([0, 1000, 2000, 3000], "host")


# Start-up's end: slow initialisation calls, warm-up annotations, and the host call a compiled model's warm-up ran in.
def _graph_made(ts: float) -> dict:
    return complete("cudaGraphInstantiate", ts, 100, cat="cuda_runtime")


FIRST_STEP = _marker(0, 1000, 1000)
ENCLOSED = {
    "its enclosing call": [complete("CompiledFunction", 200, 700, cat="cpu_op"), _graph_made(300)],
    "after an earlier call": [
        complete("aten::empty", 0, 100, cat="cpu_op"),
        complete("CompiledFunction", 200, 700, cat="cpu_op"),
        _graph_made(300),
    ],
    "starting together": [complete("CompiledFunction", 300, 600, cat="cpu_op"), _graph_made(300)],
    "inside a Python frame": [
        complete("train.py(10): <module>", 0, 5000, cat="python_function"),
        complete("CompiledFunction", 200, 700, cat="cpu_op"),
        _graph_made(300),
    ],
    "another thread's long call": [
        complete("aten::copy_", 0, 3000, tid=2, cat="cpu_op"),
        complete("CompiledFunction", 200, 700, cat="cpu_op"),
        _graph_made(300),
    ],
}


@pytest.mark.parametrize("events", list(ENCLOSED.values()), ids=list(ENCLOSED))
def test_start_up_ends_with_the_host_call_a_compiled_model_warmed_up_in(write_trace, events):
    assert startup_end(_read(write_trace, *events, FIRST_STEP, _kernel(1100, 500))) == 900


def test_a_model_s_warm_up_from_the_first_step_on_is_the_step_s(write_trace):
    events = [complete("CompiledFunction", 1000, 700, cat="cpu_op"), _graph_made(1000), FIRST_STEP]
    assert startup_end(_read(write_trace, *events, _kernel(1100, 500))) == 1100  # the warm-up's own end


def test_an_initialisation_call_of_a_millisecond_is_start_up(write_trace):
    assert startup_end(_read(write_trace, complete("cuInit", 0, 1000), _kernel(2000, 10))) == 1000
    assert startup_end(_read(write_trace, complete("cuInit", 0, 999), _kernel(2000, 10))) is None


def test_a_slow_first_runtime_call_is_start_up_only_before_device_work(write_trace):
    slow_malloc = complete("cudaMalloc", 0, 2000, cat="cuda_runtime")
    assert startup_end(_read(write_trace, slow_malloc)) == 2000  # no device work at all
    assert startup_end(_read(write_trace, slow_malloc, _kernel(0, 10))) is None  # work starts with it
    initialised = complete("cuInit", 0, 2000)
    after_work = slow_malloc | {"ts": 2200}
    assert startup_end(_read(write_trace, initialised, _kernel(2100, 10), after_work)) == 2000


# What a notebook shows of the steps.
def _four_steps() -> Steps:
    return Steps(np.array([0.0, 150, 200, 300]), np.array([150.0, 200, 300, 400]), 1)


def test_steps_print_as_their_count_warm_up_and_steady_median():
    assert repr(_four_steps()) == "Steps(4 on the host clock, 1 warm-up, steady median 100.0 µs)"
    assert repr(Steps(np.array([]), np.array([]), 0)) == "Steps(0 on the host clock, 0 warm-up)"


def test_steps_as_a_table_have_a_row_a_step():
    pytest.importorskip("pandas")
    table = _four_steps().to_pandas()
    assert list(table.columns) == ["start", "end", "duration", "warmup"]
    assert table["duration"].tolist() == [150, 50, 100, 100]
    assert table["warmup"].tolist() == [True, False, False, False]
    assert (table["start"].tolist(), table["end"].tolist()) == ([0, 150, 200, 300], [150, 200, 300, 400])


def test_the_profiler_s_mark_of_writing_the_trace_is_no_end_of_the_job(write_trace, run):
    """Kineto stamps "Record Window End" once it has stopped and processed what it recorded (5 s after the job's last
    event here, a large capture's processing): the capture ends with the job's last event, in the steps' bounds, the
    span info gives and the share of it start-up takes."""
    events = [
        complete("cudaGetDeviceCount", 0, 6_000, cat="cuda_runtime", pid=1, tid=1),  # start-up: 6 of 10 ms
        *[complete("aten::mm", 6_000 + 400 * i, 300, cat="cpu_op", pid=1, tid=1) for i in range(10)],
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 5_010_000},
    ]
    trace = _read(write_trace, *events)
    assert detect_steps(trace).last == 9_900
    path = write_trace({"schemaVersion": 1, "traceEvents": events})
    assert "span 9.900 ms" in " ".join(run("info", path).stdout.split())
    notes = " ".join(run("scan", path, "--format", "json").stdout.split())
    assert "takes 6.000 ms of the 9.900 ms captured" in notes
