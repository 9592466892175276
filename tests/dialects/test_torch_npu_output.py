"""torch_npu's profiler output as the user holds it: one directory per rank, the trace inside it in the text export
(``trace_view.json``) or the db export (sqlite), beside metadata files that are not traces."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import tracemalloc
from pathlib import Path

import pytest
from conftest import DATA

from perftool import api, load_trace
from perftool.analysis import compute_metrics
from perftool.analysis.confidence import capture_hint
from perftool.roofline.measured import BUSY, NO_PIPE_BUSY, measured_pipes
from perftool.trace import ascend_db
from perftool.trace.archives import SQLITE_MAGIC
from perftool.trace.msprof_kernels import msprof_kernels

DB_JOB = DATA / "real" / "torch_npu_db_l2_job"


def _rank_directory(
    parent, name: str, rank: int | None, trace: dict | list | None, environment: dict | None = None, config=None
):
    """A rank's directory as torch_npu writes it: profiler_info_N.json (profiler_info.json where the job is not
    distributed: ``rank`` None) with the profiler's ``config``, profiler_metadata.json (the variables it looks at,
    each empty but those ``environment`` sets) and the analysed output with the trace (where given), msprof's
    summaries beside it."""
    directory = parent / name
    output = directory / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    info = directory / ("profiler_info.json" if rank is None else f"profiler_info_{rank}.json")
    info.write_text(json.dumps({"config": config or {}, "rank_id": -1 if rank is None else rank}))
    recorded = {"ASCEND_LAUNCH_BLOCKING": "", "PYTORCH_NPU_ALLOC_CONF": "", **(environment or {})}
    (directory / "profiler_metadata.json").write_text(json.dumps({"ENV_VARIABLES": recorded}))
    (output / "communication.json").write_text(json.dumps({"step50": {"collective": {}}}))
    (output / "kernel_details.csv").write_text("Step Id,Name,Type,Duration(us)\n50,MatMul,MatMul,950\n")
    if trace is not None:
        (output / "trace_view.json").write_text(json.dumps(trace))
    return directory


def _npu_trace(shift: float) -> list:
    """trace_view.json's layout (a bare array), 4 steps of a matmul and an exposed allreduce."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 20, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "thread_name", "pid": 20, "tid": 2, "args": {"name": "Stream 2"}},
        {"ph": "M", "name": "process_name", "pid": 30, "tid": 0, "args": {"name": "HCCL"}},
        {"ph": "M", "name": "thread_name", "pid": 30, "tid": 0, "args": {"name": "Group 0 Communication"}},
    ]
    for step in range(4):
        t = shift + step * 1000.0
        events += [
            {"ph": "X", "name": f"ProfilerStep#{step}", "cat": "cpu_op", "pid": 10, "tid": 10, "ts": t, "dur": 999},
            {"ph": "X", "name": "MatMul", "pid": 20, "tid": 2, "ts": t + 10, "dur": 500},
            {"ph": "X", "name": f"hcom_allReduce__1_{step}_1", "pid": 30, "tid": 0, "ts": t + 520, "dur": 400},
        ]
    return events


def test_a_rank_directory_is_read_as_its_trace(tmp_path, run):
    directory = _rank_directory(tmp_path, "host_1234_20250109_ascend_pt", 0, _npu_trace(0))
    result = run("info", str(directory), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dialect"] == "ascend" and document["source"].endswith("ASCEND_PROFILER_OUTPUT/trace_view.json")


def _host_bound_steps() -> list:
    """trace_view.json's layout: 8 steps whose NPU waits 300 µs of each 1 ms on the host's Python, its operator
    passing through torch_npu's task queue (Enqueue@, Dequeue@)."""
    events = _npu_trace(0)[:3] + [
        {"ph": "M", "name": "process_name", "pid": 40, "tid": 0, "args": {"name": "CANN"}},
    ]
    for step in range(8):
        t = step * 1000.0
        events += [
            {"ph": "X", "name": f"ProfilerStep#{step}", "cat": "cpu_op", "pid": 10, "tid": 10, "ts": t, "dur": 999},
            {"ph": "X", "name": "train_step (train.py:40)", "pid": 10, "tid": 10, "ts": t, "dur": 300},
            {"ph": "X", "name": "Enqueue@MatMulV2", "pid": 10, "tid": 10, "ts": t + 300, "dur": 2},
            {"ph": "X", "name": "Dequeue@MatMulV2", "pid": 40, "tid": 11, "ts": t + 303, "dur": 1},
            {"ph": "X", "name": "AscendCL@aclnnMatmul", "pid": 40, "tid": 11, "ts": t + 305, "dur": 20},
            {"ph": "X", "name": "MatMulV2", "pid": 20, "tid": 2, "ts": t + 330, "dur": 660},
        ]
    return events


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"ASCEND_LAUNCH_BLOCKING": "1"}, "ASCEND_LAUNCH_BLOCKING=1 is set in the job's environment (the profiler "
         "recorded it), which makes every launch wait for its operator to finish and turns the task queue off"),
        ({"ASCEND_LAUNCH_BLOCKING": "0"}, "its task queue is on (the trace's Enqueue@/Dequeue@ events)"),
    ],
)  # fmt: skip
def test_the_environment_the_profiler_recorded_is_kept_and_read(tmp_path, run, environment, said):
    """profiler_metadata.json records the variables torch_npu looks at: those set are the trace's metadata, and a
    host-bound step whose job launches blocking is told so, whatever task-queue events the trace holds."""
    directory = _rank_directory(tmp_path, "host_1_ascend_pt", 0, _host_bound_steps(), environment)
    assert api.info(directory).trace.metadata["torch_npu.environment"] == environment
    scanned = json.loads(run("scan", str(directory), "--format", "json", "--fail-on", "never").stdout)
    host_bound = next(f for f in scanned["traces"][0]["findings"] if f["rule_id"] == "PT001")
    assert said in " ".join(host_bound["fix"]["text"].split())


