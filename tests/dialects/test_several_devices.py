"""A trace that holds several devices, each a process (a JAX process's TPUs or GPUs, one PyTorch process driving two
GPUs): one device is analysed, the one with the most device time; the others are shown, not analysed."""

from __future__ import annotations

import json

import pytest
from conftest import complete, process_name, thread_name

from perftool.analysis.family import device_name
from perftool.analysis.steps import detect_steps
from perftool.dialects.vocabulary import OTHER_DEVICES
from perftool.pipeline.read import load_trace
from perftool.trace.model import Kind, Role

STEPS = 6


def _tpus(op_us: list[float]) -> dict:
    """A JAX process's TPUs, one plane each, every chip running a step of 30 ops of ``op_us[chip]`` each on its
    own clock a few µs apart, the steps 10 ms apart (each chip's Steps line marking them)."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python")]
    for chip in range(len(op_us)):
        events += [process_name(1 + chip, f"/device:TPU:{chip}")]
        events += [thread_name(1 + chip, tid, line) for tid, line in enumerate(("Steps", "XLA Modules", "XLA Ops"), 1)]
    for step in range(STEPS):
        t = step * 10_000.0
        events.append(complete("PjitFunction(train_step)", t + 10, 300, pid=701, tid=1))
        for chip, us in enumerate(op_us):
            start = t + 400 + 1.7 * chip  # the chips start the step a little apart
            events += [complete(str(step), start, 9_000, pid=1 + chip, tid=1)]
            events += [complete("jit_train_step(7)", start, 9_000, pid=1 + chip, tid=2)]
            events += [complete(f"fusion.{k}", start + 300 * k, us, pid=1 + chip, tid=3) for k in range(30)]
    return {"displayTimeUnit": "ns", "traceEvents": events}


def test_of_a_process_s_tpus_the_busiest_is_analysed_and_its_steps_count_once(write_trace):
    """Four chips' Steps lines mark each step four times a few µs apart: taken together they were 24 steps, and the
    union of four chips' ops hid each chip's idle time. Now TPU 3 (the most device time) is the trace's device."""
    trace = load_trace(write_trace(_tpus([250, 250, 250, 290])))
    steps = detect_steps(trace)
    assert steps.count == STEPS and device_name(trace) == "/device:TPU:3"
    roles = {(t.process_name, t.thread_name): t.role for t in trace.tracks}
    assert roles[("/device:TPU:3", "XLA Ops")] == Role.DEVICE and roles[("/device:TPU:3", "Steps")] == Role.SUMMARY
    assert {roles[(f"/device:TPU:{chip}", line)] for chip in range(3) for line in ("Steps", "XLA Ops")} == {
        Role.OTHER_DEVICE
    }
    assert roles[("/host:CPU", "python")] == Role.HOST
    other = trace.on_roles(Role.OTHER_DEVICE)
    assert set(trace.kind[other].tolist()) == {Kind.OTHER}  # no step, no work: shown only
    assert trace.metadata[OTHER_DEVICES] == {
        "analysed": "/device:TPU:3",
        "others": {f"/device:TPU:{chip}": pytest.approx(250 / 290) for chip in range(3)},
        "their_hosts": 0,  # the one host process launches on every chip
        "one_host": True,
    }


def test_equal_devices_analyse_the_first_and_the_report_says_which(run, write_trace):
    path = write_trace(_tpus([250, 250]))
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert scanned["device"] == "/device:TPU:0" and scanned["steps"] == STEPS
    window = (STEPS - 1) * 10_000 + 9_000  # the first step's start to the last one's end
    assert scanned["metrics"]["device.busy_fraction"] == pytest.approx(STEPS * 30 * 250 / window)  # one chip's
    note = next(c for c in scanned["caveats"] if "devices with work" in c)
    assert note.startswith(
        "the trace holds 2 devices with work: figures and findings are /device:TPU:0's, the one with the most "
        "device time (/device:TPU:1 ran 100% of its device time)"
    )


