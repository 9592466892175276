"""PT026: one process driving several GPUs, the analysed one idle while another computes (a model split over them in
turn, or replicas given unequal work), told apart from a host that feeds the device too slowly, and never fitted to
the one-device emulator."""

from __future__ import annotations

import json

import pytest
from conftest import complete, process_name, scanned, thread_name

from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.predict import gains
from perftool.rules.catalog import load_catalog
from perftool.rules.detectors import devices_in_turn

STEPS = 6
STEP_US = 1000.0


def _two_gpus(kernels: dict[int, list[tuple[float, float]]], hosts: tuple[int, ...] = (100,)) -> dict:
    """A PyTorch capture of ``STEPS`` steps on two GPUs (Kineto: a process per device, its pid the device's number),
    GPU ``g`` running a kernel at each (offset, µs) of ``kernels[g]`` every step, each launched from the host process
    ``hosts[g]`` (one process for both by default) a few µs before it starts, the launch and the kernel linked by
    their correlation id."""
    events = [
        *({"ph": "M", "name": "process_labels", "pid": host, "tid": 0, "args": {"labels": "CPU"}} for host in hosts),
        *({"ph": "M", "name": "process_labels", "pid": g, "tid": 0, "args": {"labels": f"GPU {g}"}} for g in (0, 1)),
    ]
    correlation = 0
    for step in range(STEPS):
        t = step * STEP_US
        for host in hosts:
            events.append(complete(f"ProfilerStep#{step}", t, STEP_US - 1, pid=host, tid=host, cat="user_annotation"))
        for gpu, spans in kernels.items():
            host = hosts[gpu % len(hosts)]
            for offset, us in spans:
                correlation += 1
                args = {"correlation": correlation, "device": gpu, "stream": 7}
                launch = complete("cudaLaunchKernel", t + offset - 20, 5, pid=host, tid=host, cat="cuda_runtime")
                events += [launch | {"args": {"correlation": correlation}}]
                events += [complete("gemm_kernel", t + offset, us, pid=gpu, tid=7, cat="kernel", args=args)]
    return {"schemaVersion": 1, "traceEvents": events}


# GPU 0 computes (two kernels 10 µs apart), then GPU 1: GPU 1, the busier, idle 380 µs a step while GPU 0 computes
IN_TURN = {0: [(100, 190), (300, 190)], 1: [(500, 400)]}
UNEQUAL = {0: [(100, 460)], 1: [(100, 400), (600, 80)]}  # at once, GPU 1 waiting 60 µs a step for GPU 0's longer share


def _write(tmp_path, document: dict) -> str:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_a_model_split_over_two_gpus_waits_for_each_in_turn(run, tmp_path):
    """GPU 1 is idle 380 µs of each 1 ms step while GPU 0 computes, never beside it: the idle line gives that to the
    other device, not to the host, and PT026 reports it with its turns."""
    summary, findings = scanned(run, _write(tmp_path, _two_gpus(IN_TURN)))
    window = (STEPS - 1) * STEP_US + 900  # the first step's start to the last kernel's end
    assert summary["idle"]["other_device"] == pytest.approx(STEPS * 380 / window)
    assert summary["idle"]["host"] < 0.02  # the host only in its launch calls, each made in time
    found = findings["PT026"]
    assert found["title"] == "Devices of one process compute in turn"
    assert found["severity"] == "warning"  # 38% of each step, past the error threshold, but a bound is never an error
    assert found["values"]["waiting_ms_per_step"] == pytest.approx(0.38, abs=0.002)
    assert found["values"]["together_share"] == 0.0
    assert found["values"]["device"] == "GPU 1" and found["values"]["others"] == "GPU 0"
    assert "micro-batches" in found["fix"]["text"] or "tensor-parallel" in found["fix"]["text"]
    assert [e["name"] for e in found["evidence"]][:1] == ["idle while another device runs gemm_kernel"]


def test_the_host_feeds_every_device_it_drives_not_only_the_one_analysed(run, tmp_path):
    """The host dispatches 550 µs of ops a step (three of 150 µs, 50 µs apart, around the launches) for two GPUs
    computing 380 and 400 µs in turn: against the 780 µs of device work it feeds, its dispatch does not set the pace,
    as it would against GPU 1's 400 µs alone; so PT001 does not tell it to replay the step as a device graph."""
    document = _two_gpus(IN_TURN)
    for step in range(STEPS):
        document["traceEvents"] += [complete("aten::linear", step * STEP_US + 50 + 200 * k, 150, pid=100, tid=100,
                                             cat="cpu_op") for k in range(3)]  # fmt: skip
    _, findings = scanned(run, _write(tmp_path, document), "--select", "PT001")
    found = findings["PT001"]
    assert found["values"]["device_per_step_ms"] == pytest.approx(0.78, abs=0.001)
    assert found["values"]["dispatch_per_step_ms"] == pytest.approx(0.55, abs=0.001)
    assert "so the host sets the pace" not in found["fix"]["text"]


def test_each_idle_stretch_spent_on_other_devices_counts_once(tmp_path):
    """GPU 1's one idle stretch a step holds both of GPU 0's kernels: six stretches, not twelve pieces."""
    scope = analyse_trace(load_trace(_write(tmp_path, _two_gpus(IN_TURN))), load_catalog())[1]
    detection = devices_in_turn.detect(scope, {})
    assert detection is not None and detection.occurrences == STEPS
    assert scope.idle.by_cause["other_device"][0].size == 2 * STEPS


