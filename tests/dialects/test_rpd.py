"""rocmProfileData traces as its converter to Chrome JSON writes them (rpd2tracing, which SGLang runs on the RPD it
records): GPUs as processes ``GPU{n}``, HIP calls on threads ``Hip {tid}``, HSA calls beside them, copies by type, a
graph's replay drawn over its kernels, times and ids as strings, every process of a job in one file."""

from __future__ import annotations

import json
import sqlite3

import pytest

from perftool.analysis.family import device_name
from perftool.analysis.launches import launch_rows
from perftool.analysis.metrics import compute_metrics
from perftool.analysis.steps import detect_steps
from perftool.dialects.vocabulary import OTHER_DEVICES
from perftool.pipeline.read import load_trace
from perftool.trace.model import Kind, Role

STEPS = 8
STEP_US = 5000.0
KERNELS = 10  # a step's kernels, one every 400 µs


def _event(pid, tid, name, ts, dur=None, **fields) -> dict:
    """An event as rpd2tracing writes one: its process, thread, times and ids as strings."""
    event = {"pid": str(pid), "tid": str(tid), "name": name, "ts": str(ts), **fields}
    return event | ({"dur": str(dur), "ph": "X"} if dur is not None else {})


def _rank(host: int, gpu: int, kernel_us: float, flows: list[int]) -> list[dict]:
    """One process of the job: its HIP thread launching a step's kernels on its GPU (each linked by an ``api_op``
    flow), the HSA calls under each launch on the thread beside, a copy back to the host that it waits for at the
    step's end, and a graph replay drawn over two of the step's kernels."""
    events = [
        {"name": "process_name", "ph": "M", "pid": str(gpu), "args": {"name": f"GPU{gpu}"}},
        {"name": "thread_name", "ph": "M", "pid": str(host), "tid": str(host), "args": {"name": f"Hip {host}"}},
        {"name": "thread_name", "ph": "M", "pid": str(host), "tid": str(host + 1), "args": {"name": f"HSA {host}"}},
    ]
    for step in range(STEPS):
        t = 1_000_000.0 + step * STEP_US + gpu
        events.append(_event(host, host, f"step {step}", t, STEP_US - 10, args={"desc": f"step {step}"}))
        for k in range(KERNELS):
            at = t + 50 + 400 * k
            flows.append(len(flows) + 1)
            events += [
                _event(host, host, "hipLaunchKernel", at, 20, args={"desc": "stream=0x1"}),
                _event(host, host + 1, "hsa_queue_load_write_index_relaxed", at + 2, 1, args={"desc": ""}),
                _event(gpu, 1, "Cijk_Alik_Bljk_HHS_BH_MT128x128", at + 30, kernel_us, args={"desc": "KernelExecution"}),
                _event(host, host, "api_op", at + 18, cat="api_op", id=str(flows[-1]), ph="s"),
                _event(gpu, 1, "api_op", at + 30, cat="api_op", id=str(flows[-1]), ph="f", bp="e"),
            ]
        events.append(_event(gpu, 1, "Graph 7", t + 30, 400 + kernel_us, args={"kernels": "2"}))
        end = t + 50 + 400 * KERNELS
        events += [
            _event(host, host, "hipMemcpyWithStream", end, 300, args={"desc": ""}),
            _event(gpu, 2, "CopyDeviceToHost", end + 200, 80, args={"desc": "CopyDeviceToHost"}),
            _event(gpu, 2, "FillBuffer", end + 290, 5, args={"desc": "FillBuffer"}),
        ]
    return events


