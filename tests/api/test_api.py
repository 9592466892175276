"""The Python API: the same results as the command line, as models; the README's example runs as written."""

from __future__ import annotations

import json
import re
import sys

import pytest
import yaml
from conftest import REPO, TORCH_FIXTURE

import perftool
from perftool.analysis import detect_steps
from perftool.common.errors import PerftoolError
from perftool.gate.verdict import GateResult
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
    with pytest.raises(PerftoolError, match="no such file"):
        perftool.load_trace(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: perftool.load_trace(5), r"^load_trace\(\): path: "),
        (lambda: perftool.load_trace("a\0b"), r"^load_trace\(\): path: .*a path cannot hold a NUL byte"),
        (lambda: perftool.info("a\0b"), r"^info\(\): traces\[0\]: .*NUL byte"),
        (lambda: perftool.scan("a\0b"), r"^scan\(\): traces\[0\]: .*NUL byte"),
        (lambda: perftool.emulate("a\0b"), r"^emulate\(\): config: .*NUL byte"),
        (lambda: perftool.roofline("a\0b"), r"^roofline\(\): trace: .*NUL byte"),
    ],
)
def test_a_path_of_the_wrong_type_or_with_a_nul_byte_is_one_perftool_error(call, message):
    """``load_trace(5)`` raised TypeError and a path holding a NUL byte ValueError from deep inside: each is a
    PerftoolError naming the call and the parameter, as the README promises (hardening round 4, D20)."""
    with pytest.raises(PerftoolError, match=message) as raised:
        call()
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("command", [perftool.info, perftool.scan], ids=["info", "scan"])
def test_a_call_without_a_trace_is_refused_as_on_the_command_line(command):
    """``scan()`` of nothing gave an empty report (an agent's ``scan`` of ``[]`` through the MCP server too)."""
    with pytest.raises(PerftoolError, match=rf"^{command.__name__}\(\): traces: give at least one trace$"):
        command()


def test_a_scan_that_reads_nothing_raises_and_one_that_reads_part_warns(tmp_path):
    with pytest.raises(perftool.NothingRead, match=r"missing\.json: no such file$") as nothing:
        perftool.scan(tmp_path / "missing.json")
    assert isinstance(nothing.value, PerftoolError)
    assert [unread.problem for unread in nothing.value.report.unread] == ["no such file"]
    with pytest.raises(perftool.NothingRead, match=r"\(and 1 more traces not read\)"):
        perftool.scan(tmp_path / "missing.json", tmp_path / "gone.json", workers=1)
    with pytest.warns(perftool.PerftoolWarning, match=r"not every trace was read: .*gone\.json: no such file"):
        report = perftool.scan(SAMPLE, tmp_path / "gone.json", workers=1)
    assert len(report.traces) == 1 and [u.path for u in report.unread] == [str(tmp_path / "gone.json")]


def test_the_dataframes_say_how_to_get_pandas(monkeypatch):
    trace = perftool.load_trace(TORCH_FIXTURE)
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    for to_pandas, name in [(trace.to_pandas, "Trace.to_pandas"), (detect_steps(trace).to_pandas, "Steps.to_pandas")]:
        with pytest.raises(ImportError, match=rf"^{name} needs pandas: pip install pandas$"):
            to_pandas()


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


