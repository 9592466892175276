"""Hostile inputs and limits: bombs are refused with bounded memory and time, YAML never runs code,
templates reach only their own values, outputs are all-or-nothing, Ctrl-C exits 130 leaving no files."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib

import pytest
import yaml
from conftest import (
    DATA,
    REPO,
    child_pids,
    complete,
    ctrl_c_as_at_a_terminal,
    error_line,
    kernel_steps,
    leaving,
    spy_on_disk,
)

from perftool.common import interrupts, limits
from perftool.common.output import write_bytes
from perftool.trace import decode, loader
from perftool.trace.store import ARRAYS_IN_FILES as IN_FILES

SAMPLE = REPO / "sample_traces" / "npu" / "healthy.trace.json.gz"
NPU_CONFIG = REPO / "sample_traces" / "npu" / "healthy.yaml"


def gzip_of_spaces(path, megabytes: int) -> None:
    """A gzip bomb: a valid trace opening, then megabytes of blanks (about 1,000:1 compressed)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    blanks = b" " * (1 << 20)
    parts = [packer.compress(b'{"traceEvents":[')]
    parts += [packer.compress(blanks) for _ in range(megabytes)]
    parts += [packer.compress(b"]}"), packer.flush()]
    path.write_bytes(b"".join(parts))


def peak_rss_mb_of(code: str) -> tuple[str, float]:
    """Run ``code`` in a fresh interpreter; what it printed and its peak resident memory in MB (VmHWM, which
    starts afresh at exec, where ``ru_maxrss`` may keep the peak of the test process that forked it)."""
    peak = "next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM')) / 1024"
    program = f"{code}\nprint({peak})"
    lines = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
    *printed, peak_mb = lines.strip().splitlines()
    return "\n".join(printed), float(peak_mb)


# --- traces ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_gzip_bomb_is_refused_quickly_in_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    gzip_of_spaces(bomb, 1024)  # 1 GiB of JSON in about 1 MB
    assert bomb.stat().st_size < 2 << 20
    started = time.perf_counter()
    printed, peak_mb = peak_rss_mb_of(
        "from perftool.pipeline.read import load_trace\nfrom perftool.common.errors import TraceError\n"
        f"try:\n    load_trace({str(bomb)!r})\nexcept TraceError as exc:\n    print(exc)"
    )
    assert "gzip bomb" in printed and str(bomb) in printed
    assert time.perf_counter() - started < 20
    assert peak_mb < 400  # the interpreter and numpy take ~60 MB; decompression holds a few 8 MB chunks


REAL = DATA / "real"


@pytest.mark.parametrize(
    "trace",
    [REAL / "jax08_mi300x_attention_opbyop.xplane.pb",
     REAL / "torch_npu_db_l2_job" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"],
    ids=["XSpace", "torch_npu db export"],
)  # fmt: skip
def test_the_trace_size_limit_holds_a_protobuf_or_a_database_to_its_bytes(run, trace):
    """No JSON to count: the file's own bytes are held to the limit, said in the limit's unit."""
    line = error_line(run("info", trace, "--max-trace-size", "100KiB"), str(trace), "--max-trace-size")
    size = limits.size_text_as(trace.stat().st_size, 100 << 10)
    assert size.endswith(" KiB") and f"is larger ({size}) than the trace-size limit of 100 KiB" in line
    assert run("info", trace, "--max-trace-size", "1MiB").exit_code == 0


def test_the_trace_size_limit_names_itself_and_the_option_that_lifts_it(run, tmp_path, monkeypatch):
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(SAMPLE.read_bytes()))
    for path in (plain, SAMPLE):
        line = error_line(
            run("scan", path, "--max-trace-size", "100kB"), str(path), "limit of 100 kB", "--max-trace-size"
        )
        assert "PERFTOOL_MAX_TRACE_SIZE" in line
        assert run("scan", path, "--max-trace-size", "1GiB").exit_code == 0
    monkeypatch.setenv("PERFTOOL_MAX_TRACE_SIZE", "100kB")
    error_line(run("info", SAMPLE), "trace-size limit of 100 kB")
    error_line(run("gate", SAMPLE, SAMPLE), "trace-size limit")
    assert run("info", SAMPLE, "--max-trace-size", "10MB").exit_code == 0  # the option wins over the variable
    monkeypatch.setenv("PERFTOOL_MAX_TRACE_SIZE", "lots")
    error_line(run("info", SAMPLE), "PERFTOOL_MAX_TRACE_SIZE: not a size (got 'lots')")
    error_line(run("info", SAMPLE, "--max-trace-size", "0"), "--max-trace-size: must be more than 0 bytes")


