"""Jobs of many ranks: the bundled emulator jobs, scanned, inspected and gated as a user does."""

from __future__ import annotations

import gzip
import html
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import DATA, REPO

import perftool
from perftool.common.units import duration
from perftool.emulator.config import load_config
from perftool.emulator.full_run import run as emulate
from perftool.job.align import align, waits
from perftool.job.ranks import host_from_name, job_files, job_listing, rank_from_name
from perftool.job.summary import summarise_rank
from perftool.job.view import JobScope, job_view
from perftool.pipeline.scan import DEFAULT_READ
from perftool.report.overall import holding_back, left_out_said
from perftool.rules.detectors import straggler
from perftool.trace.profiler_dirs import trace_path
from perftool.trace.seen import seen

JOBS = REPO / "sample_traces" / "jobs"
STRAGGLER = JOBS / "gpu_ddp_straggler"
EXPOSED = JOBS / "npu_exposed_allreduce"


def scan_json(run, *args) -> tuple[dict, object]:
    result = run("scan", *args, "--format", "json", "--fail-on", "never", "--workers", "1")
    return json.loads(result.stdout), result


def test_the_straggler_is_named_with_what_makes_it_slow(run):
    document, result = scan_json(run, STRAGGLER)
    assert result.exit_code == 0
    job = document["job"]
    assert [row["rank"] for row in job["ranks"]] == list(range(8)) and job["world_size"] == 8
    assert job["slowest_rank"] == 5
    (straggler,) = job["findings"]
    assert straggler["rule_id"] == "PT013" and straggler["values"]["rank"] == 5
    assert straggler["values"]["cause"] == "device compute" and "same work" in straggler["fix"]["text"]
    assert straggler["values"]["last_share"] > 0.9
    rows = {row["rank"]: row for row in job["ranks"]}
    assert rows[5]["held_back_us"] > 1000 and rows[5]["wait_us"] == 0
    assert all(rows[r]["wait_us"] > 1000 for r in rows if r != 5)  # the others wait for it in every all-reduce
    # the slow rank computes 20% longer (the job's config says so)
    others = np.median([rows[r]["compute_us"] for r in rows if r != 5])
    assert rows[5]["compute_us"] / others == pytest.approx(1.2, rel=0.03)
    assert job["imbalance"]["compute"] > 0.1


def test_each_rank_steps_one_by_one_agree_with_its_means_and_show_the_straggler(run):
    """The job view's per-step figures (the HTML heat maps' cells) add up to the per-rank means, and step by step
    the straggler computes longest and waits least."""
    document, _ = scan_json(run, STRAGGLER)
    rows = {row["rank"]: row for row in document["job"]["ranks"]}
    traces = {trace["rank"]: trace for trace in document["traces"]}
    for rank, row in rows.items():
        steps = row["per_step"]
        assert steps["step"] == traces[rank]["step_numbers"][-len(steps["step"]) :]  # the trace's own numbering
        assert len(steps["step"]) == row["steps"] == 39
        assert np.mean(steps["compute_us"]) == pytest.approx(row["compute_us"], rel=1e-6)
        assert np.mean(steps["wait_us"]) == pytest.approx(row["wait_us"], rel=1e-6, abs=1e-6)
        assert all(c <= s for c, s in zip(steps["communication_us"], traces[rank]["step_durations_us"]))
    straggler = rows[5]["per_step"]
    for rank in set(rows) - {5}:
        others = rows[rank]["per_step"]
        assert sum(w < v for w, v in zip(straggler["wait_us"], others["wait_us"])) == 39
        assert sum(c > v for c, v in zip(straggler["compute_us"], others["compute_us"])) >= 35


def straggler_scope() -> JobScope:
    """The straggler job's ranks as summarised, aligned, and their waits, as the job view gives its detectors."""
    summaries = [
        summarise_rank(seen(str(path)), n, [], DEFAULT_READ) for n, path in enumerate(sorted(STRAGGLER.glob("rank*")))
    ]
    by_rank = {s.rank: s for s in summaries}
    timelines = {rank: s.timeline for rank, s in by_rank.items()}
    steps = {rank: s.timeline.steps for rank, s in by_rank.items()}
    return JobScope(by_rank, waits(timelines, *align(timelines)), 5, "gpu", steps_compared=steps)


def test_a_lag_no_part_of_the_step_explains_names_no_cause():
    """The straggler job's ranks as summarised, but rank 5 as late again as its extra compute accounts for (a slow
    link or proxy, which no trace records): the finding says the trace does not show why, with what to capture
    next, instead of blaming the part of its step that differs most."""
    scope = straggler_scope()
    waited = scope.waits
    explained = straggler.detect(scope, {})
    assert explained is not None and "more per step in device compute" in explained.values["why"]
    waited.lag_us[5] *= 4  # its extra compute is under half its lag now
    unexplained = straggler.detect(scope, {})
    assert unexplained is not None and unexplained.variant is None
    assert unexplained.values["why"].startswith("No part of its step that the trace shows explains its lag")


def test_waiting_for_the_straggler_is_not_blamed_on_how_ranks_communicate(run):
    document, _ = scan_json(run, STRAGGLER)
    for trace in document["traces"]:
        for finding in trace["findings"]:
            if finding["rule_id"] == "PT011" and trace["rank"] != 5:
                assert finding["severity"] == "info" and "waiting for rank 5" in finding["capped"]


def test_clocks_are_aligned_on_the_shared_collectives(run):
    """The emulator skews each rank's clock by up to 1.5 s; the alignment recovers every offset."""
    config = load_config(STRAGGLER / "job.yaml")
    skew = np.random.default_rng([config.seed, 7]).uniform(0, config.replicas.clock_skew_ms * 1e3, 8)
    document, _ = scan_json(run, STRAGGLER)
    alignment = document["job"]["alignment"]
    assert alignment["reference"] == 0 and alignment["unaligned"] == []
    found = {int(rank): offset for rank, offset in alignment["offsets_us"].items()}
    assert found == {rank: pytest.approx(skew[rank] - skew[0], abs=1.0) for rank in range(8)}
    assert alignment["residual_p95_us"] < 1.0
    assert min(alignment["matched"].values()) >= 100  # four buckets a step over the steady steps


def test_exposed_all_reduce_job(run):
    document, _ = scan_json(run, EXPOSED)
    job = document["job"]
    assert job["findings"] == []  # no rank holds the others back
    assert job["groups"] == [
        {
            "name": "default_pg",
            "parallelism": "data",
            "ranks": 8,
            "time_us": pytest.approx(job["groups"][0]["exposed_us"]),
            "exposed_us": pytest.approx(job["ranks"][0]["exposed_communication_us"], rel=0.05),
        }
    ]
    for trace in document["traces"]:
        (exposed,) = [f for f in trace["findings"] if f["rule_id"] == "PT011"]
        assert exposed["values"]["collective"] == "all_reduce" and exposed["values"]["message_mb"] == pytest.approx(
            200.0
        )
        # every all-reduce runs after the backward pass: reducing during it is the fix, emulated on the job
        assert (
            exposed["fix"]["changes"] == {"replicas.overlap": True}
            and "after the backward pass" in exposed["fix"]["text"]
        )
        assert exposed["gain"]["kind"] == "predicted" and exposed["gain"]["speedup"] == pytest.approx(1.2, abs=0.02)
        assert exposed["gain"]["text"].startswith("reduce during backward off → on: step 503.489 ms")
        assert exposed["severity"] == "error"  # a predicted 17% of the job


def test_overlapped_all_reduces_are_not_called_after_backward(run):
    document, _ = scan_json(run, STRAGGLER)
    for trace in document["traces"]:
        (exposed,) = [f for f in trace["findings"] if f["rule_id"] == "PT011"]
        assert exposed["values"]["exposed_share"] < 0.5 and "replicas.overlap" not in exposed["fix"]["changes"]


def test_job_text_report(run):
    text = run("scan", STRAGGLER, "--workers", "1", "--fail-on", "never").stdout
    assert "job of 8 ranks (world size 8)" in text and "rank 5 arrives last at the collectives: the others wait" in text
    assert "PT013 straggler" in text and "Ranks (ms per steady step)" in text
    assert "PT011 on 8 of 8 ranks" in text
    info = run("info", STRAGGLER, "--workers", "1").stdout
    assert info.startswith("perftool info job of 8 ranks") and "Communication per process group" in info


