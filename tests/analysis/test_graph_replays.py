"""Device graph replays and captures cut into windows: the device is busy from a replay's first kernel to its last,
and a host waiting at the start for work the capture does not hold is not device idle."""

from __future__ import annotations

import pytest
from conftest import complete, process_name, thread_name

from perftool.analysis.launches import graph_replays, replayed
from perftool.analysis.metrics import compute_metrics
from perftool.analysis.steps import detect_steps
from perftool.pipeline.read import load_trace


def _kernel(ts: float, dur: float, flow: int) -> list:
    """A kernel on stream 3 and the device end of its launch flow; ROCm's Kineto writes both ends as flow ends."""
    return [
        {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 9, "tid": 3, "ts": ts, "dur": dur},
        {"ph": "f", "id": flow, "pid": 9, "tid": 3, "ts": ts, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]


def _launch(name: str, ts: float, flow: int) -> list:
    return [
        {"ph": "X", "name": name, "cat": "cuda_runtime", "pid": 251, "tid": 251, "ts": ts, "dur": 20},
        {"ph": "f", "id": flow, "pid": 251, "tid": 251, "ts": ts, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]


def _window(lead_wait: float) -> dict:
    """A serving window: the host waits ``lead_wait`` µs in a blocking copy while the device shows nothing, then one
    graph launch replays 10 kernels with 30 µs between them."""
    events = [
        {"ph": "M", "name": "process_labels", "pid": 9, "tid": 0, "args": {"labels": "GPU 9"}},
        {"ph": "M", "name": "process_labels", "pid": 251, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "X", "name": "hipMemcpyWithStream", "cat": "cuda_runtime", "pid": 251, "tid": 251, "ts": 50,
         "dur": lead_wait},
        *_kernel(10, 4, 1),  # the little the window shows the device do before the wait
        *_launch("hipLaunchKernel", 5, 1),
        *_launch("hipGraphLaunch", lead_wait + 100, 2),
    ]  # fmt: skip
    for k in range(10):
        events += _kernel(lead_wait + 130 + k * 130, 100, 2)
    return {"schemaVersion": 1, "traceEvents": events}


def test_a_graph_replay_is_busy_from_its_first_kernel_to_its_last(write_trace):
    trace = load_trace(write_trace(_window(lead_wait=200_000)))
    starts, ends = graph_replays(trace)
    assert starts.tolist() == [200_130.0] and ends.tolist() == [200_130.0 + 9 * 130 + 100]
    metrics = compute_metrics(trace)
    assert metrics["device.idle_gaps.count"] == 0  # the 30 µs between the replay's kernels are not idle


def test_a_wait_at_the_start_for_work_the_capture_does_not_hold_is_left_out(write_trace):
    trace = load_trace(write_trace(_window(lead_wait=200_000)))
    steps = detect_steps(trace)
    assert steps.window == pytest.approx((200_130.0, 200_130.0 + 9 * 130 + 100))
    assert compute_metrics(trace, steps)["device.busy_fraction"] == pytest.approx(1.0)


def test_a_short_wait_at_the_start_is_the_window_s_own(write_trace):
    """Idle shorter than a fifth of the device's span is the window's own, whatever the host did meanwhile."""
    trace = load_trace(write_trace(_window(lead_wait=100)))
    assert detect_steps(trace).window[0] == pytest.approx(10.0)


def test_the_real_decode_window_is_one_busy_graph_replay(run):
    from conftest import DATA

    path = DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz"
    trace = load_trace(path)
    metrics = compute_metrics(trace)
    assert metrics["window.duration_us"] == pytest.approx(10_450, rel=0.01)
    assert metrics["device.busy_fraction"] > 0.95
    said = " ".join(run("scan", str(path)).output.split())
    assert "the host waits 463.300 ms at the start of the capture while the device shows no work" in said


# HIP's calls as CUDA makes them; a copy that blocks (hipMemcpyWithStream) is, on CUDA, an asynchronous copy that
# waits for the stream (the host's memory is pageable) followed by a short synchronisation
IN_CUDA_WORDS = {"hipLaunchKernel": "cudaLaunchKernel", "hipGraphLaunch": "cudaGraphLaunch"}


def _in_cuda_words(document: dict) -> dict:
    """A HIP capture as CUDA's runtime and CUPTI would have written it."""
    blocking = {e["args"]["correlation"] for e in document["traceEvents"] if e.get("name") == "hipMemcpyWithStream"}
    events = []
    for event in document["traceEvents"]:
        if event.get("name") == "hipMemcpyWithStream":
            copy = dict(event, name="cudaMemcpyAsync", dur=event["dur"] - 4)
            events += [copy, dict(copy, name="cudaStreamSynchronize", ts=event["ts"] + copy["dur"], dur=4, args={})]
            continue
        if event.get("cat") == "gpu_memcpy" and event["args"].get("correlation") in blocking:
            event = dict(event, name=event["name"].replace("-> Host", "-> Pageable"))
        events.append(dict(event, name=IN_CUDA_WORDS.get(event.get("name"), event.get("name"))))
    return dict(document, traceEvents=events)


def test_the_real_decode_window_reads_alike_in_cuda_s_words(run, write_trace):
    """The wait at the start is a copy from pageable memory on CUDA (its asynchronous copy waits for the stream), as
    HIP's synchronous copy is: the same window, the same notes (but how PyTorch labels a CUDA graph's kernels), the
    same finding."""
    import gzip
    import json

    from conftest import DATA

    real = DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz"
    document = json.loads(gzip.decompress(real.read_bytes()))
    converted = _in_cuda_words(document)
    assert "cudaMemcpyAsync" in json.dumps(converted) and "hipMemcpyWithStream" not in json.dumps(converted)
    scans = [run("scan", write_trace(d), "--format", "json") for d in (document, converted)]
    hip, cuda = (json.loads(scan.stdout)["traces"][0] for scan in scans)
    assert cuda["window_us"] == pytest.approx(hip["window_us"]) == pytest.approx(10_450, rel=0.01)
    annotations = (
        "; in a trace viewer, PyTorch's CUDA graph kernel annotations label them too (torch.cuda.graph(...,"
        " enable_annotations=True) with mark_kernels, CUDA 13.1 or later)"
    )  # CUDA's graphs alone are labelled
    assert [note.replace(annotations, "") for note in cuda["caveats"]] == hip["caveats"] != cuda["caveats"]
    assert [f["rule_id"] for f in cuda["findings"]] == [f["rule_id"] for f in hip["findings"]] == ["PT001"]
    assert cuda["findings"][0]["impact"]["share"] == pytest.approx(hip["findings"][0]["impact"]["share"])


@pytest.mark.parametrize(
    ("host_event", "graphs_off"),
    [
        (None, 'torch.compile without mode="reduce-overhead"'),  # no engine: PyTorch's way alone
        ("vllm::unified_attention", "vLLM's --enforce-eager"),
        ("sglang/srt/model_executor/cuda_graph_runner.py(1496): replay", "SGLang's --disable-cuda-graph"),
        # an iteration annotation either engine writes: both engines' ways
        ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk3200sqsq32sqsk3200)",
         "vLLM's --enforce-eager, SGLang's --disable-cuda-graph"),
    ],
)  # fmt: skip
def test_a_trace_mostly_in_graph_replays_says_their_kernels_have_no_op_and_how_to_see_them(
    write_trace, run, host_event, graphs_off
):
    """How to see replayed kernels by op is told in the terms of the job: a serving engine's own flag to run without
    graphs where the trace names the engine, both engines' where it does not, PyTorch's for any other job."""
    window = _window(lead_wait=100)
    if host_event:  # around the whole window, as an engine's iteration annotation is
        window["traceEvents"].append(
            {"ph": "X", "name": host_event, "cat": "user_annotation", "pid": 251, "tid": 251, "ts": 1, "dur": 1600}
        )
    said = " ".join(run("scan", write_trace(window)).output.split())
    assert "of the device's compute runs in device graph replays, whose kernels no op of their own names" in said
    assert f"profile one run with graphs off ({graphs_off})" in said