def test_by_default_no_size_limit_and_a_trace_past_the_memory_available_keeps_its_columns_on_disk(run, monkeypatch):
    monkeypatch.delenv("PERFTOOL_MAX_TRACE_SIZE", raising=False)
    monkeypatch.delenv("PERFTOOL_MEMORY", raising=False)
    assert limits.max_trace_bytes() is None
    in_memory = run("info", SAMPLE, "--format", "json")
    available = limits.PROCESS_MEMORY + 900_000  # perftool's own, and less than the sample's columns need (1 MB)
    monkeypatch.setattr(limits, "available_memory", lambda: available)
    assert limits.memory_budget() == available
    on_disk = run("info", SAMPLE, "--format", "json")
    assert in_memory.exit_code == on_disk.exit_code == 0
    assert on_disk.output == in_memory.output
    monkeypatch.setattr(limits, "available_memory", lambda: None)  # unknown: a budget of 4 GiB
    assert limits.memory_budget() == 4 << 30
    monkeypatch.setenv("PERFTOOL_MEMORY", "1MB")
    assert limits.memory_budget() == 1_000_000
    monkeypatch.setenv("PERFTOOL_MEMORY", "lots")
    error_line(run("info", SAMPLE), "PERFTOOL_MEMORY: not a size (got 'lots')")


def test_the_budget_counts_perftool_s_own_memory_first(run, tmp_path, monkeypatch):
    """A budget below what perftool's process takes before any event is one line. Decoding processes share the rest
    with the columns being built (they are gone before the analysis runs): never more than half of it."""
    error_line(run("info", SAMPLE, "--memory", "50MB"), str(SAMPLE), "memory budget of 50 MB is less than perftool",
               limits.size_text(limits.PROCESS_MEMORY), "--memory")  # fmt: skip
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [complete("k", i, 1) for i in range(1000)]}))
    started = []
    real = loader.worker_processes
    monkeypatch.setattr(
        loader, "worker_processes", lambda count, *fixed, **kw: started.append(count) or real(count, *fixed, **kw)
    )
    fits = limits.PROCESS_MEMORY + 2 * (2 * limits.WORKER_MEMORY)
    assert len(loader.read_trace(path, workers=2, memory=fits)) == 1000
    assert len(loader.read_trace(path, workers=2, memory=fits - 1)) == 1000
    assert started == [2, 1]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_stream_that_is_no_json_is_refused_before_it_is_copied(run, tmp_path, monkeypatch):
    """Without a size limit, a stream is copied to disk before it is read: one that does not begin as JSON or gzip
    (a gigabyte of NUL bytes) is refused at its first megabyte, and nothing is left where it was being copied."""
    monkeypatch.setenv("PERFTOOL_SPILL_DIR", str(tmp_path))
    error_line(run("scan", "/dev/zero"), "/dev/zero", "line 1")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("where", "problem"),
    [("args", "nested too deeply"), ("metadata", "nested too deeply"), ("events", "nested too deeply")],
)
def test_json_nesting_bomb_is_refused(run, write_trace, where, problem):
    bomb = "[" * 100_000 + "]" * 100_000
    text = {
        "args": '{"traceEvents":[{"ph":"X","ts":1,"dur":1,"args":%s}]}',
        "metadata": '{"deep":%s,"traceEvents":[{"ph":"X","ts":1,"dur":1}]}',
        "events": '{"traceEvents":%s}',
    }[where] % bomb
    path = write_trace(text, "nested.json")
    error_line(run("scan", path), str(path), problem)


@pytest.mark.slow
def test_scan_results_for_gate_are_bounded_too(run, tmp_path):
    saved = tmp_path / "bomb.findings.json.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = b'{"schema":"perftool.findings/1","tool":{"name":"perftool"},"traces":[' + b" " * 512
    saved.write_bytes(
        packer.compress(head) + b"".join(packer.compress(b" " * (1 << 20)) for _ in range(300)) + packer.flush()
    )
    error_line(run("gate", saved, saved), str(saved), "larger than 256 MiB")
    nested = tmp_path / "nested.findings.json"
    nested.write_text('{"schema":"perftool.findings/1","tool":' + "[" * 50_000 + "]" * 50_000 + "}")
    error_line(run("gate", nested, nested), str(nested), "not a perftool scan result")


# --- YAML -----------------------------------------------------------------------------------------------------------


def test_yaml_python_tags_are_errors_and_never_run(run, tmp_path):
    marker = tmp_path / "ran"
    config = tmp_path / "config.yaml"
    config.write_text(f"device: !!python/object/apply:os.system ['touch {marker}']\n")
    error_line(run("emulate", config), f"{config}:1:9", "could not determine a constructor")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "PT900-evil.yaml").write_text(f"id: !!python/object/apply:os.system ['touch {marker}']\n")
    error_line(run("rules", "list", "--rules", rules), "PT900-evil.yaml:1:5")
    assert not marker.exists()


