"""A trace that merges several ranks' traces into one file (SGLang's merged profile, perftool's own job timeline): one
rank is analysed as a trace of its own, the others shown, not analysed."""

from __future__ import annotations

import json

import pytest
from builders import (
    SGLANG_MODELS,
    SGLANG_PROFILE_ID,
    SGLANG_SMS,
    SGLANG_STEPS,
    sglang_merged,
    sglang_profile,
    sglang_rank,
)
from conftest import REPO

from perftool.analysis.family import device_name, device_properties
from perftool.analysis.launches import launch_rows
from perftool.analysis.steps import detect_steps
from perftool.dialects.merged import merged_rank, own_name, own_pid
from perftool.dialects.vocabulary import OTHER_RANKS
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.rules.catalog import load_catalog
from perftool.trace.model import Kind, Role, Track


def test_a_merged_profile_is_read_as_its_busiest_rank_alone(write_trace):
    """Taken together, both ranks' hosts marked every step twice, their launches (numbered alike) reached the other
    rank's kernels, and one rank's idle time hid under the other's work."""
    trace = load_trace(write_trace(sglang_merged({0: sglang_rank(0, 400.0), 1: sglang_rank(1, 600.0)})))
    roles = {(t.pid, t.tid): t.role for t in trace.tracks}
    assert roles[("[TP01] 4001", 1)] == Role.HOST and roles[("[TP01] 1", 7)] == Role.DEVICE
    assert {roles[("[TP00] 4000", 1)], roles[("[TP00] 0", 7)]} == {Role.OTHER_RANK}
    assert set(trace.kind[trace.on_roles(Role.OTHER_RANK)].tolist()) == {Kind.OTHER}
    assert trace.metadata[OTHER_RANKS] == {"analysed": "TP01", "others": ["TP00"]}
    assert detect_steps(trace).count == SGLANG_STEPS
    sources, spans = launch_rows(trace)
    assert sources.size == SGLANG_STEPS  # each of the rank's launches reaches its own kernel, none the other rank's
    assert {trace.tracks[i].pid for i in trace.track[sources].tolist()} == {"[TP01] 4001"}
    assert {trace.tracks[i].pid for i in trace.track[spans].tolist()} == {"[TP01] 1"}
    assert device_name(trace) == SGLANG_MODELS[1]  # its entry in deviceProperties, by the device's id within the rank
    assert device_properties(trace) == {"id": 1, "name": SGLANG_MODELS[1], "numSms": SGLANG_SMS[1]}


def test_of_ranks_whose_devices_did_alike_the_first_is_analysed(write_trace):
    trace = load_trace(write_trace(sglang_merged({0: sglang_rank(0, 500.0), 1: sglang_rank(1, 500.0)})))
    assert trace.metadata[OTHER_RANKS] == {"analysed": "TP00", "others": ["TP01"]}


def test_a_merged_profile_of_one_rank_is_that_rank_s_trace(run, write_trace):
    """SGLang merges the trace of a job on one device too: the rank's own trace, with nothing to say of other ranks."""
    path = write_trace(sglang_merged({0: sglang_rank(0, 400.0)}), "merged.json")
    assert load_trace(path).metadata[OTHER_RANKS] == {"analysed": "TP00", "others": []}
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert scanned["rank"] == 0 and scanned["merged_ranks"] == ["TP00"] and scanned["steps"] > 0
    assert not [caveat for caveat in scanned["caveats"] if "merges" in caveat]


def test_one_labelled_process_among_others_makes_no_merge(write_trace):
    trace = sglang_rank(0, 400.0)
    trace["traceEvents"] = [{**e, "pid": "[TP00] 0"} if e.get("pid") == 0 else e for e in trace["traceEvents"]]
    assert OTHER_RANKS not in load_trace(write_trace(trace)).metadata


