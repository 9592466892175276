"""Timeline analysis: interval algebra, steps and warm-up, the shared metrics."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import TORCH_FIXTURE, complete, process_name, thread_name

from perftool.analysis import METRICS, compute_metrics, detect_steps, intervals
from perftool.analysis.family import device_family, device_name
from perftool.analysis.idle import attribute_idle
from perftool.pipeline.read import load_trace


def covered_by_brute_force(starts, ends, resolution=0.5):
    grid = np.arange(0, 200, resolution) + resolution / 2
    return {float(x) for x in grid if np.any((starts <= x) & (x < ends))}


@pytest.mark.parametrize("seed", range(5))
def test_union_and_overlap_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    a_start = rng.integers(0, 180, 30).astype(float)
    a = (a_start, a_start + rng.integers(1, 20, 30))
    b_start = rng.integers(0, 180, 30).astype(float)
    b = (b_start, b_start + rng.integers(1, 20, 30))
    ua, ub = intervals.union(*a), intervals.union(*b)
    assert (ua[0][1:] > ua[1][:-1]).all()  # disjoint and sorted
    assert intervals.total(ua) == pytest.approx(0.5 * len(covered_by_brute_force(*a)))
    both = covered_by_brute_force(*a) & covered_by_brute_force(*b)
    assert intervals.overlap(ua, ub) == pytest.approx(0.5 * len(both))


@pytest.mark.parametrize(("seed", "a_size", "b_size"), [(0, 0, 7), (1, 7, 0), (2, 1, 40), (3, 40, 3), (4, 12, 12)])
def test_overlap_of_sets_of_any_sizes_matches_brute_force(seed, a_size, b_size):
    """The smaller set's intervals are searched in the larger's, whichever is given first; intervals that touch at
    whole microseconds share no time."""
    rng = np.random.default_rng(seed)
    sets = []
    for size in (a_size, b_size):
        starts = rng.integers(0, 180, size).astype(float)
        sets.append(intervals.union(starts, starts + rng.integers(1, 20, size)))
    both = covered_by_brute_force(*sets[0]) & covered_by_brute_force(*sets[1])
    assert intervals.overlap(sets[0], sets[1]) == intervals.overlap(sets[1], sets[0]) == pytest.approx(0.5 * len(both))
    touching = (np.array([0.0, 10.0]), np.array([5.0, 15.0])), (np.array([5.0]), np.array([10.0]))
    assert intervals.overlap(*touching) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_time_covered_in_many_windows_at_once_is_each_window_clipped_alone(seed):
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 180, 40).astype(float)
    covered = intervals.union(starts, starts + rng.integers(1, 20, 40))
    los = rng.uniform(-10, 200, 25)
    his = los + rng.uniform(-5, 60, 25)  # some windows empty or inverted: nothing covered
    alone = [intervals.total(intervals.clip(covered, lo, hi)) for lo, hi in zip(los, his)]
    np.testing.assert_allclose(intervals.totals_in(covered, los, his), alone, atol=1e-9)


def test_gaps_within_a_window():
    busy = intervals.union(np.array([10.0, 30.0, 35.0]), np.array([20.0, 40.0, 38.0]))
    gap_starts, gap_ends = intervals.gaps(busy, 0.0, 50.0)
    assert list(zip(gap_starts, gap_ends)) == [(0, 10), (20, 30), (40, 50)]


@pytest.mark.parametrize("base", [0.0, 3.7e12, 6.9e12])  # a clock started with the capture; 10^12 µs since boot
def test_intervals_a_nanosecond_apart_are_one_and_two_apart_are_two(base):
    """ROCm's profiler writes back-to-back kernels 1 ns apart, and a start plus a length rounds by a unit in the last
    place where times are large: neither is idle time. A gap of 10 ns is."""
    starts = base + np.array([0.0, 5.001, 10.011])
    ends = base + np.array([5.0, 10.0, 15.0])  # 1 ns, then 11 ns, to the next
    merged = intervals.union(starts, ends)
    assert merged[0].tolist() == [starts[0], starts[2]] and merged[1].tolist() == [ends[1], ends[2]]
    assert intervals.resolution(starts[0], ends[-1]) < 0.004  # at most 4 ns, where a real gap is microseconds


def test_a_microsecond_apart_stays_apart_at_unix_time_in_microseconds():
    """Times since 1970 in µs (about 1.6e15) are whole microseconds a float holds exactly: 1 µs apart is a gap."""
    starts, ends = np.array([1.61e15, 1.61e15 + 6.0]), np.array([1.61e15 + 5.0, 1.61e15 + 9.0])
    assert intervals.union(starts, ends)[0].size == 2


def step_trace(step_durations, compile_in_first=False, device_busy=None, h2d=None):
    """Host steps back to back on pid 1, device work on pid 0 stream 7, optional compile."""
    events = [process_name(1, "python"), thread_name(1, 1, "main"), thread_name(0, 7, "stream 7")]
    t = 0.0
    for i, duration in enumerate(step_durations):
        events.append(complete(f"ProfilerStep#{i}", t, duration, cat="user_annotation"))
        events.append(complete("aten::mm", t + 1, duration - 2, cat="cpu_op"))
        busy = device_busy if device_busy is not None else duration / 2
        events.append(complete("gemm", t + 5, busy, pid=0, tid=7, cat="kernel"))
        if h2d:
            events.append(
                complete("Memcpy HtoD (Pageable -> Device)", t + h2d[0], h2d[1], pid=0, tid=7, cat="gpu_memcpy")
            )
        t += duration
    if compile_in_first:
        events.append(complete("XlaCompile", 2, 50, cat="cpu_op"))
    return {"schemaVersion": 1, "traceEvents": events}


def test_warmup_skips_compiling_and_slow_leading_steps(write_trace):
    steps = detect_steps(load_trace(write_trace(step_trace([500, 300, 100, 101, 99, 100], compile_in_first=True))))
    assert steps.count == 6 and steps.warmup == 2
    assert steps.steady_durations.tolist() == [100, 101, 99, 100]


def test_no_warmup_when_steps_are_even(write_trace):
    assert detect_steps(load_trace(write_trace(step_trace([100, 102, 98, 100])))).warmup == 0


def test_throughput_counts_every_step_not_the_median_one(write_trace):
    # a loop of 4 steps: 3 back to back, then one carrying the host's dispatch gap
    m = compute_metrics(load_trace(write_trace(step_trace([100, 100, 100, 500] * 3))))
    assert m["step_time_us.median"] == 100
    assert m["throughput.steps_per_s"] == pytest.approx(1e6 / m["step_time_us.mean"])
    assert m["throughput.steps_per_s"] < 1e6 / 150


def test_ops_of_equal_time_are_ranked_by_name_whatever_the_file_s_order(write_trace):
    """A 30 µs gemm a step and twelve kernels of 3.3 µs in all, each made of other lengths in another order (float
    sums that differ in the last bit): the top ten are the gemm, then nine of the twelve by name, however the file
    lists them."""
    trace = step_trace([100] * 4, device_busy=30)
    names = [f"kernel_{letter}" for letter in "LKJIHGFEDCBA"]  # listed last name first
    lengths = [0.1, 0.2, 0.7, 2.3]
    for step in range(4):
        trace["traceEvents"] += [complete(name, step * 100 + 40 + 4 * k, lengths[(step + k) % 4], pid=0, tid=7,
                                          cat="kernel") for k, name in enumerate(names)]  # fmt: skip
    ranked = [op.name for op in compute_metrics(load_trace(write_trace(trace))).top_ops]
    trace["traceEvents"].reverse()
    assert [op.name for op in compute_metrics(load_trace(write_trace(trace))).top_ops] == ranked
    assert ranked == ["gemm", *sorted(names)[:9]]


def test_metrics_on_a_trace_with_known_answers(write_trace):
    # 4 steps of 100 µs; each has 40 µs of kernel and a 20 µs H2D copy, of which 10 µs overlaps the kernel
    trace = load_trace(write_trace(step_trace([100] * 4, device_busy=40, h2d=(35, 20))))
    m = compute_metrics(trace)
    assert m["steps.count"] == 4 and m["step_time_us.median"] == 100
    assert m["throughput.steps_per_s"] == pytest.approx(1e4)
    assert m["window.duration_us"] == 400
    assert m["device.busy_fraction"] == pytest.approx(4 * 50 / 400)  # kernel 5..45 + copy 35..55
    assert m["device.idle_fraction"] == pytest.approx(1 - 200 / 400)
    assert m["device.compute_fraction"] == pytest.approx(0.4)
    assert m["device.idle_gaps.count"] == 5  # before each step's work, and after the last
    assert m["device.idle_gap_us.max"] == pytest.approx(50)  # 55 -> 105
    assert m["h2d.count"] == 4 and m["h2d.time_us"] == pytest.approx(80)
    assert m["h2d.overlap_fraction"] == pytest.approx(0.5)
    assert m["device.ops.count"] == 4 and m["device.op_time_us.median"] == 40
    assert math.isnan(m["d2h.overlap_fraction"]) and m["d2h.count"] == 0
    assert m["recompilations.count"] == 0 and m["compile.count"] == 0


def test_recompilation_after_warmup_is_counted(write_trace):
    document = step_trace([100] * 6)
    document["traceEvents"].append(complete("XlaCompile", 450, 20, cat="cpu_op"))
    m = compute_metrics(load_trace(write_trace(document)))
    assert m["compile.count"] == 1 and m["recompilations.count"] == 1


def test_every_metric_is_documented_and_every_documented_metric_is_computed(write_trace):
    m = compute_metrics(load_trace(write_trace(step_trace([100] * 3))))
    assert set(m.values) == set(METRICS)


def test_real_fixture_step_times_match_the_raw_annotations():
    import gzip

    raw = json.loads(gzip.decompress(TORCH_FIXTURE.read_bytes()))
    expected = sorted((e["ts"], e["dur"]) for e in raw["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    m = compute_metrics(load_trace(TORCH_FIXTURE))
    assert m["steps.count"] == len(expected) == 4
    assert sorted(m.step_times_us) == pytest.approx(sorted(d for _, d in expected[int(m["steps.warmup"]) :]))
    assert math.isnan(m["device.busy_fraction"])  # a CPU-only profile has no device tracks
    assert m["sync.per_step"] == pytest.approx(1.0)  # one loss.item() per step
    assert m.top_ops_scope == "host"
    assert "aten::mm" in {op.name for op in m.top_ops}


def marked_steps(first_number: int, steps: int, at: float, warmup_us: float = 0.0) -> dict:
    """A Kineto trace at ``at`` µs (a Unix time in µs is about 1.7e15): ``warmup_us`` of a warm-up annotation, then
    ``steps`` steps of 10 ms marked ProfilerStep#``first_number``... on, each with 6 ms of a kernel."""
    events = [process_name(1, "python"), thread_name(1, 1, "main"), thread_name(0, 7, "stream 7")]
    if warmup_us:
        events.append(complete("warmup", at, warmup_us, cat="user_annotation"))
    start = at + warmup_us
    for i in range(steps):
        t = start + i * 10_000
        events += [
            complete(f"ProfilerStep#{first_number + i}", t, 9_999, cat="user_annotation"),
            complete("gemm_kernel", t + 1_000, 6_000, pid=0, tid=7, cat="kernel"),
        ]
    return {"traceEvents": events}