def test_a_chip_s_sparse_cores_are_its_coprocessors_not_more_devices(write_trace, run):
    """Each chip's SparseCore has a plane of its own ("/device:TPU:0 SparseCore 0"): shown, not analysed, and said to
    be the chip's coprocessor, not counted among the devices."""
    document = _tpus([250, 290])
    alone = json.loads(run("scan", write_trace(document), "--format", "json", "--fail-on", "never").stdout)
    for chip in range(2):
        pid = 50 + chip
        document["traceEvents"] += [
            process_name(pid, f"/device:TPU:{chip} SparseCore 0"),
            thread_name(pid, 1, "Sparse Core Ops"),
        ]
        document["traceEvents"] += [
            complete("sc_gather.1", s * 10_000.0 + 500, 1_450, pid=pid, tid=1) for s in range(STEPS)
        ]
    (scanned,) = json.loads(run("scan", write_trace(document), "--format", "json", "--fail-on", "never").stdout)[
        "traces"
    ]
    assert scanned["device"] == "/device:TPU:1"
    # its idle time while the other chip computes (they start a little apart), never while a SparseCore gathers
    assert scanned["idle"]["other_device"] == alone["traces"][0]["idle"]["other_device"] > 0
    note = " ".join(c for c in scanned["caveats"] if "devices with work" in c)
    assert note == (
        "the trace holds 2 devices with work: figures and findings are /device:TPU:1's, the one with the most device"
        " time (/device:TPU:0 ran 86% of its device time); taken together, each step would count once per device and"
        " one device's idle time would hide under the others' work; 2 SparseCores ran work too (/device:TPU:0"
        " SparseCore 0, /device:TPU:1 SparseCore 0, 17% of /device:TPU:1's device time): a chip's coprocessor beside"
        " its TensorCore, shown, not analysed; figures and findings are the TensorCore's"
    )


def test_a_note_names_three_other_devices_and_counts_the_rest(write_trace, run):
    path = write_trace(_tpus([200, 210, 220, 230, 240, 290]))
    text = " ".join(run("scan", path, "--fail-on", "never").stdout.split())
    assert (
        "figures and findings are /device:TPU:5's, the one with the most device time (/device:TPU:0, /device:TPU:1, "
        "/device:TPU:2 and 2 more ran 69%–83% of its device time)" in text
    )


def _two_gpus(work_us: tuple[float, float], host_in_first: bool = False) -> dict:
    """One PyTorch process driving two GPUs (Kineto: a process per device, its pid the device's number), each
    running a kernel of ``work_us[gpu]`` a step; with ``host_in_first`` the first GPU's process holds a host thread
    too (ROCm's Kineto labels the host's process after a device)."""
    events = [
        {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
        *(
            {"ph": "M", "name": "process_labels", "pid": gpu, "tid": 0, "args": {"labels": f"GPU {gpu}"}}
            for gpu in (0, 1)
        ),
    ]
    for step in range(STEPS):
        t = step * 1000.0
        events.append(complete(f"ProfilerStep#{step}", t, 999, pid=100, tid=100, cat="user_annotation"))
        for gpu, us in enumerate(work_us):
            events.append(complete("gemm_kernel", t + 100, us, pid=gpu, tid=7, cat="kernel"))
        if host_in_first:
            events.append(complete("aten::mm", t + 50, 20, pid=0, tid=300, cat="cpu_op"))
    return {"schemaVersion": 1, "traceEvents": events}


def test_of_a_pytorch_process_s_two_gpus_the_busier_is_analysed_and_a_host_thread_beside_it_stays_the_host(
    write_trace,
):
    trace = load_trace(write_trace(_two_gpus((300, 500), host_in_first=True)))
    roles = {(t.pid, t.tid): t.role for t in trace.tracks}
    assert roles[(1, 7)] == Role.DEVICE and roles[(0, 7)] == Role.OTHER_DEVICE and roles[(0, 300)] == Role.HOST
    assert device_name(trace) == "GPU 1"
    assert trace.metadata[OTHER_DEVICES] == {
        "analysed": "GPU 1",
        "others": {"GPU 0": pytest.approx(0.6)},
        "their_hosts": 0,
        "one_host": True,  # the one process beside the GPUs' own drives both
    }


def test_one_device_with_work_is_the_trace_s_device_whatever_else_the_trace_names(write_trace):
    """A device process with no work (JAX lists every visible GPU's plane) is no other device: nothing to say."""
    trace = load_trace(write_trace(_two_gpus((300, 0))))
    assert OTHER_DEVICES not in trace.metadata
    assert not trace.on_roles(Role.OTHER_DEVICE).any()