@pytest.mark.slow
def test_yaml_alias_bomb_recursion_and_depth_are_refused(run, tmp_path):
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10^9 values
    bomb = tmp_path / "laughs.yaml"
    bomb.write_text("\n".join(laughs) + "\ndevice: npu\n")
    started = time.perf_counter()
    error_line(run("emulate", bomb), f"{bomb}:", "aliases expand to more than 1,000,000 values")
    assert time.perf_counter() - started < 10
    recursive = tmp_path / "recursive.yaml"
    recursive.write_text("a: &a [1, *a]\ndevice: npu\n")
    error_line(run("emulate", recursive), f"{recursive}:1", "recursive alias")
    deep = tmp_path / "deep.yaml"
    deep.write_text("device: " + "[" * 50_000 + "]" * 50_000 + "\n")
    line = error_line(run("gate", SAMPLE, "--budget", deep), str(deep))
    assert "nested too deeply" in line or f"{deep}:1:" in line and "maximum nesting depth" in line  # libyaml's own


@pytest.mark.slow
def test_config_files_are_bounded(run, tmp_path):
    huge = tmp_path / "huge.yaml"
    with huge.open("w") as out:
        out.write("device: npu\n# ")
        out.truncate(300 << 20)  # sparse: 300 MB of NUL bytes after the comment
    error_line(run("emulate", huge), str(huge), "larger than 256 MiB is refused")


# --- rules and templates --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{cost_ms.__class__}", "must be a plain value name"),
        ("{cost_ms[0]}", "must be a plain value name"),
        ("{cost_ms:>{width}}", "nested field"),
        ("{cost_ms:>100000000}", "widths and precisions go up to 100"),
    ],
)
def test_templates_cannot_reach_beyond_their_values(run, tmp_path, template, problem):
    rule = yaml.safe_load((REPO / "rules" / "PT001-host-bound-gaps.yaml").read_text())
    rule |= {"id": "PT901", "name": "template-test", "message": template}
    rules = tmp_path / "rules"
    rules.mkdir()
    path = rules / "PT901-template.yaml"
    path.write_text(yaml.safe_dump(rule))
    error_line(run("rules", "list", "--rules", rules), f"{path}:", problem)