@pytest.mark.slow
def test_each_rank_s_mfu_is_its_own_trace_s_in_every_format(run, tmp_path):
    """A job of Kineto ranks that record shapes on a known device shows each rank's MFU: the figure info gives its
    trace alone, a lower bound where some device time is unmodelled; a job without shapes shows no MFU column."""
    sample = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
    for rank in (0, 1):
        shutil.copy(sample, tmp_path / f"rank{rank}.pt.trace.json.gz")
    alone = json.loads(run("info", sample, "--format", "json").stdout)["roofline"]
    job, _ = scan_json(run, tmp_path)
    ranks = job["job"]["ranks"]
    assert [r["mfu"] for r in ranks] == [pytest.approx(alone["mfu"], rel=1e-12)] * 2
    assert all(r["mfu_is_lower_bound"] for r in ranks) and alone["modelled_share"] < 0.995
    shown = f"≥{alone['mfu'] * 100:.3g}%"
    assert shown in run("scan", tmp_path, "--workers", "1", "--fail-on", "never").stdout
    markdown = run("scan", tmp_path, "--workers", "1", "--fail-on", "never", "--format", "markdown").stdout
    assert "| MFU |" in markdown and "≥ 0.2357%" in markdown
    straggler = run("scan", STRAGGLER, "--workers", "1", "--fail-on", "never", "--format", "markdown").stdout
    assert "| rank |" in straggler and "MFU" not in straggler


def test_exit_code_follows_the_job_findings(run):
    assert run("scan", STRAGGLER, "--workers", "1").exit_code == 1  # PT013 at error
    assert run("scan", STRAGGLER, "--workers", "1", "--fail-on", "never").exit_code == 0


def test_a_bad_rank_is_an_error_for_that_rank_and_the_rest_is_kept(run, tmp_path):
    job = tmp_path / "job"
    shutil.copytree(STRAGGLER, job)
    bad = job / "rank3.trace.json.gz"
    bad.write_bytes(gzip.compress(gzip.decompress(bad.read_bytes())[:5000]))
    out = tmp_path / "report.json"
    result = run("scan", job, "--format", "json", "-o", out, "--workers", "1")
    assert result.exit_code == 2
    wrote, line = result.stderr.strip().splitlines()  # the report written, then the rank that could not be read
    assert wrote.startswith(f"perftool: wrote {out} (")
    assert line.startswith(f"perftool: error: {bad}: ") and "truncated" in line
    document = json.loads(out.read_text())
    assert [t["rank"] for t in document["traces"]] == [0, 1, 2, 4, 5, 6, 7]
    assert document["unread"] == [{"path": str(bad), "problem": document["unread"][0]["problem"], "rank": 3}]
    assert document["job"]["slowest_rank"] == 5


def test_two_files_claiming_one_rank(run, tmp_path):
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copy(STRAGGLER / "rank1.trace.json.gz", tmp_path / name)
    result = run("scan", tmp_path, "--format", "json", "--workers", "1", "--fail-on", "never")
    assert result.exit_code == 2 and "rank 1 is given twice" in result.stderr


def test_several_files_are_a_job_when_they_say_their_ranks(run, tmp_path):
    named = [STRAGGLER / f"rank{r}.trace.json.gz" for r in (0, 5)]
    document, _ = scan_json(run, *named)
    assert document["job"]["world_size"] == 8 and document["job"]["slowest_rank"] == 5
    assert document["job"]["missing_ranks"] == [1, 2, 3, 4, 6, 7]
    plain = [
        REPO / "sample_traces" / "npu" / "healthy.trace.json.gz",
        REPO / "sample_traces" / "ipu" / "healthy.trace.json.gz",
    ]
    document, _ = scan_json(run, *plain)
    assert document["job"] is None and len(document["traces"]) == 2


@pytest.mark.slow
def test_gate_compares_jobs_rank_by_rank(run, tmp_path):
    baseline = tmp_path / "base.json"
    run("scan", STRAGGLER, "--format", "json", "-o", baseline, "--workers", "1", "--fail-on", "never")
    same = run("gate", baseline, STRAGGLER, "--format", "json", "--workers", "1")
    assert same.exit_code == 0, same.output
    checks = json.loads(same.stdout)["checks"]
    assert {c["id"].split("/")[0] for c in checks} == {f"rank{r}" for r in range(8)} | {"job"}
    assert all(c["name"].startswith(f"{c['id'].split('/')[0].replace('rank', 'rank ')}: ") for c in checks)
    assert [times["rank"] for times in json.loads(same.stdout)["step_times"]] == list(range(8))
    other = run("gate", EXPOSED, STRAGGLER, "--workers", "1")
    assert other.exit_code == 2
    said = other.stderr.split("not the same job (", 1)[1].split("); pass --allow-mismatch", 1)[0]
    differences = said.split("; ")  # the first three of many (every rank differs), then an ellipsis
    assert len(differences) == 4 and differences[0] == "rank 0: device family npu → gpu" and differences[3] == "…"


@pytest.mark.slow
def test_gate_refuses_a_different_world_size(run, tmp_path):
    smaller = tmp_path / "six"
    smaller.mkdir()
    for rank in range(6):
        shutil.copy(STRAGGLER / f"rank{rank}.trace.json.gz", smaller)
    refused = run("gate", STRAGGLER, smaller, "--workers", "1")
    assert refused.exit_code == 2 and "(world size 8 → 6 ranks; ranks 6, 7 only in the baseline)" in refused.stderr
    grown = run("gate", smaller, STRAGGLER, "--workers", "1")
    assert grown.exit_code == 2 and "(world size 6 → 8 ranks; ranks 6, 7 only in the candidate)" in grown.stderr
    allowed = run("gate", STRAGGLER, smaller, "--workers", "1", "--allow-mismatch", "--format", "json")
    assert allowed.exit_code in (0, 1)
    assert {c["id"].split("/")[0] for c in json.loads(allowed.stdout)["checks"]} >= {f"rank{r}" for r in range(6)}
    single = run("gate", STRAGGLER / "rank0.trace.json.gz", STRAGGLER, "--workers", "1")
    assert single.exit_code == 2 and "a job with a job" in single.stderr


def test_job_findings_point_at_the_slowest_ranks_file(run):
    lines = run("scan", STRAGGLER, "--format", "github", "--workers", "1").stdout.splitlines()
    assert any(line.startswith("::error file=") and "rank5.trace.json.gz" in line and "PT013" in line for line in lines)


def test_library_scan_of_a_job():
    report = perftool.scan(STRAGGLER, workers=1)
    assert report.job is not None and report.job.slowest_rank == 5
    assert [trace.rank for trace in report.traces] == list(range(8))


# --- the emulator's replicas ----------------------------------------------------------------------------------------


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_an_all_reduce_ends_on_every_rank_at_once():
    config = load_config(STRAGGLER / "job.yaml")
    ranks = emulate(config).ranks()  # recorded on one clock; each rank's trace shifts it to its own
    ends = np.stack([rank.recorded("comm_end") for rank in ranks])  # [rank, step, bucket]
    starts = np.stack([rank.recorded("comm_start") for rank in ranks])
    assert np.allclose(ends, ends[0])
    updates = ranks[0].recorded("update")
    steady = updates & (np.arange(updates.size) > 0)  # past the first step, which captures the CUDA graph
    assert np.allclose(starts[5][steady], starts[:, steady].max(axis=0))  # the slow rank 5 is the last in


def test_each_rank_trace_records_its_rank_and_the_collectives(tmp_path, run):
    out = tmp_path / "job"
    result = run("emulate", STRAGGLER / "job.yaml", "--trace", out)
    assert result.exit_code == 0 and "8 ranks" in result.stdout
    assert sorted(p.name for p in out.iterdir()) == [f"rank{r}.trace.json.gz" for r in range(8)]
    document = json.loads(gzip.decompress((out / "rank3.trace.json.gz").read_bytes()))
    assert document["distributedInfo"] == {"backend": "nccl", "rank": 3, "world_size": 8}
    collectives = [e for e in document["traceEvents"] if e.get("cat") == "communication"]
    assert collectives and collectives[0]["args"]["Collective name"] == "allreduce"
    assert all(e["name"].startswith("ncclDevKernel_AllReduce") for e in collectives)
    again = tmp_path / "again"
    run("emulate", STRAGGLER / "job.yaml", "--trace", again)
    assert all((out / p.name).read_bytes() == p.read_bytes() for p in again.iterdir())  # same seed, same bytes


