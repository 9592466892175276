"""Hostile inputs around jobs: outputs aimed into a job's directory, files in it that are not traces, numbers in a
trace that would size a structure, and what a run must never do with them (destroy a file, hang, trace back)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO, complete

STRAGGLER = REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler"
TRACE = REPO / "sample_traces" / "gpu" / "healthy.trace.json.gz"


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


@pytest.fixture
def job(tmp_path) -> Path:
    copy = tmp_path / "job"
    shutil.copytree(STRAGGLER, copy)
    return copy


@pytest.mark.parametrize(
    "command",
    [
        ["scan", "{job}", "-o", "{job}/rank3.trace.json.gz"],
        ["scan", "{job}", "--format", "json", "-o", "{job}/report.json"],
        ["info", "{job}", "-o", "{job}/rank0.trace.json.gz"],
        ["gate", "{job}", "{job}", "-o", "{job}/gate.json"],
        ["diff", "{job}", "{job}", "-o", "{job}/../job/diff.txt"],
    ],
    ids=["scan-rank", "scan-report", "info", "gate", "diff-other-spelling"],
)
def test_an_output_inside_an_input_directory_is_refused_before_any_work(run, job, command):
    before = digest(job)
    result = run(*(part.format(job=job) for part in command), "--workers", "1")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "is inside" in line and str(job) in line
    assert digest(job) == before  # nothing written, nothing replaced


def test_reports_left_in_a_job_directory_are_not_taken_for_ranks(run, job, tmp_path):
    """perftool's own JSON reports, SARIF, an HTML page named *.json, PyTorch's memory timelines and TraceLens's
    record of split windows sit beside the ranks: the scan reads the eight ranks and nothing else."""
    for fmt, name in [("json", "report.json"), ("sarif", "report.sarif.json")]:
        assert run("scan", job, "--format", fmt, "-o", tmp_path / name, "--workers", "1").exit_code in (0, 1)
        shutil.copy(tmp_path / name, job / name)
    (job / "page.json").write_text("<!doctype html><title>report</title>")
    # torch.profiler's export_memory_timeline (torch 2.14, as written): times, then sizes per category
    (job / "memory.json").write_text("[[1796047838145560, 1796047838145688], [[32768, 0, 0], [40960, 256, 0]]]")
    (job / "memory.raw.json.gz").write_bytes(gzip.compress(b"[[-1, 1, 32768, 0], [1796047838145560009, 2, 8192, 2]]"))
    (job / "info.json.gz").write_bytes(gzip.compress(run("info", TRACE, "--format", "json").stdout.encode()))
    # TraceLens's record of the windows it split a trace into (each one's file and iteration)
    (job / "execution_details.json").write_text(json.dumps([{"file": "rank0.trace.json.gz", "iteration": 0}], indent=2))
    result = run("scan", job, "--format", "json", "--workers", "1", "--fail-on", "never")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert sorted(t["rank"] for t in document["traces"]) == list(range(8)) and document["unread"] == []


def test_a_damaged_rank_is_still_reported_not_skipped(run, job):
    """Only what a file holds that is plainly not a trace makes it skipped: a rank cut short is an error."""
    (job / "rank2.trace.json.gz").write_bytes(b"")
    result = run("scan", job, "--workers", "1")
    assert result.exit_code == 2 and "rank2.trace.json.gz" in result.stderr


@pytest.mark.parametrize("kind", ["pipe", "broken link"])
def test_a_rank_that_is_no_file_is_named_before_anything_is_read(run, job, kind):
    """A pipe named like a rank was left out without a word (and reading it would wait for a writer for ever)."""
    odd = job / "rank8.trace.json"
    if kind == "pipe":
        os.mkfifo(odd)
    else:
        odd.symlink_to(job / "gone.json")
    result = run("scan", job, "--workers", "1")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"perftool: error: {odd}: not a file perftool can read")


def test_a_world_size_of_two_billion_costs_nothing(run, tmp_path):
    """Two 1 KB files claiming a world of 2,000,000,000 ranks: the missing ranks are listed without building the
    world in memory."""
    for rank in (0, 1):
        events = [complete(f"ProfilerStep#{step}", step * 1000, 900, cat="user_annotation") for step in range(4)]
        events += [complete("kernel", step * 1000 + 10, 800, pid=0, tid=7, cat="kernel") for step in range(4)]
        document = {"distributedInfo": {"rank": rank, "world_size": 2_000_000_000}, "traceEvents": events}
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(document))
    result = run("scan", tmp_path, "--format", "json", "--workers", "1", "--fail-on", "never")
    assert result.exit_code == 0, result.stderr
    job = json.loads(result.stdout)["job"]
    assert job["world_size"] == 2_000_000_000 and job["missing_ranks"][:3] == [2, 3, 4]


def test_standard_input_is_scanned_only_on_its_own(run, job):
    """A job's ranks are read where they are analysed: standard input there would be read by no one."""
    result = run("scan", "-", job, "--workers", "1", input=gzip.decompress(TRACE.read_bytes()))
    assert result.exit_code == 2 and "- (standard input) is scanned only on its own" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_job_of_unlike_ranks_says_how_they_differ(run, job):
    """Three GPU ranks and an NPU trace as rank 3: the view says the ranks differ, in device and family, and
    which ranks are which."""
    shutil.copy(REPO / "sample_traces" / "npu" / "healthy.trace.json.gz", job / "rank3.trace.json.gz")
    document = json.loads(run("scan", job, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    unlike = document["job"]["unlike"]
    assert [line.split(":")[0] for line in unlike] == ["device", "device family"]
    assert unlike[1] == "device family: gpu ranks 0-2, 4-7, npu rank 3"
    text = run("scan", job, "--workers", "1", "--fail-on", "never").stdout
    assert "warning: the ranks differ in device family" in " ".join(text.split())


def test_ranks_on_devices_of_one_kind_are_alike(run, job):
    rank1 = job / "rank1.trace.json.gz"
    rank1.write_bytes(gzip.compress(gzip.decompress(rank1.read_bytes()).replace(b'"GPU 0', b'"GPU 1')))
    document = json.loads(run("scan", job, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    assert {t["device"].split(" (")[0] for t in document["traces"]} == {"GPU 0", "GPU 1"}
    assert document["job"]["unlike"] == []


def test_a_rank_file_left_unreadable_is_named_and_fails_the_job(run, job):
    """A rank file a crashed writer left NUL-filled (or any bytes no text holds) was skipped as 'not a trace': the
    straggler vanished and the scan exited 0. It is a rank that could not be read: named, exit 2 (hardening round
    4, D05); an HTML page named *.json is still not taken for a rank."""
    (job / "rank5.trace.json.gz").write_bytes(b"\0" * 100_000)
    (job / "page.json").write_text("<!doctype html><title>report</title>")
    # torch.profiler's export_memory_timeline (torch 2.14, as written): times, then sizes per category
    (job / "memory.json").write_text("[[1796047838145560, 1796047838145688], [[32768, 0, 0], [40960, 256, 0]]]")
    (job / "memory.raw.json.gz").write_bytes(gzip.compress(b"[[-1, 1, 32768, 0], [1796047838145560009, 2, 8192, 2]]"))
    result = run("scan", job, "--workers", "1", "--format", "json", "--fail-on", "never")
    assert result.exit_code == 2
    unread = json.loads(result.stdout)["unread"]
    assert [(Path(u["path"]).name, u["rank"]) for u in unread] == [("rank5.trace.json.gz", 5)]


def test_ranks_of_different_world_sizes_are_said_to_differ(run, job):
    """Rank files of two runs (world sizes 8 and 4) in one directory were merged as one job without a word."""
    rank7 = job / "rank7.trace.json.gz"
    rank7.write_bytes(gzip.compress(gzip.decompress(rank7.read_bytes()).replace(b'"world_size":8', b'"world_size":4')))
    document = json.loads(run("scan", job, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    assert document["job"]["unlike"] == ["world size: 8 ranks 0-6, 4 rank 7"]


def test_emulate_never_leaves_another_run_s_ranks_beside_its_own(run, tmp_path):
    """Four replicas written where an eight-replica run left its ranks: ranks 4-7 of the old run stayed and a later
    scan read one job of two runs (hardening round 4, D07). A directory holding another run's traces is refused
    before the run, the directory left as it was; rewriting a run of the same ranks replaces them."""
    config, ranks = STRAGGLER / "job.yaml", tmp_path / "ranks"
    assert run("emulate", config, "--trace", ranks, "--set", "workload.steps=8").exit_code == 0
    before = digest(ranks)
    assert sorted(before) == [f"rank{i}.trace.json.gz" for i in range(8)]
    smaller = run("emulate", config, "--trace", ranks, "--set", "workload.steps=8", "--set", "replicas.count=4",
                  "--set", "replicas.slow_ranks=[]")  # fmt: skip
    assert smaller.exit_code == 2
    assert smaller.stderr == (
        f"perftool: error: {ranks}: holds traces of another run (rank4.trace.json.gz, rank5.trace.json.gz, "
        "rank6.trace.json.gz and 1 more) that a scan would take for ranks of this job: give an empty or new "
        "directory\n"
    )
    assert digest(ranks) == before
    again = run("emulate", config, "--trace", ranks, "--set", "workload.steps=12")
    assert again.exit_code == 0 and sorted(digest(ranks)) == sorted(before) and digest(ranks) != before


REAL = REPO / "tests" / "data" / "real"


def _directory_of(tmp_path: Path, *names: str) -> Path:
    """A directory holding copies of the real captures ``names``, as a user gathers traces of several runs."""
    directory = tmp_path / "traces"
    directory.mkdir()
    for name in names:
        shutil.copy(REAL / name, directory / name)
    return directory


def test_traces_of_different_devices_in_one_directory_are_scanned_each_on_its_own(run, tmp_path):
    """An MI250's capture and an A100's in one folder were 'a job of 2 ranks' (rank 250 the number in a name): a
    job's ranks run on one model of device, so they are two traces, each scanned alone with the rank it states (the
    A100's distributedInfo says 0, the other says none), and the report says why."""
    directory = _directory_of(tmp_path, "alexnet_benchmark_startup.json.gz", "rocm_mi250_minitoy.json.gz")
    result = run("scan", directory, "--workers", "1", "--format", "json", "--fail-on", "never")
    document = json.loads(result.stdout)
    assert document["job"] is None
    assert [(Path(t["path"]).name, t["rank"]) for t in document["traces"]] == [
        ("alexnet_benchmark_startup.json.gz", 0),
        ("rocm_mi250_minitoy.json.gz", None),
    ]
    devices = ", ".join(sorted(t["device"] for t in document["traces"]))
    assert document["different_jobs"] == f"they differ in device: {devices}"
    text = " ".join(run("scan", directory, "--workers", "1", "--fail-on", "never").stdout.split())
    assert f"note: 2 traces of different jobs (they differ in device: {devices}): each is scanned on its own, not " \
        "as the ranks of one job" in text  # fmt: skip
    assert "job of 2 ranks" not in text
    markdown = run("scan", directory, "--workers", "1", "--fail-on", "never", "--format", "markdown").stdout
    assert "> 2 traces of different jobs (they differ in device: " in markdown
    page = tmp_path / "scan.html"
    run("scan", directory, "--workers", "1", "--fail-on", "never", "--format", "html", "-o", page)
    assert "<p>2 traces of different jobs (they differ in device: " in page.read_text()
    info = run("info", directory, "--workers", "1")
    assert info.exit_code == 2
    assert f"2 traces of different jobs (they differ in device: {devices}), not the ranks of one job" in info.stderr


def test_traces_of_different_profilers_and_runs_are_no_job_and_keep_the_ranks_they_state(run, tmp_path):
    """A JAX capture, a rank of a 2-GPU NCCL run and one of a 300-rank gloo run (their distributedInfo say ranks 0
    and 34): traces of three profilers and runs, said apart, each with the rank it states; the host-only rank's
    'device' is none to compare, nor the JAX export's '/device:GPU:0', which says where its work ran, not on what."""
    names = ("cpu_only_gloo.json.gz", "jax08_mi300x_attention_opbyop.trace.json.gz", "nccl_a100_rank.json.gz")
    directory = _directory_of(tmp_path, *names)
    document = json.loads(run("scan", directory, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    assert document["job"] is None
    assert sorted(t["device"] for t in document["traces"]) == [
        "/device:GPU:0",
        "NVIDIA A100-PG509-200",
        "none (host only)",
    ]
    assert document["different_jobs"] == "they differ in trace format: kineto, xla; and in world size: 2, 300"
    assert {Path(t["path"]).name: t["rank"] for t in document["traces"]} == dict(zip(names, (34, None, 0)))


def test_ranks_that_say_they_are_ranks_stay_one_job_whatever_their_devices(run, job):
    """Every trace names its rank: the job the user gathered is kept, its view warning of the devices."""
    shutil.copy(REAL / "rocm_mi250_minitoy.json.gz", job / "rank3.trace.json.gz")
    document = json.loads(run("scan", job, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    assert document["different_jobs"] is None and len(document["job"]["ranks"]) == 8
    assert document["job"]["unlike"][0].startswith("device: ")


def test_another_job_s_trace_among_a_job_s_ranks_is_left_out_of_its_view(run, job):
    """An MI250 capture that says no rank, left among eight A100 ranks that do: the job is the ranks', the capture
    is named as another job's and left out (it had taken the place of a rank by its position in the folder)."""
    stray = job / "profile.trace.json.gz"
    shutil.copy(REAL / "rocm_mi250_minitoy.json.gz", stray)
    document = json.loads(run("scan", job, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    assert [row["rank"] for row in document["job"]["ranks"]] == list(range(8))
    assert document["job"]["other_jobs"] == [str(stray)] and document["job"]["unlike"] == []
    assert [Path(trace["path"]).name for trace in document["traces"]] == [f"rank{r}.trace.json.gz" for r in range(8)]
    shown = run("scan", job, "--workers", "1", "--fail-on", "never").stdout
    assert "note: 1 trace of another job left out (no rank said, and a trace format, world size or device the ranks " \
        "do not share; scan each on its own): " in " ".join(shown.split())  # fmt: skip
    assert str(stray) in shown.replace("\n", "")  # a long path may be cut anywhere to fit the terminal's width


def test_a_folder_of_one_job_s_captures_before_and_after_a_change_is_no_job(run, tmp_path):
    """Two single-GPU captures, before and after a change, gathered in one folder were 'a job of 2 ranks' (ranks by
    their place in it): neither names a rank, holds distributedInfo or runs a collective, so each is scanned on its
    own and info says why it will not take them together."""
    folder = tmp_path / "captures"
    folder.mkdir()
    shutil.copy(REPO / "sample_traces" / "gpu" / "healthy.trace.json.gz", folder / "before.trace.json.gz")
    shutil.copy(REPO / "sample_traces" / "gpu" / "sync_every_step.trace.json.gz", folder / "after.trace.json.gz")
    document = json.loads(run("scan", folder, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    assert document["job"] is None and len(document["traces"]) == 2
    info = run("info", folder, "--workers", "1")
    assert info.exit_code == 2
    assert (
        "2 traces of no distributed job (none names a rank, holds distributedInfo or runs a collective)" in info.stderr
    )


def test_ranks_that_run_collectives_are_a_job_though_nothing_names_their_ranks(run, job, tmp_path):
    """Two ranks of a DDP run, their distributedInfo gone and their names saying no rank: their all-reduces show a
    distributed job, so the folder is one, its ranks by their place in it."""
    folder = tmp_path / "nodes"
    folder.mkdir()
    for rank, name in ((0, "node_a"), (1, "node_b")):
        trace = json.loads(gzip.decompress((job / f"rank{rank}.trace.json.gz").read_bytes()))
        del trace["distributedInfo"]
        (folder / f"{name}.trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
    document = json.loads(run("scan", folder, "--workers", "1", "--format", "json", "--fail-on", "never").stdout)
    assert [row["rank"] for row in document["job"]["ranks"]] == [0, 1]
