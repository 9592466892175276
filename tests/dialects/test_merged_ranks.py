"""A trace that merges several ranks' traces into one file (SGLang's merged profile, perftool's own job timeline): one
rank is analysed as a trace of its own, the others shown, not analysed; beside the ranks' own traces in a directory,
the merge is no rank of the job."""

from __future__ import annotations

import copy
import gzip
import html
import json
from pathlib import Path

import pytest
from conftest import complete, process_name, thread_name

from perftool.analysis.family import device_name, device_properties
from perftool.analysis.launches import launch_rows
from perftool.analysis.steps import detect_steps
from perftool.dialects.merged import merged_rank, own_pid
from perftool.dialects.vocabulary import OTHER_RANKS
from perftool.pipeline.read import load_trace
from perftool.trace.model import Kind, Role, Track

STEPS = 6
PROFILE_ID = "1764000000.123"  # SGLang's default profile id: the time the profile started
MODELS = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H200"}  # apart, so that finding a device's entry by its id shows
SMS = {0: 132, 1: 140}


def _rank(rank: int, kernel_us: float) -> dict:
    """One TP rank's Kineto trace as SGLang exports it: its host process (the OS's pid) launching one kernel a step
    on its GPU (pid: the device's number), each launch a flow numbered from 1 as CUPTI numbers a process's calls, and
    the job in ``distributedInfo``."""
    host, gpu = 4000 + rank, rank
    events = [
        process_name(host, "python3"),
        thread_name(host, 1, "scheduler"),
        {"ph": "M", "name": "process_labels", "pid": gpu, "tid": 0, "args": {"labels": f"GPU {gpu}"}},
        thread_name(gpu, 7, "stream 7"),
    ]
    for step in range(STEPS):
        t = step * 1000.0 + 3 * rank
        events += [
            complete(f"ProfilerStep#{step}", t, 999, pid=host, tid=1, cat="user_annotation"),
            complete("cudaLaunchKernel", t + 10, 5, pid=host, tid=1, cat="cuda_runtime"),
            {"ph": "s", "id": step + 1, "pid": host, "tid": 1, "ts": t + 10, "cat": "ac2g", "name": "ac2g"},
            complete("gemm_kernel", t + 100, kernel_us, pid=gpu, tid=7, cat="kernel"),
            {"ph": "f", "id": step + 1, "pid": gpu, "tid": 7, "ts": t + 100, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": device, "name": MODELS[device], "numSms": SMS[device]} for device in MODELS],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
        "traceEvents": events,
    }


def _merged(ranks: dict[int, dict]) -> dict:
    """SGLang's merge of its ranks' traces (``--merge-profiles``): every event's pid prefixed by its rank's label, the
    first file's other keys, every file's ``deviceProperties``."""
    merged: dict = {"traceEvents": []}
    for rank, trace in ranks.items():
        trace = copy.deepcopy(trace)
        merged["traceEvents"] += [{**event, "pid": f"[TP{rank:02d}] {event['pid']}"} for event in trace["traceEvents"]]
        merged.update({key: value for key, value in trace.items() if key not in merged and key != "deviceProperties"})
        merged.setdefault("deviceProperties", []).extend(trace["deviceProperties"])
    return merged


def _write(path: Path, document: dict) -> Path:
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    return path


def _sglang_directory(directory: Path, merged: bool = True) -> Path:
    """The folder SGLang profiles a TP-2 job into: each rank's trace, and the merge of them where asked for."""
    directory.mkdir()
    ranks = {rank: _rank(rank, kernel_us) for rank, kernel_us in ((0, 400.0), (1, 600.0))}
    for rank, trace in ranks.items():
        _write(directory / f"{PROFILE_ID}-TP-{rank}.trace.json.gz", trace)
    if merged:
        _write(directory / f"merged-{PROFILE_ID}.trace.json.gz", _merged(ranks))
    return directory


def test_a_merged_profile_is_read_as_its_busiest_rank_alone(write_trace):
    """Taken together, both ranks' hosts marked every step twice, their launches (numbered alike) reached the other
    rank's kernels, and one rank's idle time hid under the other's work."""
    trace = load_trace(write_trace(_merged({0: _rank(0, 400.0), 1: _rank(1, 600.0)})))
    roles = {(t.pid, t.tid): t.role for t in trace.tracks}
    assert roles[("[TP01] 4001", 1)] == Role.HOST and roles[("[TP01] 1", 7)] == Role.DEVICE
    assert {roles[("[TP00] 4000", 1)], roles[("[TP00] 0", 7)]} == {Role.OTHER_RANK}
    assert set(trace.kind[trace.on_roles(Role.OTHER_RANK)].tolist()) == {Kind.OTHER}
    assert trace.metadata[OTHER_RANKS] == {"analysed": "TP01", "others": ["TP00"]}
    assert detect_steps(trace).count == STEPS
    sources, spans = launch_rows(trace)
    assert sources.size == STEPS  # each of the rank's launches reaches its own kernel, none the other rank's
    assert {trace.tracks[i].pid for i in trace.track[sources].tolist()} == {"[TP01] 4001"}
    assert {trace.tracks[i].pid for i in trace.track[spans].tolist()} == {"[TP01] 1"}
    assert device_name(trace) == MODELS[1]  # its entry in deviceProperties, by the device's id within the rank
    assert device_properties(trace) == {"id": 1, "name": MODELS[1], "numSms": SMS[1]}


def test_of_ranks_whose_devices_did_alike_the_first_is_analysed(write_trace):
    trace = load_trace(write_trace(_merged({0: _rank(0, 500.0), 1: _rank(1, 500.0)})))
    assert trace.metadata[OTHER_RANKS] == {"analysed": "TP00", "others": ["TP01"]}


def test_a_merged_profile_of_one_rank_is_that_rank_s_trace(run, write_trace):
    """SGLang merges the trace of a job on one device too: the rank's own trace, with nothing to say of other ranks."""
    path = write_trace(_merged({0: _rank(0, 400.0)}), "merged.json")
    assert load_trace(path).metadata[OTHER_RANKS] == {"analysed": "TP00", "others": []}
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert scanned["rank"] == 0 and scanned["merged_ranks"] == ["TP00"] and scanned["steps"] > 0
    assert not [caveat for caveat in scanned["caveats"] if "merges" in caveat]


def test_the_scan_of_a_merged_profile_gives_its_rank_s_figures_says_so_and_claims_no_rank(run, write_trace):
    """The merge keeps the first file's distributedInfo (rank 0): the figures are another rank's, so none is given."""
    path = write_trace(_merged({0: _rank(0, 400.0), 1: _rank(1, 600.0)}), "merged.json")
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    (alone,) = json.loads(run("scan", write_trace(_rank(1, 600.0)), "--format", "json").stdout)["traces"]
    assert scanned["rank"] is None and scanned["world_size"] == 2 and scanned["merged_ranks"] == ["TP01", "TP00"]
    assert scanned["device"] == alone["device"] == MODELS[1]
    assert (scanned["steps"], scanned["step_time_us"]) == (alone["steps"], alone["step_time_us"])
    assert scanned["metrics"]["device.busy_fraction"] == pytest.approx(alone["metrics"]["device.busy_fraction"])
    assert (
        "the trace merges 2 ranks' traces into one: figures and findings are those of TP01, the rank whose device did"
        " the most work, the others shown, not analysed (TP00); for the job view" in scanned["caveats"][0]
    )


def test_perftool_s_own_job_timeline_is_read_back_as_one_rank(run, tmp_path):
    """scan --format perfetto of a job writes its ranks on one timeline, each process named by its rank."""
    job = _sglang_directory(tmp_path / "job", merged=False)
    timeline = tmp_path / "timeline.json.gz"
    assert run("scan", job, "--format", "perfetto", "-o", timeline, "--fail-on", "never").exit_code == 0
    (alone,) = json.loads(run("scan", job / f"{PROFILE_ID}-TP-1.trace.json.gz", "--format", "json").stdout)["traces"]
    (read_back,) = json.loads(run("scan", timeline, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert read_back["merged_ranks"] == ["rank 1", "rank 0"] and read_back["rank"] is None
    assert read_back["steps"] == alone["steps"] and read_back["step_time_us"] == pytest.approx(alone["step_time_us"])


@pytest.mark.parametrize(
    ("pid", "process", "rank", "own"),
    [
        ("[TP03] 12345", "python3", "TP03", 12345),
        ("[TP01-DP02-PP00-EP03] 7", "", "TP01-DP02-PP00-EP03", 7),
        (20_000_005, "rank 1 · python3", "rank 1", 20_000_005),
        (5, "rank 2 (its own clock: not aligned) · GPU 0", "rank 2", 5),
        ("[TP03]12345", "python3", None, "[TP03]12345"),  # no label without the space SGLang writes
        ("[XX03] 1", "ranked · python3", None, "[XX03] 1"),
        (3, "rank 1", None, 3),  # a process a user named so, not perftool's label
    ],
)
def test_a_process_s_rank_in_a_merged_trace(pid, process, rank, own):
    track = Track(id=0, pid=pid, tid=1, process_name=process)
    assert merged_rank(track) == rank and own_pid(pid) == own


def test_a_merged_profile_beside_its_ranks_traces_is_left_out_of_the_job_view(run, tmp_path):
    """SGLang writes merged-{id}.trace.json.gz into the folder of the ranks' own traces: as a rank it claimed rank 0
    (its distributedInfo) beside rank 0's own trace, with rank 1's figures."""
    job = _sglang_directory(tmp_path / "job")
    merged = str(job / f"merged-{PROFILE_ID}.trace.json.gz")
    document = json.loads(run("scan", job, "--format", "json", "--workers", "1", "--fail-on", "never").stdout)
    assert document["unread"] == [] and merged not in [t["path"] for t in document["traces"]]
    assert [row["rank"] for row in document["job"]["ranks"]] == [0, 1]
    assert document["job"]["merged_traces"] == [merged] and document["job"]["earlier_captures"] == []
    said = "1 trace merging the ranks' traces into one file left out (the view reads each rank's own trace"
    for fmt in ("text", "markdown", "html"):
        shown = run("scan", job, "--format", fmt, "--workers", "1", "--fail-on", "never")
        assert said in " ".join(html.unescape(shown.stdout).split()), fmt


def test_merged_profiles_alone_are_no_job_and_each_is_reported(run, tmp_path):
    job = _sglang_directory(tmp_path / "job")
    for rank in (0, 1):
        (job / f"{PROFILE_ID}-TP-{rank}.trace.json.gz").unlink()
    again = _merged({0: _rank(0, 300.0), 1: _rank(1, 200.0)})
    _write(job / "merged-1764000999.5.trace.json.gz", again)
    document = json.loads(run("scan", job, "--format", "json", "--workers", "1", "--fail-on", "never").stdout)
    assert document["job"] is None
    assert sorted(t["merged_ranks"][0] for t in document["traces"]) == ["TP00", "TP01"]