def test_committed_jobs_equal_a_fresh_regeneration(tmp_path, run):
    for job in (STRAGGLER, EXPOSED):
        fresh = tmp_path / job.name
        run("emulate", job / "job.yaml", "--trace", fresh)
        for committed in sorted(job.glob("rank*.trace.json.gz")):
            assert gzip.decompress((fresh / committed.name).read_bytes()) == gzip.decompress(committed.read_bytes())


def test_replica_settings_are_checked(run, tmp_path):
    document = yaml.safe_load((STRAGGLER / "job.yaml").read_text())
    document["replicas"]["slow_ranks"] = [{"rank": 8, "compute": 1.5}]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(document))
    result = run("emulate", bad)
    assert result.exit_code == 2 and "replicas.slow_ranks[0].rank: 8 is not a replica" in result.stderr
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    result = run("emulate", STRAGGLER / "job.yaml", "--trace", not_a_dir)
    assert result.exit_code == 2 and "is not a directory" in result.stderr


def test_markdown_and_sarif_of_a_job(run, sarif_validator):
    markdown = run("scan", STRAGGLER, "--format", "markdown", "--workers", "1", "--fail-on", "never").stdout
    assert "## Job of 8 ranks (world size 8)" in markdown and "**Rank 5 arrives last at the collectives" in markdown
    assert "| 5 | 7.149 ms |" in markdown and "`PT013`" in markdown
    sarif = json.loads(run("scan", STRAGGLER, "--format", "sarif", "--workers", "1", "--fail-on", "never").stdout)
    assert [error.message for error in sarif_validator.iter_errors(sarif)] == []
    (straggler,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "PT013"]
    location = straggler["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert location.endswith("rank5.trace.json.gz")


def _two_hosts(rank: int) -> str:
    return "node-a" if rank < 4 else "node-b"


def _on_hosts(job: Path, directory: Path, host: Callable[[int], str] = _two_hosts) -> Path:
    """The ranks of ``job`` copied into ``directory`` as tensorboard_trace_handler names them by default
    ({host}_{pid}.{time}.pt.trace.json.gz), on the host ``host`` gives each rank (ranks 0-3 on node-a, 4-7 on
    node-b)."""
    directory.mkdir(exist_ok=True)
    for path in sorted(job.glob("rank*.trace.json.gz")):
        rank = int(path.name.split(".")[0].removeprefix("rank"))
        shutil.copy(path, directory / f"{host(rank)}_{1000 + rank}.1796045217257616926.pt.trace.json.gz")
    return directory


def test_a_job_on_two_hosts_names_each_rank_s_and_keeps_a_slow_rank_apart_from_a_slow_node(run, tmp_path):
    """Rank 5 alone computes slower (the bundled job): the other ranks on its host keep pace, so the fix is the rank's
    own. The hosts come from the handler's file names."""
    job = _on_hosts(STRAGGLER, tmp_path / "job")
    document, _ = scan_json(run, job)
    assert [row["host"] for row in document["job"]["ranks"]] == ["node-a"] * 4 + ["node-b"] * 4
    alignment = document["job"]["alignment"]  # the bundled job's ranks, each on a clock of its own, named as hosts'
    offsets = alignment["offsets_us"]
    gap = max(
        max(offsets[str(r)] for r in ranks) - min(offsets[str(r)] for r in ranks) for ranks in (range(4), range(4, 8))
    )
    assert alignment["host_agreement_us"] == pytest.approx(gap) and gap > 1e5
    assert alignment["text"].endswith("apart: their traces do not read one clock")
    (found,) = document["job"]["findings"]
    assert (
        found["values"]["node"] == " The other ranks on its host, node-b (ranks 4, 6, 7), keep the other hosts' pace."
    )
    assert found["fix"]["text"].startswith("Rank 5's device computes longer than the others'")
    markdown = run("scan", job, "--format", "markdown", "--workers", "1", "--fail-on", "never").stdout
    assert "| rank | host | step |" in markdown and "| 5 | node-b | 7.149 ms |" in markdown
    assert "<th>host</th>" in run("scan", job, "--format", "html", "--workers", "1", "--fail-on", "never").stdout
    text = run("scan", job, "--workers", "1", "--fail-on", "never").stdout
    assert "│    5 │ node-b │" in text
    one_host = _on_hosts(STRAGGLER, tmp_path / "one_host", lambda rank: "node-a")
    markdown = run("scan", one_host, "--format", "markdown", "--workers", "1", "--fail-on", "never").stdout
    assert "| rank | step |" in markdown and "| node-a |" not in markdown  # one host: nothing to tell apart
    assert scan_json(run, one_host)[0]["job"]["findings"][0]["values"]["node"] == ""
    host_each = scan_json(run, _on_hosts(STRAGGLER, tmp_path / "host_each", lambda rank: f"node{rank}"))[0]["job"]
    assert host_each["alignment"]["host_agreement_us"] is None and "host" not in host_each["alignment"]["text"]
    assert host_each["findings"][0]["values"]["node"] == " It ran on node5, the only rank there."


def test_a_slow_node_s_ranks_are_its_fix_and_its_what_if(run, tmp_path):
    """Ranks 4-7, all on node1 (four ranks a host), compute 12-20% slower: rank 5, the slowest, holds the job back,
    but the fix is the node's, and the what-if runs the job with all four at the other ranks' pace. The hosts are the
    ones the traces record, and the ranks of a host share its clock."""
    document = yaml.safe_load((STRAGGLER / "job.yaml").read_text())
    document["replicas"]["slow_ranks"] = [{"rank": r, "compute": 1.2 if r == 5 else 1.12} for r in (4, 5, 6, 7)]
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(document))
    run("emulate", config, "--trace", tmp_path / "own_clocks", "--format", "json")
    document["replicas"]["ranks_per_host"] = 4
    config.write_text(yaml.safe_dump(document))
    run("emulate", config, "--trace", tmp_path / "job", "--format", "json")
    job = scan_json(run, tmp_path / "job")[0]["job"]
    assert [row["host"] for row in job["ranks"]] == ["node0"] * 4 + ["node1"] * 4
    offsets = job["alignment"]["offsets_us"]
    assert len({offsets[str(r)] for r in range(4)}) == len({offsets[str(r)] for r in range(4, 8)}) == 1
    assert offsets["4"] != offsets["0"] and job["alignment"]["host_agreement_us"] == 0.0
    assert job["alignment"]["text"].endswith("ranks on one host, which share its clock, align within 0.0 µs")
    (found,) = job["findings"]
    assert found["values"]["rank"] == 5 and found["values"]["host_ranks"] == "4, 5, 6, 7"
    assert found["values"]["node"].endswith("The node is slow, not the rank.")
    assert found["fix"]["text"].startswith("The ranks of node1 (4, 5, 6, 7) all run slower than the other hosts'")
    assert found["gain"]["text"].startswith("slow ranks: none: step 7.149 ms → 6.197 ms")
    without_hosts = scan_json(run, tmp_path / "own_clocks")[0]["job"]  # rank 5 at the others' pace
    assert {row["host"] for row in without_hosts["ranks"]} == {None}
    assert len(set(without_hosts["alignment"]["offsets_us"].values())) == 8  # a clock each
    assert without_hosts["findings"][0]["gain"]["text"].startswith(
        "slow ranks: rank 4 (compute ×1.12), rank 6 (compute ×1.12), rank 7 (compute ×1.12): step 7.149 ms → 6.820 ms"
    )


