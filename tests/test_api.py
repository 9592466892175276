"""The Python API: the same results as the command line, as models; the README's example runs as written."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO, TORCH_FIXTURE

import perftool
from perftool.analysis import detect_steps
from perftool.errors import PerftoolError
from perftool.gate.run import GateResult
from perftool.rules.findings import ScanReport

SAMPLE = REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz"


def test_scan_returns_the_report_the_cli_prints_as_json(run):
    report = perftool.scan(SAMPLE)
    assert isinstance(report, ScanReport)
    from_cli = json.loads(run("scan", SAMPLE, "--format", "json").stdout)
    ours = json.loads(report.model_dump_json(by_alias=True))
    assert ours["traces"][0]["findings"] == from_cli["traces"][0]["findings"]


def test_gate_and_bad_input(tmp_path):
    verdict = perftool.gate(REPO / "sample_traces" / "baselines" / "npu__healthy.findings.json", SAMPLE)
    assert isinstance(verdict, GateResult) and verdict.status == "fail"
    assert [unread.problem for unread in perftool.scan(tmp_path / "missing.json").unread] == ["no such file"]
    with pytest.raises(PerftoolError, match="no such file"):
        perftool.load_trace(tmp_path / "missing.json")


def test_trace_and_steps_as_dataframes():
    trace = perftool.load_trace(TORCH_FIXTURE)
    events = trace.to_pandas()
    assert len(events) == len(trace) and list(events.columns) == [
        "ts",
        "dur",
        "name",
        "cat",
        "track",
        "role",
        "kind",
        "phase",
        "order",
    ]
    assert (events["name"] == "aten::item").sum() == int((trace.name == trace.names.index("aten::item")).sum())
    assert set(events.loc[events["name"] == "aten::item", "kind"]) == {"sync"}
    steps = detect_steps(trace).to_pandas()
    assert len(steps) == detect_steps(trace).count and (steps["duration"] > 0).all()


def test_the_readme_python_example_runs_as_written(monkeypatch, capsys):
    readme = (REPO / "README.md").read_text()
    example = next(
        block for block in re.findall(r"```python\n(.*?)```", readme, re.DOTALL) if "perftool.scan(" in block
    )
    monkeypatch.chdir(REPO)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "PT001 warning 17.8% {'loop_size': 16}" in printed and "fail ['step time (median)'" in printed
