"""Ranks and tune sweeps on a real Dask cluster: a ``LocalCluster`` of worker processes on this machine, reached by
its scheduler's address as a user reaches a cluster of many machines."""

from __future__ import annotations

import gzip
import json
import shutil
import socket
from pathlib import Path

import pytest
from distributed import LocalCluster

import perftool

REPO = Path(__file__).parent.parent
STRAGGLER = REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler"


@pytest.fixture(scope="module")
def scheduler():
    """The address of a local cluster of two single-threaded worker processes."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
    ) as cluster:
        yield cluster.scheduler_address


def test_a_job_on_a_cluster_equals_the_job_analysed_here(run, scheduler):
    here = run("scan", STRAGGLER, "--format", "json", "--workers", "1", "--fail-on", "never")
    there = run("scan", STRAGGLER, "--format", "json", "--scheduler", scheduler, "--fail-on", "never")
    assert there.exit_code == 0, there.output
    assert json.loads(there.stdout) == json.loads(here.stdout)


def test_local_workers_by_default():
    """No scheduler: the library starts its own local worker processes (two here) and stops them after."""
    report = perftool.scan(STRAGGLER, workers=2)
    assert report.job is not None and report.job.slowest_rank == 5
    assert [trace.rank for trace in report.traces] == list(range(8))


def test_a_bad_rank_on_the_cluster_is_reported_and_the_rest_kept(run, scheduler, tmp_path):
    job = tmp_path / "job"
    shutil.copytree(STRAGGLER, job)
    (job / "rank6.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1'))
    result = run("scan", job, "--format", "json", "--scheduler", scheduler)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"{job / 'rank6.trace.json.gz'}: " in line
    assert [t["rank"] for t in json.loads(result.stdout)["traces"]] == [0, 1, 2, 3, 4, 5, 7]


def test_gate_on_the_cluster(run, scheduler):
    result = run("gate", STRAGGLER, STRAGGLER, "--scheduler", scheduler)
    assert result.exit_code == 0, result.output
    assert "rank 7:" in result.stdout


def test_tune_sweeps_on_the_cluster(scheduler):
    config = REPO / "examples" / "tune" / "npu.yaml"
    there = perftool.tune(config, scheduler=scheduler)
    here = perftool.tune(config)
    assert there.best_config() == here.best_config()
    assert there.evaluations == here.evaluations


def test_an_unreachable_scheduler_is_one_line(run):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run("scan", STRAGGLER, "--scheduler", f"tcp://127.0.0.1:{port}")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"perftool: error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port}")