@pytest.mark.parametrize(
    ("family", "collective"),
    [
        ("npu", "hcom_allReduce_"),
        ("ipu", "GCL AllReduce (replicas)"),
        ("hpu", "hccl_allreduce"),
        ("gpu", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    ],
)
@pytest.mark.slow
def test_every_family_emulates_replicas_in_its_own_words(run, tmp_path, family, collective):
    document = yaml.safe_load((REPO / "sample_traces" / family / "healthy.yaml").read_text())
    document["workload"]["steps"] = 64
    document["replicas"] = {"count": 2, "bucket": "10MB", "slow_ranks": [{"rank": 1, "compute": 1.5}]}
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(document))
    assert run("emulate", config, "--trace", tmp_path / "job").exit_code == 0
    names = {e["name"] for e in _events(tmp_path / "job" / "rank0.trace.json.gz") if e.get("cat") == "communication"}
    assert names == {collective}
    scanned, _ = scan_json(run, tmp_path / "job")
    (stat,) = [t for t in scanned["traces"] if t["rank"] == 0]
    assert stat["world_size"] == 2 and stat["metrics"]["communication.count"] > 0
    assert stat["metrics"]["communication.bytes"] > 0  # the sizes in the args were read back
    assert scanned["job"]["slowest_rank"] == 1


def test_a_rank_no_later_than_the_clocks_disagree_is_no_straggler():
    """The straggler job's rank 5, late by its lag a step: named where the ranks' clocks agree to under half that,
    and not where their alignment strays by half of it or more (the trace cannot tell who is slow then)."""
    scope = straggler_scope()
    lag = scope.waits.lag_us[5] / scope.steps_compared[5]
    named = straggler.detect(replace(scope, clock_error_us=0.45 * lag), {})
    assert named is not None and named.values["rank"] == 5
    assert straggler.detect(replace(scope, clock_error_us=0.5 * lag), {}) is None


def test_the_rank_the_others_wait_for_is_named_for_that_not_as_the_slowest(run):
    """torch_npu's two ranks: rank 0 arrives last at the all-reduces, so rank 1 waits and its step is the longer one.
    The job view names rank 0 for what it does (the others wait for it), never as "slowest" beside a longer step."""
    job = REPO / "tests" / "data" / "real" / "torch_npu_db_l2_job"
    document, _ = scan_json(run, job)
    steps = {row["rank"]: row["step_time_us"] for row in document["job"]["ranks"]}
    assert document["job"]["slowest_rank"] == 0 and steps[0] < steps[1]
    text = run("scan", job, "--fail-on", "never").stdout
    assert "of the ranks here, rank 0 arrives last (6.257 ms per step)" in " ".join(text.split())
    assert "slowest" not in text


def _db_job_summaries() -> dict:
    """The torch_npu db job's two ranks as summarised for the job view."""
    job = REPO / "tests" / "data" / "real" / "torch_npu_db_l2_job"
    directories = sorted(job.glob("rank*_ascend_pt"))
    return {n: summarise_rank(seen(trace_path(str(d))), n, [], DEFAULT_READ) for n, d in enumerate(directories)}


def test_a_rank_every_rank_here_waits_for_and_no_trace_holds_is_named_first(run):
    """Both ranks of the db capture wait for HCCL's rank 4 most of each step (their Notify_Wait tasks name it), far
    longer than either waits for the other: the job view names rank 4 as the one the job waits for, and says the
    ranks here hold none of it, with the least and the most a rank waits."""
    document, _ = scan_json(run, REPO / "tests" / "data" / "real" / "torch_npu_db_l2_job")
    absent = document["job"]["late_absent"]
    waited = [t["peer_waits"]["per_step_us"]["4"] for t in document["traces"]]
    assert absent == {"rank": 4, "wait_us": [pytest.approx(min(waited)), pytest.approx(max(waited))]}
    assert min(waited) > document["job"]["held_back_us"] * 10
    assert {t["peer_waits"]["rank"] for t in document["traces"]} == {0, 1}
    text = " ".join(run("scan", REPO / "tests" / "data" / "real" / "torch_npu_db_l2_job").stdout.split())
    assert "rank 4, which has no trace here, arrives last at the collectives: every rank here waits 89.666 ms" in text


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda rank, waits: waits, 4),
        (lambda rank, waits: waits.model_copy(update={"rank": 1 - rank}), None),  # numbered otherwise than the job
        (lambda rank, waits: waits.model_copy(update={"per_step_us": {7 if rank else 4: 1e5}}), None),
        (lambda rank, waits: waits.model_copy(update={"per_step_us": {4: 6000.0 + 500 * rank}}), None),  # one
        # rank waits for it less than the 6.257 ms the other waits for rank 0
        (lambda rank, waits: waits.model_copy(update={"per_step_us": {4: 6500.0}}), 4),
        (lambda rank, waits: None if rank else waits, None),  # a rank whose trace names no peer: not every rank
        (lambda rank, waits: "unnamed", "unnamed"),  # level 0: no peer named, every rank waiting (its metric)
        (lambda rank, waits: waits if rank else "unnamed", None),  # one rank names them
        (lambda rank, waits: 6000.0 + rank, None),  # every rank waits, less than rank 1 waits for rank 0
        (lambda rank, waits: 0.0 if rank else "unnamed", None),  # a rank that does not wait
    ],
    ids=["as captured", "other numbering", "each waits most for another", "shorter than the wait for a rank here",
         "just longer", "one rank without waits", "no rank names peers", "one rank names them",
         "unnamed, shorter than the wait for a rank here", "unnamed, one rank not waiting"],
)  # fmt: skip
def test_an_absent_rank_is_named_only_where_every_rank_here_waits_longest_for_it(change, named):
    """Named where every rank's tasks name the same latest peer, outside the job; unnamed ("ranks with no trace
    here") where no rank's tasks name peers and every rank waits (communication.waiting_us); either only where the
    least of those waits is more than the 6.257 ms a step rank 1 waits for rank 0. A change that is a number sets a
    rank's waiting per step, its peers unnamed; "unnamed" leaves its waiting as captured, its peers unnamed."""
    summaries = _db_job_summaries()
    for rank, summary in summaries.items():
        changed = change(rank, summary.scan.peer_waits)
        if changed == "unnamed" or isinstance(changed, float):
            metrics = summary.scan.metrics
            waiting = metrics["communication.waiting_us"] if changed == "unnamed" else changed * summary.scan.steps
            summary.scan = summary.scan.model_copy(
                update={"peer_waits": None, "metrics": metrics | {"communication.waiting_us": waiting}}
            )
        else:
            summary.scan = summary.scan.model_copy(update={"peer_waits": changed})
    view = job_view(list(summaries.values()), [])
    absent = view.late_absent
    assert (None if absent is None else "unnamed" if absent.rank is None else absent.rank) == named
    if named == "unnamed":  # every rank's own waiting per step, the least and the most
        waited = sorted(s.scan.metrics["communication.waiting_us"] / s.scan.steps for s in summaries.values())
        assert absent.wait_us == [waited[0], waited[-1]]
        assert holding_back(view).startswith(
            f"ranks with no trace here arrive last at the collectives: every rank here waits {duration(waited[0])} to "
        )


def test_a_straggler_on_npus_is_checked_with_ascend_s_tools_not_nccl_s(run):
    """The network check a straggler's fix names fits the collective library the job ran: for an NPU job, HCCL's own
    test and Ascend's network diagnosis, not NCCL's debug log and nccl-tests."""
    job = REPO / "tests" / "data" / "real" / "torch_npu_db_l2_job"
    document, _ = scan_json(run, job)
    (found,) = [f for f in document["job"]["findings"] if f["rule_id"] == "PT013"]
    assert "hccl_test" in found["fix"]["text"] and "ascend-dmi -dg -i network" in found["fix"]["text"]
    assert "NCCL" not in found["fix"]["text"] and "nccl-tests" not in found["fix"]["text"]


def test_a_real_cpu_job_s_straggler_is_its_untraced_host_time(run):
    """Two gloo ranks on CPUs (tests/data/capture_gloo_job.py): rank 1 sleeps 20 ms a step outside any traced call
    before its forward, and rank 0 waits for it in every all-reduce. The job aligns their clocks on the
    all-reduces; PT013 names rank 1 and, no device to compare, the host time no traced call covers."""
    document, result = scan_json(run, str(DATA / "gloo_cpu_job"))
    assert result.exit_code == 0
    job = document["job"]
    assert job["world_size"] == 2 and job["slowest_rank"] == 1
    (straggler,) = [f for f in job["findings"] if f["rule_id"] == "PT013"]
    assert straggler["values"]["rank"] == 1 and straggler["values"]["cause"] == "host time outside every traced call"
    assert 15 < straggler["values"]["excess_ms_per_step"] < 25  # the 20 ms sleep, less the noise of a real run
    assert "with_stack=True" in straggler["fix"]["text"]


