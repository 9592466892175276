"""Dialects map each source's conventions onto roles and kinds."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import TORCH_FIXTURE, complete, process_name, thread_name

from perftool.common.errors import PerftoolError
from perftool.dialects.base import Dialect
from perftool.dialects.vocabulary import READ_BACK
from perftool.pipeline.read import load_trace
from perftool.trace import Kind, Role


def kind_of(trace, name):
    return {Kind(k) for k in trace.kind[trace.name == trace.names.index(name)]}


def role_of(trace, pid, tid):
    return next(t.role for t in trace.tracks if (t.pid, t.tid) == (pid, tid))


def kineto_events():
    return {
        "schemaVersion": 1,
        "traceEvents": [
            process_name(100, "python"),
            thread_name(100, 100, "thread 100 (python)"),
            process_name(0, "python"),
            thread_name(0, 7, "stream 7"),
            complete("ProfilerStep#1", 0, 100, pid=100, tid=100, cat="user_annotation"),
            complete("aten::mm", 1, 10, pid=100, tid=100, cat="cpu_op"),
            complete("cudaLaunchKernel", 5, 3, pid=100, tid=100, cat="cuda_runtime"),
            complete("cudaMemcpyAsync", 12, 3, pid=100, tid=100, cat="cuda_runtime"),
            complete("cudaStreamSynchronize", 20, 30, pid=100, tid=100, cat="cuda_runtime"),
            complete("aten::item", 19, 32, pid=100, tid=100, cat="cpu_op"),
            complete("ampere_sgemm_128x64_tn", 9, 20, pid=0, tid=7, cat="kernel"),
            complete("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30, 5, pid=0, tid=7, cat="kernel"),
            complete("Memcpy HtoD (Pageable -> Device)", 14, 4, pid=0, tid=7, cat="gpu_memcpy"),
            complete("Memcpy DtoH (Device -> Pageable)", 40, 4, pid=0, tid=7, cat="gpu_memcpy"),
            complete("Memset (Device)", 45, 1, pid=0, tid=7, cat="gpu_memset"),
            complete("ProfilerStep#1", 9, 40, pid=0, tid=7, cat="gpu_user_annotation"),
        ],
    }


def test_kineto_roles_and_kinds(write_trace):
    trace = load_trace(write_trace(kineto_events()))
    assert trace.dialect == "kineto"
    assert role_of(trace, 100, 100) == Role.HOST
    assert role_of(trace, 0, 7) == Role.DEVICE
    expected = {
        "aten::mm": Kind.HOST_OP,
        "cudaLaunchKernel": Kind.RUNTIME,
        "cudaMemcpyAsync": Kind.RUNTIME,
        "cudaStreamSynchronize": Kind.SYNC,
        "aten::item": Kind.SYNC,
        "ampere_sgemm_128x64_tn": Kind.COMPUTE,
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL": Kind.COMMUNICATION,
        "Memcpy HtoD (Pageable -> Device)": Kind.H2D,
        "Memcpy DtoH (Device -> Pageable)": Kind.D2H,
        "Memset (Device)": Kind.MEMSET,
    }
    for name, kind in expected.items():
        assert kind_of(trace, name) == {kind}, name
    assert kind_of(trace, "ProfilerStep#1") == {Kind.STEP}


def test_real_fixture_is_kineto_with_a_host_thread():
    trace = load_trace(TORCH_FIXTURE)
    host = [t for t in trace.tracks if t.role == Role.HOST]
    assert [t.thread_name for t in host] == [f"thread {host[0].tid} (python)"]
    assert {t.role for t in trace.tracks if t.pid in ("Spans", "Traces")} == {Role.SUMMARY}
    assert kind_of(trace, "aten::item") == {Kind.SYNC}
    assert kind_of(trace, "aten::mm") == {Kind.HOST_OP}


def ascend_events():
    """Laid out as torch_npu / msprof write trace_view.json, timestamps as strings."""
    return [
        process_name(1, "Python"),
        thread_name(1, 11, "Thread 11"),
        process_name(2, "CANN"),
        thread_name(2, 11, "Thread 11"),
        process_name(3, "Ascend Hardware"),
        thread_name(3, 5, "Stream 5"),
        process_name(4, "Overlap Analysis"),
        thread_name(4, 0, "Computing"),
        complete("ProfilerStep#0", "1000.000", "900.000", pid=1, tid=11),
        complete("aten::matmul", "1010.000", "50.000", pid=1, tid=11),
        complete("AscendCL@aclopCompileAndExecute", "1020.000", "400.000", pid=2, tid=11),
        complete("AscendCL@aclrtSynchronizeStreamWithTimeout", "1500.000", "300.000", pid=2, tid=11),
        complete("AscendCL@aclnnMatmul", "1450.000", "10.000", pid=2, tid=11),
        complete("MatMulV2", "1460.000", "120.250", pid=3, tid=5),
        complete("TransData", "1600.000", "30.000", pid=3, tid=5),
        complete("MEMCPY_ASYNC_H2D", "1400.000", "40.000", pid=3, tid=5),
        complete("Computing", "1460.000", "200.000", pid=4, tid=0),
    ]


def test_ascend_roles_and_kinds(write_trace):
    trace = load_trace(write_trace(ascend_events()))
    assert trace.dialect == "ascend"
    assert role_of(trace, 3, 5) == Role.DEVICE
    assert role_of(trace, 2, 11) == Role.HOST and role_of(trace, 1, 11) == Role.HOST
    assert role_of(trace, 4, 0) == Role.SUMMARY
    assert kind_of(trace, "AscendCL@aclopCompileAndExecute") == {Kind.COMPILE}
    assert kind_of(trace, "AscendCL@aclrtSynchronizeStreamWithTimeout") == {Kind.SYNC}
    assert kind_of(trace, "AscendCL@aclnnMatmul") == {Kind.RUNTIME}
    assert kind_of(trace, "MatMulV2") == {Kind.COMPUTE} and kind_of(trace, "TransData") == {Kind.COMPUTE}
    assert kind_of(trace, "MEMCPY_ASYNC_H2D") == {Kind.H2D}
    assert kind_of(trace, "aten::matmul") == {Kind.HOST_OP}
    assert trace.dur[trace.name == trace.names.index("MatMulV2")].tolist() == [120.25]


def test_ascend_operator_compiles_that_compiled_nothing_are_calls(write_trace):
    """Under online compilation torch_npu runs an operator through aclopCompileAndExecute every step; the opCompile
    inside it compiles only where the operator is not compiled yet. One under OP_CACHE_HIT_US (1 ms) found it
    compiled (a cache hit): both are calls. A longer one is the compile, counted once: the call around it is not."""
    events = [*ascend_events()[:4], process_name(3, "Ascend Hardware"), thread_name(3, 5, "Stream 5")]
    for start, inner in ((10_000, 30.0), (20_000, 999.0), (30_000, 1_000.0)):
        events += [
            complete("AscendCL@aclopCompileAndExecute", str(start), str(inner + 400), pid=2, tid=11),
            complete("AscendCL@opCompile", str(start + 5), str(inner), pid=2, tid=11),
            complete("Conv2D", str(start + inner + 420), "300.000", pid=3, tid=5),
        ]
    events.append(complete("AscendCL@aclopCompileAndExecute", "40000", "2000", pid=2, tid=11))  # no opCompile in it
    trace = load_trace(write_trace(events))
    kinds = {(trace.names[n], float(d)): Kind(k) for n, d, k in zip(trace.name, trace.dur, trace.kind)}
    assert kinds[("AscendCL@opCompile", 30.0)] == kinds[("AscendCL@opCompile", 999.0)] == Kind.RUNTIME
    assert kinds[("AscendCL@opCompile", 1_000.0)] == Kind.COMPILE
    assert {kinds[("AscendCL@aclopCompileAndExecute", d)] for d in (430.0, 1_399.0, 1_400.0)} == {Kind.RUNTIME}
    assert kinds[("AscendCL@aclopCompileAndExecute", 2_000.0)] == Kind.COMPILE


def test_ascend_copy_tasks_take_their_direction_from_msprof_s_args(write_trace):
    """msprof names every copy task MEMCPY_ASYNC and says which way it copied in ``memcpy direction``; a copy whose
    args do not say stays a copy on the device."""
    events = [*ascend_events()[:4], process_name(3, "Ascend Hardware"), thread_name(3, 5, "Stream 5")]
    said = ["host to device", "host to device ex", "device to host", "device to device", "sideways", None]
    for i, direction in enumerate(said):
        args = {"Task Type": "PCIE_DMA_SQE", "data size(Byte)": 4096} | (
            {"memcpy direction": direction} if direction else {}
        )
        events.append(complete("MEMCPY_ASYNC", str(1000 * i), "10.000", pid=3, tid=5, args=args))
    trace = load_trace(write_trace(events))
    copies = np.flatnonzero(trace.name == trace.names.index("MEMCPY_ASYNC"))
    kinds = [Kind(k) for k in trace.kind[copies[np.argsort(trace.ts[copies])]]]
    assert kinds == [Kind.H2D, Kind.H2D, Kind.D2H, Kind.D2D, Kind.D2D, Kind.D2D]


def test_emulator_traces_declare_roles_and_kinds(write_trace):
    document = {
        "perftool": {
            "emulator": {"device": "npu"},
            "tracks": [
                {"pid": 1, "tid": 1, "role": "host"},
                {"pid": 2, "tid": 1, "role": "device"},
                {"pid": 2, "tid": 2, "role": "link.h2d"},
            ],
        },
        "traceEvents": [
            complete("step 0", 0, 100, pid=1, tid=1, cat="step"),
            complete("forward", 10, 50, pid=2, tid=1, cat="compute"),
            complete("infeed batch 0", 0, 10, pid=2, tid=2, cat="h2d"),
        ],
    }
    trace = load_trace(write_trace(document))
    assert trace.dialect == "emulator"
    assert [role_of(trace, 1, 1), role_of(trace, 2, 1), role_of(trace, 2, 2)] == [Role.HOST, Role.DEVICE, Role.H2D]
    assert kind_of(trace, "forward") == {Kind.COMPUTE} and kind_of(trace, "infeed batch 0") == {Kind.H2D}
    assert kind_of(trace, "step 0") == {Kind.STEP}


def test_unrecognised_trace_loads_with_unknown_roles(write_trace):
    trace = load_trace(write_trace([complete("work", 0, 5), complete("ProfilerStep#1", 0, 10)]))
    assert trace.dialect == "generic"
    assert {t.role for t in trace.tracks} == {Role.UNKNOWN}
    assert kind_of(trace, "ProfilerStep#1") == {Kind.STEP}  # shared vocabulary still applies


class _CategoriesAndRoles(Dialect):
    """A dialect whose categories and track roles both give kinds, as a dialect may."""

    category_kinds = {"loading": Kind.INPUT, "copying": Kind.H2D}
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP}


def test_a_category_s_kind_comes_before_its_track_s_and_a_name_s_before_both(write_trace):
    device, host = (1, 7), (2, 7)
    events = [
        process_name(1, "GPU 0"),
        process_name(2, "python"),
        complete("batch", 0, 5, *host, cat="loading"),  # the category's kind over the role's
        complete("forward", 5, 5, *host, cat="cpu"),  # no category kind: the role's
        complete("gemm", 10, 5, *device, cat="cpu"),
        complete("ProfilerStep#1", 0, 20, *host, cat="loading"),  # a name's kind over both
        complete("Memcpy HtoD (Pageable -> Device)", 15, 2, *device, cat="cpu"),  # a direction refines device work
        complete("Memcpy DtoH (Device -> Pageable)", 17, 2, *device, cat="copying"),  # ... or a copy
        complete("cudaMemcpyAsync HtoD", 15, 1, *host, cat="cpu"),  # a direction refines no host call
        complete("ncclKernel_AllReduce", 20, 2, *host, cat="loading"),  # nor a category's other kind
    ]
    trace = load_trace(write_trace(events), dialect="generic")
    assert {t.pid: t.role for t in trace.tracks} == {1: Role.DEVICE, 2: Role.HOST}
    kinds = dict(zip((trace.names[n] for n in trace.name), _CategoriesAndRoles().kinds(trace).tolist()))
    assert kinds == {
        "batch": Kind.INPUT,
        "forward": Kind.HOST_OP,
        "gemm": Kind.COMPUTE,
        "ProfilerStep#1": Kind.STEP,
        "Memcpy HtoD (Pageable -> Device)": Kind.H2D,
        "Memcpy DtoH (Device -> Pageable)": Kind.D2H,
        "cudaMemcpyAsync HtoD": Kind.HOST_OP,
        "ncclKernel_AllReduce": Kind.INPUT,
    }


def test_forcing_a_dialect(write_trace):
    trace = load_trace(write_trace(kineto_events()), dialect="generic")
    assert trace.dialect == "generic" and {t.role for t in trace.tracks} == {Role.UNKNOWN}
    with pytest.raises(PerftoolError, match="unknown dialect 'nope'"):
        load_trace(write_trace(kineto_events()), dialect="nope")


def _read_back(pid, tid, ts: float, inside: list) -> list:
    """A scalar read back as PyTorch records it (aten::item over aten::_local_scalar_dense), with ``inside`` it."""
    return [complete("aten::item", ts, 100, cat="cpu_op", pid=pid, tid=tid),
            complete("aten::_local_scalar_dense", ts + 5, 90, cat="cpu_op", pid=pid, tid=tid), *inside]  # fmt: skip


def test_a_scalar_read_of_a_host_tensor_is_no_wait_for_the_device(write_trace):
    """Where the trace records the runtime's calls, a read back with a copy and a synchronisation inside it waits for
    the device; one with none read a host tensor (a loss already on the CPU, an index): a host op, no sync."""
    device = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
              complete("gemm", 0, 5_000, cat="kernel", pid=0, tid=7)]  # fmt: skip
    waits = _read_back(
        1,
        1,
        1_000,
        [
            complete("cudaMemcpyAsync", 1_010, 60, cat="cuda_runtime", pid=1, tid=1),
            complete("cudaStreamSynchronize", 1_075, 10, cat="cuda_runtime", pid=1, tid=1),
        ],
    )
    host = _read_back(1, 1, 2_000, [])
    other_thread = _read_back(1, 2, 3_000, [])  # the copy at 1,010 is another thread's
    at_start = _read_back(1, 1, 4_000, [complete("cudaMemcpyAsync", 4_000, 60, cat="cuda_runtime", pid=1, tid=1)])
    before_launch = _read_back(1, 1, 5_000, [complete("cudaLaunchKernel", 5_100, 5, cat="cuda_runtime", pid=1, tid=1)])
    trace = load_trace(write_trace([*device, *waits, *host, *other_thread, *at_start, *before_launch]))
    kinds = {(trace.names[n], float(ts)): Kind(k) for n, ts, k in zip(trace.name, trace.ts, trace.kind, strict=True)}
    assert kinds[("aten::item", 1_000)] == kinds[("aten::_local_scalar_dense", 1_005)] == Kind.SYNC
    assert kinds[("aten::item", 2_000)] == kinds[("aten::_local_scalar_dense", 2_005)] == Kind.HOST_OP
    assert kinds[("aten::item", 3_000)] == Kind.HOST_OP
    assert kinds[("aten::item", 4_000)] == Kind.SYNC  # its copy starts with it
    assert kinds[("aten::item", 5_000)] == Kind.HOST_OP  # the launch starts as it ends, after it
    alone = load_trace(write_trace([*device, *host]))  # no runtime call recorded: nothing tells a host tensor's read
    assert set(alone.kind[alone.name_matches(READ_BACK)].tolist()) == {Kind.SYNC}


def test_the_real_torch_npu_job_s_syncs_are_its_device_syncs(run):
    """The torch_npu db export's ranks read 24 scalars a step, 4 of them from the NPU (a CANN synchronisation inside
    each, on the reading thread's id in the CANN process): PT008 counts 4 synchronisations a step, not every read."""
    from conftest import DATA

    document = json.loads(run("scan", str(DATA / "real" / "torch_npu_db_l2_job"), "--format", "json").stdout)
    per_step = {trace["path"]: f["values"]["per_step"] for trace in document["traces"]
                for f in trace["findings"] if f["rule_id"] == "PT008"}  # fmt: skip
    assert per_step and set(per_step.values()) == {4.0}
