"""Collectives in every dialect: what they are, how long, how much they moved and how much compute hid them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from builders import ARGS, NCCL, kineto_job, meta, span
from conftest import DATA

from perftool import load_trace
from perftool.analysis import compute_metrics
from perftool.analysis.communication import PART_SKEW_US, collective_parts, collective_type, parallelism
from perftool.analysis.family import job_kind
from perftool.trace.model import Kind, Role


def test_exposed_time_overlap_and_bandwidth_of_a_sized_all_reduce(write_trace):
    metrics = compute_metrics(load_trace(write_trace(kineto_job(kernel_args=ARGS))))
    m = metrics.values
    assert m["communication.count"] == 4 and m["communication.per_step"] == 1
    assert m["communication.time_us"] == pytest.approx(4 * 300)
    assert m["communication.exposed_us"] == pytest.approx(4 * 200)  # compute hides 500-600 of 500-800
    assert m["communication.overlap_fraction"] == pytest.approx(1 / 3)
    assert m["communication.bytes"] == pytest.approx(4 * 100e6)
    (stat,) = metrics.collectives
    assert (stat.name, stat.count, stat.group_size) == ("all_reduce", 4, 4)
    assert stat.algbw_gbps == pytest.approx(100e6 / 300e-6 / 1e9)  # 333 GB/s
    assert stat.busbw_gbps == pytest.approx(stat.algbw_gbps * 2 * 3 / 4)  # nccl-tests: 2(n-1)/n for all-reduce
    (group,) = metrics.groups
    assert (group.name, group.parallelism, group.exposed_us) == ("dp_replicate", "data", pytest.approx(800))


def test_host_records_lend_their_sizes_to_kernels_without_args(write_trace):
    host = {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "BFloat16"}
    metrics = compute_metrics(load_trace(write_trace(kineto_job(host_args=host))))
    (stat,) = metrics.collectives
    assert stat.bytes == pytest.approx(4 * 2000) and stat.group_size == 4  # world size from distributedInfo


def test_without_sizes_the_bandwidth_is_unknown_not_zero(write_trace):
    metrics = compute_metrics(load_trace(write_trace(kineto_job())))
    (stat,) = metrics.collectives
    assert stat.bytes is None and stat.busbw_gbps is None
    assert metrics.values["communication.exposed_us"] == pytest.approx(800)


def test_gloo_collectives_on_a_host_only_trace(write_trace):
    events = [span(f"ProfilerStep#{i}", 1, 1, i * 1000, 999, "user_annotation") for i in range(3)]
    events += [
        span(
            "gloo:all_reduce",
            1,
            1,
            i * 1000 + 100,
            400,
            "user_annotation",
            {"Input Dims": [[1000]], "Input type": ["float"]},
        )
        for i in range(3)
    ]
    metrics = compute_metrics(load_trace(write_trace({"traceEvents": events})))
    assert metrics.values["communication.time_us"] == pytest.approx(3 * 400)
    (stat,) = metrics.collectives
    assert (stat.name, stat.count, stat.bytes) == ("all_reduce", 3, 3 * 4000)


@pytest.mark.parametrize(
    ("threads", "tasks", "process"),
    [((1, 1), ("Notify_Wait", "Memcpy"), "HCCL"), ((2, 3), ("Notify_Wait", "RDMASend"), "Communication")],
    ids=["on the op's thread", "on plane threads, newer CANN's process name"],
)
def test_an_hccl_op_and_its_tasks_are_one_collective(write_trace, threads, tasks, process):
    """msprof writes an HCCL op and the tasks it runs (on its own thread, or on plane threads): one collective,
    under a process CANN names HCCL or, since 8.1, Communication."""
    events = [
        meta("process_name", 1, 0, name="Python"),
        meta("process_name", 3, 0, name="Ascend Hardware"),
        meta("process_name", 4, 0, name=process),
        *(meta("thread_name", 4, tid, name=f"Plane {tid}") for tid in set(threads) - {1}),
    ]
    for i in range(3):
        t = i * 1000
        events += [
            span(f"ProfilerStep#{i}", 1, 1, t, 999),
            span("MatMulV2", 3, 5, t, 500),
            span("hcom_allReduce__428_0_1", 4, 1, t + 500, 300),
            span(tasks[0], 4, threads[0], t + 510, 100),
            span(tasks[1], 4, threads[1], t + 620, 150),
        ]
    trace = load_trace(write_trace({"traceEvents": events}))
    metrics = compute_metrics(trace)
    assert trace.dialect == "ascend"
    assert [(c.name, c.count) for c in metrics.collectives] == [("all_reduce", 3)]
    assert metrics.values["communication.exposed_us"] == pytest.approx(3 * 300)
    assert metrics.values["device.busy_fraction"] == pytest.approx(0.8, abs=0.01)  # the all-reduce is device time


@pytest.mark.parametrize(
    ("op", "args", "nbytes"),
    [
        ("hcom_allReduce__428_0_1", {"data_type": "BFP16", "count": 1000, "alg_type": "MESH-RING"}, 2000),
        ("hcom_broadcast__428_0_1", {"data_type": "FP32", "count": 1000}, 4000),
        ("hcom_allGather__428_0_1", {"data_type": "FP32", "count": 1000}, None),  # each rank's 4 kB, ranks unknown
        ("hcom_alltoallv__428_0_1", {"data_type": "INT8", "count": 1000}, None),  # counts differ by peer
        ("hcom_allReduce__428_0_1", {"data_type": "INVALID_TYPE", "count": 1000}, None),
        ("hcom_allReduce__428_0_1", {"data_type": "FP16", "count": "1000"}, None),
        ("hcom_allReduce__428_0_1", {"count": 1000}, None),
    ],
    ids=["all-reduce", "broadcast", "all-gather", "all-to-all", "no such type", "count not a number", "no type"],
)
def test_an_hccl_op_s_elements_and_their_type_are_its_message(write_trace, op, args, nbytes):
    """msprof writes an HCCL op's element count (HCCL's, each rank's) and data type in its args: an all-reduce's or
    a broadcast's message; a gather's is that times the ranks, which the op does not say."""
    events = [meta("process_name", 3, 0, name="Ascend Hardware"), meta("process_name", 4, 0, name="HCCL")]
    for i in range(3):
        events += [span("MatMulV2", 3, 5, i * 1000, 500), span(op, 4, 1, i * 1000 + 500, 300, args=args)]
    (stat,) = compute_metrics(load_trace(write_trace({"traceEvents": events}))).collectives
    assert stat.bytes == (None if nbytes is None else 3 * nbytes)


@pytest.mark.parametrize(
    "op", ["vllm::all_reduce", "sglang::inplace_all_reduce", "symm_mem::multimem_all_reduce_", "vllm::all_gather"]
)
def test_a_serving_engine_s_all_reduce_op_lends_its_input_s_size_to_its_kernel(write_trace, op):
    """vLLM's, SGLang's and torch's symmetric-memory all-reduce ops record the tensor they reduce (``Input Dims``,
    ``Input type`` as c10's dtype): its size is the message of the kernel the op ran (which records none). Not an
    all-gather's input, which is each rank's part."""
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    args = {"Input type": ["c10::BFloat16", ""], "Input Dims": [[888, 2880], []]}
    for i in range(3):
        t = i * 1000
        events += [
            span(f"ProfilerStep#{i}", 100, 1, t, 999, "user_annotation"),
            span(op, 100, 1, t + 10, 20, "cpu_op", args),
            span("sgemm_128x64", 0, 7, t, 500, "kernel"),
            span("multimem_all_reduce_kernel<c10::BFloat16, 16>", 0, 13, t + 500, 30, "kernel"),
        ]
    (stat,) = compute_metrics(load_trace(write_trace({"traceEvents": events}))).collectives
    assert stat.bytes == (None if "gather" in op else 3 * 888 * 2880 * 2)


def test_info_says_a_bandwidth_without_ranks_is_the_algorithm_s(run, write_trace):
    """An HCCL op's args name no ranks: the bandwidth shown is the algorithm's, not bus bandwidth scaled by none."""
    events = [meta("process_name", 3, 0, name="Ascend Hardware"), meta("process_name", 4, 0, name="HCCL")]
    args = {"data_type": "FP32", "count": 1_000_000}
    for i in range(3):
        events += [
            span("MatMulV2", 3, 5, i * 1000, 500),
            span("hcom_allReduce__1_0_1", 4, 1, i * 1000 + 500, 250, args=args),
        ]
    markdown = run("info", write_trace({"traceEvents": events}), "--format", "markdown").stdout
    assert "| 4.00 MB avg | 16.0 GB/s algbw |" in markdown


@pytest.mark.parametrize(("reach_us", "part"), [(PART_SKEW_US, True), (PART_SKEW_US + 0.5, False)])
def test_a_collective_s_tasks_are_its_parts_on_its_planes_and_on_its_stream(write_trace, reach_us, part):
    """msprof draws an HCCL op over its tasks, and those tasks twice (plane and stream): each task within the op's
    span, give or take PART_SKEW_US, is a part of it; a task reaching further is work of its own, as is the
    compute beside the op and the op itself."""
    events = [
        meta("process_name", 3, 0, name="Ascend Hardware"),
        meta("thread_name", 3, 4, name="Stream 4"),
        meta("process_name", 4, 0, name="HCCL"),
        meta("thread_name", 4, 2, name="Plane 0"),
        span("MatMulV2", 3, 2, 0, 600),
        span("hcom_allReduce__428_0_1", 4, 1, 500, 300),
        span("Notify_Wait", 4, 2, 510, 100),  # on the op's plane
        span("Notify Wait", 3, 4, 510, 100),  # the same task on the stream that ran it
        span("AI_CORE", 3, 4, 500 - reach_us, 300 + 2 * reach_us),  # the op's own task, recorded a little wider
    ]
    trace = load_trace(write_trace({"traceEvents": events}))
    parts = {trace.names[trace.name[row]]: bool(is_part) for row, is_part in enumerate(collective_parts(trace))}
    assert parts == {"MatMulV2": False, "hcom_allReduce__428_0_1": False, "Notify_Wait": True, "Notify Wait": True,
                     "AI_CORE": part}  # fmt: skip


def test_nccl_kernels_are_whole_collectives_without_parts(write_trace):
    events = [span("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 7, 100 * i, 80, cat="kernel") for i in range(3)]
    events += [span("ncclDevKernel_SendRecv", 0, 9, 100 * i + 10, 20, cat="kernel") for i in range(3)]
    trace = load_trace(write_trace({"traceEvents": events}))
    assert np.count_nonzero((trace.kind == Kind.COMMUNICATION) & trace.on_roles(Role.DEVICE)) == 6
    assert not collective_parts(trace).any()  # the send/recv within the all-reduce is a collective of its own


@pytest.mark.parametrize(
    ("name", "collective"),
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "all_reduce"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce_scatter"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "send_recv"),
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "broadcast"),
        ("nccl:all_to_all", "all_to_all"),
        ("gloo:all_reduce", "all_reduce"),
        ("hcom_allGather__123_0_1", "all_gather"),
        ("hcom_receive__9_1", "send_recv"),
        ("_allgather_base", "all_gather"),
        ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
        ("barrier", "barrier"),
        ("ncclDevKernel_Generic", "other"),
    ],
)
def test_collective_names_across_libraries(name, collective):
    assert collective_type(name) == collective


@pytest.mark.parametrize(
    ("group", "kind"),
    [("default_pg", "data"), ("default_group", "data"), ("dp_shard", "data"), ("tp", "tensor"),
     ("pp_stage_1", "pipeline"), ("ep", "expert"), ("group 7", "unknown")],
)  # fmt: skip
def test_process_groups_say_their_parallelism(group, kind):
    assert parallelism(group) == kind


def test_info_shows_the_collectives(run, write_trace):
    path = write_trace(kineto_job(kernel_args=ARGS))
    text = run("info", path).stdout
    assert "Collectives (steady state)" in text and "all_reduce ×4" in text and "exposed" in text
    document = json.loads(run("info", path, "--format", "json").stdout)
    assert document["collectives"][0]["name"] == "all_reduce"
    assert document["process_groups"] == [
        {"name": "dp_replicate", "parallelism": "data", "count": 4, "time_us": 1200.0, "exposed_us": 800.0}
    ]
    assert document["metrics"]["communication.exposed_fraction"] == pytest.approx(800 / 3999, rel=1e-3)


def test_info_names_a_group_known_only_by_its_number_once(run, write_trace):
    """A process group with no description is known by its number ("group 3"): the table says so once."""
    args = {key: value for key, value in ARGS.items() if key != "Process Group Description"}
    markdown = run("info", write_trace(kineto_job(kernel_args=args)), "--format", "markdown").stdout
    assert "| *group 3 (unknown)* |" in markdown and "group group" not in markdown


def test_metrics_command_documents_the_communication_metrics(run):
    listed = run("metrics").stdout
    for name in ("communication.exposed_us", "communication.overlap_fraction", "communication.busbw_gbps"):
        assert name in listed


def test_host_records_lend_their_process_group(write_trace):
    host = ARGS | {"Process Group Name": "5", "Process Group Description": "tp"}
    metrics = compute_metrics(load_trace(write_trace(kineto_job(host_args=host))))
    (group,) = metrics.groups
    assert (group.name, group.parallelism, group.count) == ("tp", "tensor", 4)
    (stat,) = metrics.collectives
    assert stat.bytes == pytest.approx(4 * 100e6)


@pytest.mark.parametrize("name", ["nccl:send 0->1", "nccl:recv 1<-0", "hcom_send__3_1", "send", "recv"])
def test_point_to_point_names(name):
    assert collective_type(name) == "send_recv"


@pytest.mark.parametrize("name", ["RDMASend", "Notify_Wait", "Memcpy", "Reduce_Inline"])
def test_hccl_task_names_are_no_collectives_of_their_own(name):
    assert collective_type(name) == "other"


def test_a_host_only_trace_gets_host_figures_and_concurrent_collectives_count_once(run):
    """A gloo capture: two threads all-reduce at once, with no device. The host is busy in them, the top host ops
    are them, and no exposure exceeds the window: calls at once on two threads count once."""
    info = json.loads(run("info", DATA / "real" / "cpu_only_gloo.json.gz", "--format", "json").stdout)
    metrics, window = info["metrics"], info["metrics"]["window.duration_us"]
    assert metrics["host.busy_fraction"] > 0.8  # it was 0.0%: a gloo call is an annotation, and was not work
    (collective,) = info["collectives"]
    assert collective["time_us"] > window  # summed over the two threads' calls
    assert collective["exposed_us"] == pytest.approx(metrics["communication.exposed_us"])
    assert collective["exposed_us"] <= window
    assert [op["name"] for op in info["top_ops"]["ops"]] == ["gloo:all_reduce"]
    text = run("info", DATA / "real" / "cpu_only_gloo.json.gz").stdout
    assert "busy 85.1%" in text and "343.681 ms │ 178.777 ms" in text


def test_a_capture_whose_device_computes_nothing_is_not_taken_for_inference(run, write_trace):
    """The gloo rank shows all-reduces and no compute, forward or backward: nothing says it serves or infers, so its
    exposed all-reduce gets a training job's advice (DDP), not a serving engine's all-reduce kernels; the job kind
    of a trace with device compute and no backward stays inference."""
    result = run("scan", DATA / "real" / "cpu_only_gloo.json.gz", "--format", "json", "--fail-on", "never")
    (trace,) = json.loads(result.stdout)["traces"]
    fix = next(f["fix"]["text"] for f in trace["findings"] if f["rule_id"] == "PT011")
    assert "no_sync()" in fix and "serving engine" not in fix
    assert job_kind(load_trace(str(DATA / "real" / "cpu_only_gloo.json.gz"))) == "training"
    assert job_kind(load_trace(str(DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz"))) == "serving"
    forward = write_trace(kineto_job(steps=3))  # a GEMM and an all-reduce a step, no backward
    assert job_kind(load_trace(str(forward))) == "inference"


ARGS_VARIANTS = [
    ARGS,
    ARGS | {"External id": 7, "correlation": 12},  # ids beside the same fields: the same record
    ARGS | {"dtype": "c10::BFloat16", "In msg nelems": 3.5, "Out msg nelems": -1},
    ARGS | {"Collective name": "_allgather_base", "Group size": True, "Process Group Description": "undefined"},
    {"Input Dims": [[1024, 8]], "Input type": ["float"], "Process Group Name": 5},
    {"Input Dims": [[2, "x"]], "Input type": "float", "Group size": 0, "Process Group Name": ""},
    {"Collective name": None, "dtype": ["Float"], "In msg nelems": {"n": 1}},
    {},
]


@pytest.mark.parametrize("odd", [None, [1, 2], ARGS | {"note": "MARK"}], ids=["objects", "a-list", "bad-utf-8"])
def test_records_read_once_per_distinct_fields_are_each_call_s_own(write_trace, odd):
    """Calls whose args give the same fields share one record; each is what reading its own args gives, whatever
    the args hold (and one by one where some args are no object, or hold bytes that are no UTF-8 where no record
    reads: such args read as none)."""
    from perftool.analysis.communication import _record, _records, find_collectives

    variants = ARGS_VARIANTS + ([] if odd is None else [odd])
    events = kineto_job(steps=len(variants) * 2)["traceEvents"]
    kernels = [e for e in events if e["name"] == NCCL]
    for i, kernel in enumerate(kernels):
        kernel["args"] = variants[i % len(variants)]
    text = json.dumps({"traceEvents": events}).encode().replace(b'"MARK"', b'"\xff"')
    trace = load_trace(write_trace(text, "job.json"))
    rows = find_collectives(trace).rows
    assert rows.size == len(kernels)
    read_once = [repr(record) for record in _records(trace, rows)]  # by their fields' text: a NaN equals no NaN
    assert read_once == [repr(_record(args or {})) for args in trace.args_of(rows)]