def _job(kernel_us: tuple[float, ...] = (150.0,)) -> str:
    """The file rpd2tracing writes of a job whose process ``n`` drives ``GPU{n}`` (its kernels ``kernel_us[n]``
    long): the event list opens with an empty object, and counters close it."""
    flows: list[int] = []
    events = [event for gpu, us in enumerate(kernel_us) for event in _rank(4242 + 100 * gpu, gpu, us, flows)]
    last = 4242 + 100 * (len(kernel_us) - 1)  # the process of the last GPU pushes the range around the profile
    events.append(_event(last, last, "rpd profile range", 999_000, STEPS * STEP_US + 2_000, args={"desc": ""}))
    events += [{"pid": str(gpu), "name": "QueueDepth", "ph": "C", "ts": 1_000_000, "args": {"depth": 1}}
               for gpu in range(len(kernel_us))]  # fmt: skip
    return '{"traceEvents": [ {}\n' + "".join(f",{json.dumps(event)}\n" for event in events) + "]}"


def test_an_rpd_trace_is_read_in_its_own_terms(write_trace):
    trace = load_trace(write_trace(_job()))
    assert trace.dialect == "rpd" and device_name(trace) == "GPU0"
    roles = {(t.process_name, t.thread_name): t.role for t in trace.tracks}
    assert roles[("GPU0", "")] == Role.DEVICE and roles[("", "Hip 4242")] == Role.HOST
    assert roles[("", "HSA 4242")] == Role.SUMMARY  # the calls under the HIP calls: never counted twice
    kinds = {trace.names[n]: Kind(k) for n, k in zip(trace.name.tolist(), trace.kind.tolist(), strict=True)}
    assert kinds["CopyDeviceToHost"] == Kind.D2H and kinds["FillBuffer"] == Kind.MEMSET
    assert kinds["Graph 7"] == Kind.ANNOTATION
    assert kinds["rpd profile range"] == Kind.ANNOTATION  # SGLang's range around the whole profile: no host work
    assert kinds["Cijk_Alik_Bljk_HHS_BH_MT128x128"] == Kind.COMPUTE and kinds["hipLaunchKernel"] == Kind.RUNTIME
    steps = detect_steps(trace)
    assert steps.count == STEPS
    assert launch_rows(trace)[0].size == STEPS * KERNELS
    document = json.loads(_job())
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("name") != "Graph 7"]
    without = load_trace(write_trace(document, "without_graphs.json"))
    busy = compute_metrics(trace, steps)["device.busy_fraction"]
    assert busy == compute_metrics(without, detect_steps(without))["device.busy_fraction"]  # the span adds nothing
    assert busy > 0.3


def test_a_job_in_one_rpd_file_is_read_as_its_busiest_gpu_and_the_process_driving_it(write_trace):
    """RPD records every process of the job into one file: the steps of each process's host counted at once, and
    every GPU's busy time, would make one rank of many."""
    trace = load_trace(write_trace(_job((150.0, 190.0))))
    assert device_name(trace) == "GPU1" and detect_steps(trace).count == STEPS
    roles = {(t.process_name, t.thread_name): t.role for t in trace.tracks}
    assert roles[("", "Hip 4342")] == Role.HOST
    assert roles[("", "Hip 4242")] == roles[("GPU0", "")] == Role.OTHER_DEVICE
    assert trace.metadata[OTHER_DEVICES]["their_hosts"] == 1


def test_a_host_that_launches_on_the_analysed_gpu_too_stays_the_host(write_trace):
    """One process driving both GPUs keeps its host, whichever GPU is analysed."""
    document = json.loads(_job((150.0, 190.0)))
    for event in document["traceEvents"]:
        if event.get("pid") == "4342" and event.get("ph") != "M":  # the second process's calls made by the first
            event["pid"], event["tid"] = "4242", "4242"
    trace = load_trace(write_trace(document))
    assert device_name(trace) == "GPU1"
    assert {t.role for t in trace.tracks if t.thread_name == "Hip 4242"} == {Role.HOST}
    assert trace.metadata[OTHER_DEVICES]["their_hosts"] == 0