def test_steps_keep_the_numbers_their_markers_give(write_trace):
    """A capture that starts at step 7 (a profiler schedule's wait and warm-up steps not recorded) numbers its steps
    from 7, as the user's loop did, not from 0."""
    steps = detect_steps(load_trace(write_trace(marked_steps(7, 6, at=1.7e15))))
    assert steps.numbers().tolist() == [7, 8, 9, 10, 11, 12]


@pytest.mark.parametrize(("warmup_us", "mostly"), [(5_000.0, False), (200_000.0, True)])
def test_start_up_is_most_of_the_capture_by_its_share_of_the_capture_s_time(write_trace, warmup_us, mostly):
    """5 ms of warm-up before 60 ms of steps is a small share, 200 ms most of the capture, wherever the clock's zero
    lies (the capture's own times are a Unix time in µs)."""
    steps = detect_steps(load_trace(write_trace(marked_steps(0, 6, at=1.7e15, warmup_us=warmup_us))))
    assert steps.startup_end == pytest.approx(1.7e15 + warmup_us)
    assert steps.mostly_startup is mostly


def test_intersect_and_subtract():
    a = (np.array([0.0, 10.0]), np.array([5.0, 20.0]))
    b = (np.array([3.0, 12.0]), np.array([11.0, 14.0]))
    both = intervals.intersect(a, b, 0.0, 20.0)
    assert both[0].tolist() == [3.0, 10.0, 12.0] and both[1].tolist() == [5.0, 11.0, 14.0]
    rest = intervals.subtract(a, b, 0.0, 20.0)
    assert rest[0].tolist() == [0.0, 11.0, 14.0] and rest[1].tolist() == [3.0, 12.0, 20.0]
    assert intervals.total(both) + intervals.total(rest) == intervals.total(a)


