"""Which device work each host launch started: flows paired as trace viewers pair them, by category and id; where a
trace holds no flows, both ends' correlation id."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import REPO

from perftool.analysis.launches import _correlation_id, launch_rows
from perftool.pipeline.read import load_trace


def _flow(ph: str, ts: float, tid: int, cat: str, pid: int = 1) -> dict:
    return {"ph": ph, "id": 7, "pid": pid, "tid": tid, "ts": ts, "cat": cat, "name": cat, "bp": "e"}


def test_a_launch_reaches_its_kernel_when_a_forward_to_backward_flow_has_the_same_id(write_trace):
    """Kineto numbers its ``fwdbwd`` flows (a forward op to its backward) apart from its launches (``ac2g``): an
    id can name one of each, and which the file lists first must not decide which the kernel's launch is."""
    events = [
        {"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
        {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 5, "dur": 30},
        {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "name": "MmBackward0", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": 500, "dur": 30},
        {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 20, "dur": 50},
    ]
    flows = [_flow("s", 5, 1, "fwdbwd"), _flow("f", 500, 2, "fwdbwd"), _flow("s", 10, 1, "ac2g"),
             _flow("f", 20, 7, "ac2g", pid=0)]  # fmt: skip
    for listed in (flows, flows[::-1]):
        trace = load_trace(str(write_trace({"traceEvents": events + listed})))
        sources, spans = launch_rows(trace)
        assert [trace.names[trace.name[row]] for row in spans] == ["gemm"]
        assert trace.cats[trace.cat[sources[0]]] == "ac2g" and trace.ts[sources[0]] == 10.0


@pytest.mark.parametrize(
    ("kept", "found"),
    [
        (b'{"correlation_id": "12", "hlo_op": "fusion"}', 12),  # XLA's: a string of digits
        (b'{"correlation_id": 7}', 7),
        (b'{"correlation_id": "x"}', -1),
        (b'{"correlation_id": null}', -1),
        (b'{"correlation_id": {"a": 1}}', -1),
        (b'{"correlation_id": -3}', -1),
        (b'{"correlation_id": true}', -1),
        (b'{"correlation_id": 1.5}', -1),
        (b'{"correlation_id": "99999999999999999999999"}', -1),  # no tracer's counter, and no int64
        (b'{"correlation_id": 4611686018427387905}', -1),
        (b"[1]", -1),
        (b"\xff", -1),
        (b"{}", -1),
    ],
)
def test_a_correlation_id_is_a_tracer_s_counter_or_none(kept, found):
    assert _correlation_id(kept) == found


def _without_flows(write_trace, path) -> str:
    """The trace at ``path`` with its flows left out, as a filter that lightens a trace for a viewer leaves it."""
    document = json.loads(gzip.decompress(path.read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("ph") not in ("s", "t", "f")]
    return str(write_trace(document, "no_flows.json"))


def _pairs(path: str) -> list[tuple[float, str, float]]:
    """Per launch: when the host launched, and the name and start of the device work it reached."""
    trace = load_trace(path)
    sources, spans = launch_rows(trace)
    return list(zip(trace.ts[sources].tolist(), [trace.names[n] for n in trace.name[spans]], trace.ts[spans].tolist()))


@pytest.mark.parametrize(
    "capture",
    [
        "rocm_mi250_minitoy.json.gz",  # ROCm's Kineto, which writes both ends of a flow as its ends
        "resnet50_pt18_workers0.json.gz",  # PyTorch 1.8: Runtime and Kernel, flows in ``async``
        "nccl_a100_rank.json.gz",
        "alexnet_benchmark_startup.json.gz",  # streams' syncs, reached from the host's waits
    ],
)
def test_a_kineto_trace_whose_flows_were_left_out_pairs_each_launch_with_the_work_its_flow_reached(
    write_trace, capture
):
    path = REPO / "tests" / "data" / "real" / capture
    with_flows = _pairs(str(path))
    assert len(with_flows) > 10
    assert _pairs(_without_flows(write_trace, path)) == with_flows


def test_a_kineto_launch_and_its_kernel_hold_their_correlation_id_as_their_flow_id(write_trace):
    """Read for every trace, flows or none: what a span holds never depends on what else its piece of the file
    holds (the loader cuts a file where its workers' share ends)."""
    path = REPO / "tests" / "data" / "real" / "rocm_mi250_minitoy.json.gz"
    written = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    for trace in (load_trace(str(path)), load_trace(_without_flows(write_trace, path))):
        for category in ("kernel", "cuda_runtime"):
            spans = np.flatnonzero(np.array(trace.cats)[trace.cat] == category)
            expected = [e["args"]["correlation"] for e in written if e.get("cat") == category]
            assert len(expected) > 10 and trace.flow_id[spans].tolist() == expected


def test_only_a_span_holds_its_correlation_id_as_its_flow_id(write_trace):
    on_device, on_host = {"pid": 0, "tid": 7}, {"pid": 1, "tid": 1}
    events = [
        {"ph": "X", "name": "gemm", "cat": "kernel", **on_device, "ts": 10, "dur": 5, "args": {"correlation": 5}},
        {"ph": "i", "name": "mark", "cat": "kernel", **on_device, "ts": 12, "s": "t", "args": {"correlation": 6}},
        {"ph": "X", "name": "relu", "cat": "cpu_op", **on_host, "ts": 9, "dur": 5, "args": {"correlation": 7}},
    ]
    trace = load_trace(str(write_trace({"schemaVersion": 1, "traceEvents": events})))
    flow_ids = {trace.names[n]: flow for n, flow in zip(trace.name.tolist(), trace.flow_id.tolist())}
    assert flow_ids == {"gemm": 5, "mark": -1, "relu": -1}  # an instant, and a span of no launch or its work: none


def _launched(flow_ids: list[tuple[str, int]], launch: str = "cudaLaunchKernel", flows: bool = True) -> list[dict]:
    """One stream's kernels 100 µs apart, each reached by a flow of the given id (and carrying it as its correlation
    id; no flows where ``flows`` is false); a launch call (``launch``) at 5 µs before each kernel whose flow is named
    ``own`` (with its id), none for one named ``reused``."""
    events = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    for k, (kind, flow) in enumerate(flow_ids):
        at, correlation = 100.0 * k + 10, {"correlation": flow}
        call = {"ph": "X", "name": launch, "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": at - 5, "dur": 3}
        kernel = {"ph": "X", "name": f"kernel{k}", "cat": "kernel", "pid": 0, "tid": 7, "ts": at, "dur": 50}
        start = {"ph": "s", "id": flow, "pid": 1, "tid": 1, "ts": at - 5, "cat": "ac2g", "name": "ac2g"}
        end = {"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": at, "cat": "ac2g", "name": "ac2g", "bp": "e"}
        if kind == "own":
            events += [call | {"args": correlation}] + [start] * flows
        events += [kernel | {"args": correlation}] + [end] * flows
    return events


def _reached(write_trace, events: list[dict]) -> list[str]:
    trace = load_trace(str(write_trace({"schemaVersion": 1, "traceEvents": events})))
    _, spans = launch_rows(trace)
    return sorted(trace.names[trace.name[row]] for row in spans)


@pytest.mark.parametrize("flows", [True, False])
def test_work_a_profiler_links_to_a_past_launch_s_id_is_no_launch_s(write_trace, flows):
    """torch_npu's MSPTI gives kernels with no launch of their own a past launch's id: launch 1 reaches kernel0, and
    kernel2 and kernel4, after other launches' kernels on the stream, are no work of it (nor of any launch)."""
    ids = [("own", 1), ("own", 2), ("reused", 1), ("own", 3), ("reused", 1)]
    assert _reached(write_trace, _launched(ids, flows=flows)) == ["kernel0", "kernel1", "kernel3"]


@pytest.mark.parametrize("flows", [True, False])
@pytest.mark.parametrize(
    ("launch", "ids"),
    [
        ("cudaGraphLaunch", [("own", 1), ("own", 2), ("reused", 1)]),  # a graph's replay: all its kernels
        ("cudaMemcpyAsync", [("own", 1), ("reused", 1), ("own", 2)]),  # a copy in pieces, one after another
    ],
)
def test_a_launch_s_spans_in_a_row_or_a_graph_s_are_its_work(write_trace, launch, ids, flows):
    assert _reached(write_trace, _launched(ids, launch, flows)) == ["kernel0", "kernel1", "kernel2"]


def test_scan_finds_in_a_trace_whose_flows_were_left_out_what_it_finds_in_the_trace(run, write_trace):
    """Without the correlation ids, the flow-less trace's launches went unpaired: the host's gaps read as Python where
    they were launches (PT001 found), and the graph replays' kernels were no op's (their note lost)."""
    path = REPO / "tests" / "data" / "real" / "ddp_v100_rank1.json.gz"
    scans = [run("scan", p, "--format", "json").stdout for p in (path, _without_flows(write_trace, path))]
    found = [json.loads(scan)["traces"][0] for scan in scans]
    assert [f["rule_id"] for f in found[0]["findings"]] == ["PT011", "PT019"]
    assert any("device graph replays" in caveat for caveat in found[0]["caveats"])
    events = {"trace.events": found[1]["metrics"]["trace.events"]}  # the flows' events left out
    assert found[1] == found[0] | {"path": found[1]["path"], "metrics": found[0]["metrics"] | events}
