"""The command line as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, TORCH_FIXTURE, complete, error_line

from perftool import __version__
from perftool.analysis import METRICS
from perftool.common.units import duration, percent
from perftool.report.escape import markdown

SAMPLE = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"


def test_info_text_on_the_bundled_sample(run):
    result = run("info", SAMPLE)
    assert result.exit_code == 0, result.output
    assert "kineto trace" in result.output
    assert "stream 7" in result.output and "device" in result.output
    assert "step time" in result.output and "ampere_sgemm" in result.output


def test_info_counts_one_of_a_thing_in_the_singular(run, write_trace):
    """Two kernels on one stream with one gap between them: '1 track' and '1 gap', not '1 tracks'."""
    kernels = [complete("gemm_kernel", ts, 100, pid=0, tid=7, cat="kernel") for ts in (0, 600)]
    result = run("info", write_trace({"traceEvents": kernels}))
    assert result.exit_code == 0, result.output
    assert "kineto trace · 2 events · 1 track · span 700.0 µs" in result.output
    assert "idle 71.4% (1 gap, longest 500.0 µs)" in result.output


def test_info_json_is_versioned_and_complete(run):
    result = run("info", TORCH_FIXTURE, "--format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["schema"] == "perftool.info/1"
    assert document["dialect"] == "kineto"
    assert set(document["metrics"]) == set(METRICS)
    assert document["metrics"]["steps.count"] == 4
    assert document["metrics"]["device.busy_fraction"] is None  # NaN is written as null
    assert len(document["step_times_us"]) == 4
    assert any(t["role"] == "host" for t in document["tracks"])


def test_info_markdown_says_what_info_json_says(run):
    """Every format of info tells one story: the markdown holds json's step time, ops, collectives and tracks."""
    document = json.loads(run("info", SAMPLE, "--format", "json").stdout)
    result = run("info", SAMPLE, "--format", "markdown")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith(f"# perftool info {markdown(SAMPLE)}\n")
    median = document["metrics"]["step_time_us.median"]
    assert f"| step time (device) | median {duration(median)} ·" in text
    assert len(document["step_numbers"]) == len(document["step_times_us"]) == document["metrics"]["steps.steady"]
    for op in document["top_ops"]["ops"]:
        assert f"| {op['count']:,} | {duration(op['total_us'])} | {percent(op['share'])} |" in text
    (collective,) = document["collectives"]
    figures = f"{collective['count']} | {duration(collective['time_us'])} | {duration(collective['exposed_us'])}"
    assert f"| {collective['name']} | {figures} |" in text
    for track in document["tracks"]:
        assert f"| {track['pid']}:{track['tid']} | {track['role']} |" in text


def test_info_of_a_job_in_markdown_lists_its_ranks_and_no_findings(run):
    job = REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler"
    result = run("info", job, "--format", "markdown", "--workers", "1")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert (
        text.startswith("# perftool info\n")
        and "## Job of 8 ranks" in text
        and "**Rank 5 arrives last at the collectives: the others wait" in text
    )
    assert "finding" not in text.replace("top finding", "")  # info runs no rules: it says nothing of findings