def test_idle_time_goes_to_one_cause_each_in_priority_order(write_trace):
    """Device idle 100-1000: compile covers 100-300, the host runs 200-600, nothing explains 600-1000."""
    events = [
        process_name(1, "python3"),
        process_name(0, "GPU 0"),
        complete("kernel_a", 0, 100, pid=0, tid=7, cat="kernel"),
        complete("kernel_b", 1000, 100, pid=0, tid=7, cat="kernel"),
        complete("XlaCompile", 100, 200, pid=1, tid=1, cat="cpu_op"),
        complete("aten::add", 200, 400, pid=1, tid=1, cat="cpu_op"),
    ]
    trace = load_trace(write_trace({"traceEvents": events, "deviceProperties": []}))
    idle = attribute_idle(trace, 0.0, 1100.0)
    assert idle.total == 900.0
    assert idle.time("compile") == 200.0 and idle.time("host") == 300.0 and idle.time("other") == 400.0
    assert sum(idle.time(c) for c in idle.by_cause) == idle.total


@pytest.mark.parametrize("wait", ["cudaStreamSynchronize", "cudaMemcpy"])
@pytest.mark.parametrize(
    ("load_at", "drained_at"),
    [(100.0, 100.0), (150.0, 100.0), (100.0, 100.5)],
    ids=["as the device drains", "after the wait returns", "before the device's last work is recorded done"],
)
def test_a_wait_for_the_device_keeps_the_idle_after_it_only_until_the_host_loads_its_batch(
    write_trace, wait, load_at, drained_at
):
    """The host waits for the step's kernel in a sync (or a read-back) until 100, the device then idles until 1000:
    the stretch is the wait's until the host starts loading its next batch, the input's from there, even where the
    load begins the instant the device drains, or before the device's clock records its kernel done (the clocks
    differ by a fraction of a microsecond): the host loads already, and no part of the stretch is the wait's."""
    events = [
        process_name(1, "python3"),
        process_name(0, "GPU 0"),
        complete("kernel_a", 0, drained_at, pid=0, tid=7, cat="kernel"),
        complete("kernel_b", 1000, 100, pid=0, tid=7, cat="kernel"),
        complete(wait, 10, 90, pid=1, tid=1, cat="cuda_runtime"),
        *(complete("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", start, end - start, pid=1, tid=1,
                   cat="user_annotation") for start, end in ((load_at, 900.0), (1010.0, 1050.0))),
    ]  # fmt: skip
    trace = load_trace(write_trace({"traceEvents": events, "deviceProperties": []}))
    idle = attribute_idle(trace, 0.0, 1100.0)
    cause = "sync" if wait == "cudaStreamSynchronize" else "blocking_copy"
    assert idle.time(cause) == max(load_at - drained_at, 0.0)
    assert idle.time("input_wait") == 900.0 - max(load_at, drained_at)


