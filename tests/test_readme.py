"""The README's CI examples are right as written: the workflow parses, installs our package, and a
failing gate still leaves its report for the summary step."""

from __future__ import annotations

import re
import shlex
import shutil

import yaml
from conftest import REPO

README = (REPO / "README.md").read_text()
DISTRIBUTION = re.search(r'^name = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README, re.DOTALL)


def test_every_install_line_installs_this_project():
    installs = re.findall(r"pip install ([^\s&;`]+)", README)
    from_index = [name for name in installs if not name.startswith(("'.", ".", "-e"))]
    assert from_index and set(from_index) == {DISTRIBUTION}
    assert DISTRIBUTION != "perftool"  # that name on PyPI is someone else's


def test_the_github_workflow_is_complete_valid_yaml():
    workflow = next(yaml.safe_load(block) for block in yaml_blocks() if block.startswith("name: perf-gate"))
    assert workflow.get("on", workflow.get(True)) == ["pull_request"]  # PyYAML reads the key `on` as True
    steps = workflow["jobs"]["gate"]["steps"]
    assert workflow["jobs"]["gate"]["runs-on"] and all("uses" in step or "run" in step for step in steps)
    report = next(step for step in steps if step.get("name") == "Report")
    assert report["if"] == "always()" and "GITHUB_STEP_SUMMARY" in report["run"]


def test_a_failing_gate_leaves_its_report_for_the_summary_step(run, tmp_path, monkeypatch):
    """The workflow's gate command, on a candidate that regressed: exit 1, and gate.md is there."""
    workflow = next(yaml.safe_load(block) for block in yaml_blocks() if block.startswith("name: perf-gate"))
    command = next(
        step["run"] for step in workflow["jobs"]["gate"]["steps"] if step.get("name") == "Gate the training trace"
    )
    args = shlex.split(command)[1:]  # after the program's name: gate BASELINE CANDIDATE ...
    baseline, candidate = args[1], args[2]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perf").mkdir()
    (tmp_path / "out").mkdir()
    samples = REPO / "sample_traces"
    assert run("scan", samples / "npu" / "healthy.trace.json.gz", "--format", "json", "-o", baseline).exit_code == 0
    shutil.copy(samples / "npu" / "host_bound_loop_size.trace.json.gz", candidate)  # same job, slower steps
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert (tmp_path / "gate.md").read_text().startswith("# perftool gate: ❌ fail")