def test_the_db_export_s_recorded_environment_is_kept(tmp_path):
    """The db export records the same variables in META_DATA's ENV_VARIABLES, as JSON text."""
    copy = shutil.copytree(DB_JOB / "rank0_ascend_pt", tmp_path / "rank0_ascend_pt")
    database = copy / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    assert "torch_npu.environment" not in api.info(copy).trace.metadata  # every variable empty, as captured
    with sqlite3.connect(database) as connection:
        connection.execute(
            "UPDATE META_DATA SET value = ? WHERE name = 'ENV_VARIABLES'",
            (json.dumps({"ASCEND_LAUNCH_BLOCKING": "1", "HCCL_RDMA_TC": ""}),),
        )
    assert api.info(copy).trace.metadata["torch_npu.environment"] == {"ASCEND_LAUNCH_BLOCKING": "1"}


def test_the_schedule_the_profiler_recorded_is_what_to_change_to_capture_more_steps(run):
    """The capture kept one step (schedule(wait=0, warmup=10, active=1, repeat=1, skip_first=40), as
    profiler_info_0.json records it): the way to more steady steps is that schedule with more kept active."""
    directory = DB_JOB / "rank0_ascend_pt"
    recorded = api.info(directory).trace.metadata["torch_npu.schedule"]
    fields = {"wait": 0, "active": 1, "warmup": 10, "repeat": 1, "skip_first": 40}  # in the order schedule() takes
    assert recorded == {"file": "profiler_info_0.json", "fields": fields} and list(recorded["fields"]) == list(fields)
    scanned = json.loads(run("scan", str(directory), "--format", "json", "--fail-on", "never").stdout)
    said = " ".join(" ".join(scanned["traces"][0]["caveats"]).split())
    assert (
        "the profiler kept 1 step active (torch_npu.profiler.schedule(wait=0, active=1, warmup=10, repeat=1, "
        "skip_first=40), as profiler_info_0.json records it); give it torch_npu.profiler.schedule(wait=0, active=5, "
        "warmup=10, repeat=1, skip_first=40), with prof.step() at the end of every iteration"
    ) in said


@pytest.mark.parametrize(
    ("schedule", "recorded"),
    [
        ({"wait": 1, "warmup": 1, "active": 2, "repeat": 1}, {"wait": 1, "active": 2, "warmup": 1, "repeat": 1}),
        ({"wait": 1, "warmup": 1, "active": 3}, {"wait": 1, "active": 3, "warmup": 1}),
        ({"wait": 1, "warmup": 1}, None),  # no step kept active: no schedule
        ({"active": "2", "warmup": 1}, None),  # not torch_npu's record: no schedule
        ({"active": -1}, None),
        ({"active": 0, "wait": 1}, None),
        (None, None),  # profiled without a schedule
    ],
)
def test_a_recorded_schedule_names_the_change_only_where_it_kept_too_few_steps(tmp_path, schedule, recorded):
    """One step captured: a schedule that kept 2 active is told to keep 5; one that kept 3, enough (its other steps
    warm-up or unmarked), or none recorded, leaves the profiler's usual way."""
    config = {"common_config": {"schedule": schedule}}
    directory = _rank_directory(tmp_path, "host_1_ascend_pt", None, _npu_trace(0)[:8], config=config)
    trace = api.info(directory).trace
    assert trace.metadata.get("torch_npu.schedule") == (recorded and {"file": "profiler_info.json", "fields": recorded})
    hint = capture_hint(trace)
    if recorded and recorded["active"] < 3:
        assert hint.endswith("give it torch_npu.profiler.schedule(wait=1, active=5, warmup=1, repeat=1), with "
                             "prof.step() at the end of every iteration")  # fmt: skip
    else:
        assert "torch_npu.profiler.profile(schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=5))" in hint


def _without_pytorch(events: list) -> list:
    """``events`` as msprof's own timeline (or MindSpore's) holds them: the device's and CANN's, no PyTorch op or
    step marker on the host."""
    return [e for e in events if e.get("pid") != 10]


def test_a_trace_without_pytorch_s_events_is_told_either_framework_s_profiler(tmp_path, run):
    """An Ascend trace whose names show no PyTorch (msprof's timeline of any application, MindSpore's) is not told
    to use torch_npu's profiler alone: the hint names PyTorch's and MindSpore's ways, each with a schedule; scan
    says which framework it saw, and gate, which reads that, gives the same hint."""
    torch_npu = tmp_path / "torch_npu.json"
    msprof = tmp_path / "msprof_timeline.json"
    torch_npu.write_text(json.dumps(_npu_trace(0)[:8]))
    msprof.write_text(json.dumps(_without_pytorch(_npu_trace(0))))
    pytorch_hint = capture_hint(load_trace(str(torch_npu)))
    assert (
        "torch_npu.profiler.profile(schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=5))" in pytorch_hint
    )
    assert "mindspore" not in pytorch_hint
    either = capture_hint(load_trace(str(msprof)))
    assert either.endswith(
        "torch_npu.profiler.profile(schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=5)) in PyTorch, "
        "mindspore.Profiler(schedule=mindspore.profiler.schedule(wait=1, warmup=1, active=5)) in MindSpore"
    )
    frameworks = [
        json.loads(run("scan", str(path), "--format", "json", "--fail-on", "never").stdout)["traces"][0]["framework"]
        for path in (torch_npu, msprof)
    ]
    assert frameworks == ["pytorch", "unknown"]
    gated = json.loads(run("gate", str(msprof), str(msprof), "--format", "json").stdout)
    reasons = " ".join(check["detail"] for check in gated["checks"] if check["verdict"] == "not_checked")
    assert either in reasons