def test_control_characters_in_input_stay_on_one_line(run, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(NPU_CONFIG.read_text() + '"bad\\nkey\\rhere": 1\n')
    line = error_line(run("emulate", config))
    assert "bad\\nkey\\rhere" in line


# --- outputs --------------------------------------------------------------------------------------------------------


def test_emulated_traces_too_long_to_build_are_refused_before_work(run, tmp_path):
    out = tmp_path / "long.json"
    started = time.perf_counter()
    error_line(run("emulate", NPU_CONFIG, "--set", "workload.steps=500000", "--trace", out), str(out), "200,000")
    assert time.perf_counter() - started < 5 and not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("scan", SAMPLE, "-o"),
        ("info", SAMPLE, "-o"),
        ("gate", SAMPLE, SAMPLE, "-o"),
        ("emulate", NPU_CONFIG, "--trace"),
        ("tune", REPO / "examples" / "tune" / "gpu.yaml", "-o"),
        ("tune", REPO / "examples" / "tune" / "gpu.yaml", "--write-best"),
        ("tune", REPO / "examples" / "tune" / "gpu.yaml", "--results"),
        ("tune", REPO / "examples" / "tune" / "gpu.yaml", "--emit-trace"),
    ],
)
def test_unwritable_outputs_fail_before_any_work(run, tmp_path, args):
    error_line(run(*args, tmp_path / "missing" / "out.json"), "missing/out.json", "does not exist")
    error_line(run(*args, tmp_path), str(tmp_path), "is a directory")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if not os.access(locked, os.W_OK):  # root may write anywhere; other users get the read-only check too
        error_line(run(*args, locked / "out.json"), "locked/out.json", "not writable")
    locked.chmod(0o700)


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")

    def interrupted(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_bytes(b"new", str(target))
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_termination_signal_mid_write_leaves_no_partial_file(tmp_path, monkeypatch, signum):
    """The signal lands while the temporary file is written: the run stops as for Ctrl-C and the temporary file
    beside the output is removed."""
    target = tmp_path / "report.json"
    target.write_text("old")
    previous = {s: signal.getsignal(s) for s in interrupts.TERMINATING}
    interrupts.stop_on_termination()
    monkeypatch.setattr(os, "replace", lambda *_args: os.kill(os.getpid(), signum))
    try:
        with pytest.raises(interrupts.Terminated):
            write_bytes(b"new", str(target))
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


HELD = """
import os, signal, sys, threading, time
from perftool.common import interrupts
interrupts.stop_on_termination()
started = []
try:
    with interrupts.held():
        sender = threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGTERM))
        sender.start() if sys.argv[1] == "thread" else os.kill(os.getpid(), signal.SIGTERM)
        sender.join() if sys.argv[1] == "thread" else None
        worker = os.fork()
        if worker == 0:  # signalled before it has set how it takes signals: it lives until it has
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            os.write(1, b"set up; ")
            interrupts.ignore_in_worker()
            time.sleep(5)
            os._exit(0)
        started.append(worker)
        time.sleep(0.1)
        started.append("the block ran to its end")
except interrupts.Terminated:
    _, status = os.waitpid(started[0], 0)
    print(started[1], "then stopped; the worker ended by signal", os.WTERMSIG(status))
"""


@pytest.mark.parametrize("sent_to", ["process", "thread"])
def test_a_signal_while_workers_start_waits_for_the_block_and_reaches_the_workers_once_set_up(sent_to):
    """A sweep's pool signalled as it starts used to hang at exit: the signal's handler raised inside the pool's
    bookkeeping. Within ``held()`` it waits, whichever thread took it, and a process forked there starts with it
    blocked."""
    result = subprocess.run([sys.executable, "-c", HELD, sent_to], capture_output=True, text=True, timeout=60)
    assert result.stdout == "set up; the block ran to its end then stopped; the worker ended by signal 15\n"
    assert result.returncode == 0, result.stderr


ABANDONED = """
import multiprocessing, os, signal, sys, time
from perftool.tune.evaluator import Evaluator
from perftool.tune.exhaustive import exhaustive
from perftool.tune.space import Space
from perftool.tune.spec import load_tune_config

class Stop(Exception):
    pass

def stop(evaluations, pruned):
    raise Stop  # as Ctrl-C or SIGTERM's handler does, while the sweep waits on its pool

config = load_tune_config(sys.argv[1], ["tune.space.prefetch_depth={range: [1, 1024]}"])
with Evaluator(config, Space.of(config.tune.space), jobs=2, on_progress=stop) as evaluator:
    try:
        exhaustive(evaluator)
    except Stop:
        for worker in multiprocessing.active_children():  # as a signal to the process group reaches them too
            os.kill(worker.pid, signal.SIGTERM)
        time.sleep(1)
print("closed")
"""


@pytest.mark.slow
def test_a_sweep_stopped_by_a_signal_to_its_process_group_closes_its_pool():
    """The sweep stops midway and its workers get the signal too: the pool closes and the process exits. The
    workers used to die at once: killed while sending a result, they left the pool waiting forever on the rest of
    it; and as the stopped sweep (through ``Executor.map``) had cancelled its queued work, the pool failed on that
    (CPython gh-107219) and the process waited forever at exit."""
    script = [sys.executable, "-c", ABANDONED, str(REPO / "examples" / "tune" / "npu.yaml")]
    result = subprocess.run(script, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, "closed\n"), result.stderr
    assert "Exception in thread" not in result.stderr


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [
        (signal.SIGINT, 130, "perftool: interrupted"),
        (signal.SIGTERM, 143, "perftool: terminated (SIGTERM)"),
        (signal.SIGHUP, 129, "perftool: terminated (SIGHUP)"),
    ],
    ids=["ctrl-c", "sigterm", "sighup"],
)
@pytest.mark.slow
def test_a_stopped_sweep_exits_with_the_signals_code_and_writes_nothing(tmp_path, signum, code, said):
    outputs = {
        flag: tmp_path / name
        for flag, name in [("--write-best", "best.yaml"), ("--results", "all.csv"), ("-o", "summary.txt")]
    }
    space = "tune.space.prefetch_depth={range: [1, 1024]}"  # 663,552 configurations: about 10 s
    command = [
        sys.executable,
        "-c",
        "from perftool.cli.main import main; main()",
        "tune",
        str(REPO / "examples" / "tune" / "npu.yaml"),
        "--strategy",
        "exhaustive",
        "--set",
        space,
        "-j",
        "2",
        "--progress",
        *(str(part) for pair in outputs.items() for part in pair),
    ]
    sweep = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=ctrl_c_as_at_a_terminal
    )
    deadline = time.monotonic() + 60
    while len(child_pids(sweep.pid)) < 2:  # its two worker processes are up: the sweep has begun (a progress bar
        assert sweep.poll() is None and time.monotonic() < deadline  # drawn to a pipe shows only when it ends)
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(sweep.pid, signum)  # as a terminal or a job runner does: the whole process group, workers included
    _, said_then = sweep.communicate(timeout=60)
    assert sweep.returncode == code
    assert said_then.strip().splitlines()[-1].endswith(said)
    assert "Traceback" not in said_then
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("workload.gflops_per_sample=.inf", "finite number"),
        ("workload.preprocess_us_per_sample=.nan", "finite number"),
        ("workload.weights=1180591620717411303424", "less than or equal to"),
        ("workload.graph_compile_ms=1e300", "less than or equal to"),
        ("workload.ops_per_step=100000000000", "less than or equal to"),
    ],
)
def test_emulator_physics_refuses_numbers_it_cannot_compute_with(run, override, problem):
    line = error_line(run("emulate", NPU_CONFIG, "--set", override), f"(--set {override})", problem)
    assert override.split("=")[0] in line


