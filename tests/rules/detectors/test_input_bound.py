"""PT002's detector on emulated traces, where the run's prefetch depth is known: more workers and deeper prefetching
are each the other's alternative, for the emulator to judge which helps."""

from __future__ import annotations

import math

from conftest import REPO, complete

from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.rules.detectors import input_bound
from perftool.rules.detectors.base import Detection

NPU = REPO / "sample_traces" / "npu"


def _detected(path) -> Detection:
    _, scope = analyse_trace(load_trace(str(path)), [])
    found = input_bound.detect(scope, dict(input_bound.DETECTOR.params))
    assert found is not None
    return found


def _deeper(values: dict) -> int:
    """A worker's ready batches cover its slowest (p99) batch, and one more than now at least."""
    covering = math.ceil(values["prepare_p99_ms"] / (values["workers"] * values["step_ms"])) + 1
    return max(covering, values["current_prefetch_depth"] + 1)


def test_workers_that_keep_up_are_prefetched_deeper_with_more_workers_the_alternative():
    found = _detected(NPU / "input_bound_prefetch.trace.json.gz")
    assert (found.values["workers"], found.values["current_prefetch_depth"]) == (2, 1)
    assert (found.variant, found.changes) == (None, {"prefetch_depth": 4}) and _deeper(found.values) == 4
    assert [(a.variant, a.changes) for a in found.alternatives] == [("too_few_workers", {"workload.input_workers": 3})]


def test_workers_that_cannot_keep_up_are_more_with_deeper_prefetching_the_alternative(run, tmp_path):
    trace = tmp_path / "starved.json"
    starved = ["--set", "workload.input_workers=2", "--set", "workload.preprocess_us_per_sample=2000"]
    run("emulate", NPU / "healthy.yaml", *starved, "--trace", trace)
    found = _detected(trace)
    assert (found.variant, found.changes) == ("too_few_workers", {"workload.input_workers": 16})
    assert [(a.variant, a.changes) for a in found.alternatives] == [(None, {"prefetch_depth": _deeper(found.values)})]
    assert _deeper(found.values) == 4  # 217 ms at p99 over 2 workers' 60 ms steps: 3, and one over the 3 now


def test_the_bound_on_a_late_batch_counts_the_stall_from_the_wait_on_not_what_came_before_it(write_trace):
    """Each 5 ms step: the host works 1 ms with the device idle (a copy of its own), waits 1 ms for the DataLoader's
    batch, dispatches for 0.5 ms, then the device computes 2.5 ms. The batch's wait leads to the dispatch's idle
    after it (1.5 ms a step bound), not to the host's work before it (2.5 ms, the whole stretch, before)."""
    host = {"pid": 10, "tid": 10}
    events = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    for n in range(8):
        b = n * 5_000.0
        events += [
            complete(f"ProfilerStep#{n}", b, 5_000, cat="user_annotation", **host),
            complete("aten::to", b, 1_000, cat="cpu_op", **host),
            complete("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", b + 1_000, 1_000,
                     cat="user_annotation", **host),
            complete("aten::linear", b + 2_000, 500, cat="cpu_op", **host),
            complete("cudaLaunchKernel", b + 2_450, 10, cat="cuda_runtime", args={"correlation": n}, **host),
            complete("gemm_kernel", b + 2_500, 2_500, pid=0, tid=7, cat="kernel", args={"correlation": n}),
        ]  # fmt: skip
    path = write_trace({"traceEvents": events})
    _, scope = analyse_trace(load_trace(str(path)), [])
    found = input_bound.detect(scope, dict(input_bound.DETECTOR.params))
    assert found is not None and found.bound_us is not None
    assert scope.per_step(found.lost_us) == 1_000
    assert scope.per_step(found.bound_us) == 1_500