def test_a_directory_of_rank_directories_is_a_job_ranked_by_their_metadata(tmp_path, run):
    """The directories' names say no rank; profiler_info_N.json does (the first directory is rank 1)."""
    job = tmp_path / "job"
    _rank_directory(job, "node-a_4411_ascend_pt", 1, _npu_trace(30.0))
    _rank_directory(job, "node-b_4412_ascend_pt", 0, _npu_trace(0.0))
    result = run("scan", str(job), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    ranks = {row["rank"]: row for row in report["job"]["ranks"]}
    assert sorted(ranks) == [0, 1] and not report["unread"]
    by_rank = {t["rank"]: t["path"] for t in report["traces"]}
    assert "node-b_4412_ascend_pt" in by_rank[0] and "node-a_4411_ascend_pt" in by_rank[1]


def test_one_device_s_captures_cycle_after_cycle_are_each_its_own_trace(tmp_path, run):
    """A schedule that repeats on one NPU, not distributed: torch_npu writes profiler_info.json (no rank) into one
    <host>_<pid>_<time>_ascend_pt directory a cycle. The time in the name is no rank: both are the process's
    captures, each scanned as its own trace in turn, no job."""
    job = tmp_path / "run"
    later = _rank_directory(job, "node-a_4411_20261130101020001_ascend_pt", None, _npu_trace(10e6))
    earlier = _rank_directory(job, "node-a_4411_20261130101010001_ascend_pt", None, _npu_trace(0.0))
    result = run("scan", str(job), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["job"] is None and not report["unread"]
    assert [t["path"].split("/")[-3] for t in report["traces"]] == [earlier.name, later.name]


def test_a_job_s_captures_cycle_after_cycle_give_the_view_each_rank_s_latest(tmp_path, run):
    job = tmp_path / "job"
    for rank, shift in ((0, 0.0), (1, 30.0)):
        for time, offset in (("20261130101010001", 0.0), ("20261130101020001", 10e6)):
            _rank_directory(job, f"node-{rank}_44{rank}_{time}_ascend_pt", rank, _npu_trace(shift + offset))
    result = run("scan", str(job), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [row["rank"] for row in report["job"]["ranks"]] == [0, 1] and not report["unread"]
    assert all("20261130101020001" in t["path"] for t in report["traces"])
    assert [p.split("/")[-3] for p in report["job"]["earlier_captures"]] == [
        "node-0_440_20261130101010001_ascend_pt",
        "node-1_441_20261130101010001_ascend_pt",
    ]


def test_a_rank_directory_whose_analysis_did_not_run_says_so(tmp_path, run):
    directory = _rank_directory(tmp_path, "host_1_ascend_pt", 0, None)
    result = run("scan", str(directory))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"perftool: error: {directory}: a torch_npu profiler directory without a trace")


@pytest.mark.parametrize(("metadata", "framework"), [("profiler_info_0.json", True), ("profiler_info.json", False)])
def test_a_rank_directory_holding_only_raw_data_says_the_analysis_has_not_run(tmp_path, run, metadata, framework):
    """Before its analysis (deferred, or the job killed first), a rank's directory holds its metadata and raw data
    only: named alone or in a job, one line says how to analyse it, not that its metadata JSON is no trace. The
    metadata alone marks it, a distributed rank's (profiler_info_N.json) or one device's (profiler_info.json)."""
    job = tmp_path / "job"
    directory = job / "host_1_20250109_ascend_pt"
    (directory / "PROF_000001_20250109_ABC" / "device_0" / "data").mkdir(parents=True)
    if framework:
        (directory / "FRAMEWORK").mkdir()
    (directory / metadata).write_text(json.dumps({"config": {}, "rank_id": 0}))
    for named in (directory, job):
        result = run("scan", str(named))
        assert result.exit_code == 2
        assert result.output.strip() == (
            f"perftool: error: {directory}: a torch_npu profiler directory whose analysis has not run (no "
            "ASCEND_PROFILER_OUTPUT/ in it): torch_npu.profiler.profiler.analyse(directory) runs it"
        )


def test_a_job_with_one_rank_not_analysed_reports_the_others_and_says_which(tmp_path, run):
    """Nothing is lost: the analysed rank is scanned and reported, the other is named among the unread with how to
    analyse it, and the command exits 2."""
    job = tmp_path / "job"
    _rank_directory(job, "node-a_4411_ascend_pt", 0, _npu_trace(0.0))
    raw = job / "node-b_4412_ascend_pt"
    (raw / "FRAMEWORK").mkdir(parents=True)
    (raw / "profiler_info_1.json").write_text(json.dumps({"config": {}, "rank_id": 1}))
    result = run("scan", str(job), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert [t["path"] for t in report["traces"]] == [str(job / "node-a_4411_ascend_pt" / "ASCEND_PROFILER_OUTPUT" /
                                                         "trace_view.json")]  # fmt: skip
    assert [u["path"] for u in report["unread"]] == [str(raw)] and "analysis has not run" in report["unread"][0][
        "problem"
    ]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"perftool: error: {raw}: a torch_npu profiler directory whose analysis has not run")


@pytest.mark.parametrize("export", ["text", "db"])
def test_the_analysed_output_folder_named_itself_reads_as_the_rank_s_trace(tmp_path, run, export):
    if export == "text":
        output = _rank_directory(tmp_path, "host_2_ascend_pt", 0, _npu_trace(0)) / "ASCEND_PROFILER_OUTPUT"
    else:
        output = DB_JOB / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    result = run("info", str(output), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dialect"] == "ascend" and "job" not in document
    expected = "trace_view.json" if export == "text" else "ascend_pytorch_profiler_1.db"
    assert document["source"] == str(output / expected)


def _msprof_run(parent, name: str, timelines: list[str], database: bool = False):
    """msprof's run directory (``PROF_<n>_<time>_<id>``): raw data, the exported timeline(s) in
    mindstudio_profiler_output/ beside its summaries, and the same run as msprof_<time>.db where asked."""
    run_directory = parent / name
    (run_directory / "device_0" / "data").mkdir(parents=True)
    (run_directory / "host" / "data").mkdir(parents=True)
    output = run_directory / "mindstudio_profiler_output"
    output.mkdir()
    (output / "msprof_tx_20250109101010.json").write_text("[]")  # msproftx's part of the timeline, not the timeline
    (output / "op_summary_20250109101010.csv").write_text("Op Name,Task Duration(us)\nMatMul,500\n")
    for timeline in timelines:
        (output / timeline).write_text(json.dumps(_npu_trace(0)))
    if database:
        db = DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
        shutil.copy(db, run_directory / "msprof_20250109101010.db")
    return run_directory


@pytest.mark.parametrize(
    ("timelines", "database", "read"),
    [
        (["msprof_20250109101010.json"], False, "mindstudio_profiler_output/msprof_20250109101010.json"),
        ([], True, "msprof_20250109101010.db"),
        (
            ["msprof_slice_0_20250109101010.json", "msprof_slice_1_20250109101010.json"],
            True,
            "msprof_20250109101010.db",
        ),
    ],  # fmt: skip
    ids=["the timeline", "the db alone", "a sliced timeline beside the db"],
)
def test_msprof_s_run_directory_reads_as_its_exported_timeline(tmp_path, run, timelines, database, read):
    run_directory = _msprof_run(tmp_path, "PROF_000001_20250109101010_ABCDEFG", timelines, database)
    result = run("info", str(run_directory), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dialect"] == "ascend" and document["source"] == str(run_directory / read)


@pytest.mark.parametrize(
    ("timelines", "said"),
    [
        (
            ["msprof_slice_0_20250109101010.json", "msprof_slice_1_20250109101010.json"],
            "msprof sliced its timeline into 2 files (msprof_slice_0_20250109101010.json, "
            'msprof_slice_1_20250109101010.json) and wrote no msprof_*.db: export it again unsliced ("slice_switch": '
            '"off" in msprof_slice.json) or as a db (msprof --export=on --type=db --output=DIR)',
        ),
        (
            [],
            "msprof's raw data with no exported timeline (mindstudio_profiler_output/msprof_*.json or msprof_*.db): "
            "msprof --export=on --output=DIR exports it",
        ),
    ],
    ids=["sliced, no db", "never exported"],
)
def test_a_run_directory_without_one_timeline_says_what_to_export(tmp_path, run, timelines, said):
    run_directory = _msprof_run(tmp_path, "PROF_000002_20250109101010_ABCDEFG", timelines)
    result = run("scan", str(run_directory))
    assert result.exit_code == 2
    assert result.output.strip() == f"perftool: error: {run_directory}: {said}"


def test_a_directory_of_msprof_runs_is_a_job_ranked_in_name_order(tmp_path, run):
    """A run's directory and its timeline's name hold a sequence number and times, no rank: each run is a rank
    in the order of their names, not numbered by a timestamp."""
    job = tmp_path / "job"
    for node in ("a", "b"):
        _msprof_run(job, f"PROF_00000{1 if node == 'a' else 2}_2025010910101{node}_X", ["msprof_20250109101010.json"])
    result = run("scan", str(job), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    by_rank = {t["rank"]: t["path"] for t in report["traces"]}
    assert sorted(by_rank) == [0, 1] and not report["unread"]
    assert "PROF_000001" in by_rank[0] and "PROF_000002" in by_rank[1]


def _msprof_step(rank_directory) -> dict:
    """msprof's own breakdown of the step, from the analysis.db the profiler wrote beside the trace (µs)."""
    with sqlite3.connect(rank_directory / "ASCEND_PROFILER_OUTPUT" / "analysis.db") as connection:
        cursor = connection.execute("SELECT * FROM StepTraceTime")
        (row,) = cursor.fetchall()
        return dict(zip([c[0] for c in cursor.description], row))


@pytest.mark.parametrize("rank", [0, 1])
def test_the_db_export_gives_msprof_s_own_figures(rank):
    """Read through sqlite3 as the text export's events, a rank's compute and exposed communication are those msprof
    computed from the same tables (its analysis.db, which perftool does not read): communication to the microsecond
    (the collectives, not the communication stream's waits for the compute stream nor its event records), exposed
    communication to 0.1%."""
    directory = DB_JOB / f"rank{rank}_ascend_pt"
    view = api.info(directory)
    metrics, reference = view.metrics, _msprof_step(directory)
    assert view.trace.dialect == "ascend" and view.trace.metadata["torch_npu.SCHEMA_VERSION"] == "1.0.0"
    compute = metrics["device.compute_fraction"] * metrics["window.duration_us"]
    assert compute == pytest.approx(reference["computing"], rel=0.005)
    assert metrics["communication.exposed_us"] == pytest.approx(reference["communication_not_overlapped"], rel=1e-3)
    assert metrics["communication.time_us"] == pytest.approx(reference["communication"], abs=1.0)
    assert metrics["communication.count"] == 4  # the step's four all-reduces
    database = directory / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
    with sqlite3.connect(database) as connection:  # each op's elements and their type, read here by hand
        (elements, types), = connection.execute(
            "SELECT SUM(o.count), GROUP_CONCAT(DISTINCT e.name) FROM COMMUNICATION_OP o "
            "JOIN ENUM_HCCL_DATA_TYPE e ON e.id = o.dataType"
        )  # fmt: skip
    (all_reduce,) = metrics.collectives
    assert types == "FP32" and all_reduce.bytes == elements * 4 == 244_403_360  # AlexNet's 61.1 M gradients


def test_a_db_job_reads_as_two_ranks_with_their_exposed_allreduce(run):
    result = run("scan", str(DB_JOB), "--format", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted(row["rank"] for row in report["job"]["ranks"]) == [0, 1]
    assert all(t["dialect"] == "ascend" for t in report["traces"])
    assert {f["rule_id"] for t in report["traces"] for f in t["findings"]} >= {"PT011"}


def test_a_db_job_s_all_reduces_wait_for_the_rank_the_capture_left_out(run):
    """Both ranks of the capture wait most of each all-reduce for HCCL's rank 4, which the job's directories do not
    hold: their plane tasks name it (the db's srcRank and dstRank), the finding shows those waits, and the fix is to
    find what delays it, not to move less."""
    report = json.loads(run("scan", str(DB_JOB), "--format", "json", "--fail-on", "never").stdout)
    for trace in report["traces"]:
        (finding,) = [f for f in trace["findings"] if f["rule_id"] == "PT011"]
        assert finding["title"] == "Collectives wait for a late rank"
        assert f"rank {trace['rank']}'s collectives wait" in finding["fix"]["text"]
        assert "for rank 4 to reach them" in finding["fix"]["text"] and "move less" not in finding["fix"]["text"]
        longest = finding["evidence"][0]  # the cause's evidence: the waits for rank 4, the longest first
        assert longest["name"] == "Notify_Wait" and longest["track"].startswith("HCCL / Plane ")
        assert longest["dur_us"] > 0.8 * max(trace["peer_waits"]["per_step_us"].values())


@pytest.mark.parametrize("columns", [True, False], ids=["ranks recorded", "an older schema without them"])
def test_the_db_export_s_plane_tasks_name_their_ranks_as_the_text_export_s_do(tmp_path, columns):
    database = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / database.name, database)
    database.chmod(0o644)
    if not columns:
        with sqlite3.connect(database) as connection:
            connection.executescript(
                "ALTER TABLE COMMUNICATION_TASK_INFO DROP COLUMN srcRank;"
                "ALTER TABLE COMMUNICATION_TASK_INFO DROP COLUMN dstRank;"
            )
    events = [e for batch in ascend_db.batches(str(database), {}) for e in batch]
    waits = [e for e in events if e.name == "Notify_Wait" and e.pid == ascend_db.HCCL]
    assert len(waits) == 112
    ranks = [json.loads(bytes(e.args)) if bytes(e.args) else None for e in waits]
    if columns:
        assert {r["src rank"] for r in ranks} == {0} and {r["dst rank"] for r in ranks} == set(range(1, 8))
    else:
        assert ranks == [None] * len(waits)


def _recording_groups(tmp_path, recorded) -> Path:
    """The db export of a copy of the real db job's rank 0 directory, with torch_npu's record of its process groups
    added: ``recorded`` for its one communicator, by that communicator's name."""
    output = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    shutil.copytree(DB_JOB / "rank0_ascend_pt", output.parent)
    database = output / "ascend_pytorch_profiler_0.db"
    database.chmod(0o644)
    with sqlite3.connect(database) as connection:
        ((communicator,),) = connection.execute(
            "SELECT DISTINCT s.value FROM COMMUNICATION_OP c JOIN STRING_IDS s ON s.id = c.groupName"
        )
        connection.execute("INSERT INTO META_DATA (name, value) VALUES (?, ?)",
                           (ascend_db.PARALLEL_GROUPS, json.dumps({communicator: recorded})))  # fmt: skip
    return database


@pytest.mark.parametrize(
    ("recorded", "size", "group"),
    [
        ({"group_name": "dp", "group_rank": 0, "global_ranks": list(range(8))}, 8, "dp"),
        ({"group_name": "", "group_rank": 0, "global_ranks": [0, 1]}, 2, None),  # a group torch_npu names not
        ({"group_name": "tp", "global_ranks": "0-7"}, None, "tp"),  # ranks not a list: not counted
        ({"group_name": "tp", "global_ranks": []}, None, "tp"),  # nor none
        ("not a record", None, None),
    ],
    ids=["named", "unnamed", "ranks-unread", "no-ranks", "not-a-record"],
)
def test_the_db_export_s_process_groups_give_its_collectives_their_size_and_name(tmp_path, run, recorded, size, group):
    """torch_npu records each HCCL communicator's process group in META_DATA (``parallel_group_info``, keyed by the
    communicator's name as COMMUNICATION_OP.groupName gives it): the all-reduces get the group's size (a bus
    bandwidth) and its name (a parallelism)."""
    database = _recording_groups(tmp_path, recorded)
    metrics = compute_metrics(load_trace(str(database)))
    (stat,) = metrics.collectives
    assert stat.group_size == size
    assert stat.busbw_gbps == pytest.approx(stat.algbw_gbps * (2 * (size - 1) / size if size else 1))
    assert [g.name for g in metrics.groups] == [group or "default"]
    report = json.loads(run("scan", str(database.parent.parent), "--format", "json", "--select", "PT011").stdout)
    (finding,) = report["traces"][0]["findings"]
    assert ("GB/s bus bandwidth" in finding["message"]) == (size is not None)
    assert ("the ranks not recorded" in finding["message"]) == (size is None)


@pytest.mark.parametrize(
    ("global_ranks", "own", "peers", "late"),
    [
        (list(range(10, 18)), 10, set(range(11, 18)), 14),
        ([str(rank) for rank in range(10, 18)], 0, set(range(1, 8)), 4),
        ([10, 11, 12, 13], 10, {11, 12, 13, 4, 5, 6, 7}, 4),  # a record shorter than the communicator: the rest as is
    ],
    ids=["numbered", "not-numbers", "too-few"],
)
def test_a_communicator_s_ranks_are_the_job_s_where_torch_npu_recorded_its_global_ranks(
    tmp_path, run, global_ranks, own, peers, late
):
    """HCCL numbers each communicator's ranks from 0; torch_npu's record of the process group lists its global ranks
    in that order: the plane tasks' ranks, and so the late peer PT011 names, are the job's (a group of ranks 10-17:
    the communicator's rank 4 is the job's rank 14). Ranks the record does not give as numbers map nothing."""
    database = _recording_groups(tmp_path, {"group_name": "dp", "global_ranks": global_ranks})
    events = [e for batch in ascend_db.batches(str(database), {}) for e in batch]
    ranks = [json.loads(bytes(e.args)) for e in events if e.name == "Notify_Wait" and e.pid == ascend_db.HCCL]
    assert {r["src rank"] for r in ranks} == {own} and {r["dst rank"] for r in ranks} == peers
    report = json.loads(run("scan", str(database.parent.parent), "--format", "json", "--select", "PT011").stdout)
    (trace,) = report["traces"]
    assert trace["peer_waits"]["rank"] == own
    assert f"for rank {late} to reach them" in trace["findings"][0]["fix"]["text"]


@pytest.mark.parametrize(("rank", "job_rank"), [(0, 10), (1, 11), (2, 2), (-1, -1), (0xFFFFFFFF,) * 2, ("1", "1")])
def test_only_a_rank_of_the_communicator_is_given_the_job_s_number(rank, job_rank):
    """HCCL's "no rank", a negative or out-of-range number, or no number at all, is left as recorded."""
    assert ascend_db._global(rank, (10, 11)) == job_rank


@pytest.mark.parametrize("value", ['{"90.91.105.46%enp189s0f0": {"group_name": ', "[" * 100_000, None])
def test_a_record_of_process_groups_that_does_not_read_is_passed_over(tmp_path, value):
    database = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / database.name, database)
    database.chmod(0o644)
    with sqlite3.connect(database) as connection:
        connection.execute("INSERT INTO META_DATA (name, value) VALUES (?, ?)", (ascend_db.PARALLEL_GROUPS, value))
    (stat,) = compute_metrics(load_trace(str(database))).collectives
    assert stat.count == 4 and stat.group_size is None


def _hccl_threads(database) -> dict[int, str]:
    """The HCCL process's threads the db reader names, by thread id."""
    events = [e for batch in ascend_db.batches(str(database), {}) for e in batch]
    return {e.tid: json.loads(bytes(e.args))["name"] for e in events if e.ph == "M" and e.pid == ascend_db.HCCL
            and e.name == "thread_name"}  # fmt: skip


def test_each_communicator_s_ops_and_planes_are_laid_out_as_the_text_export_lays_them(tmp_path):
    """The db records each op's and task's communicator (groupName): each gets its own thread, then its planes, as the
    text export draws them, so that ranks, each communicator's own, are read per communicator. The last all-reduce
    moved into a second communicator here."""
    database = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / database.name, database)
    database.chmod(0o644)
    one = _hccl_threads(database)
    assert one == {0: "Group 0 Communication", **{1 + plane: f"Plane {plane}" for plane in range(8)}}
    with sqlite3.connect(database) as connection:
        connection.executescript(
            "INSERT INTO STRING_IDS (id, value) VALUES (99999, 'tp_group');"
            "UPDATE COMMUNICATION_OP SET groupName = 99999 WHERE opId = (SELECT MAX(opId) FROM COMMUNICATION_OP);"
            "UPDATE COMMUNICATION_TASK_INFO SET groupName = 99999, planeId = planeId % 2 "
            "WHERE opId = (SELECT MAX(opId) FROM COMMUNICATION_OP);"
        )
    two = _hccl_threads(database)
    assert two == one | {9: "Group 1 Communication", 10: "Plane 0", 11: "Plane 1"}
    events = [
        e for batch in ascend_db.batches(str(database), {}) for e in batch if e.ph == "X" and e.pid == ascend_db.HCCL
    ]
    last = max((e for e in events if e.name.startswith("hcom_")), key=lambda e: e.ts)
    assert last.tid == 9 and {e.tid for e in events if e.ts >= last.ts and not e.name.startswith("hcom_")} == {10, 11}


@pytest.mark.parametrize(
    ("change", "threads"),
    [
        ("ALTER TABLE COMMUNICATION_TASK_INFO DROP COLUMN groupName; "
         "ALTER TABLE COMMUNICATION_OP DROP COLUMN groupName",
         {0: "Group 0 Communication", **{1 + plane: f"Plane {plane}" for plane in range(8)}}),
        ("UPDATE COMMUNICATION_TASK_INFO SET planeId = 4294967295 WHERE planeId > 0",
         {0: "Group 0 Communication", 1: "Plane 0"}),
    ],
    ids=["a schema without communicators", "no plane recorded"],
)  # fmt: skip
def test_tasks_of_no_communicator_or_plane_read_as_one_communicator_s_first_plane(tmp_path, change, threads):
    database = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / database.name, database)
    database.chmod(0o644)
    with sqlite3.connect(database) as connection:
        connection.executescript(change)
    assert _hccl_threads(database) == threads


def test_an_sqlite_file_that_is_not_torch_npu_s_is_one_line(tmp_path, run):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (x INTEGER)")
    assert path.read_bytes().startswith(SQLITE_MAGIC)
    result = run("info", str(path))
    assert result.exit_code == 2
    assert result.output.strip() == f"perftool: error: {path}: an sqlite database without the tables torch_npu's " \
        "and msprof's db exports write (STRING_IDS, TASK or PYTORCH_API)"  # fmt: skip


def test_a_truncated_db_export_is_one_line(tmp_path, run):
    database = DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    cut = tmp_path / "cut.db"
    cut.write_bytes(database.read_bytes()[:40_000])
    result = run("info", str(cut))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert result.output.startswith(f"perftool: error: {cut}: ")


@pytest.mark.parametrize("written", [b"\x00" * 4096, b"<html>502 Bad Gateway</html>"], ids=["zeros", "html"])
def test_a_db_export_that_is_not_sqlite_is_one_line_saying_so(tmp_path, run, written):
    """A rank directory whose db export holds other bytes (a copy that wrote nothing, a download that failed): the
    error says the database is damaged, not that the file is bad JSON."""
    directory = tmp_path / "rank0_ascend_pt"
    shutil.copytree(DB_JOB / "rank0_ascend_pt", directory)
    database = directory / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    database.chmod(0o644)
    database.write_bytes(written)
    result = run("scan", str(directory))
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"perftool: error: {database}: named a database but not an sqlite one (its " \
        "first bytes are not sqlite's header): a damaged or half-copied db export? Export the profile again, or " \
        "scan its text export"  # fmt: skip


def test_a_gzipped_trace_view_is_found_too(tmp_path, run):
    directory = _rank_directory(tmp_path, "host_9_ascend_pt", 0, None)
    output = directory / "ASCEND_PROFILER_OUTPUT"
    with gzip.open(output / "trace_view.json.gz", "wt") as fh:
        json.dump(_npu_trace(0), fh)
    shutil.copy(output / "communication.json", output / "communication_matrix.json")
    result = run("info", str(directory), "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["source"].endswith("trace_view.json.gz")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("UPDATE TASK SET startNs = NULL WHERE rowid = 5", "missing or non-finite 'ts'"),
        ("UPDATE CANN_API SET globalTid = NULL, connectionId = NULL WHERE rowid = 3", None),
        ("ALTER TABLE TASK RENAME COLUMN streamId TO sid", "cannot read torch_npu's tables: no such column: streamId"),
        (
            "DELETE FROM TASK; DELETE FROM PYTORCH_API; DELETE FROM CANN_API; DELETE FROM COMMUNICATION_OP",
            "empty trace: only metadata events, nothing timed",
        ),
    ],  # fmt: skip
    ids=["a task without a time", "a call without thread or connection", "a column renamed", "no rows"],
)
def test_a_db_export_with_rows_or_tables_out_of_shape_is_read_or_one_line(tmp_path, run, change, said):
    database = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / database.name, database)
    database.chmod(0o644)
    with sqlite3.connect(database) as connection:
        connection.executescript(change)
    result = run("info", str(database))
    if said is None:  # read, the call kept on a thread of its own
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 2
        (line,) = result.output.strip().splitlines()
        assert line.startswith(f"perftool: error: {database}: ") and said in line