def test_the_scan_of_a_merged_profile_gives_its_rank_s_figures_says_so_and_claims_no_rank(run, write_trace):
    """The merge keeps the first file's distributedInfo (rank 0): the figures are another rank's, so none is given."""
    path = write_trace(sglang_merged({0: sglang_rank(0, 400.0), 1: sglang_rank(1, 600.0)}), "merged.json")
    (scanned,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    (alone,) = json.loads(run("scan", write_trace(sglang_rank(1, 600.0)), "--format", "json").stdout)["traces"]
    assert scanned["rank"] is None and scanned["world_size"] == 2 and scanned["merged_ranks"] == ["TP01", "TP00"]
    assert scanned["device"] == alone["device"] == SGLANG_MODELS[1]
    assert (scanned["steps"], scanned["step_time_us"]) == (alone["steps"], alone["step_time_us"])
    assert scanned["metrics"]["device.busy_fraction"] == pytest.approx(alone["metrics"]["device.busy_fraction"])
    assert (
        "the trace merges 2 ranks' traces into one: figures and findings are those of TP01, the rank whose device did"
        " the most work, the others shown, not analysed (TP00); for the job view" in scanned["caveats"][0]
    )


def test_perftool_s_own_job_timeline_is_read_back_as_one_rank(run, tmp_path):
    """scan --format perfetto of a job writes its ranks on one timeline, each process named by its rank."""
    job = sglang_profile(tmp_path / "job")
    timeline = tmp_path / "timeline.json.gz"
    assert run("scan", job, "--format", "perfetto", "-o", timeline, "--fail-on", "never").exit_code == 0
    (alone,) = json.loads(run("scan", job / f"{SGLANG_PROFILE_ID}-TP-1.trace.json.gz", "--format", "json").stdout)[
        "traces"
    ]
    (read_back,) = json.loads(run("scan", timeline, "--format", "json", "--fail-on", "never").stdout)["traces"]
    assert read_back["merged_ranks"] == ["rank 1", "rank 0"] and read_back["rank"] is None
    assert read_back["steps"] == alone["steps"] and read_back["step_time_us"] == pytest.approx(alone["step_time_us"])
    assert read_back["device"] == alone["device"] == SGLANG_MODELS[1]  # the first rank's deviceProperties, kept


def test_perftool_s_own_timeline_of_an_emulator_job_is_read_as_the_emulator_s(run, tmp_path):
    """The bundled jobs are the emulator's traces: their timeline keeps the emulator's record of every rank's tracks
    (renumbered as placed), so it reads as the analysed rank's own trace, not as a trace of no known producer."""
    job = REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler"
    timeline = tmp_path / "timeline.json.gz"
    assert run("scan", job, "--format", "perfetto", "-o", timeline, "--fail-on", "never").exit_code == 0
    (read_back,) = json.loads(run("scan", timeline, "--format", "json", "--fail-on", "never").stdout)["traces"]
    rank = read_back["merged_ranks"][0].removeprefix("rank ")
    (alone,) = json.loads(run("scan", job / f"rank{rank}.trace.json.gz", "--format", "json", "--fail-on", "never")
                          .stdout)["traces"]  # fmt: skip
    same = ("dialect", "device", "steps", "step_time_us")
    assert [read_back[key] for key in same] == [alone[key] for key in same] and alone["dialect"] == "emulator"
    assert [(f["rule_id"], f["gain"]["text"]) for f in read_back["findings"]] == [
        (f["rule_id"], f["gain"]["text"]) for f in alone["findings"]
    ]
    # the timeline records its first rank's run, whichever rank is read: no gain is predicted by re-running it
    rules = load_catalog()
    assert analyse_trace(load_trace(timeline), rules)[1].run is None
    assert analyse_trace(load_trace(job / f"rank{rank}.trace.json.gz"), rules)[1].run is not None


@pytest.mark.parametrize(
    ("pid", "process", "rank", "own", "name"),
    [
        ("[TP03] 12345", "python3", "TP03", 12345, "python3"),
        ("[TP01-DP02-PP00-EP03] 7", "", "TP01-DP02-PP00-EP03", 7, ""),
        (20_000_005, "rank 1 · python3", "rank 1", 5, "python3"),  # perftool's job timeline: rank 1's pid 5
        (30_000_001, "rank 2 (its own clock: not aligned) · GPU 1", "rank 2", 1, "GPU 1"),
        ("[TP03]12345", "python3", None, "[TP03]12345", "python3"),  # no label without the space SGLang writes
        ("[XX03] 1", "ranked · python3", None, "[XX03] 1", "ranked · python3"),
        (20_000_005, "rank 1", None, 20_000_005, "rank 1"),  # a process a user named so, not perftool's label
    ],
)
def test_a_process_s_rank_in_a_merged_trace(pid, process, rank, own, name):
    """Its rank, its id and its name in its rank's own trace."""
    track = Track(id=0, pid=pid, tid=1, process_name=process)
    assert (merged_rank(track), own_pid(track), own_name(track)) == (rank, own, name)


def test_a_rank_s_device_time_is_its_work_not_the_annotations_drawn_over_it(write_trace):
    """Kineto draws a record_function's span over its kernels on the device's stream (gpu_user_annotation): TP00's
    spans made it look the busier rank."""
    quieter = sglang_rank(0, 400.0)
    quieter["traceEvents"] += [
        {"ph": "X", "name": "forward", "cat": "gpu_user_annotation", "pid": 0, "tid": 7, "ts": e["ts"], "dur": 900}
        for e in quieter["traceEvents"]
        if e.get("name") == "gemm_kernel"
    ]
    trace = load_trace(write_trace(sglang_merged({0: quieter, 1: sglang_rank(1, 600.0)})))
    assert trace.metadata[OTHER_RANKS] == {"analysed": "TP01", "others": ["TP00"]}
