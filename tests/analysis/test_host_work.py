"""The host's dispatch per step: its op and runtime calls and the short gaps between them, less what a device graph
would not remove (Python that runs no op, the allocator, a launch loading code)."""

from __future__ import annotations

import pytest
from builders import eager_steps, span

from perftool.analysis.host_work import dispatch_per_step, kernel_launches
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace


def _dispatch(write_trace, document: dict) -> float:
    trace = load_trace(str(write_trace(document)))
    _, scope = analyse_trace(trace, [])
    return dispatch_per_step(trace, scope)


def test_dispatch_is_the_ops_time_and_not_python_that_runs_no_op(write_trace):
    """20 ops of 100 µs a step after 3 ms of Python preprocessing: 2 ms of dispatch, not 5."""
    assert _dispatch(write_trace, eager_steps(op_us=100, python_us=3000)) == pytest.approx(2000, abs=0.01)
    assert _dispatch(write_trace, eager_steps(op_us=150, python_us=3000)) == pytest.approx(3000, abs=0.01)


def test_the_allocator_s_calls_inside_an_op_are_not_dispatch(write_trace):
    """A free of 80 µs inside each step's first op is churn, which a graph does not explain: 80 µs a step less."""
    document = eager_steps(op_us=100, python_us=3000)
    starts = [e["ts"] for e in document["traceEvents"] if e["name"] == "update_metrics (train.py:10)"]
    document["traceEvents"] += [span("cudaFree", 100, 1, at + 3000 + 5, 80, "cuda_runtime") for at in starts]
    assert _dispatch(write_trace, document) == pytest.approx(2000 - 80, abs=0.01)


@pytest.mark.parametrize(
    "launcher",
    [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernelEx",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipDrvLaunchKernelEx",
    ],
)
def test_a_launch_that_loads_code_is_not_dispatch(write_trace, launcher):
    """One launch of 95 µs among launches of 5 µs (a first launch loading its code, past ten times the median) is
    paid once, not each step: it leaves the dispatch, and with it the 100 µs op that made no other call; one of
    45 µs stays in it. Whichever of the CUDA runtime's, the driver's or HIP's launchers makes the calls (RCCL
    launches with hipExtLaunchKernel)."""
    for length, left_out in ((95, 100), (45, 0)):
        document = eager_steps(op_us=100, python_us=3000)
        for event in document["traceEvents"]:
            event["name"] = launcher if event["name"] == "cudaLaunchKernel" else event["name"]
        launch = [e for e in document["traceEvents"] if e["name"] == launcher][60]  # in the fourth step
        launch["ts"], launch["dur"] = launch["ts"] + 5 - length, length  # still inside its op, ending where it did
        assert _dispatch(write_trace, document) == pytest.approx(2000 - left_out / 8, abs=0.01), length


def test_ascendcl_calls_that_enqueue_device_work_are_its_launches(write_trace):
    """Of AscendCL's calls, those that enqueue device work launch it (an aclnn operator, a compiled op executed, a
    collective); its bookkeeping, an operator's sizing on the host, a synchronous copy and a sync do not, so that
    the median launch (what a launch costs) is a launch's."""
    launches = [
        "AscendCL@aclnnMm",
        "AscendCL@aclopCompileAndExecute",
        "AscendCL@aclmdlExecute",
        "AscendCL@hcom_allReduce_",
    ]
    others = [
        "AscendCL@aclCreateTensorDesc",
        "AscendCL@aclnnMmGetWorkspaceSize",
        "AscendCL@TransData_Tiling",
        "AscendCL@aclrtMemcpy",
        "AscendCL@aclrtSynchronizeStreamWithTimeout",
        "AscendCL@aclrtRecordEvent",
    ]
    events = [span(name, 100, 1, 100 * at, 50, "cuda_runtime") for at, name in enumerate(launches + others)]
    trace = load_trace(str(write_trace({"traceEvents": events})))
    assert [trace.names[n] for n in trace.name[kernel_launches(trace)].tolist()] == launches
