"""The command line as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, TORCH_FIXTURE

from perftool import __version__
from perftool.analysis import METRICS

SAMPLE = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"


def test_info_text_on_the_bundled_sample(run):
    result = run("info", SAMPLE)
    assert result.exit_code == 0, result.output
    assert "kineto trace" in result.output
    assert "stream 7" in result.output and "device" in result.output
    assert "step time" in result.output and "ampere_sgemm" in result.output


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


def test_python_dash_m_and_version():
    done = subprocess.run([sys.executable, "-m", "perftool", "--version"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0 and __version__ in done.stdout


def test_console_script_reports_bad_input_without_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    done = subprocess.run([sys.executable, "-m", "perftool", "info", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == f"perftool: error: {bad}: truncated JSON: the file ends before the trace is complete"