@pytest.mark.parametrize(
    ("event", "refused_at", "on_disk_at", "passes_at"),
    [
        # tiny, all alike: on disk 6 bytes an event with the analysis's arrays in files too, else 38
        ('{{"ph":"X","name":"a","pid":1,"tid":1,"ts":{i},"dur":1}}', "1MB" if IN_FILES else "5MB", "20MB", "40MB"),
        # a track each: info's document lists them all (1,100 bytes each), beside their names and threads (700)
        ('{{"ph":"X","name":"k{i}","pid":1,"tid":{i},"ts":{i},"dur":1}}', "300MB", "380MB", "420MB"),
    ],
    ids=["alike", "distinct"],
)
@pytest.mark.slow
def test_events_are_held_to_the_memory_budget(run, tmp_path, monkeypatch, event, refused_at, on_disk_at, passes_at):
    """Tiny events need more memory per byte of JSON than large ones, and events of distinct names and threads
    more again (a name each, a track each): what they will need is held to the budget as they arrive. Past it,
    the columns go to disk; what stays in memory even then (each distinct name and track) is held to it too."""
    path = tmp_path / "tiny.json"
    path.write_text('{"traceEvents":[' + ",".join(event.format(i=i) for i in range(200_000)) + "]}")
    assert path.stat().st_size < 16_000_000
    made = spy_on_disk(monkeypatch)
    refused_at, on_disk_at, passes_at = leaving(refused_at), leaving(on_disk_at), leaving(passes_at)
    error_line(run("info", path, "--memory", refused_at), str(path), "holds more events (", "with its columns on disk",
               f"memory budget of {limits.size_text(int(refused_at))} allows", "--memory")  # fmt: skip
    shown = run("info", path, "--memory", passes_at, "--format", "json")
    assert len(made) == 1 and shown.exit_code == 0  # only the refused one went to disk
    assert run("info", path, "--memory", on_disk_at, "--format", "json").output == shown.output
    assert len(made) == 2


def test_on_disk_an_event_counts_what_its_analysis_keeps_in_memory():
    """With its columns on disk an event counts 38 bytes and its command's own (a scan's 24), or, where the
    analysis's large arrays go into files too, 6 bytes whatever the command; counter samples, not both."""
    assert limits.memory_to_scan(10**6, 0, 0, 0, 0, True, "scan") == 62 * 10**6
    assert limits.memory_to_scan(10**6, 0, 0, 0, 0, True, "info") == 38 * 10**6
    assert limits.memory_to_scan(10**6, 0, 0, 0, 0, True, "scan", True) == 6 * 10**6
    assert limits.memory_to_scan(10**6, 0, 0, 0, 0, True, "calibrate", True) == 6 * 10**6
    assert limits.memory_to_scan(10**6, 0, 10**5, 0, 0, True, "info", True) == 35 * 10**6  # 350 bytes a sample
    assert limits.memory_to_scan(10**6, 0, 0, 0, 0, False, "scan", True) == 204 * 10**6  # in memory: no files


def test_info_counts_the_tracks_its_document_lists_in_memory_and_on_disk():
    """info's document lists every track, about a kilobyte each while it is made (a million tracks took info 1,906
    bytes an event, 880 counted for their events, names and threads); no other command's report lists them."""
    for on_disk in (False, True):
        counted = {
            command: limits.memory_to_scan(10**4, 10**4, 0, 0, 0, on_disk, command, tracks=10**4)
            - limits.memory_to_scan(10**4, 10**4, 0, 0, 0, on_disk, command)
            for command in limits.ANALYSIS_MEMORY_PER_EVENT
        }
        assert counted == {"info": 1_100 * 10**4, "diff": 0, "scan": 0, "calibrate": 0}


def test_on_disk_kept_args_count_where_they_end_and_their_bytes_are_in_a_file():
    """Kept args count 200 bytes each and their bytes in memory; on disk 16 each, and of the args' bytes only the
    counter events' (``args_bytes`` less ``kept_bytes``)."""
    in_memory = limits.memory_to_scan(0, 0, 0, 1000, 300_000, False, "info", True, 250_000)
    on_disk = limits.memory_to_scan(0, 0, 0, 1000, 300_000, True, "info", True, 250_000)
    assert (in_memory, on_disk) == (200_000 + 300_000, 16_000 + 50_000)


def test_a_refusal_names_what_a_trace_needs_in_the_budget_s_unit(run, tmp_path):
    """'needing 500.5 MB ... the memory budget of 500 MB', never '477.3 MiB' beside '500 MB'."""
    assert limits.size_text_as(500_500_000, 500_000_000) == "500.5 MB"
    assert limits.size_text_as(3 << 29, 1 << 30) == "1.5 GiB"
    assert limits.size_text_as(2048, 10**9) == "0 GB" and limits.size_text_as(7, 7) == "7 bytes"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [complete(f"k{i}", i, 1, tid=i) for i in range(20_000)]}))
    line = error_line(run("info", path, "--memory", "70MB"), str(path), "holds more events")  # 2.9 MB for columns
    assert re.search(r"needing [\d.,]+ MB of memory .* budget of 70 MB allows", line), line