@pytest.mark.parametrize(("launch", "annotated"), [("cudaGraphLaunch", True), ("cuGraphLaunch", True),
                                                   ("hipGraphLaunch", False)])  # fmt: skip
def test_only_cuda_s_graph_replays_are_told_of_pytorch_s_graph_kernel_annotations(write_trace, run, launch, annotated):
    """PyTorch labels the kernels of a CUDA graph it captured (CUDA 13.1 or later); a HIP graph's it does not, so a
    ROCm trace is not told to."""
    window = _window(lead_wait=100)
    for event in window["traceEvents"]:
        event["name"] = launch if event["name"] == "hipGraphLaunch" else event["name"]
    said = " ".join(run("scan", write_trace(window)).output.split())
    assert "of the device's compute runs in device graph replays" in said
    assert ("enable_annotations=True) with mark_kernels, CUDA 13.1 or later" in said) is annotated


def test_a_trace_without_graph_replays_says_nothing_of_them(run):
    from conftest import DATA

    said = " ".join(run("scan", str(DATA / "real" / "nccl_a100_rank.json.gz")).output.split())
    assert "graph replays" not in said


def test_scan_attributes_no_idle_inside_a_graph_replay(write_trace, run):
    """The idle scan attributes by cause is the idle the metrics measure: the 30 µs between a replay's kernels are
    the graph's own dependencies, attributed to no cause (the window is the replay: no idle at all)."""
    import json

    scanned = json.loads(run("scan", write_trace(_window(lead_wait=200_000)), "--format", "json").stdout)["traces"][0]
    assert scanned["metrics"]["device.idle_fraction"] == pytest.approx(0.0, abs=1e-9)
    assert sum(scanned["idle"].values()) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("name", ["sglang_mi300x_qwen3_8b_decode_window", "ddp_v100_rank1"])
