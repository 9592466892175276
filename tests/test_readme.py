"""The examples of the README and the documentation are right as written: the CI workflow parses, installs our
package, and a failing gate still leaves its report for the summary step."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from conftest import REPO

README = "\n".join(page.read_text() for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
# the README and the documentation's pages: every example in either runs as written
DISTRIBUTION = re.search(r'^name = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README, re.DOTALL)


def ci_install_lines() -> list[str]:
    """The install line of the GitHub workflow and of the GitLab job."""
    workflow = next(yaml.safe_load(block) for block in yaml_blocks() if block.startswith("name: perf-gate"))
    github = next(step["run"] for step in workflow["jobs"]["gate"]["steps"] if step.get("name") == "Install perftool")
    gitlab = next(line for line in yaml.safe_load(yaml_example("perf-gate:"))["perf-gate"]["script"] if "pip" in line)
    return [github, gitlab]


def test_no_install_line_names_a_distribution_that_is_not_published():
    installs = re.findall(r"pip install ([^\s&;`]+)", README)
    assert installs and not [name for name in installs if DISTRIBUTION in name or name == "perftool"]
    assert DISTRIBUTION != "perftool"  # that name on PyPI is someone else's


@pytest.mark.slow
def test_the_ci_snippets_install_line_installs_the_wheel_built_as_the_readme_says(tmp_path):
    """The README's build command, then the snippets' install line in a fresh virtual environment, offline: its
    dependencies come from this environment, perftool only from the wheel."""
    github, gitlab = ci_install_lines()
    assert github == gitlab
    build = re.search(r"`(\w+)=(\w+) pip wheel (.+) -w (\S+) \.` writes\s+`([^`]+)`", README)
    assert build, "the README says how to build the wheel"
    variable, value, options, folder, wheel = build.groups()
    ci_checkout = tmp_path / "checkout"  # the user's repository, where the wheel is committed
    built = subprocess.run(  # the README's command, writing into a temporary folder, with the build tools at hand
        [sys.executable, "-m", "pip", "wheel", *shlex.split(options), "--no-build-isolation", "-w", tmp_path / folder]
        + ["."],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_NO_INDEX": "1", variable: value},
    )
    assert built.returncode == 0, built.stderr
    assert wheel.endswith("-py3-none-any.whl")  # pure Python: it installs on whatever runs the user's CI
    (ci_checkout / "tools").mkdir(parents=True)
    shutil.move(tmp_path / wheel, ci_checkout / "tools")  # the name the README gives is the name built
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(in_venv(venv, "python", "-c", purelib).stdout.strip())
    (site / "dependencies.pth").write_text(f"{dependencies_without_perftool(tmp_path / 'dependencies')}\n")
    installed = in_venv(venv, *shlex.split(github), cwd=ci_checkout, PIP_NO_INDEX="1")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    sample = REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz"
    scanned = in_venv(venv, "perftool", "scan", str(sample), "--format", "json")
    assert scanned.returncode in (0, 1), scanned.stderr
    assert json.loads(scanned.stdout)["traces"][0]["findings"]  # the built-in rules came with the wheel
    imported = in_venv(venv, "python", "-c", "import perftool; print(perftool.__file__)")
    assert Path(imported.stdout.strip()).is_relative_to(site)


def dependencies_without_perftool(folder: Path) -> Path:
    """A folder of links to this environment's installed packages, perftool's own left out."""
    folder.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "perftool" not in entry.name:
            (folder / entry.name).symlink_to(entry)
    return folder


def in_venv(venv: Path, *command: str, cwd: Path | None = None, **settings: str) -> subprocess.CompletedProcess:
    """``command`` run as in a shell with ``venv`` activated, from ``cwd`` (a folder of its own by default)."""
    path = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    environment = {**os.environ, "PATH": path, "VIRTUAL_ENV": str(venv), **settings}
    environment.pop("PYTHONPATH", None)
    return subprocess.run(command, cwd=cwd or venv, capture_output=True, text=True, env=environment)


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


def shown_commands() -> list[tuple[str, int, list[str]]]:
    """Each ``$ perftool ...`` example of the README and the documentation: the command, the terminal width it was
    shown at (``$ COLUMNS=110 perftool ...``; else 80) and the output it shows, up to a line ``…`` that ends an
    excerpt."""
    found = []
    for block in re.findall(r"```text\n(.*?)```", README, re.DOTALL):
        lines = block.splitlines()
        command = re.match(r"\$ (?:COLUMNS=(\d+) )?(perftool .*)", lines[0]) if lines else None
        if command:
            shown = lines[1:]
            shown = shown[: shown.index("…")] if "…" in shown else shown
            found.append((command.group(2).strip(), int(command.group(1) or 80), shown))
    return found


def as_shown(line: str) -> re.Pattern:
    """A shown line as a pattern: as written, but for "…", which stands for what varies or was left out."""
    return re.compile("".join(".*?" if part == "…" else re.escape(part) for part in re.split("(…)", line.rstrip())))


@pytest.mark.parametrize(("command", "width", "shown"), shown_commands(), ids=lambda value: str(value)[:40])
@pytest.mark.slow
def test_every_command_the_documentation_shows_prints_what_it_shows(run, monkeypatch, command, width, shown):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", str(width))
    result = run(*shlex.split(command)[1:])
    assert result.exit_code in (0, 1), result.output  # 1: findings at --fail-on, which the example shows
    printed = result.stdout.splitlines()
    assert len(printed) >= len(shown) and shown
    for number, (line, expected) in enumerate(zip(printed, shown), 1):
        assert as_shown(expected).fullmatch(line.rstrip()), f"line {number}: {line!r} is shown as {expected!r}"


def test_an_example_line_matches_only_what_it_shows():
    assert as_shown("epoch) · … s").fullmatch("epoch) · 1.25 s")
    assert not as_shown("epoch) · … s").fullmatch("epoch) · 1.25 ms")
    assert as_shown("reduce_kernel<Functor<…>>").fullmatch("reduce_kernel<Functor<…>>")
    assert not as_shown("mean step 154.687 ms").fullmatch("mean step 154.688 ms")


def yaml_example(first_key: str) -> str:
    return next(block for block in yaml_blocks() if block.startswith(first_key))


def test_the_project_config_example_loads_as_written(tmp_path):
    from perftool.api.project import load_project
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