def test_a_real_cpu_job_with_its_python_stack_names_the_python_the_straggler_runs(run):
    """The same job captured with ``with_stack=True`` (``gloo_cpu_job_stack``): the sleep is a frame of rank 1's
    Python stack, so the host time no traced call covers is gone from every rank; PT013 names rank 1's time in
    Python between its ops, and the sleep as the frame it spends it in, and no longer tells the user to capture
    the stack it has."""
    document, result = scan_json(run, str(DATA / "gloo_cpu_job_stack"))
    assert result.exit_code == 0
    (straggler,) = [f for f in document["job"]["findings"] if f["rule_id"] == "PT013"]
    values = straggler["values"]
    assert values["rank"] == 1 and values["cause"] == "Python between its host's ops"
    assert 15 < values["excess_ms_per_step"] < 25
    assert values["python_frames"] == "most of it in <built-in function sleep>"
    assert "(most of it in <built-in function sleep>)" in straggler["fix"]["text"]
    assert "with_stack" not in straggler["fix"]["text"]


def test_a_host_only_rank_s_summary_holds_its_python_between_ops_where_its_trace_records_it():
    """Per steady step: rank 1 of the job captured with its stack spends about 20 ms in the sleep, rank 0 under a
    millisecond in all its Python between ops; the job captured without the stack has no such part, and its time
    is untraced."""
    stacked = {n: summarise_rank(seen(str(DATA / "gloo_cpu_job_stack" / f"rank{n}.pt.trace.json.gz")), n, [],
                                 DEFAULT_READ) for n in (0, 1)}  # fmt: skip
    slow = stacked[1]
    (frame, time), *_ = slow.python_us.items()  # the most first
    assert frame == "<built-in function sleep>" and 18_000 < time < 25_000
    assert slow.breakdown_us["host.python"] >= sum(slow.python_us.values()) and slow.breakdown_us["host.untraced"] < 100
    assert stacked[0].breakdown_us["host.python"] < 1_000 and "<built-in function sleep>" not in stacked[0].python_us
    plain = summarise_rank(seen(str(DATA / "gloo_cpu_job" / "rank1.pt.trace.json.gz")), 1, [], DEFAULT_READ)
    assert "host.python" not in plain.breakdown_us and plain.python_us == {}
    assert plain.breakdown_us["host.untraced"] > 18_000


REAL_NPU_RANK = DATA / "real" / "torch_npu_db_l2_job" / "rank1_ascend_pt"  # torch_npu's db export of one rank
CYCLES = DATA / "profiler_cycles"  # tests/data/capture_profiler_cycles.py: a repeating schedule, one trace a cycle


def test_one_process_captured_cycle_after_cycle_is_no_job(run):
    """tensorboard_trace_handler writes a trace per cycle of a repeating schedule, ``{host}_{pid}.{time}``: one
    process's windows in turn. Each is scanned as its own trace, in the order they were captured; none is refused
    as its rank given twice, and the pid is no rank."""
    first, second = sorted(CYCLES.joinpath("one_process").iterdir())
    document, result = scan_json(run, CYCLES / "one_process")
    assert result.exit_code == 0 and result.stderr == ""
    assert document["job"] is None and document["unread"] == []
    assert [t["path"] for t in document["traces"]] == [str(first), str(second)]
    assert [t["step_numbers"][0] for t in document["traces"]] == [2, 8]  # cycle one's steps 2-5, cycle two's 8-11
    text = run("scan", CYCLES / "one_process", "--workers", "1")
    assert text.exit_code == 0 and "No findings in 2 traces." in text.stdout and "job" not in text.stdout


def test_the_handler_s_traces_of_ranks_that_record_no_rank_are_a_job_by_their_collectives(run, tmp_path):
    """A PyTorch older than 1.10 writes no distributedInfo: tensorboard_trace_handler's traces of a DDP job's ranks
    ({host}_{pid}.{time}.pt.trace.json) say nothing of the job but the collectives they run, which make them one,
    each rank named by its process id."""
    for number, trace in enumerate(sorted((DATA / "gloo_cpu_job").iterdir())):
        document = json.loads(gzip.decompress(trace.read_bytes()))
        del document["distributedInfo"]
        name = f"trainer_{31000 + 7 * number}.170000000{number}000.pt.trace.json.gz"
        (tmp_path / name).write_bytes(gzip.compress(json.dumps(document).encode()))
    document, result = scan_json(run, tmp_path)
    job = document["job"]
    assert result.exit_code == 0 and job is not None
    assert [r["rank"] for r in job["ranks"]] == [31000, 31007] and job["slowest_rank"] == 31007
    assert job["held_back_us"] > 1000


def test_runs_one_after_another_in_one_log_directory_are_no_job(run):
    """Two processes of no distributed job (their traces hold no distributedInfo) wrote into one directory, one run
    after the other: each trace is reported alone, in the order captured, not as ranks named by their pids."""
    files = sorted(CYCLES.joinpath("two_runs").iterdir(), key=lambda f: int(f.name.split(".")[1]))
    document, result = scan_json(run, CYCLES / "two_runs")
    assert result.exit_code == 0 and result.stderr == ""
    assert document["job"] is None and document["unread"] == []
    assert [t["path"] for t in document["traces"]] == [str(f) for f in files]
    said = run("info", CYCLES / "two_runs", "--workers", "1")
    assert said.exit_code == 2 and said.stderr == (
        f"perftool: error: {CYCLES / 'two_runs'}: 4 traces of 2 processes in no distributed job (none holds "
        "distributedInfo or runs a collective), not the ranks of a job; give info one trace at a time\n"
    )


def test_processes_named_by_rank_stay_a_job_without_distributed_info(run, tmp_path):
    """A job whose launcher is not torch.distributed (no distributedInfo in its traces) whose workers name their
    traces by rank: the names say it is a job."""
    latest = [sorted(f for f in CYCLES.joinpath("two_runs").iterdir() if f.name.startswith(pid))[-1]
              for pid in sorted({f.name.split(".")[0] for f in CYCLES.joinpath("two_runs").iterdir()})]  # fmt: skip
    for rank, file in enumerate(latest):
        shutil.copy(file, tmp_path / f"rank{rank}.{file.name.split('.')[1]}.pt.trace.json.gz")
    document, result = scan_json(run, tmp_path)
    assert result.exit_code == 0 and [row["rank"] for row in document["job"]["ranks"]] == [0, 1]


def _rank_folders(directory: Path) -> None:
    """A job that gives each rank a log directory of its own (``tensorboard_trace_handler(f"log/rank{rank}")``): the
    real gloo job's traces without their distributedInfo, each named by the handler ({host}_{pid}.{time}), so that
    only their folders say their ranks; and beside them, a hidden folder and a serving engine's capture traces."""
    for number, trace in enumerate(sorted((DATA / "gloo_cpu_job").iterdir())):
        document = json.loads(gzip.decompress(trace.read_bytes()))
        del document["distributedInfo"]
        (directory / f"rank{number}").mkdir(parents=True)
        name = f"trainer_{31000 + 7 * number}.170000000{number}000.pt.trace.json.gz"
        (directory / f"rank{number}" / name).write_bytes(gzip.compress(json.dumps(document).encode()))
    for folder in (".ipynb_checkpoints", "capture_traces"):
        (directory / folder).mkdir()
        (directory / folder / "trainer_31000.1700000000000.pt.trace.json").write_text("{")


def test_a_job_that_gives_each_rank_a_folder_is_read_one_level_down(run, tmp_path):
    """A directory that holds no trace of its own is read one level down: each rank's folder gives its traces, and
    its name (rank0/, rank1/) their rank, not the process id in the files' names. A hidden folder and a serving
    engine's folder of capture traces are not read (their broken files would be reported unread)."""
    _rank_folders(tmp_path / "job")
    document, result = scan_json(run, tmp_path / "job")
    assert result.exit_code == 0 and document["unread"] == []
    assert [row["rank"] for row in document["job"]["ranks"]] == [0, 1] and document["job"]["slowest_rank"] == 1
    _rank_folders(tmp_path / "again")
    compared = run("diff", tmp_path / "job", tmp_path / "again", "--format", "json", "--workers", "1")
    assert compared.exit_code == 0
    assert [d["rank"] for d in json.loads(compared.stdout)["diffs"]] == [0, 1]