def test_the_scan_names_amd_s_graphs_and_the_hosts_left_out(run, write_trace):
    """rocmProfileData names no device model: the HIP calls say the GPU is AMD's, so its graphs are HIP graphs."""
    path = write_trace(_job((150.0, 190.0)), "rpd-1764000000.5-TP-0.trace.json.gz")
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert scanned["dialect"] == "rpd" and scanned["steps"] == STEPS
    note = next(c for c in scanned["caveats"] if "devices with work" in c)
    assert "ran 80% of its device time); 1 host process launching only on the others left out with them;" in note
    text = " ".join(run("scan", path, "--fail-on", "never").stdout.split())
    assert "HIP graph" in text and "CUDA graph" not in text
    assert "rpd profile range" not in text  # the idle is no time the host spent in the profile's own range


def test_without_a_launch_seen_on_the_analysed_gpu_every_host_stays(write_trace):
    """Where no flow shows which process drives the analysed GPU, no host is taken for another GPU's."""
    document = json.loads(_job((150.0, 190.0)))
    dropped = ("4342", "1")  # the second process's launches, and their ends on GPU1
    document["traceEvents"] = [
        e for e in document["traceEvents"] if e.get("cat") != "api_op" or e["pid"] not in dropped
    ]
    trace = load_trace(write_trace(document))
    assert device_name(trace) == "GPU1" and trace.metadata[OTHER_DEVICES]["their_hosts"] == 0
    assert {t.role for t in trace.tracks if t.thread_name.startswith("Hip")} == {Role.HOST}


def test_a_gpu_process_alone_does_not_make_a_trace_rpd_s(write_trace):
    """A process named GPU0 in a trace whose host threads are not rocmProfileData's HIP threads: another producer."""
    events = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "GPU0"}},
        {"name": "thread_name", "ph": "M", "pid": 7, "tid": 7, "args": {"name": "main"}},
        {"ph": "X", "pid": 0, "tid": 1, "name": "gemm", "ts": 0, "dur": 10},
        {"ph": "X", "pid": 7, "tid": 7, "name": "hipLaunchKernel", "ts": 0, "dur": 2},
    ]
    assert load_trace(write_trace({"traceEvents": events})).dialect == "generic"


def test_an_rpd_database_is_refused_with_the_way_to_its_json(run, tmp_path):
    database = tmp_path / "trace.rpd"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE rocpd_op (id INTEGER, gpuId INTEGER)")
        connection.execute("CREATE TABLE rocpd_api (id INTEGER, pid INTEGER)")
    connection.close()
    result = run("scan", database)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"perftool: error: {database}: a rocmProfileData database (its rocpd_op and rocpd_api tables): perftool reads "
        "its Chrome JSON (python rpd2tracing.py FILE.rpd FILE.json, from rocmProfileData's tools; SGLang writes it as "
        "rpd-*.trace.json.gz)\n"
    )


@pytest.mark.parametrize(
    ("tables", "said"),
    [
        (  # rocprofv3's default output (%hostname%/%pid%_results.db): each table named with the session's uuid
            ["rocpd_info_agent_0a1b2c (id INTEGER)", "rocpd_string_0a1b2c (id INTEGER, string TEXT)"],
            "a rocprofv3 database (rocpd), which perftool does not read: profile the job with PyTorch's profiler",
        ),
        (  # nsys export --type sqlite: StringIds always, the activity tables as the report holds them
            ["StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)", "CUPTI_ACTIVITY_KIND_KERNEL (start INT)"],
            "an Nsight Systems export (nsys export --type sqlite), which perftool does not read: profile the job",
        ),
        (["events (id INTEGER)"], "an sqlite database without the tables torch_npu's and msprof's db exports write"),
    ],
)
def test_another_profiler_s_database_is_named_for_what_it_is(run, tmp_path, tables, said):
    database = tmp_path / "profile.sqlite"
    with sqlite3.connect(database) as connection:
        for table in tables:
            connection.execute(f"CREATE TABLE {table}")
    connection.close()
    result = run("scan", database)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"perftool: error: {database}: {said}") and result.stderr.count("\n") == 1