def test_a_refusal_names_the_budget_the_whole_trace_needs_and_that_budget_reads_it(run, tmp_path):
    """Past the budget even with its columns on disk, the refusal foresees what the whole trace needs and names a
    budget to give; that budget reads the trace, and one a little under the need is refused."""
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [complete(f"k{i}", i, 1, tid=i) for i in range(20_000)]}))
    line = error_line(run("info", path, "--memory", "70MB"), str(path), "the whole trace needs about")
    found = re.search(r"needs about ([\d.]+) MB \(foreseen from the 100% read\): a budget of (\d+MB) holds it \("
                      r"--memory SIZE or PERFTOOL_MEMORY\)$", line)  # fmt: skip
    assert found, line
    needed, named = float(found[1]), found[2]
    assert needed <= float(named.removesuffix("MB")) < needed * 1.1  # rounded up to two figures, no further
    assert run("info", path, "--memory", named, "--format", "json").exit_code == 0
    assert run("info", path, "--memory", f"{int(needed * 0.97)}MB").exit_code == 2


def test_a_budget_to_give_is_rounded_up_to_two_figures_as_people_write_it():
    assert limits.budget_above(562_300_000) == "570MB" and limits.budget_above(600_000_000) == "600MB"
    assert limits.budget_above(101_000_000) == "110MB" and limits.budget_above(1_234_000_000) == "1.3GB"
    assert limits.budget_above(12_345_678_901) == "13GB"


def test_info_lists_the_busiest_tracks_not_every_one(run, tmp_path):
    """A track per event: the text table keeps the 100 busiest and counts the rest; JSON lists them all."""
    events = [complete("k", i, 1, tid=i) for i in range(300)] + [complete("busy", 400 + i, 1, tid=7) for i in range(5)]
    path = tmp_path / "tracks.json"
    path.write_text(json.dumps({"traceEvents": events}))
    text = " ".join(run("info", path).stdout.replace("│", " ").split())  # a wrapped cell read as one line
    assert "… 200 more tracks with fewer events (--format json lists all)" in text and "1:7" in text
    assert len(json.loads(run("info", path, "--format", "json").stdout)["tracks"]) == 300


# --- work that grows with the input, never faster -------------------------------------------------------------------

HOSTILE_NAMES = [
    "k" + "_1" * 100_000 + "x",  # a launch id that is not one: every position looks like its start
    "conv" * 50_000, "memcpy" * 30_000 + "x", "softmax" * 30_000, "gemm" * 50_000, "layernorm" * 20_000,
]  # fmt: skip