def test_a_folder_per_profiled_iteration_is_read_as_captures_of_the_job(run, tmp_path):
    """torchtitan writes each profiled iteration's traces into a folder of its own
    (``iteration_{step}/rank{rank}_trace.json``): the directory above them is the job, its view compares each rank's
    latest capture and names the earlier ones."""
    cycles = sorted((CYCLES / "gloo_job").iterdir(), key=lambda f: int(f.name.split(".")[1]))
    for number, trace in enumerate(cycles):  # the real job's two cycles of its two ranks, in the order captured
        folder = tmp_path / f"iteration_{10 * (1 + number // 2)}"
        folder.mkdir(exist_ok=True)
        rank = 0 if trace.name.startswith("vm_4999") else 1
        (folder / f"rank{rank}_trace.json").write_bytes(gzip.decompress(trace.read_bytes()))
    document, result = scan_json(run, tmp_path)
    assert result.exit_code == 0 and document["unread"] == []
    job = document["job"]
    assert [row["rank"] for row in job["ranks"]] == [0, 1]
    assert sorted(Path(t["path"]).parent.name for t in document["traces"]) == ["iteration_20"] * 2
    assert job["earlier_captures"] == [str(tmp_path / "iteration_10" / f"rank{r}_trace.json") for r in (0, 1)]


def test_a_trace_two_names_lead_to_is_read_once_by_the_one_through_no_link(run, tmp_path):
    """A log directory's ``latest`` linked to its newest run's folder, and a link beside the file it names: the trace
    is read once, by its own name, not once per name (two traces of one process where there is one)."""
    (tmp_path / "run1").mkdir()
    trace = tmp_path / "run1" / "vm_4992.1796045327865899285.pt.trace.json.gz"
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", trace)
    (tmp_path / "latest").symlink_to("run1", target_is_directory=True)
    (tmp_path / "run1" / "0_current.pt.trace.json.gz").symlink_to(trace.name)
    document, result = scan_json(run, tmp_path)
    assert result.exit_code == 0 and [t["path"] for t in document["traces"]] == [str(trace)]


def test_one_level_down_only_files_named_as_traces_are_read(run, tmp_path):
    """A project's directory read one level down: its folders' other JSON (a config, metrics) is no trace to try and
    report unread; the profile's trace, named as profilers name theirs, is read, and so is any file in a folder named
    for its rank (HF Accelerate's profile_0.json)."""
    for folder, name in (("configs", "train.json"), ("results", "metrics.json")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text('{"lr": 0.1, "epochs": 3}')
    (tmp_path / "profile").mkdir()
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", tmp_path / "profile" / "trainer.pt.trace.json.gz")
    document, result = scan_json(run, tmp_path)
    assert result.exit_code == 0 and document["unread"] == []
    assert [t["path"] for t in document["traces"]] == [str(tmp_path / "profile" / "trainer.pt.trace.json.gz")]
    (tmp_path / "rank0").mkdir()
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", tmp_path / "rank0" / "profile_0.json.gz")
    assert job_files([str(tmp_path)]) == [
        str(tmp_path / d) for d in ("profile/trainer.pt.trace.json.gz", "rank0/profile_0.json.gz")
    ]


def test_folders_beside_a_directory_s_own_traces_are_said_to_be_left_unread(run, tmp_path):
    """A directory that holds a trace itself is not read further down: a folder of earlier traces and one a trace
    splitter wrote are named as holding traces of their own, not read, in every format; a torch_npu rank's directory
    beside them is read as one of the directory's traces; a folder of other files, an empty one, a hidden one and a
    serving engine's capture traces are not named. A directory read one level down names none, nor does a jax.profiler
    log directory, read as its run's folder."""
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", tmp_path / "trainer.pt.trace.json.gz")
    for folder in ("earlier", "split_traces", ".ipynb_checkpoints", "capture_traces"):
        (tmp_path / folder).mkdir()
        shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", tmp_path / folder / "iteration_0.pt.trace.json.gz")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "train.json").write_text('{"lr": 0.1}')
    (tmp_path / "empty").mkdir()
    shutil.copytree(REAL_NPU_RANK, tmp_path / "rank1_ascend_pt")
    left = [str(tmp_path / "earlier"), str(tmp_path / "split_traces")]
    listing = job_listing([str(tmp_path)])
    assert listing.folders_left == left and len(listing.files) == 2
    shutil.rmtree(tmp_path / "rank1_ascend_pt")  # the rest read the CPU trace alone
    document, result = scan_json(run, tmp_path)
    assert result.exit_code == 0 and document["folders_not_read"] == left
    text = "".join(run("scan", tmp_path).stdout.split())  # the paths as wide as the terminal is narrow
    assert "note:2folders(" in text and "earlier/," in text and "split_traces/)holdtracesoftheirown,notread" in text
    assert "scaneachonitsown" in text
    for form in ("markdown", "html"):
        assert f"{left[0]}/" in run("scan", tmp_path, "--format", form).stdout
    shutil.rmtree(tmp_path / "earlier")
    assert "split_traces/holdstracesofitsown,notread" in "".join(run("scan", tmp_path).stdout.split())
    (tmp_path / "down" / "rank0").mkdir(parents=True)  # a directory of no trace of its own: read one level down
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", tmp_path / "down" / "rank0" / "trainer.pt.trace.json.gz")
    assert job_listing([str(tmp_path / "split_traces"), str(tmp_path / "down")]).folders_left == []
    (tmp_path / "odd").mkdir()  # a folder holding what perftool would refuse to read (a pipe named as a trace)
    os.mkfifo(tmp_path / "odd" / "rank0.pt.trace.json")
    assert job_listing([str(tmp_path)]).folders_left == [str(tmp_path / d) for d in ("odd", "split_traces")]
    run_folder = tmp_path / "log" / "plugins" / "profile" / "2026_12_03_08_00_00"  # a jax.profiler log directory
    run_folder.mkdir(parents=True)
    shutil.copy(DATA / "real" / "jax08_mi300x_attention_opbyop.xplane.pb", run_folder / "host.xplane.pb")
    assert job_listing([str(tmp_path / "log")]) == ([str(run_folder / "host.xplane.pb")], [])


def test_info_of_a_job_names_the_folders_beside_its_ranks_left_unread(run, tmp_path):
    """``info`` on a job's directory that also holds a folder of an earlier run's traces: the job's ranks are read,
    and the folder is named as not read, in text and in JSON."""
    shutil.copytree(DATA / "gloo_cpu_job", tmp_path / "job")
    shutil.copytree(DATA / "gloo_cpu_job", tmp_path / "job" / "earlier")
    result = run("info", tmp_path / "job")
    assert result.exit_code == 0 and "job of 2 ranks" in result.stdout
    assert "earlier/holdstracesofitsown,notread" in "".join(result.stdout.split())
    document = json.loads(run("info", tmp_path / "job", "--format", "json").stdout)
    assert document["folders_not_read"] == [str(tmp_path / "job" / "earlier")] and len(document["traces"]) == 2


def test_info_of_a_directory_of_one_trace_names_the_folders_beside_it_left_unread(run, tmp_path):
    """``info`` on a directory that holds one trace and a folder of earlier traces: the trace is summarised, and the
    folder named as not read in every format (in JSON, ``folders_not_read``); one without such a folder names none."""
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", tmp_path / "trainer.pt.trace.json.gz")
    (tmp_path / "earlier").mkdir()
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", tmp_path / "earlier" / "trainer.pt.trace.json.gz")
    text = run("info", tmp_path)
    assert text.exit_code == 0 and "earlier/holdstracesofitsown,notread" in "".join(text.stdout.split())
    for form in ("markdown", "html"):
        assert "holds traces of its own, not read" in run("info", tmp_path, "--format", form).stdout
    document = json.loads(run("info", tmp_path, "--format", "json").stdout)
    assert document["folders_not_read"] == [str(tmp_path / "earlier")] and document["schema"] == "perftool.info/1"
    shutil.rmtree(tmp_path / "earlier")
    assert json.loads(run("info", tmp_path, "--format", "json").stdout)["folders_not_read"] == []


def test_a_directory_whose_folders_hold_no_trace_either_is_refused_in_one_line(run, tmp_path):
    """Its folders hold no trace to read: only files left out (a hidden folder's, capture traces, one folder down
    and two) and a report named as a trace, none of which is told of as a trace further down."""
    _rank_folders(tmp_path)
    for rank in (0, 1):
        shutil.rmtree(tmp_path / f"rank{rank}")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "scan.trace.json").write_text('{"schema": "perftool.findings/1", "traces": []}')
    (tmp_path / "served" / "capture_traces").mkdir(parents=True)  # a serving engine's, further down: left out too
    (tmp_path / "served" / "capture_traces" / "bs32.pt.trace.json").write_text('{"traceEvents": []}')
    result = run("scan", tmp_path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"perftool: error: {tmp_path}: a directory with no trace files")
    assert result.stderr.endswith(" in it or in its folders\n")