def test_the_documented_python_example_runs_as_written(monkeypatch, capsys):
    page = (REPO / "docs" / "python-api.md").read_text()
    example = next(block for block in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if "perftool.scan(" in block)
    monkeypatch.chdir(REPO)
    exec(compile(example, "docs/python-api.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "PT001 warning 17.8% {'loop_size': 16}" in printed and "fail ['step time (median)'" in printed


def test_a_trace_and_its_steps_print_as_one_line_not_their_columns():
    trace = perftool.load_trace(SAMPLE)
    steps = detect_steps(trace)
    for shown in (repr(trace), str(trace), repr(steps)):
        assert "\n" not in shown and "array(" not in shown and len(shown) < 200
    assert repr(trace).startswith(f"Trace({str(SAMPLE)!r}, emulator, ") and f"{len(trace):,} events" in repr(trace)
    assert repr(steps).startswith(f"Steps({steps.count:,} on the host clock, {steps.warmup} warm-up")


def test_errors_name_the_api_s_parameters_and_the_command_line_its_options(run, tmp_path):
    """What the caller can change is named as the caller sets it: ``allow_mismatch=True`` from Python,
    ``--allow-mismatch`` on the command line."""
    npu, gpu = (REPO / "sample_traces" / family / "healthy.trace.json.gz" for family in ("npu", "gpu"))
    config = REPO / "sample_traces" / "npu" / "healthy.yaml"
    with pytest.raises(PerftoolError, match=r"; pass `allow_mismatch=True` to compare them anyway$"):
        perftool.gate(npu, gpu)
    refused = run("gate", npu, gpu)
    assert refused.exit_code == 2 and refused.stderr.rstrip().endswith("; pass --allow-mismatch to compare them anyway")
    with pytest.raises(PerftoolError, match=r"^`overrides` 'loop_size': expected NAME=VALUE"):
        perftool.emulate(config, overrides=["loop_size"])
    refused = run("emulate", config, "--set", "loop_size")
    assert refused.stderr.startswith("perftool: error: --set 'loop_size': expected NAME=VALUE")
    with pytest.raises(PerftoolError, match=r"; `max_bytes` \(or PERFTOOL_MAX_TRACE_SIZE\) raises it$"):
        perftool.scan(npu, max_bytes=1000)
    refused = run("scan", npu, "--max-trace-size", "1kB")
    assert "; --max-trace-size SIZE (or PERFTOOL_MAX_TRACE_SIZE) raises it" in refused.stderr
    assert "`" not in refused.stderr


def test_the_catalogues_are_the_api_s_and_the_cli_prints_them(run, tmp_path):
    """rules, rule, metrics, knobs and schema answer from Python what the listing commands print."""
    from perftool import api

    listed = api.rules().rules
    assert [rule.id for rule in listed] == sorted(rule.id for rule in listed) and len(listed) > 10
    page = run("rules", "list").stdout
    assert all(rule.id in page for rule in listed)
    assert api.rule(listed[0].name) == api.rule(listed[0].id) == listed[0]
    with pytest.raises(PerftoolError, match="unknown rule 'PT999'"):
        api.rule("PT999")
    project = tmp_path / "perftool.yaml"
    project.write_text(f"rules:\n  {listed[0].id}:\n    enabled: false\n")
    assert not api.rule(listed[0].id, config=project).enabled
    assert "(disabled)" in run("rules", "list", "--config", project).stdout
    assert json.loads(run("metrics", "--format", "json").stdout) == api.metrics().model_dump(mode="json", by_alias=True)
    assert json.loads(run("knobs", "--format", "json").stdout) == api.knobs().model_dump(mode="json", by_alias=True)
    assert json.loads(run("rules", "list", "--format", "json").stdout)["rules"][0]["id"] == listed[0].id
    assert json.loads(run("rules", "explain", listed[0].id, "--format", "json").stdout)["name"] == listed[0].name
    assert json.loads(run("schema", "gate-result").stdout) == api.schema("gate-result")
    with pytest.raises(PerftoolError, match="no schema 'gates'"):
        api.schema("gates")


def test_tune_writes_its_files_from_python_checked_before_the_sweep(tmp_path):
    """write_best, results and emit_trace: refused before the sweep when they cannot be written, else all written."""
    config = REPO / "examples" / "tune" / "npu.yaml"
    with pytest.raises(PerftoolError, match=r"`results` writes .json or .csv$"):
        perftool.tune(config, evaluations=10, results=tmp_path / "rows.txt")
    with pytest.raises(PerftoolError, match="give each output its own file"):
        perftool.tune(config, evaluations=10, results=tmp_path / "a.json", emit_trace=tmp_path / "a.json")
    assert not list(tmp_path.iterdir())
    paths = {"write_best": tmp_path / "best.yaml", "results": tmp_path / "rows.csv", "emit_trace": tmp_path / "t.json"}
    result = perftool.tune(config, evaluations=10, **paths)
    written = json.loads(paths["emit_trace"].read_text())["perftool"]["emulator"]
    assert written["prediction"] == perftool.emulate(paths["write_best"]).prediction
    assert len(paths["results"].read_text().splitlines()) == 1 + len(result.rows.reason)


def test_calibrate_writes_the_fitted_config_from_python_checked_before_the_fit(tmp_path):
    trace = REPO / "tests" / "data" / "vocab" / "zero_workers.json.gz"
    with pytest.raises(PerftoolError, match="is a directory"):
        perftool.calibrate(trace, write_config=tmp_path)
    fitted = perftool.calibrate(trace, write_config=tmp_path / "fit.yaml")
    assert yaml.safe_load((tmp_path / "fit.yaml").read_text()) == fitted.document()
    assert perftool.emulate(tmp_path / "fit.yaml").config.device == fitted.config.device
