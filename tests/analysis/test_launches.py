"""Which device work each host launch started: flows paired as trace viewers pair them, by category and id."""

from __future__ import annotations

import pytest

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


def _launched(flow_ids: list[tuple[str, int]], launch: str = "cudaLaunchKernel") -> list[dict]:
    """One stream's kernels 100 µs apart, each reached by a flow of the given id; a launch call (``launch``) at 5 µs
    before each kernel whose flow is named ``own`` (with its id), none for one named ``reused``."""
    events = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    for k, (kind, flow) in enumerate(flow_ids):
        at = 100.0 * k + 10
        if kind == "own":
            events += [
                {"ph": "X", "name": launch, "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": at - 5, "dur": 3},
                {"ph": "s", "id": flow, "pid": 1, "tid": 1, "ts": at - 5, "cat": "ac2g", "name": "ac2g"},
            ]
        events += [
            {"ph": "X", "name": f"kernel{k}", "cat": "kernel", "pid": 0, "tid": 7, "ts": at, "dur": 50},
            {"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": at, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
    return events


def _reached(write_trace, events: list[dict]) -> list[str]:
    trace = load_trace(str(write_trace({"schemaVersion": 1, "traceEvents": events})))
    _, spans = launch_rows(trace)
    return sorted(trace.names[trace.name[row]] for row in spans)


def test_work_a_profiler_links_to_a_past_launch_s_id_is_no_launch_s(write_trace):
    """torch_npu's MSPTI gives kernels with no launch of their own a past launch's id: launch 1 reaches kernel0, and
    kernel2 and kernel4, after other launches' kernels on the stream, are no work of it (nor of any launch)."""
    flows = [("own", 1), ("own", 2), ("reused", 1), ("own", 3), ("reused", 1)]
    assert _reached(write_trace, _launched(flows)) == ["kernel0", "kernel1", "kernel3"]


@pytest.mark.parametrize(
    ("launch", "flows"),
    [
        ("cudaGraphLaunch", [("own", 1), ("own", 2), ("reused", 1)]),  # a graph's replay: all its kernels
        ("cudaMemcpyAsync", [("own", 1), ("reused", 1), ("own", 2)]),  # a copy in pieces, one after another
    ],
)
def test_a_launch_s_spans_in_a_row_or_a_graph_s_are_its_work(write_trace, launch, flows):
    assert _reached(write_trace, _launched(flows, launch)) == ["kernel0", "kernel1", "kernel2"]