def test_on_real_captures_the_idle_by_cause_adds_up_to_the_device_s_idle(run, name):
    """A decode step replayed as one graph, and a DDP rank: the causes share out the device's idle time, not more
    (scan attributed the gaps inside replays too: 6.5% by cause against 3.9% idle on the decode window)."""
    import json

    from conftest import DATA

    scan = run("scan", str(DATA / "real" / f"{name}.json.gz"), "--format", "json", "--fail-on", "never")
    scanned = json.loads(scan.stdout)["traces"][0]
    assert sum(scanned["idle"].values()) == pytest.approx(scanned["metrics"]["device.idle_fraction"], abs=2e-4)


def test_a_kernel_that_starts_before_the_graph_launch_linked_to_it_is_no_part_of_the_replay(write_trace):
    """A flow that links a graph launch to a kernel before it (an id used twice, clocks mixed) would stretch the
    replay, and the device's busy time, back over time it did not take."""
    document = _window(lead_wait=200_000)
    document["traceEvents"] += _kernel(1_000, 4, 2)  # flow 2 is the graph launch's, 199,100 µs before it
    starts, ends = graph_replays(load_trace(write_trace(document)))
    assert starts.tolist() == [200_130.0] and ends.tolist() == [200_130.0 + 9 * 130 + 100]


