"""A device clock behind the host's (its work starting before the calls that launch it) is moved onto the host's, so
that every figure reads the device's work against what the host did at the time; one ahead, or a stray pair, is
left."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import complete, leaving, process_name, scanned, spy_on_disk, thread_name

from perftool import dialects
from perftool.analysis.confidence import _device_clock
from perftool.analysis.device_clock import DEVICE_CLOCK, align_device_clock
from perftool.analysis.launches import launch_rows
from perftool.pipeline.read import load_trace
from perftool.trace.loader import read_trace
from perftool.trace.model import Kind

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
STEPS = 6
STEP_US = 1000.0
LATENCY_US = 5.0  # from each launch call's start to its kernel's


def _capture(offset_us: float = 0.0, early: int = 0, second_gpu: bool = False) -> dict:
    """A Kineto capture of ``STEPS`` steps: the host launches four kernels a step (200 µs apart), each starting
    ``LATENCY_US`` to 5.75 µs more after its launch call (a quarter µs more each), the device's times written
    ``offset_us`` off the host's; the first ``early`` kernels (of all) start 10 µs before their calls instead (a
    correlation id paired wrongly). A host thread in the GPU's process (as ROCm's Kineto writes one) runs an op a
    step; with ``second_gpu``, a second GPU runs a kernel a step too."""
    events = [
        {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    correlation = 0
    for step in range(STEPS):
        t = step * STEP_US
        events.append(complete(f"ProfilerStep#{step}", t, STEP_US - 1, pid=100, tid=1, cat="user_annotation"))
        for k in range(4):
            correlation += 1
            call = t + 10 + 200 * k
            latency = LATENCY_US + (correlation - 1) / 4  # 5 to 10.75 µs, no two alike
            start = call + latency + offset_us - (latency + 10 if correlation <= early else 0)
            events.append(complete("cudaLaunchKernel", call, 8, pid=100, tid=1, cat="cuda_runtime",
                                   args={"correlation": correlation}))  # fmt: skip
            events.append(complete("gemm_kernel", start, 150, pid=0, tid=7, cat="kernel",
                                   args={"correlation": correlation, "device": 0, "stream": 7}))  # fmt: skip
        events.append(complete("aten::empty", t + 900, 3, pid=0, tid=300, cat="cpu_op"))
        if second_gpu:
            events.append(complete("gemm_kernel", t + 20 + offset_us, 100, pid=1, tid=7, cat="kernel"))
    return {"schemaVersion": 1, "traceEvents": events}


def _write(tmp_path, document: dict, name: str = "trace.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_a_device_clock_behind_the_host_s_is_moved_onto_it(run, tmp_path):
    """Written 3 ms behind, every kernel starts before its launch: moved 3 ms less the 5 µs the earliest launches
    took (what the trace cannot tell apart), the capture reads as the same one written on one clock."""
    trace = load_trace(_write(tmp_path, _capture(-3000.0)))
    # the 1% quantile of how early the work starts: between the earliest two launches' (5 and 5.25 µs latencies)
    shift = pytest.approx(3000 - LATENCY_US - 0.23 * 0.25)
    assert trace.metadata[DEVICE_CLOCK] == {"shift_us": shift, "before": 24, "launches": 24}
    # the first kernel where its launch call starts, less the quarter of a quarter µs the quantile leaves
    assert trace.ts[trace.kind == Kind.COMPUTE].min() == pytest.approx(10 - 0.23 * 0.25)
    assert trace.ts[trace.kind == Kind.HOST_OP].tolist() == [t * STEP_US + 900 for t in range(STEPS)]  # host: stays
    moved, _ = scanned(run, _write(tmp_path, _capture(-3000.0)))
    same, _ = scanned(run, _write(tmp_path, _capture(), "same.json"))
    assert moved["step_time_us"] == pytest.approx(same["step_time_us"], abs=LATENCY_US)
    # the device idles as long; what the host was doing in the 5 µs the trace cannot place may differ
    assert sum(moved["idle"].values()) == pytest.approx(sum(same["idle"].values()), abs=0.001)
    assert any("its events were moved 2.995 ms later" in caveat for caveat in moved["caveats"])


def test_what_was_derived_from_the_times_before_they_moved_is_derived_again(tmp_path):
    """Events' ends, the spans in a window and the launches' pairing, read before the device's events move (as a
    dialect may read them), are read again from the moved times."""
    trace = dialects.apply(read_trace(_write(tmp_path, _capture(-3000.0)), keep_args=dialects.kept_args(False)))
    before = (trace.end.copy(), trace.spans_in(0.0, 1000.0).copy(), launch_rows(trace))
    align_device_clock(trace)
    assert trace.end.tolist() == (trace.ts + trace.dur).tolist() != before[0].tolist()
    kernels = trace.kind == Kind.COMPUTE
    in_step_0 = np.flatnonzero(trace.spans_in(0.0, 1000.0) & kernels).tolist()
    assert trace.ts[in_step_0].max() < 1000 and in_step_0 != np.flatnonzero(before[1] & kernels).tolist()
    assert "launch_rows" not in trace.derived


@pytest.mark.parametrize(
    ("offset_us", "early"),
    [
        (0.0, 0),  # one clock
        (3000.0, 0),  # the device's ahead: no launch says so (a queue of work looks the same)
        (-LATENCY_US - 1.9, 0),  # the quickest launches' kernels up to 1.9 µs before their calls: the clocks' rounding
        (0.0, 2),  # two kernels paired with the wrong launch
    ],
)
def test_a_device_clock_is_left_where_no_launch_shows_it_behind(tmp_path, offset_us, early):
    trace = load_trace(_write(tmp_path, _capture(offset_us, early)))
    assert DEVICE_CLOCK not in trace.metadata


def test_the_clocks_of_a_trace_of_several_devices_are_left_as_written(tmp_path):
    """Two GPUs, each on a clock of its own, the analysed one behind the host's: which offset is whose, the trace does
    not say for the other; both are left."""
    trace = load_trace(_write(tmp_path, _capture(-3000.0, second_gpu=True)))
    assert DEVICE_CLOCK not in trace.metadata


def test_three_kernels_before_their_launches_show_the_clock_behind(tmp_path):
    """Three of 24 launches (past the 1% share, at the three a clock behind needs): moved by the 1% quantile of how
    early the launches' work starts, between the earliest two (10 µs early each)."""
    trace = load_trace(_write(tmp_path, _capture(0.0, early=3)))
    assert trace.metadata[DEVICE_CLOCK]["shift_us"] == pytest.approx(10.0)


