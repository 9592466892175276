"""Ranks and tune sweeps on a real Dask cluster: a ``LocalCluster`` of worker processes on this machine, reached by
its scheduler's address as a user reaches a cluster of many machines."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import distributed
import pytest
from conftest import REPO
from distributed import LocalCluster

import perftool
from perftool.common.errors import PerftoolError
from perftool.job import cluster

STRAGGLER = REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler"


@pytest.fixture(scope="module")
def scheduler():
    """The address of a local cluster of two single-threaded worker processes."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
    ) as cluster:
        yield cluster.scheduler_address


@pytest.mark.slow
def test_a_job_on_a_cluster_equals_the_job_analysed_here(run, scheduler):
    here = run("scan", STRAGGLER, "--format", "json", "--workers", "1", "--fail-on", "never")
    there = run("scan", STRAGGLER, "--format", "json", "--scheduler", scheduler, "--fail-on", "never")
    assert there.exit_code == 0, there.output
    assert json.loads(there.stdout) == json.loads(here.stdout)


@pytest.mark.slow
def test_one_trace_is_decoded_by_the_cluster_s_workers_with_the_same_result(run, scheduler, tmp_path, monkeypatch):
    """scan and info of one uncompressed trace with --scheduler: the workers decode its byte ranges (about 25 here)
    and send back their columns; every figure is the one decoded here. A bad event in a range is still named."""
    from distributed import Client, get_task_stream

    from perftool.trace import decode

    trace = tmp_path / "kineto.json"
    trace.write_bytes(gzip.decompress((REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz").read_bytes()))
    monkeypatch.setattr(decode, "PIECE_BYTES", 256 << 10)  # the ranges are cut here, so this cuts many
    ranges = -(-trace.stat().st_size // (256 << 10))
    with Client(scheduler) as watcher, get_task_stream(watcher) as stream:
        there = run("info", trace, "--format", "json", "--scheduler", scheduler)
    decoded = [task for task in stream.data if "part_of_range" in str(task["key"])]
    assert ranges - 1 <= len(decoded) <= ranges + 1
    here = run("info", trace, "--format", "json")
    assert there.exit_code == 0 and json.loads(there.stdout) == json.loads(here.stdout)
    scanned = run("scan", trace, "--format", "json", "--scheduler", scheduler, "--fail-on", "never")
    assert json.loads(scanned.stdout)["traces"] == json.loads(run("scan", trace, "--format", "json", "--fail-on",
                                                                  "never").stdout)["traces"]  # fmt: skip
    text = trace.read_text()
    at = text.index('"ph": "X"', len(text) // 2)
    trace.write_text(text[:at] + '"ph": 7' + text[at + len('"ph": "X"') :])
    broken = run("info", trace, "--scheduler", scheduler)
    assert broken.exit_code == 2 and str(trace) in broken.stderr and "event" in broken.stderr
    assert len(broken.stderr.strip().splitlines()) == 1


NPU_JOB = REPO / "sample_traces" / "jobs" / "npu_exposed_allreduce"


@pytest.mark.slow
def test_relative_paths_name_the_files_here_not_files_of_that_name_where_the_workers_run(run, tmp_path, monkeypatch):
    """The workers run in a directory whose jobX/ holds the NPU job; here, jobX/ holds the GPU job. The report was
    about the workers' files without a word (hardening round 4, D01): paths leave this process absolute, and every
    figure is the GPU job's, for a job of ranks and for one trace decoded on the cluster."""
    there, here = tmp_path / "there", tmp_path / "here"
    shutil.copytree(NPU_JOB, there / "jobX")
    shutil.copytree(STRAGGLER, here / "jobX")
    single = gzip.decompress((REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz").read_bytes())
    (here / "one.json").write_bytes(single)
    (there / "one.json").write_bytes(gzip.decompress((NPU_JOB / "rank0.trace.json.gz").read_bytes()))
    monkeypatch.chdir(there)
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=50) as workers_there:
        monkeypatch.chdir(here)
        job = run("scan", "jobX", "--format", "json", "--scheduler", workers_there.scheduler_address, "--fail-on",
                  "never")  # fmt: skip
        one = run("info", "one.json", "--format", "json", "--scheduler", workers_there.scheduler_address)
    assert job.exit_code == 0, job.stderr
    expected = run("scan", "jobX", "--format", "json", "--workers", "1", "--fail-on", "never")
    assert json.loads(job.stdout) == json.loads(expected.stdout)
    assert {trace["family"] for trace in json.loads(job.stdout)["traces"]} == {"gpu"}
    assert one.exit_code == 0, one.stderr
    assert json.loads(one.stdout) == json.loads(run("info", "one.json", "--format", "json").stdout)


def test_a_worker_that_sees_another_file_at_the_path_says_so(tmp_path):
    """Where a worker's file at the same path is not the one seen here (another machine's copy, changed since),
    reading it is an error naming the file as given, not a report on other data."""
    from perftool.common.errors import TraceError
    from perftool.trace.seen import seen

    trace = tmp_path / "rank0.json"
    trace.write_bytes(b'{"traceEvents": []}')
    file = seen(str(trace))
    file.check()  # the same file: nothing to say
    trace.write_bytes(b'{"traceEvents": [{"ph": "X"}]}')
    with pytest.raises(TraceError, match=r"another file is at .*\(30 bytes, not 19, or other contents\)"):
        file.check()
    trace.unlink()
    with pytest.raises(TraceError, match="not found at .* where it is read"):
        file.check()


@pytest.mark.slow
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


@pytest.mark.slow
def test_tune_sweeps_on_the_cluster(scheduler):
    config = REPO / "examples" / "tune" / "npu.yaml"
    there = perftool.tune(config, scheduler=scheduler)
    here = perftool.tune(config)
    assert there.best_config() == here.best_config()
    assert there.evaluations == here.evaluations


@pytest.mark.slow
def test_an_unreachable_scheduler_is_one_line(run):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run("scan", STRAGGLER, "--scheduler", f"tcp://127.0.0.1:{port}")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"perftool: error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port}")


@pytest.fixture
def short_waits(monkeypatch):
    """The cluster's deadlines cut to a second, so a test of what ends them takes seconds."""
    monkeypatch.setattr(cluster, "HANDSHAKE_S", 2.0)
    monkeypatch.setattr(cluster, "WORKERS_WAIT_S", 1.0)


@pytest.mark.slow
def test_a_listener_that_is_not_dask_ends_in_one_line_not_a_hang(run, short_waits):
    """A server that accepts the connection and never answers (as a web server does to Dask's handshake)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        started = time.monotonic()
        result = run("scan", STRAGGLER, "--scheduler", f"tcp://127.0.0.1:{port}")
    assert time.monotonic() - started < 30
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "no answer as a Dask scheduler" in line


@pytest.mark.parametrize("greeting", [b"HTTP/1.1 400 Bad Request\r\n\r\n", (3 << 30).to_bytes(8, "little") + b"x"])
def test_a_listener_that_answers_but_not_as_dask_is_named_before_any_allocation(run, greeting):
    """A server that answers with its own bytes ('HTTP/1.1', or a length of 3 GB): Dask's client read them as a
    frame's length and tried to allocate it ('Unable to allocate 3.01 EiB'); perftool checks the greeting first
    and says the listener is no Dask scheduler (hardening round 4, D26)."""
    import threading

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def answer() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.sendall(greeting)
                time.sleep(1)

        threading.Thread(target=answer, daemon=True).start()
        result = run("scan", STRAGGLER, "--scheduler", f"tcp://127.0.0.1:{port}")
    assert result.exit_code == 2
    assert result.stderr == (
        f"perftool: error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port}: the listener there is no Dask "
        f"scheduler (it begins {greeting[:8]!r})\n"
    )


def test_a_local_cluster_leaves_no_scratch_space_behind(run, tmp_path, monkeypatch):
    """Every job on local workers left TMPDIR/dask-scratch-space and its lock files (hardening round 4, D25): the
    workers' scratch space is perftool's own and is removed."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    result = run("scan", STRAGGLER, "--workers", "2", "--fail-on", "never")
    assert result.exit_code == 0, result.stderr
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
def test_a_scheduler_without_workers_ends_in_one_line_not_a_hang(run, short_waits):
    with LocalCluster(n_workers=0, protocol="tcp", dashboard_address=":0", silence_logs=50) as empty:
        result = run("scan", STRAGGLER, "--scheduler", empty.scheduler_address)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "has no workers" in line


@pytest.mark.parametrize(
    "address", ["localhost", "garbage", "tls://host:8786", "ucx://host:8786", "tcp://[::1", "tcp://host:99999"]
)
@pytest.mark.parametrize("source", ["option", "environment", "project"])
def test_a_malformed_address_is_bad_input_from_wherever_it_comes(run, tmp_path, monkeypatch, address, source):
    arguments = ["scan", str(STRAGGLER)]
    if source == "option":
        arguments += ["--scheduler", address]
    elif source == "environment":
        monkeypatch.setenv("PERFTOOL_SCHEDULER", address)
    else:
        (tmp_path / "perftool.yaml").write_text(f"scheduler: '{address}'\n")
        arguments += ["--config", str(tmp_path / "perftool.yaml")]
    result = run(*arguments)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("perftool: error: ") and repr(address) in line


def test_a_task_that_fails_on_the_cluster_is_one_error(scheduler):
    """What a worker raises (here: a worker without what the task needs) comes back as perftool's error."""
    with pytest.raises(PerftoolError, match=r"a task failed on the Dask scheduler at .*: ModuleNotFoundError"):
        cluster.map_tasks(importlib.import_module, [("perftool_plugin_nobody_installed",)], scheduler=scheduler)


@pytest.mark.parametrize("workers", [-1, 0.5, "2"])
def test_a_worker_count_that_is_not_one_is_refused_by_the_api(workers):
    with pytest.raises(PerftoolError, match="workers"):
        perftool.scan(STRAGGLER, workers=workers)


def test_workers_are_capped_at_the_ranks_and_the_cpus():
    assert cluster.local_workers(64, 8) == min(8, os.cpu_count() or 1)
    assert cluster.local_workers(None, 3) == min(3, os.cpu_count() or 1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_a_scheduler_killed_mid_run_is_one_line_not_a_traceback(tmp_path):
    """A scheduler and a worker of their own (``dask scheduler``, ``dask worker``); the scheduler is killed while a
    64-rank scan runs on it: exit 2, one line, nothing of Dask's logs, within a bounded time."""
    job = tmp_path / "job"
    job.mkdir()
    for rank in range(64):
        shutil.copy(STRAGGLER / f"rank{rank % 8}.trace.json.gz", job / f"rank{rank}.trace.json.gz")
    address = f"tcp://127.0.0.1:{free_port()}"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    scheduler = subprocess.Popen([*dask, "--port", address.rsplit(":", 1)[1], "--dashboard-address", ":0"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        with distributed.Client(address, timeout=30) as probe:
            probe.wait_for_workers(1, timeout=30)
            scan = subprocess.Popen([sys.executable, "-m", "perftool", "scan", str(job), "--scheduler", address],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
            deadline = time.monotonic() + 60
            while not probe.processing().get(next(iter(probe.scheduler_info()["workers"]))) and scan.poll() is None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        scheduler.kill()
        _, stderr = scan.communicate(timeout=120)
    finally:
        for process in (scheduler, worker):
            process.kill()
            process.wait()
    assert scan.returncode == 2, stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"perftool: error: a task failed on the Dask scheduler at {address}")


def test_a_small_job_runs_here_and_a_large_one_on_local_workers(monkeypatch):
    """By default a job too small for a local cluster's start-up to pay off never starts one; one large enough does,
    and so does any job given more than one worker outright."""
    started = []

    @contextmanager
    def no_cluster(scheduler, workers):
        started.append(workers)
        raise PerftoolError("a cluster was started")
        yield

    monkeypatch.setattr(cluster, "dask_client", no_cluster)
    report = perftool.scan(STRAGGLER)
    assert report.job is not None and report.job.slowest_rank == 5 and not started
    with pytest.raises(PerftoolError, match="a cluster was started"):
        perftool.scan(STRAGGLER, workers=2)
    monkeypatch.setattr(cluster, "SCANNED_BYTES_PER_S", 1e3)  # as if each byte took a millisecond
    with pytest.raises(PerftoolError, match="a cluster was started"):
        perftool.scan(STRAGGLER)
    assert started == [2, min(os.cpu_count() or 1, 8)]


def test_a_cluster_pays_off_once_the_work_outlasts_its_start_on_the_other_workers():
    rate, start = cluster.SCANNED_BYTES_PER_S, cluster.CLUSTER_START_S
    assert not cluster.cluster_pays_off(int(rate * start * 1.9), 2)  # 1.9 s here: 0.95 s saved, 1 s to start
    assert cluster.cluster_pays_off(int(rate * start * 2.1), 2)
    assert not cluster.cluster_pays_off(10**12, 1)