def test_device_family_from_names_and_dialect(write_trace):
    def family(*names):
        return device_family(load_trace(write_trace({"traceEvents": [complete(n, 0, 1) for n in names]})))

    assert family("CPU fallback digamma : self=HPUBFloat16Type") == "hpu"
    assert family("DstStridedCopy") == "ipu"
    assert family("AscendCL@aclmdlExecute") == "npu"
    assert family("matmul") == "generic"


@pytest.mark.parametrize(
    ("second", "named"),
    [("HCCL", "NPU"), ("Ascend Hardware", "2 × NPU")],
    ids=["its collectives' own process", "a second device computing"],
)
def test_a_process_of_collectives_alone_is_no_device_of_its_own(write_trace, second, named):
    """msprof draws an NPU's collectives in a process of their own (HCCL) beside its Ascend Hardware streams: one NPU,
    not two; a second process where the device computes is a second device."""
    events = [{"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "NPU"}} for pid in (3, 4)]
    events += [
        process_name(3, "Ascend Hardware"),
        process_name(4, second),
        complete("MatMulV2", 0, 500, pid=3, tid=2),
        complete("hcom_allReduce__1_0_1" if second == "HCCL" else "MatMulV2", 500, 300, pid=4, tid=1),
    ]
    trace = load_trace(str(write_trace({"traceEvents": events})))
    assert trace.dialect == "ascend" and device_name(trace) == named
