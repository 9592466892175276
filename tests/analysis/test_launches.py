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