def test_an_npu_whose_tasks_start_before_their_launches_lines_up_with_its_peer_on_the_host_s_clock(run):
    """Rank 1 of a real two-NPU capture: 45 of its 425 tasks start before the runtime calls that launch them, up to
    84 µs. Moved 81 µs onto its host's clock, its HCCL planes with its compute stream, the two ranks' clocks, set
    against each other on the collectives they share, differ by 2.5 µs, where they differed by 78 µs as written."""
    rank1 = load_trace(REAL / "ascend_l2_job" / "rank1.trace_view.json.gz")
    assert rank1.metadata[DEVICE_CLOCK] == {"shift_us": pytest.approx(81.25), "before": 45, "launches": 425}
    result = run("scan", str(REAL / "ascend_l2_job"), "--format", "json", "--fail-on", "never")
    offsets = json.loads(result.stdout)["job"]["alignment"]["offsets_us"]
    assert abs(offsets["1"] - offsets["0"]) < 5


def test_a_jax_gpu_s_copy_streams_move_with_its_kernels(tmp_path):
    """jax.profiler's GPU plane, 3 ms behind its host: the kernels (each paired with its launch by correlation id)
    show it, and the streams of copies each way, on the same clock, move with them."""
    events = [
        process_name(701, "/host:CPU"),
        thread_name(701, 2, "Host Threads/2"),
        process_name(1, "/device:GPU:0"),
        thread_name(1, 16, "Stream #16(Kernel)"),
        thread_name(1, 17, "Stream #17(MemcpyH2D)"),
        thread_name(1, 18, "Stream #18(MemcpyD2H)"),
    ]
    for n in range(24):
        launch, args = 100.0 * n, {"correlation_id": str(n + 1)}
        events.append(complete("hipModuleLaunchKernel", launch, 8, pid=701, tid=2, args=args))
        events.append(complete("loop_add_fusion", launch + 10 - 3000, 20, pid=1, tid=16, args=args))
    events.append(complete("MemcpyH2D", 2500.0 - 3000, 30, pid=1, tid=17))
    events.append(complete("MemcpyD2H", 2600.0 - 3000, 30, pid=1, tid=18))
    trace = load_trace(_write(tmp_path, {"displayTimeUnit": "ns", "traceEvents": events}))
    assert trace.metadata[DEVICE_CLOCK]["shift_us"] == pytest.approx(2990.0)
    assert trace.ts[trace.kind == Kind.H2D].tolist() == pytest.approx([2500.0 - 10])
    assert trace.ts[trace.kind == Kind.D2H].tolist() == pytest.approx([2600.0 - 10])


def test_a_device_clock_moves_alike_with_the_columns_on_disk(run, tmp_path, monkeypatch):
    """Columns kept on disk, each pass a few rows at a time: the device's events move as they do in memory."""
    path = _write(tmp_path, _capture(-3000.0))
    in_memory = run("info", path, "--format", "json")
    made = spy_on_disk(monkeypatch, chunk_rows=7)
    on_disk = run("info", path, "--format", "json", "--memory", leaving("16kB"))
    assert made and on_disk.exit_code == in_memory.exit_code == 0
    assert on_disk.output == in_memory.output
    assert "its events were moved 2.995 ms later" in in_memory.output


def test_the_caveat_counts_the_launches_as_every_count_is_written():
    said = _device_clock({"before": 1234, "launches": 5000, "shift_us": 2995.0})
    assert said.startswith("the device's work starts before the calls that launch it in 1,234 of its 5,000 launches")
