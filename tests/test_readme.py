"""The README's CI examples are right as written: the workflow parses, installs our package, and a
failing gate still leaves its report for the summary step."""

from __future__ import annotations

import re
import shlex
import shutil

import pytest
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


def shown_commands() -> list[tuple[str, str]]:
    """Each ``$ perftool ...`` example in the README, with the first line of output it shows."""
    found = []
    for block in re.findall(r"```text\n(.*?)```", README, re.DOTALL):
        lines = block.splitlines()
        if lines and lines[0].startswith("$ perftool "):
            found.append((lines[0][2:].split("  #")[0].strip(), lines[1]))
    return found


@pytest.mark.parametrize("command, first_line", shown_commands(), ids=lambda value: value[:40])
def test_every_command_the_readme_shows_runs_as_written(run, monkeypatch, command, first_line):
    monkeypatch.chdir(REPO)
    result = run(*shlex.split(command)[1:])
    assert result.exit_code in (0, 1), result.output  # 1: findings at --fail-on, which the example shows
    assert result.stdout.splitlines()[0].rstrip() == first_line.rstrip()


def yaml_example(first_key: str) -> str:
    return next(block for block in yaml_blocks() if block.startswith(first_key))


def test_the_project_config_example_loads_as_written(tmp_path):
    from perftool.project import load_project
    from perftool.rules.catalog import load_catalog

    path = tmp_path / "perftool.yaml"
    path.write_text(yaml_example("fail_on:"))
    project = load_project(str(path))
    assert project.fail_on == "warning" and project.device == "npu"
    rules = {rule.id: rule for rule in load_catalog(project, ())}
    assert rules["PT001"].thresholds.warning == 0.10 and not rules["PT006"].enabled


@pytest.mark.parametrize("first_key", ["device: npu", "device: ipu"])
def test_the_emulator_and_tune_config_examples_run_as_written(run, tmp_path, first_key):
    path = tmp_path / "config.yaml"
    path.write_text(yaml_example(first_key))
    command = (
        ("tune", path, "--no-progress", "--evaluations", "30") if "tune:" in path.read_text() else ("emulate", path)
    )
    result = run(*command)
    assert result.exit_code == 0, result.output


def test_the_budget_example_loads_as_written(tmp_path):
    from perftool.gate.policy import load_budget

    path = tmp_path / "budget.yaml"
    path.write_text(yaml_example("metrics:"))
    assert set(load_budget(str(path)).metrics) == {
        "step_time_us.median",
        "throughput.steps_per_s",
        "device.idle_fraction",
        "recompilations.count",
    }


def test_the_gitlab_example_is_valid_yaml():
    job = yaml.safe_load(yaml_example("perf-gate:"))["perf-gate"]
    assert job["artifacts"]["when"] == "always" and job["artifacts"]["reports"]["junit"] == "gate.xml"