def test_a_directory_whose_traces_lie_further_down_says_where_to_scan(run, tmp_path):
    """torchtitan's captures three folders below its output directory: the refusal names the first trace it finds
    there and the folder to scan, the one whose folders hold the captures (read one level down)."""
    iteration = tmp_path / "outputs" / "profile_traces" / "iteration_10"
    iteration.mkdir(parents=True)
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", iteration / "rank0_trace.json.gz")
    (tmp_path / "outputs" / "config.json").write_text("{}")  # beside them, no trace: not named as one
    result = run("scan", tmp_path)
    assert result.exit_code == 2 and result.stderr.endswith(
        "; traces lie further down (outputs/profile_traces/iteration_10/rank0_trace.json.gz): "
        f"scan {tmp_path / 'outputs' / 'profile_traces'}\n"
    )
    assert run("scan", tmp_path / "outputs" / "profile_traces", "--workers", "1").exit_code == 0


def test_the_look_further_down_lists_a_bounded_number_of_entries(run, tmp_path, monkeypatch):
    """Pointed at a large tree (a home directory), the look for a trace further down stops after so many entries
    and the refusal says no more than that the directory holds none."""
    from perftool.job import ranks

    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    shutil.copy(DATA / "torch_cpu_train.pt.trace.json.gz", deep / "run.pt.trace.json.gz")
    monkeypatch.setattr(ranks, "_DEEPER_LOOKED_AT", 2)  # the folders a, b and c are three entries
    assert run("scan", tmp_path).stderr.endswith(" in it or in its folders\n")


def test_a_folder_that_cannot_be_listed_is_said_in_one_line(run, tmp_path, monkeypatch):
    """A rank's folder the user may not read (another user's, mode 000) is named in one line, not a traceback nor
    a job read without it."""
    _rank_folders(tmp_path)
    listing = Path.iterdir

    def refused(self: Path):
        if self.name == "rank1":
            raise PermissionError(13, "Permission denied", str(self))
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", refused)
    result = run("scan", tmp_path)
    assert result.exit_code == 2
    assert result.stderr == f"perftool: error: {tmp_path / 'rank1'}: cannot list the directory: Permission denied\n"


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("vm_4992.1796045327865899285.pt.trace.json.gz", 4992),  # tensorboard_trace_handler's {host}_{pid}.{time}
        ("ip-172-31-20-1.ec2.internal_4081.1796045217257616926.pt.trace.json", 4081),  # a host's full name, dots in it
        ("rank2.1796045217257616926.pt.trace.json", 2),  # a worker named by its rank
        ("n122-197-168_1333345_20241105122131111_ascend_pt", 1333345),  # torch_npu's <host>_<pid>_<time>_ascend_pt
        ("worker-3.json", 3),
        ("rank3/vm_4992.1796045327865899285.pt.trace.json.gz", 3),  # a folder of its own, named for the rank
        ("rank3_logs/vm_4992.1796045327865899285.pt.trace.json.gz", 4992),  # a folder whose name is more than that
    ],
)
def test_a_trace_s_name_gives_its_worker_s_number_never_a_time_or_a_host_s(name, rank):
    assert rank_from_name(f"/job/{name}") == rank


@pytest.mark.parametrize(
    ("name", "host"),
    [
        ("vm_4992.1796045327865899285.pt.trace.json.gz", "vm"),  # tensorboard_trace_handler's {host}_{pid}.{time}
        ("ip-172-31-20-1.ec2.internal_4081.1796045217257616926.pt.trace.json", "ip-172-31-20-1.ec2.internal"),
        ("gpu_node_7_4081.1796045217257616926.pt.trace.json", "gpu_node_7"),  # underscores in the host's name
        ("rank3/vm_4992.1796045327865899285.pt.trace.json.gz", "vm"),  # a folder per rank, the handler's name in it
        ("rank_2.1796045217257616926.pt.trace.json", None),  # a worker the job named by its rank
        ("worker-3.json", None),
        ("n122-197-168_1333345_20241105122131111_ascend_pt", "n122-197-168"),  # torch_npu's rank folder
        ("n122-197-168_1333345_20241105122131111_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", "n122-197-168"),
        ("rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", None),
    ],
)
def test_a_trace_s_name_gives_its_host_where_its_profiler_named_it_by_the_host(name, host):
    assert host_from_name(f"/job/{name}") == host


def test_a_view_of_many_earlier_captures_names_four_and_counts_the_rest():
    job = perftool.scan(CYCLES / "gloo_job", workers=1).job
    assert job is not None
    many = job.model_copy(update={"earlier_captures": [f"c{n}.pt.trace.json" for n in range(10)]})
    assert left_out_said(many) == [
        "the view compares each rank's latest capture; 10 earlier captures left out (scan each on its own): "
        "c0.pt.trace.json, c1.pt.trace.json, c2.pt.trace.json, c3.pt.trace.json and 6 more"
    ]
    assert left_out_said(job.model_copy(update={"earlier_captures": []})) == []


def _front_end(directory: Path, kernel: bool = False) -> Path:
    """A serving engine's front end's trace beside its workers', as vLLM's AsyncLLM writes one
    (``{host}_{pid}.async_llm.{time}.pt.trace.json.gz``): its host's Python alone, no ``distributedInfo``; with a
    ``kernel``, device work of its own."""
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}}]
    events += [{"ph": "X", "name": "vllm/v1/engine/async_llm.py(300): generate", "cat": "python_function",
                "pid": 4242, "tid": 4242, "ts": 1000.0 * n, "dur": 800} for n in range(20)]  # fmt: skip
    if kernel:
        events.append({"ph": "X", "name": "gemm_kernel", "cat": "kernel", "pid": 0, "tid": 7, "ts": 500, "dur": 300})
    file = directory / "node7_4242.async_llm.1796045332020000000.pt.trace.json.gz"
    file.write_bytes(gzip.compress(json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()))
    return file


def test_a_serving_front_end_s_trace_beside_the_ranks_is_named_and_left_out_of_the_job_view(tmp_path, run):
    """vLLM writes its front end's host-only trace into the directory of its workers' traces: a process of no rank
    whose device did nothing is no rank of the job (no 'rank 4242' with no device beside the ranks), and the job view
    names it, in every format; a trace of the same name with device work stays a rank."""
    shutil.copytree(CYCLES / "gloo_job", tmp_path / "job")
    front_end = _front_end(tmp_path / "job")
    document, result = scan_json(run, tmp_path / "job")
    assert result.exit_code == 0 and document["unread"] == []
    job = document["job"]
    assert [row["rank"] for row in job["ranks"]] == [0, 1] and not job["unlike"]
    assert job["beside_ranks"] == [str(front_end)] and len(job["earlier_captures"]) == 2
    assert str(front_end) not in [t["path"] for t in document["traces"]]
    said = "1 trace of processes beside the ranks left out (no rank and no device work: a serving engine's front end"
    for fmt in ("text", "markdown", "html"):
        shown = run("scan", tmp_path / "job", "--format", fmt, "--workers", "1", "--fail-on", "never")
        assert said in " ".join(html.unescape(shown.stdout).split()), fmt
    _front_end(tmp_path / "job", kernel=True)  # the same process with device work of its own
    document, _ = scan_json(run, tmp_path / "job")
    assert [row["rank"] for row in document["job"]["ranks"]] == [0, 1, 4242] and document["job"]["beside_ranks"] == []