STEP_TRACE = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing\n"
    "50,8868.24,95962.016,4011.262,99973.278,25032.619,129862.75,0,95962.016,17483.75\n"
)


@pytest.mark.parametrize(
    ("csv_text", "said"),
    [
        (
            STEP_TRACE,
            "step_trace_time.csv beside the trace (step 50), per step: computing 8.868 ms, communication "
            "99.973 ms, communication overlapping no compute 95.962 ms, free 25.033 ms, stage 129.863 ms",
        ),
        ("Step,Computing\n50,not a number\n", "left out: step_trace_time.csv: rows that are not numbers, 1 of 1"),
        ("Step,Computing\n", None),
        ("Step,Computing\n50,8868.24\n51,\xff\n", "left out: step_trace_time.csv: not read (not UTF-8 text)"),
    ],  # fmt: skip
    ids=["msprof's figures", "a row that is no numbers", "no rows", "not text"],
)
def test_msprof_s_own_step_breakdown_is_set_beside_perftool_s(tmp_path, run, csv_text, said):
    directory = _rank_directory(tmp_path, "host_7_ascend_pt", 0, _npu_trace(0))
    (directory / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_bytes(csv_text.encode("latin-1"))
    result = run("info", str(directory))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert (said in text) if said else "step_trace_time.csv" not in text


def test_torch_npu_s_recorded_shapes_give_the_roofline_its_ops():
    """torch_npu records an op's inputs as ';'-separated strings ("32,4096;4096,9216;"), in the db export under
    swapped column names: both read as shapes, and each framework op is linked to the tasks it queued."""
    roof = api.roofline(DB_JOB / "rank0_ascend_pt")
    assert {"aten::mm", "aten::addmm"} <= {op.name for op in roof.ops}
    assert roof.flops > 10e9 and roof.modelled_us / roof.device_us > 0.2
    (mm,) = [op for op in roof.ops if op.name == "aten::mm" and op.shapes == "32x4096, 4096x9216"]
    assert mm.family == "gemm" and mm.flops == pytest.approx(2 * 32 * 4096 * 9216 * mm.calls)
    assert roof.spec is not None and roof.spec.key == "Ascend-910B"  # the db export's NPU_INFO names the NPU


REAL_KERNELS = DATA / "real" / "torch_npu_text_l2_rank0_kernel_details.csv"


def test_msprof_s_kernel_counters_say_which_pipe_each_kernel_type_waits_on(tmp_path, run):
    directory = _rank_directory(tmp_path, "host_7_ascend_pt", 0, _npu_trace(0))
    shutil.copy(REAL_KERNELS, directory / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    result = run("info", str(directory), "--format", "json")
    assert result.exit_code == 0, result.output
    measured = json.loads(result.stdout)["roofline"]["measured"]
    by_type = {(row["type"], row["core"]): row for row in measured}
    matmul = by_type["MatMulV2", "AI_CORE"]  # 8 kernels: their MTE2 time over their AI Core time
    assert matmul["kernels"] == 8 and matmul["device_us"] == pytest.approx(938.298)
    assert matmul["busiest"] == "aic_mte2" and matmul["pipes"]["aic_mte2"] == pytest.approx(0.8925, abs=1e-4)
    assert matmul["bound"] == "HBM reads"
    assert by_type["TransData", "AI_VECTOR_CORE"]["bound"] == NO_PIPE_BUSY  # MTE2 busy 35% of its time
    assert by_type["MaxPoolGradWithArgmaxV1", "AI_VECTOR_CORE"]["bound"] == "scalar (control flow)"
    assert measured[0]["type"] == "ForeachAddList"  # the most device time first
    assert not [row for row in measured if row["core"] == "HCCL"]  # collectives have no pipe counters


@pytest.mark.parametrize("output", ["text", "markdown", "html"])
def test_the_measured_pipes_are_shown_beside_the_roofline(tmp_path, run, output):
    directory = _rank_directory(tmp_path, "host_7_ascend_pt", 0, _npu_trace(0))
    shutil.copy(REAL_KERNELS, directory / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    result = run("info", str(directory), "--format", output)
    assert result.exit_code == 0, result.output
    assert "Pipes the NPU measured busy" in result.output
    assert "MatMulV2" in result.output and "HBM reads" in result.output


@pytest.mark.parametrize(
    "csv_bytes",
    [
        b"Step Id,Name,Type,Duration(us)\n50,MatMul,MatMul,950\n",  # level 0, or no PipeUtilization: no counters
        b"Name,Type,Duration(us),aicore_time(us),aic_mac_time(us)\nMatMul,MatMul,N/A,100,90\n",
        b"Name,Type\n\x00\xff\xfe",
    ],
    ids=["no counters", "a row that is no numbers", "not a CSV"],
)
def test_a_kernel_details_file_without_counters_adds_nothing(tmp_path, run, csv_bytes):
    directory = _rank_directory(tmp_path, "host_7_ascend_pt", 0, _npu_trace(0))
    (directory / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_bytes(csv_bytes)
    result = run("info", str(directory), "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["roofline"]["measured"] == []
    unread = [c for c in report["caveats"] if "kernel_details.csv" in c]  # said where the file cannot be read
    assert unread == (["msprof's own CSVs beside the trace, left out: kernel_details.csv: not read (not UTF-8 text)"]
                      if b"\xff" in csv_bytes else [])  # fmt: skip


def test_newer_cann_s_cube_column_counts_as_the_cube(tmp_path):
    output = tmp_path / "ASCEND_PROFILER_OUTPUT"
    output.mkdir()
    (output / "kernel_details.csv").write_text(
        "Name,Type,Accelerator Core,Duration(us),aicore_time(us),aic_cube_time(us),aic_mte2_time(us)\n"
        "mm_1,MatMulV3,AI_CORE,110,100,80,30\nmm_2,MatMulV3,AI_CORE,60,50,40,20\n"
    )
    (row,) = msprof_kernels(str(output / "trace_view.json")).rows
    assert row == {
        "type": "MatMulV3", "core": "AI_CORE", "kernels": 2, "device_us": 170.0,
        "pipes": {"aic_cube": pytest.approx(120 / 150), "aic_mte2": pytest.approx(50 / 150)},
    }  # fmt: skip
    (measured,) = measured_pipes([row])
    assert measured.busiest == "aic_cube" and measured.bound == "cube compute"


@pytest.mark.parametrize("share, bound", [(BUSY, "HBM writes"), (BUSY - 0.01, NO_PIPE_BUSY)])
def test_a_pipe_is_the_limit_once_busy_half_the_core_s_time(share, bound):
    row = {"type": "Add", "core": "AI_VECTOR_CORE", "kernels": 1, "device_us": 10.0,
           "pipes": {"aiv_vec": share - 0.1, "aiv_mte3": share}}  # fmt: skip
    (measured,) = measured_pipes([row])
    assert measured.busiest == "aiv_mte3" and measured.bound == bound


def test_the_db_export_s_counters_read_as_the_text_export_s(tmp_path):
    """The db export keeps the counters per task (TASK_PMU_INFO); another level-2 capture of the same job, written
    as text, gives each kernel type the same busiest pipe, within two points."""
    text_output = tmp_path / "ASCEND_PROFILER_OUTPUT"
    text_output.mkdir()
    shutil.copy(REAL_KERNELS, text_output / "kernel_details.csv")
    from_text = {(r.type, r.core): r for r in measured_pipes(msprof_kernels(str(text_output / "trace_view.json")).rows)}
    from_db = {(r.type, r.core): r for r in api.roofline(DB_JOB / "rank0_ascend_pt").measured}
    assert len(from_db) == len(from_text) > 20
    for key in [("ForeachAddList", "AI_VECTOR_CORE"), ("MatMulV2", "AI_CORE"), ("Conv2DBackpropInput", "AI_CORE")]:
        assert from_db[key].busiest == from_text[key].busiest
        assert from_db[key].pipes[from_db[key].busiest] == pytest.approx(
            from_text[key].pipes[from_text[key].busiest], abs=0.02
        )


def _peak_bytes_of(read) -> int:
    """The most memory Python held at once while ``read()`` ran, above what it held before."""
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_kernel_table_of_many_kernels_is_read_a_row_at_a_time(tmp_path):
    """msprof writes a row per kernel (millions in a long capture): only the sums per type are held while it is read
    (every row was kept first: 8.3 GB for a 656 MB file)."""
    output = tmp_path / "ASCEND_PROFILER_OUTPUT"
    output.mkdir()
    header, *rows = REAL_KERNELS.read_text().splitlines()
    kernels = output / "kernel_details.csv"
    kernels.write_text("\n".join([header, *rows * 100]) + "\n")  # 19,000 kernels, 6.4 MB
    once = msprof_kernels(str(output / "trace_view.json")).rows
    peak = _peak_bytes_of(lambda: msprof_kernels(str(output / "trace_view.json")))
    assert peak < 2 << 20, peak  # the whole table held as rows: 75 MB
    matmul = next(row for row in once if row["type"] == "MatMulV2")
    assert matmul["kernels"] == 800 and matmul["device_us"] == pytest.approx(93_829.8)


def test_the_db_export_s_counters_are_read_a_task_at_a_time(tmp_path):
    """TASK_PMU_INFO holds about 28 counters a task: they are summed as they come, a task at a time, not held."""
    database = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / database.name, database)
    with sqlite3.connect(database) as connection:
        copies, offset = 200, connection.execute("SELECT max(globalTaskId) + 1 FROM TASK").fetchone()[0]
        for table in ("TASK_PMU_INFO", "COMPUTE_TASK_INFO", "TASK"):
            columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
            moved = ", ".join(f"{c} + :shift" if c == "globalTaskId" else c for c in columns)
            for copy in range(1, copies):
                connection.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) SELECT {moved} FROM {table} WHERE globalTaskId < "
                    ":offset", {"shift": copy * offset, "offset": offset},
                )  # fmt: skip
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT count(*) FROM TASK_PMU_INFO").fetchone()[0] == 5180 * copies
        measured = ascend_db._kernel_types(connection)
        peak = _peak_bytes_of(lambda: ascend_db._kernel_types(connection))
    assert peak < 2 << 20, peak  # every task's counters held: 31 MB
    matmul = next(row for row in measured if row["type"] == "MatMulV2")
    assert matmul["kernels"] == 8 * copies


@pytest.mark.parametrize(
    ("change", "left_out"),
    [
        ("ALTER TABLE TASK_PMU_INFO RENAME COLUMN value TO counted", "msprof.kernel_details"),
        ("ALTER TABLE NPU_INFO RENAME COLUMN name TO model", "deviceProperties"),
        ("ALTER TABLE META_DATA RENAME COLUMN value TO text", "torch_npu.SCHEMA_VERSION"),
    ],
    ids=["kernel counters", "NPU name", "recorded variables"],
)
def test_an_optional_table_laid_out_otherwise_is_passed_over_and_the_events_read(tmp_path, change, left_out):
    """Another schema's columns in a table the events do not come from (the kernels' counters, the NPU's name, the
    variables recorded): the export's events read as they do, that table's figures left out."""
    database = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(DB_JOB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / database.name, database)
    database.chmod(0o644)
    whole: dict = {}
    events = [e for batch in ascend_db.batches(str(database), whole) for e in batch]
    with sqlite3.connect(database) as connection:
        connection.execute(change)
    metadata: dict = {}
    assert [e for batch in ascend_db.batches(str(database), metadata) for e in batch] == events
    assert left_out in whole and left_out not in metadata and "perftool.source" in metadata