def test_info_of_a_directory_holding_one_trace_is_that_trace(run, tmp_path):
    """A profiler's output directory of one trace is read as the trace, as scan reads it, not refused as a job."""
    (tmp_path / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
    of_directory = run("info", tmp_path, "--format", "json")
    assert of_directory.exit_code == 0, of_directory.output
    document, direct = json.loads(of_directory.stdout), json.loads(run("info", SAMPLE, "--format", "json").stdout)
    assert document["schema"] == "perftool.info/1" and document["source"] == str(tmp_path / SAMPLE.name)
    assert document["metrics"] == direct["metrics"] and document["tracks"] == direct["tracks"]


def test_info_output_file_is_written_whole(run, tmp_path):
    out = tmp_path / "info.json"
    result = run("info", TORCH_FIXTURE, "--format", "json", "--output", out)
    assert result.exit_code == 0 and result.stdout == ""
    assert json.loads(out.read_text())["source"] == str(TORCH_FIXTURE)
    assert [p.name for p in tmp_path.iterdir()] == ["info.json"]  # no temporary file left behind
    text_out = tmp_path / "info.txt"
    assert run("info", TORCH_FIXTURE, "-o", text_out).exit_code == 0
    text = text_out.read_text()
    assert "step time" in text and "Tracks" in text
    assert "\x1b[" not in text  # a file gets plain text, never terminal colour codes


def test_unwritable_output_fails_before_loading(run, tmp_path):
    result = run("info", tmp_path / "missing-trace.json", "--output", tmp_path / "no-dir" / "x.json")
    assert result.exit_code == 2
    assert "does not exist" in result.stderr and "no-dir" in result.stderr


def test_metrics_command_lists_every_metric(run):
    result = run("metrics")
    assert result.exit_code == 0
    for name in METRICS:
        assert name in result.output


def test_a_group_named_without_a_command_prints_its_help_as_perftool_alone_does(run):
    """perftool rules with no command: the group's help, line by line, as perftool alone gives its own; not a one-line
    error with the help's line breaks escaped."""
    alone, group = run(), run("rules")
    assert (alone.exit_code, group.exit_code) == (2, 2)
    assert alone.stderr.splitlines()[0].endswith(" [OPTIONS] COMMAND [ARGS]...")  # "Usage: perftool ..." as installed
    lines = group.stderr.splitlines()
    assert lines[0].endswith(" rules [OPTIONS] COMMAND [ARGS]...") and "Commands:" in lines
    assert "perftool: error" not in group.stderr and "\\n" not in group.stderr


def test_schema_names_its_argument_and_lists_the_files_it_knows(run):
    from perftool import api

    assert error_line(run("schema", "bogus"), "Invalid value for '[NAME]': 'bogus' is not one of 'budget',")
    said = "".join(run("schema", "--help").stdout.split())  # as wrapped, some names broken at their hyphen
    assert said.startswith("Usage:clischema[OPTIONS][NAME]") and f"oneof{','.join(sorted(api.SCHEMAS))}." in said


def test_python_dash_m_and_version():
    done = subprocess.run([sys.executable, "-m", "perftool", "--version"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0 and __version__ in done.stdout


@pytest.mark.slow
def test_console_script_reports_bad_input_without_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    done = subprocess.run([sys.executable, "-m", "perftool", "info", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == f"perftool: error: {bad}: truncated JSON: the file ends before the trace is complete"


@pytest.mark.slow
def test_tune_takes_workers_as_every_command_does_and_keeps_jobs(run, monkeypatch):
    from perftool.tune import search

    config, processes = REPO / "examples" / "tune" / "npu.yaml", []
    sweep = search.tune

    def counted(loaded, jobs, *rest):
        processes.append(jobs)
        return sweep(loaded, jobs, *rest)

    monkeypatch.setattr(search, "tune", counted)
    by_workers = run("tune", config, "--evaluations", "40", "--workers", "2", "--format", "json")
    by_jobs = run("tune", config, "--evaluations", "40", "--jobs", "3", "--format", "json")
    assert by_workers.exit_code == by_jobs.exit_code == 0 and processes == [2, 3]
    assert json.loads(by_workers.stdout)["best"] == json.loads(by_jobs.stdout)["best"]


def test_metrics_lists_each_metric_with_its_unit_as_json(run):
    document = json.loads(run("metrics", "--format", "json").stdout)
    units = {metric["name"]: metric["unit"] for metric in document["metrics"]}
    assert units["step_time_us.median"] == "us" and units["device.idle_fraction"] == "fraction"
    assert set(units) == set(METRICS)


@pytest.mark.slow
def test_calibrate_reads_with_a_dialect_and_a_size_limit_as_the_other_commands(run):
    trace = REPO / "sample_traces" / "npu" / "healthy.trace.json.gz"
    assert "trace-size limit of 1 KiB" in error_line(run("calibrate", trace, "--max-trace-size", "1KiB"))
    assert run("calibrate", trace, "--dialect", "emulator").exit_code == 0
    assert "no device activity" in error_line(run("calibrate", trace, "--dialect", "kineto"))  # forced, and wrong


def test_shell_completion_completes_commands_and_options():
    env = {**os.environ, "COMP_WORDS": "perftool scan --fo", "COMP_CWORD": "2", "_PERFTOOL_COMPLETE": "bash_complete"}
    completed = subprocess.run([sys.executable, "-m", "perftool"], env=env, capture_output=True, text=True)
    assert "plain,--format" in completed.stdout.splitlines()