def test_xla_s_command_buffer_replays_keep_their_kernels_ops(write_trace, run):
    """XLA replays a program's kernels as command buffers (cuGraphLaunch), each kernel still named by the program's
    op it runs: no note that replayed kernels have no op of their own, nor a torch.compile setting for a JAX job."""
    events = [
        process_name(701, "/host:CPU"), thread_name(701, 1, "python"), thread_name(701, 2, "tf_pjrt_thread_pool/1"),
        process_name(1, "/device:GPU:0"), thread_name(1, 16, "Stream #16(Kernel)"),
    ]  # fmt: skip
    for n in range(6):
        t, launch = n * 1000.0, {"correlation_id": str(n)}
        events += [
            complete("train", t, 990, pid=701, tid=1, args={"step_num": str(n)}),
            complete("PjitFunction(train_step)", t + 5, 200, pid=701, tid=1),
            complete("cuGraphLaunch", t + 150, 10, pid=701, tid=2, args=launch),
            *(complete(f"loop_fusion_{k}", t + 300 + k * 120, 100, pid=1, tid=16, args=launch) for k in range(5)),
        ]
    path = write_trace({"displayTimeUnit": "ns", "traceEvents": events}, name="host.trace.json")
    trace = load_trace(path)
    assert trace.dialect == "xla" and replayed(trace)[1].size == 30  # the replays are there, linked to their launch
    said = " ".join(run("info", str(path)).output.split())
    assert "graph replays" not in said and "torch.compile" not in said


def _without_host_end(events: list, flow: int) -> list:
    """The events less the host's end of flow ``flow``: the profiler wrote no flow from that launch."""
    return [e for e in events if not (e.get("id") == flow and e["pid"] == 251)]


REPLAY = _window(lead_wait=100)["traceEvents"]  # a kernel launched at 5 (flow 1), a graph launched at 200 (flow 2)
NO_REPLAY = [e for e in REPLAY if e.get("id") != 2 and e.get("ts", 0) < 230]  # the graph launch, none of its kernels
AFTER = [*_launch("hipLaunchKernel", 1_600, 3), *_kernel(1_610, 50, 3)]  # a kernel launched after the replay
UNLINKED = [
    ("the replay's flow lost", _without_host_end(REPLAY, 2), True),
    ("the replay linked", REPLAY, False),
    # most of the device's work a kernel of no launch, so the replay's is under a tenth of it and goes unremarked
    ("the replay linked, a kernel of no launch after it", [*REPLAY, _kernel(1_600, 20_000, 9)[0]], False),
    ("no replay kernels, a linked kernel after", [*NO_REPLAY, *AFTER], False),
    ("no replay kernels, an unlinked kernel before", [*_without_host_end(NO_REPLAY, 1), *AFTER], False),
    ("no flow at all", [e for e in REPLAY if e["ph"] != "f"], False),  # as the emulator writes its traces
]


@pytest.mark.parametrize(("events", "said"), [case[1:] for case in UNLINKED], ids=[case[0] for case in UNLINKED])
def test_graph_launches_no_flow_links_to_their_kernels_are_said_to_read_as_work_of_its_own(write_trace, events, said):
    """A profiler that writes flows for kernel launches but none from a graph launch: the replay's kernels, linked to
    nothing, read as work of their own (the gaps inside the replay as idle), and the notes say so; not where the
    graph launches link to their work, nor where all work after them is linked to its launch."""
    from perftool.analysis.confidence import caveats

    trace = load_trace(write_trace({"schemaVersion": 1, "traceEvents": events}))
    notes = [c.text for c in caveats(trace, detect_steps(trace)) if c.text.startswith("no flow links")]
    assert len(notes) == said
    assert all(n.startswith("no flow links the window's 1 device graph launch to the kernels replayed") for n in notes)


def test_scan_says_when_no_flow_links_a_graph_launch_to_its_kernels(run, write_trace):
    import json

    document = {"schemaVersion": 1, "traceEvents": _without_host_end(REPLAY, 2)}
    scanned = json.loads(run("scan", write_trace(document), "--format", "json").stdout)["traces"][0]
    assert any(c.startswith("no flow links the window's 1 device graph launch") for c in scanned["caveats"])