@pytest.mark.parametrize(("kept", "traces"), [("one_process", 3), ("one_rank", 3), ("a_device_process", 2)])
def test_a_front_end_s_trace_where_there_is_no_job_view_is_reported_like_the_others(tmp_path, kept, traces):
    """Without a distributed rank beside it (processes alone, even one whose device works), or without a job view to
    name it in (one rank captured twice), a host-only process's trace is reported in turn like the others."""
    if kept == "one_process":
        shutil.copytree(CYCLES / "one_process", tmp_path / "job")
    elif kept == "one_rank":
        (tmp_path / "job").mkdir()
        for file in sorted(CYCLES.joinpath("gloo_job").glob("vm_4999.*")):
            shutil.copy(file, tmp_path / "job" / file.name)
    else:  # a process of no distributed job that drives the device
        (tmp_path / "job").mkdir()
        _front_end(tmp_path / "job", kernel=True).rename(
            tmp_path / "job" / "node7_4343.1796045332030000000.pt.trace.json.gz"
        )
    front_end = _front_end(tmp_path / "job")
    report = perftool.scan(tmp_path / "job", workers=1)
    assert report.job is None and len(report.traces) == traces
    assert str(front_end) in [trace.path for trace in report.traces]


def test_library_sorts_a_rank_s_captures_from_a_copy_of_one(tmp_path):
    """A copy of a capture (the same window of the same rank) is still refused as given twice; the captures of
    another cycle are not."""
    first, second = sorted(CYCLES.joinpath("one_process").iterdir())
    for file in (first, second):
        shutil.copy(file, tmp_path / file.name)
    copy = f"{first.name.split('.')[0]}.copy.pt.trace.json.gz"  # the same worker's name
    shutil.copy(first, tmp_path / copy)
    with pytest.warns(perftool.PerftoolWarning, match="not every trace was read: .* is given twice"):
        report = perftool.scan(tmp_path, workers=1)
    assert report.job is None and len(report.traces) == 2
    (repeated,) = report.unread
    assert "is given twice" in repeated.problem and {repeated.path, *(t.path for t in report.traces)} == {
        str(tmp_path / name) for name in (first.name, second.name, copy)
    }


def test_captures_starting_at_one_time_on_their_clock_are_not_a_copy(tmp_path):
    """A profiler whose clock starts with each capture starts every capture at one time: what they hold tells them
    apart (here the second capture is the first less its last step)."""
    first = sorted(CYCLES.joinpath("one_process").iterdir())[0]
    document = json.loads(gzip.decompress(first.read_bytes()))
    last_step = max(e["ts"] for e in document["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("ts", 0) < last_step]
    shutil.copy(first, tmp_path / first.name)
    worker, time = first.name.split(".")[:2]
    (tmp_path / f"{worker}.{int(time) + 1}.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(document).encode()))
    report = perftool.scan(tmp_path, workers=1)
    assert report.job is None and not report.unread and len(report.traces) == 2
    assert report.traces[0].step_starts_us[0] == report.traces[1].step_starts_us[0]  # one start, on one clock


def test_info_says_one_process_s_captures_are_no_job(run):
    result = run("info", CYCLES / "one_process", "--workers", "1")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"perftool: error: {CYCLES / 'one_process'}: 2 captures of one process at different times (a profiler "
        "schedule that repeats), not the ranks of a job; give info one trace at a time\n"
    )


def test_a_job_captured_cycle_after_cycle_compares_each_rank_s_latest_capture(run):
    """Two gloo ranks, each captured twice: the job view compares the later capture of each (the same cycle on both
    ranks, their clocks aligned on its all-reduces) and names the earlier ones it leaves out, in every format."""
    captures: dict[int, list[Path]] = {0: [], 1: []}  # each rank's files, in the order they were written
    for file in sorted(CYCLES.joinpath("gloo_job").iterdir(), key=lambda f: int(f.name.split(".")[1])):
        captures[json.loads(gzip.decompress(file.read_bytes()))["distributedInfo"]["rank"]].append(file)
    document, result = scan_json(run, CYCLES / "gloo_job")
    assert result.exit_code == 0 and document["unread"] == []
    job = document["job"]
    assert [row["rank"] for row in job["ranks"]] == [0, 1] and not job["alignment"]["unaligned"]
    assert [t["path"] for t in document["traces"]] == [str(captures[0][1]), str(captures[1][1])]
    assert all(t["step_numbers"][0] == 8 for t in document["traces"])
    assert job["earlier_captures"] == [str(captures[0][0]), str(captures[1][0])] or job["earlier_captures"] == [
        str(captures[1][0]),
        str(captures[0][0]),
    ]  # in the order they started
    said = "view compares each rank's latest capture; 2 earlier captures left out (scan each on its own)"
    for fmt in ("text", "markdown", "html"):
        shown = run("scan", CYCLES / "gloo_job", "--format", fmt, "--workers", "1", "--fail-on", "never")
        assert said in " ".join(html.unescape(shown.stdout).split()), fmt


def test_a_job_view_says_what_its_ranks_are_and_warns_where_they_differ(tmp_path, run):
    """The job's headline says what its ranks are taken for; a rank taken for another job (a training rank beside a
    serving engine's) is named among what the ranks differ in."""
    straggler = " ".join(run("scan", STRAGGLER, "--workers", "1", "--fail-on", "never").stdout.split())
    assert "traces · device" in straggler and "· training" in straggler.split("Ranks")[0]
    ranks = ("b200_vllm_gptoss_eager_tp8_rank0.json.gz", "mi300_resnet_actckpt_ddp8_rank0.json.gz")
    for rank, name in enumerate(ranks):
        document = json.loads(gzip.decompress((DATA / "real" / name).read_bytes()))
        document["distributedInfo"].update(rank=rank, world_size=2)
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(document))
    job = scan_json(run, tmp_path)[0]["job"]
    assert "job: vLLM serving rank 0, training rank 1" in job["unlike"]


def test_a_job_view_of_one_rank_read_says_there_is_no_clock_to_align(run, tmp_path):
    """The other rank's file does not read: the job view holds one rank, whose clock aligns with nothing (it read
    '1 rank aligned to rank 0 ... clocks differ by up to 0.0 µs, and single readings stray —')."""
    shutil.copy(STRAGGLER / "rank0.trace.json.gz", tmp_path / "rank0.trace.json.gz")
    (tmp_path / "rank1.trace.json").write_text('{"traceEvents": [')
    result = run("scan", str(tmp_path), "--format", "json")
    assert result.exit_code == 2
    job = json.loads(result.stdout)["job"]
    assert [row["rank"] for row in job["ranks"]] == [0]
    assert job["alignment"]["text"] == "only one rank read, so no other clock to align with"


@pytest.mark.parametrize(
    ("offsets", "unaligned", "residual", "said"),
    [
        ({}, [0], None, "only one rank read, so no other clock to align with"),
        ({0: 0.0}, [], None, "only one rank read, so no other clock to align with"),
        ({}, [0, 1], None, "clocks not aligned: no rank traced a collective to align on; times are each rank's own"),
        ({0: 0.0}, [1], None, "; not aligned (too few shared collectives): ranks 1"),
        # two ranks on one host: one clock where their offsets lie within 10 µs, or four times the readings' stray
        ({0: 0.0, 1: 10.0}, [], None, "; ranks on one host, which share its clock, align within 10.0 µs"),
        (
            {0: 0.0, 1: 10.5},
            [],
            None,
            "; ranks on one host lie up to 10.5 µs apart: their traces do not read one clock",
        ),
        ({0: 0.0, 1: 12.0}, [], 3.0, "; ranks on one host, which share its clock, align within 12.0 µs"),
        ({0: 0.0, 1: 12.5}, [], 3.0, "; ranks on one host lie up to 12.5 µs apart: their traces do not read one clock"),
    ],
)
def test_the_clocks_line_says_what_was_aligned(offsets, unaligned, residual, said):
    from perftool.job.align import Alignment
    from perftool.job.view import _alignment

    found = Alignment(0 if offsets else None, offsets, {rank: 4 for rank in offsets}, residual, unaligned)
    assert _alignment(found, dict.fromkeys(offsets, "node-a")).text.endswith(said)