def test_the_other_chips_of_a_jax_process_are_named_without_their_sparse_cores(run, tmp_path):
    """Two TPUs of one JAX process computing in turn, each with a SparseCore beside it: the turns are the chips'; the
    SparseCores are their coprocessors, neither counted nor named among the devices; the fix is JAX's sharding."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python")]
    for chip in range(2):
        events += [process_name(1 + chip, f"/device:TPU:{chip}"), thread_name(1 + chip, 3, "XLA Ops")]
        events += [
            process_name(50 + chip, f"/device:TPU:{chip} SparseCore 0"),
            thread_name(50 + chip, 1, "Sparse Core Ops"),
        ]
    for step in range(STEPS):
        t = step * 10_000.0
        events.append(complete("PjitFunction(train_step)", t + 10, 300, pid=701, tid=1))
        events += [complete(f"fusion.{k}", t + 400 + 300 * k, 250, pid=1, tid=3) for k in range(10)]
        events += [complete(f"fusion.{k}", t + 3_400 + 300 * k, 290, pid=2, tid=3) for k in range(10)]
        events += [complete("sc_gather.1", t + 400, 100, pid=50 + chip, tid=1) for chip in range(2)]
    _, findings = scanned(run, _write(tmp_path, {"displayTimeUnit": "ns", "traceEvents": events}))
    assert findings["PT026"]["values"]["others"] == "/device:TPU:0"
    assert findings["PT026"]["values"]["devices"] == 2
    assert "jax.sharding.Mesh" in findings["PT026"]["fix"]["text"]  # a JAX job's way to split work, not PyTorch's


def test_devices_at_once_with_unequal_work_wait_for_the_larger_share(run, tmp_path):
    """GPU 1 computes beside GPU 0 for 400 of its 480 µs a step, then waits 60 µs for GPU 0's longer kernel: the
    devices run at once, one given more work."""
    _, findings = scanned(run, _write(tmp_path, _two_gpus(UNEQUAL)))
    found = findings["PT026"]
    assert found["title"] == "Devices of one process do unequal work"
    assert found["values"]["together_share"] == pytest.approx(400 / 480, abs=0.01)
    assert found["values"]["waiting_ms_per_step"] == pytest.approx(0.06, abs=0.002)
    assert "DistributedDataParallel" in found["fix"]["text"]


def test_the_others_waiting_while_the_first_gpu_computes_alone_cost_what_spreading_its_work_would_save(run, tmp_path):
    """nn.DataParallel's shape: both GPUs run the forward for 200 µs, then GPU 0 alone 400 µs (the loss, the update):
    GPU 1 waits. Spread over the two, the 400 µs would take 200: that is the cost, its evidence GPU 0's lone work."""
    _, findings = scanned(run, _write(tmp_path, _two_gpus({0: [(100, 200), (300, 400)], 1: [(100, 200)]})))
    found = findings["PT026"]
    assert found["impact"]["per_step_us"] == pytest.approx(200.0)
    assert found["values"]["waiting_ms_per_step"] == 0.0
    assert found["values"]["alone_ms_per_step"] == pytest.approx(0.4)
    assert [(e["track"], e["dur_us"]) for e in found["evidence"]][:1] == [("pid 0 / tid 7", 400.0)]


def test_devices_each_driven_by_a_host_of_its_own_do_not_wait_for_each_other(run, tmp_path):
    """The same kernels launched by two processes (a file that holds every process of a job): GPU 1's idle time is
    not GPU 0's turn, as nothing ties the two."""
    summary, findings = scanned(run, _write(tmp_path, _two_gpus(IN_TURN, hosts=(100, 200))))
    assert summary["idle"]["other_device"] == 0.0
    assert "PT026" not in findings


def test_a_trace_waiting_for_other_devices_is_not_fitted_to_one_device(tmp_path):
    """The emulator runs one device: a trace whose device waits 38% of each step for another has no fit (its fixes'
    gains are bounds), where the same device's trace alone is fitted."""
    rules = load_catalog()
    in_turn = load_trace(_write(tmp_path, _two_gpus(IN_TURN)))
    assert gains._fitted(analyse_trace(in_turn, rules)[1]) is None
    alone = load_trace(_write(tmp_path, _two_gpus({1: IN_TURN[1]})))
    assert gains._fitted(analyse_trace(alone, rules)[1]) is not None


def test_a_chip_s_sparse_core_is_no_partner_of_the_other_chips(run, tmp_path):
    """TPU 1 computes 3 ms a step, TPU 0 a trifle beside it (0.3 ms), TPU 1's SparseCore 1.2 ms after TPU 1's ops:
    the SparseCore is TPU 1's coprocessor, not a device waiting for it, so nothing is reported."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python")]
    for chip in range(2):
        events += [process_name(1 + chip, f"/device:TPU:{chip}"), thread_name(1 + chip, 3, "XLA Ops")]
    events += [process_name(51, "/device:TPU:1 SparseCore 0"), thread_name(51, 1, "Sparse Core Ops")]
    for step in range(STEPS):
        t = step * 10_000.0
        events.append(complete("PjitFunction(train_step)", t + 10, 300, pid=701, tid=1))
        events += [complete(f"fusion.{k}", t + 400 + 300 * k, 300, pid=2, tid=3) for k in range(10)]
        events.append(complete("fusion.0", t + 400, 300, pid=1, tid=3))
        events.append(complete("sc_gather.1", t + 3_400, 1_200, pid=51, tid=1))
    _, findings = scanned(run, _write(tmp_path, {"displayTimeUnit": "ns", "traceEvents": events}))
    assert "PT026" not in findings