@pytest.mark.parametrize(("command", "code"), [("diff", 0), ("gate", 1)])  # gate: a 3x slower candidate fails
@pytest.mark.slow
def test_kernel_names_built_to_backtrack_cost_linear_time(tmp_path, command, code):
    """200 KB names that made the launch-id and op-map patterns backtrack (minutes for one name) take seconds."""
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    kernel_steps(base, 6, 1, HOSTILE_NAMES)
    kernel_steps(new, 6, 3, HOSTILE_NAMES)
    finished = subprocess.run(
        [sys.executable, "-m", "perftool", command, str(base), str(new)], capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == code and "Traceback" not in finished.stderr


@pytest.mark.slow
def test_the_built_in_op_map_reads_a_name_once():
    """Each built-in pattern, unbounded by the op map's cut, on names that repeat its words 20,000 times."""
    code = (
        "from perftool.diff.names import load_op_map\n"
        "words = ['conv', 'bwd ', 'memcpy', 'htod', 'softmax', 'grad', 'gemm', 'layer_norm', 'dgrad', 'send']\n"
        "for _, pattern, _ in load_op_map().entries:\n"
        "    for word in words:\n"
        "        pattern is None or pattern.search(word * 20_000 + '!')\n"
        "print('done')"
    )
    finished = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert finished.stdout.strip() == "done", finished.stderr


def test_a_file_of_nul_bytes_fails_at_its_first_byte_in_bounded_memory(tmp_path):
    zeros = tmp_path / "zeros.json"
    with open(zeros, "wb") as fh:
        fh.truncate(512 << 20)  # sparse: 512 MB of NUL bytes that take no disk
    printed, peak_mb = peak_rss_mb_of(
        "from perftool.pipeline.read import load_trace\nfrom perftool.common.errors import TraceError\n"
        f"try:\n    load_trace({str(zeros)!r})\nexcept TraceError as exc:\n    print(exc)"
    )
    assert printed == f"{zeros}: not valid JSON at line 1, column 1: invalid character"
    assert peak_mb < 300  # the interpreter and numpy take ~60 MB; buffering the file took 1.1 GB


def test_ranges_of_a_whitespace_padded_events_array_read_the_file_about_once(tmp_path, monkeypatch):
    """Two events around 4 MB of blanks, cut into 64 ranges: only the range the blanks begin in reads past
    its end, and every event lands in exactly one range."""
    event = json.dumps(complete("kernel", 1, 2))
    path = tmp_path / "padded.json"
    path.write_text('{"traceEvents":[' + event + " " * (4 << 20) + "," + event + "]}")
    monkeypatch.setattr(decode, "PIECE_BYTES", 64 << 10)
    read, pread = [], os.pread
    monkeypatch.setattr(decode.os, "pread", lambda fd, n, at: read.append(n) or pread(fd, n, at))
    events = decode.locate_events(str(path), {})
    pieces = [decode.read_events_range(str(path), *events, *piece) for piece in loader._pieces(*events)]
    assert len(pieces) == 65 and sum(len(decode.decode_piece(p)) for p in pieces if p.strip()) == 2
    assert sum(read) < 6 * path.stat().st_size  # every range reading on to the next cut: 40 times the file


PRESSED_WHILE_OPTIONS_ARE_READ = """
import os, signal, sys
sys.argv = ["perftool", "info", sys.argv[1]]
import click
from perftool.cli.main import main

def reading(self, *args, **kwargs):  # Ctrl-C arrives as click parses the command's options
    os.kill(os.getpid(), signal.SIGINT)
    return click.Command.parse_args(self, *args, **kwargs)

click.Group.parse_args = reading
main()
"""


@pytest.mark.parametrize("signum, said", [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated (SIGTERM)")])
def test_a_signal_while_the_options_are_read_is_one_line(signum, said):
    """Between the modules loading and the command running, click reads the options; a Ctrl-C there is the same one
    line and exit code as before and after, not click's "Aborted!" and exit 1, and SIGTERM is not a traceback."""
    program = PRESSED_WHILE_OPTIONS_ARE_READ.replace("SIGINT", signal.Signals(signum).name)
    done = subprocess.run(
        [sys.executable, "-c", program, str(SAMPLE)], capture_output=True, preexec_fn=ctrl_c_as_at_a_terminal
    )
    assert (done.returncode, done.stderr.decode()) == (128 + signum, f"perftool: {said}\n")


SIGNALLED_WHILE_LOADING = """
import os, signal, sys, time
sys.argv = [sys.argv[1], "info", "trace.json"]  # the command as its script or `python -m perftool` starts it
import perftool  # the command's start: its modules load from here
LOADED
os.kill(os.getpid(), signal.SIGNAL)
time.sleep(10)
"""


@pytest.mark.parametrize("loaded", ["", "import perftool.cli.main", "import perftool.cli.main, perftool.pipeline.scan"])
@pytest.mark.parametrize("command", ["perftool", "-m"])
@pytest.mark.parametrize(("signum", "said"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated (SIGTERM)"),
                                              (signal.SIGHUP, "terminated (SIGHUP)")])  # fmt: skip
def test_a_signal_while_the_command_starts_is_one_line(command, loaded, signum, said):
    """Ctrl-C, SIGTERM or SIGHUP at a point of perftool's modules loading (the package alone, the command line's
    modules, the analysis's) ends as it does later: one line, 128 + the signal. SIGTERM there took the default
    action, dying by the signal without a word (hardening round 4, D23). Each signal is sent from inside at that
    point, so the test is the same on any machine, however busy."""
    program = SIGNALLED_WHILE_LOADING.replace("LOADED", loaded).replace("SIGNAL", signal.Signals(signum).name)
    done = subprocess.run([sys.executable, "-c", program, command], capture_output=True, timeout=60,
                          preexec_fn=ctrl_c_as_at_a_terminal)  # fmt: skip
    assert (done.returncode, done.stderr.decode()) == (128 + signum, f"perftool: {said}\n")


def test_a_recorded_shape_longer_than_a_tensor_has_is_never_multiplied_out():
    """A million-dimension 'shape' in Input Dims would take minutes to multiply (a Python integer growing with each
    size): a list longer than MAX_DIMS is no shape, and no product is taken (hardening round 4, D11)."""
    from perftool.dialects.op_families import MAX_DIMS, _is_shape

    assert _is_shape([1] * MAX_DIMS) and not _is_shape([1] * (MAX_DIMS + 1))
    assert not _is_shape([2] * 1_000_000)


def test_an_input_worker_s_thread_name_is_matched_word_by_word():
    """'preprocess' repeated in one thread name made the worker pattern quadratic (a 1 MB name took minutes): it is
    tried at word starts only, and still reads the workers' names (hardening round 4, D12)."""
    from perftool.dialects.vocabulary import INPUT_WORKER_THREAD

    assert INPUT_WORKER_THREAD.pattern.startswith(r"(?i)(\bpreprocess")
    for name in ("Preprocess_3 worker", "preprocess worker", "DataLoader worker 0", "input worker", "pt_data_worker"):
        assert INPUT_WORKER_THREAD.search(name), name
    assert not INPUT_WORKER_THREAD.search("preprocess" * 20_000)


def test_a_flow_id_past_int64_is_a_name_and_still_links(write_trace, run):
    """A uint64 flow id (2^64 - 1, valid JSON) crashed the loader with a traceback: it is interned like a string id,
    and the launch it names still reaches its kernel (hardening round 4, D16)."""
    from perftool.analysis.launches import launch_rows
    from perftool.pipeline.read import load_trace

    huge = 2**64 - 1
    path = write_trace({"traceEvents": [
        {"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "s", "id": huge, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": huge, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 20, "dur": 50},
    ]})  # fmt: skip
    assert run("info", path).exit_code == 0
    trace = load_trace(str(path))
    sources, spans = launch_rows(trace)  # the flow's start on the host, the device work it reaches
    assert len(sources) == 1 and [trace.names[trace.name[r]] for r in spans] == ["gemm"]


def test_integer_and_string_flow_ids_never_share_a_number(write_trace):
    """String ids were numbered from 2^62, so the integer id 2^62 and the first string id became one flow and
    unrelated ends were linked (hardening round 4, D19): each id keeps its own number, whatever its type."""
    from perftool.pipeline.read import load_trace

    flow = {"pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"}
    path = write_trace({"traceEvents": [
        {"ph": "X", "name": "step", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {**flow, "ph": "s", "id": 2**62}, {**flow, "ph": "s", "id": "corr-A"}, {**flow, "ph": "s", "id": "2"},
        {**flow, "ph": "s", "id": 2},
    ]})  # fmt: skip
    ids = load_trace(str(path)).flow_id
    flows = ids[ids != -1].tolist()
    assert len(flows) == 4 and len(set(flows)) == 4 and 2**62 in flows and 2 in flows


def test_launches_between_calls_are_counted_per_thread_in_one_sort():
    """Counting a thread's launches before a time made a pass over every launch per thread (300k threads took 32 s):
    one sort now counts them all, and gives what a pass per thread gives (hardening round 4, D28)."""
    import numpy as np

    from perftool.rules.detectors.elementwise_chains import _launched_before

    rng = np.random.default_rng(7)
    launch_track, launch_ts = rng.integers(0, 6, 300), rng.integers(0, 50, 300).astype(float)
    track, when = rng.integers(0, 8, 200), rng.integers(0, 50, 200).astype(float)  # ties with launches included
    before, until = _launched_before(launch_track, launch_ts, track, when, when[::-1])
    own = launch_track[None, :] == track[:, None]
    assert before.tolist() == ((launch_ts[None, :] < when[:, None]) & own).sum(axis=1).tolist()
    assert until.tolist() == ((launch_ts[None, :] <= when[::-1][:, None]) & own).sum(axis=1).tolist()


@pytest.mark.parametrize("digits", [30, 5_000])
def test_numbers_in_names_past_an_int64_s_digits_are_read_as_none(run, tmp_path, digits):
    """A step marker, an engine's iteration or a graph's capture naming a number of more digits than an int64 holds
    (or than Python converts at all: 4,300) is read as naming none, not a traceback: the steps go unnumbered, the
    iteration's tokens and sequences and the capture's batch unknown."""
    big = "9" * digits
    kernels = [complete("gemm", step * 100 + 10, 50, pid=0, tid=7, cat="kernel") for step in range(4)]
    steps = [complete(f"ProfilerStep#{big if step == 0 else step}", step * 100, 90, cat="user_annotation")
             for step in range(4)]  # fmt: skip
    attention = {"Input Dims": [[4, 8, 64], [4, 1, 64]], "Input type": ["c10::BFloat16"] * 2}
    engine = [complete(f"execute_{big}_context_1(sq{big}sk1sqsq1sqsk1)_generation_0(sq0sk0sqsq0sqsk0)", step * 100,
                       90, cat="user_annotation") for step in range(4)] + [
        complete("cudaGraphLaunch", 5, 2, cat="cuda_runtime"),
        {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 5, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 10, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        complete("vllm::unified_attention", 120, 5, cat="cpu_op", args=attention)]  # fmt: skip
    (tmp_path / "capture_traces").mkdir()
    capture = [complete(f"capture_{big}_DECODE", 0, 20, cat="user_annotation"),
               complete("cudaStreamBeginCapture", 1, 1, cat="cuda_runtime"),
               complete("cudaLaunchKernel", 5, 1, cat="cuda_runtime"),
               complete("cudaStreamEndCapture", 9, 1, cat="cuda_runtime")]  # fmt: skip
    (tmp_path / "capture_traces" / "bs.json").write_text(json.dumps({"traceEvents": capture}))
    for name, events in (("steps.json", steps + kernels), ("engine.json", engine + kernels)):
        (tmp_path / name).write_text(json.dumps({"traceEvents": events}))
        for command in ("info", "scan"):
            result = run(command, str(tmp_path / name))
            assert result.exit_code in (0, 1) and not result.stderr, result.stderr
