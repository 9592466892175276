"""The rule catalogue: rule files as data, their validation, overrides, and the rules commands."""

from __future__ import annotations

import json
import string
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, error_line

from perftool.api.project import load_project
from perftool.common.errors import PerftoolError
from perftool.rules.catalog import builtin_dir, load_catalog, load_rule, selected
from perftool.rules.detectors import COMMON_VALUES, DETECTORS
from perftool.rules.findings import Finding, Impact, biggest_first
from perftool.rules.model import Severity, Thresholds, fill, over_the_trace, template_fields

SAMPLE = REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz"  # PT001 at 17.8%
HOST_BOUND = builtin_dir() / "PT001-host-bound-gaps.yaml"


def _rule_document() -> dict:
    return yaml.safe_load(HOST_BOUND.read_text())


def _write_rule(directory: Path, **changes) -> Path:
    directory.mkdir(exist_ok=True)
    document = _rule_document() | {"id": "PX001", "name": "my-host-bound"} | changes
    path = directory / "my-rule.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_builtin_rules_load_and_cover_every_detector():
    rules = load_catalog()
    assert [r.id for r in rules] == [f"PT{i:03d}" for i in range(1, 27)]
    from perftool.rules.detectors import DETECTORS

    assert {r.detector for r in rules} == set(DETECTORS)
    assert all(r.explain.what and r.explain.why and r.explain.example and "generic" in r.fix for r in rules)


@pytest.mark.slow
def test_installed_package_finds_its_rules(tmp_path):
    """Run from outside the checkout, so the installed package (a wheel in CI) must carry the rule files."""
    result = subprocess.run(
        [sys.executable, "-m", "perftool", "rules", "list"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "PT001" in result.stdout and "PT008" in result.stdout


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"detector": "nope"}, "detector: unknown detector 'nope'"),
        ({"id": "pt1"}, "id: String should match pattern"),
        ({"thresholds": {"warning": 0.5, "error": 0.1}}, "thresholds: must not decrease"),
        ({"thresholds": {"warning": 2}}, "thresholds.warning: Input should be less than or equal to 1"),
        ({"params": {"bogus": 1}}, "params.bogus: detector host_bound has no such setting"),
        ({"message": "lost {nothing}"}, "message: unknown value {nothing}"),
        ({"message": "{share.__class__}"}, "message: template field {share.__class__} must be a plain value name"),
        ({"message": "{share[0]}"}, "must be a plain value name"),
        ({"fix": {"npu": "x"}}, "fix: needs a 'generic' fix"),
        ({"fix": {"generic": "x", "tpu": "y"}}, "unknown device family or context 'tpu'"),
        ({"colour": "red"}, "colour: unknown field"),
        ({"titles": {"launch_bound": "x", "nope": "y"}}, "titles: 'nope' is no variant of fix_variants"),
        ({"severity": "fatal"}, "severity: Input should be 'info', 'warning' or 'error'"),
    ],
)
def test_invalid_rule_file_names_file_and_field(tmp_path, run, change, expected):
    path = _write_rule(tmp_path / "rules", **change)
    with pytest.raises(PerftoolError) as caught:
        load_rule(path)
    assert str(caught.value).startswith(str(path)) and expected in str(caught.value)
    result = run("scan", SAMPLE, "--rules", tmp_path / "rules")
    assert result.exit_code == 2 and expected in result.stderr and "Traceback" not in result.output


def test_a_rule_file_s_errors_name_the_line_and_what_would_do(tmp_path):
    """Each error whole: the file and line, the field, and the names it could have used."""
    host_bound = DETECTORS["host_bound"]
    given = ", ".join({**COMMON_VALUES, **host_bound.values})
    for change, line, said in [
        ({"detector": "nope"}, 4, f"detector: unknown detector 'nope' (have: {', '.join(DETECTORS)})"),
        (
            {"params": {"bogus": 1}},
            11,
            f"params.bogus: detector host_bound has no such setting (has: {', '.join(host_bound.settings)})",
        ),  # fmt: skip
        ({"params": {"target_overhead": "x"}}, 11, "params.target_overhead: "),
        (
            {"detector": "recompilation", "params": {"bogus": 1}},
            11,
            "params.bogus: detector recompilation has no such setting (has: none)",
        ),  # fmt: skip
        ({"message": "lost {nothing}"}, 16, f"message: unknown value {{nothing}} (detector host_bound gives: {given})"),
        ({"message": "{share[0]}"}, 16, "message: template field {share[0]} must be a plain value name"),
        ({"fix": {"generic": "{nothing}"}}, 20, "fix.generic: unknown value {nothing}"),  # the line of the fix itself
    ]:
        path = _write_rule(tmp_path / "rules", **change)
        with pytest.raises(PerftoolError) as caught:
            load_rule(path)
        assert str(caught.value).startswith(f"{path}:{line}: {said}"), str(caught.value)
    for text in ["- a\n- b\n", ""]:
        (path := tmp_path / "list.yaml").write_text(text)
        with pytest.raises(PerftoolError, match=r"list\.yaml: a rule file must be a YAML mapping \(id, name, title, "):
            load_rule(path)
    (path := tmp_path / "latin1.yaml").write_bytes(b"\xe9")
    with pytest.raises(PerftoolError, match=r"latin1\.yaml: cannot read rule file: not UTF-8 \(byte 0\)$"):
        load_rule(path)


def test_rule_directories_hold_yaml_and_yml_files_and_must_exist(tmp_path):
    extra = tmp_path / "rules"
    _write_rule(extra).rename(extra / "mine.yml")
    assert "PX001" in [rule.id for rule in load_catalog(extra_dirs=(str(extra),))]
    with pytest.raises(PerftoolError, match=f"^{tmp_path / 'none'}: rule directory does not exist$"):
        load_catalog(extra_dirs=(str(tmp_path / "none"),))


def test_a_project_changes_a_rule_by_its_name_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perftool.yaml").write_text("rules:\n  host-bound-gaps: {severity: error}\n")
    (host_bound,) = [rule for rule in load_catalog(load_project()) if rule.id == "PT001"]
    assert host_bound.severity is Severity.ERROR


def test_rule_file_errors_carry_the_line(tmp_path):
    path = tmp_path / "r.yaml"
    text = HOST_BOUND.read_text().replace("detector: host_bound", "detector: nope")
    path.write_text(text)
    line = text.splitlines().index("detector: nope") + 1
    with pytest.raises(PerftoolError, match=rf"r\.yaml:{line}: detector"):
        load_rule(path)


def test_rule_files_are_read_safely(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(PerftoolError, match="not valid YAML"):
        load_rule(path)


def test_templates_only_reach_the_findings_values():
    assert fill("{share:.0%} of {name}", {"share": 0.25, "name": "x", "secret": "s"}) == "25% of x"
    with pytest.raises(ValueError):
        fill("{share.__class__.__mro__}", {"share": 0.25})


def test_extra_rule_directory_adds_rules_and_refuses_duplicate_ids(tmp_path, run):
    _write_rule(tmp_path / "rules")
    result = run("scan", SAMPLE, "--rules", tmp_path / "rules", "--format", "json")
    ids = [f["rule_id"] for f in json.loads(result.stdout)["traces"][0]["findings"]]
    assert ids == ["PT001", "PX001"]
    _write_rule(tmp_path / "dupes", id="PT001")
    result = run("scan", SAMPLE, "--rules", tmp_path / "dupes")
    assert result.exit_code == 2 and "id PT001 is already used by" in result.stderr


def test_thresholds_in_rule_files_are_honoured(tmp_path, run):
    def severity(**thresholds):
        _write_rule(tmp_path / "rules", thresholds=thresholds)
        findings = json.loads(
            run("scan", SAMPLE, "--rules", tmp_path / "rules", "--select", "PX001", "--format", "json").stdout
        )["traces"][0]["findings"]
        return findings[0]["severity"] if findings else None

    assert severity(info=0.02, warning=0.05, error=0.25) == "warning"
    assert severity(info=0.02, warning=0.05, error=0.15) == "error"
    assert severity(info=0.02, warning=0.5) == "info"
    assert severity(info=0.5) is None


def test_project_config_overrides_thresholds_and_settings(tmp_path, run, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perftool.yaml").write_text(
        "fail_on: warning\nrules:\n  PT001:\n    thresholds: {error: 0.1}\n    params: {target_overhead: 0.1}\n"
    )
    result = run("scan", SAMPLE, "--format", "json")
    finding = json.loads(result.stdout)["traces"][0]["findings"][0]
    assert result.exit_code == 1  # fail_on from the project config
    assert finding["severity"] == "error"
    assert finding["fix"]["changes"]["loop_size"] == 4  # a looser target needs a smaller loop size than 16


def test_pyproject_tool_section(tmp_path, run, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.perftool]\nignore = ["PT001"]\n[tool.perftool.rules.PT002]\nenabled = false\n'
    )
    project = load_project()
    assert project.ignore == ["PT001"]
    result = run("scan", SAMPLE, "--format", "json")
    assert json.loads(result.stdout)["traces"][0]["findings"] == []
    assert "(disabled)" in run("rules", "list").stdout


def test_the_project_config_is_found_upward_to_the_repository_root(tmp_path, run, monkeypatch):
    """As ruff and pytest look: from a subdirectory, the nearest perftool.yaml (or pyproject.toml with a
    [tool.perftool] table) up to the folder that holds .git; and the JSON says which file was used."""
    repository = tmp_path / "outer" / "repo"
    (repository / ".git").mkdir(parents=True)
    (repository / "perftool.yaml").write_text("fail_on: warning\n")
    (repository / "jobs" / "train").mkdir(parents=True)
    (repository / "jobs" / "pyproject.toml").write_text('[project]\nname = "train"\n')  # no [tool.perftool]
    (tmp_path / "outer" / "perftool.yaml").write_text("fail_on: never\n")  # above the repository: not used
    monkeypatch.chdir(repository / "jobs" / "train")
    result = run("scan", SAMPLE, "--format", "json")
    assert result.exit_code == 1  # the warning fails, as the repository's config says
    assert json.loads(result.stdout)["config"] == str(repository / "perftool.yaml")
    gated = run("gate", REPO / "sample_traces" / "baselines" / "npu__healthy.findings.json", SAMPLE, "--format", "json")
    assert json.loads(gated.stdout)["config"] == str(repository / "perftool.yaml")
    (repository / "perftool.yaml").unlink()
    monkeypatch.chdir(repository)
    assert load_project() is None  # the search stops at the repository's root
    assert json.loads(run("scan", SAMPLE, "--format", "json").stdout)["config"] is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rules:\n  PT999: {enabled: false}\n", "rules.PT999: no such rule"),
        ("fail_on: sometimes\n", "perftool.yaml:1: fail_on: Input should be"),
        (
            "rules:\n  PT001:\n    params: {nope: 1}\n",
            "rules.PT001.params.nope: detector host_bound has no such setting",
        ),
        (
            "rules:\n  PT001:\n    thresholds: {warning: 0.9}\n",
            "perftool.yaml: rules.PT001.thresholds: must not decrease",
        ),
        ("- a list\n", "must be a YAML mapping"),
    ],
)
def test_bad_project_config_is_exit_2(tmp_path, run, monkeypatch, text, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perftool.yaml").write_text(text)
    result = run("scan", SAMPLE)
    assert result.exit_code == 2 and expected in result.stderr


def test_templates_read_every_field_past_escaped_braces_and_bound_their_formats():
    assert template_fields("{{literal}} {share:.0%} and {lost_ms:ms}") == ["share", "lost_ms"]
    assert fill("{{n}} {share:.0%} {name!r} {name!s} {name:.1%}", {"share": 0.5, "name": "x"}) == "{n} 50% 'x' x x"
    assert fill("{share!s:.1%}", {"share": 0.5}) == "0.5"  # converted to text first: no percentage of a string
    assert template_fields("{share:>100}") == ["share"]
    with pytest.raises(ValueError, match=r"^template field \{share:>101\}: widths and precisions go up to 100$"):
        template_fields("{share:>101}")
    with pytest.raises(ValueError, match=r"^template field \{share\} has a nested field in its format$"):
        template_fields("{share:{width}}")


def test_findings_are_listed_by_cost_then_severity_then_rule():
    def finding(rule_id: str, share: float, severity: Severity) -> Finding:
        return Finding.model_construct(
            rule_id=rule_id, severity=severity, impact=Impact(lost_us=1.0, per_step_us=None, share=share)
        )

    listed = [finding("PT009", 0.1, Severity.WARNING), finding("PT002", 0.1, Severity.WARNING),
              finding("PT005", 0.1, Severity.ERROR), finding("PT001", 0.2, Severity.INFO)]  # fmt: skip
    assert [f.rule_id for f in sorted(listed, key=biggest_first)] == ["PT001", "PT005", "PT002", "PT009"]


def test_thresholds_pick_the_highest_level_reached():
    thresholds = Thresholds(info=0.01, warning=0.05, error=0.25)
    assert thresholds.severity(0.005, Severity.INFO) is None
    assert thresholds.severity(0.03, Severity.INFO) is Severity.INFO
    assert thresholds.severity(0.03, Severity.WARNING) is Severity.WARNING
    assert thresholds.severity(0.3, Severity.INFO) is Severity.ERROR
    assert thresholds.severity(0.05, Severity.INFO) is Severity.WARNING  # a threshold is reached at its value


def test_select_and_ignore_name_rules_by_id_or_name_or_all_of_them(run):
    rules = load_catalog()
    off = [rule.model_copy(update={"enabled": False}) if rule.id == "PT005" else rule for rule in rules]

    def ids(chosen) -> list[str]:
        return [rule.id for rule in chosen]

    assert "PT005" not in ids(selected(off, (), ()))  # as a project's `rules: {PT005: {enabled: false}}` leaves it
    assert ids(selected(off, ("ALL",), ())) == ids(rules)  # every rule, the one switched off included
    assert ids(selected(off, ("PT005", "cpu-fallback"), ())) == ["PT004", "PT005"]
    assert ids(selected(off, ("ALL",), ("PT001", "input-bound"))) == [
        r.id for r in rules if r.id not in {"PT001", "PT002"}
    ]
    assert selected(off, (), ("ALL",)) == []
    with pytest.raises(PerftoolError, match=r"^unknown rule 'all' in `select`/`ignore` \(see perftool rules list\)$"):
        selected(rules, ("all",), ())
    refused = run("scan", REPO / "sample_traces" / "npu" / "healthy.trace.json.gz", "--ignore", "PT999")
    assert error_line(refused) == "perftool: error: unknown rule 'PT999' in --select/--ignore (see perftool rules list)"


def test_rules_list_and_explain(run):
    listing = run("rules", "list").stdout
    assert all(f"PT00{i}" in listing for i in range(1, 9))
    page = " ".join(run("rules", "explain", "PT001").stdout.split())
    for heading in ("What it finds", "Why it matters", "Example", "How to fix", "Severity", "Template values"):
        assert heading in page
    assert "NPU_LOOP_SIZE" in page and "warning ≥ 5%" in page
    inputs = " ".join(run("rules", "explain", "PT002").stdout.split())
    assert "Titles preparing inputs: Device waits while the host prepares inputs in Python" in inputs
    assert run("rules", "explain", "cpu-fallback").stdout.startswith("PT004 cpu-fallback")
    missing = run("rules", "explain", "PT404")
    assert missing.exit_code == 2 and "unknown rule 'PT404'" in missing.stderr


def test_a_rule_s_markdown_page_says_what_its_text_page_says(run):
    """The documentation's rule pages are ``rules explain --format markdown``: the same parts, every fix of every
    cause and family, as headings and lists."""
    rule = load_rule(builtin_dir() / "PT011-exposed-communication.yaml")
    page = run("rules", "explain", "PT011", "--format", "markdown").stdout
    assert page.startswith("# PT011 exposed-communication\n\n**Communication not hidden behind compute**")
    headings = [line[3:] for line in page.splitlines() if line.startswith("## ")]
    assert headings == ["What it finds", "Why it matters", "Example", "How to fix", "Severity", "Titles",
                        "Template values", "References"]  # fmt: skip
    assert "- late peer: Collectives wait for a late rank" in page
    fixes = [line for line in page.splitlines() if line.lstrip().startswith("- **")]
    assert len(fixes) == len(rule.fix) + sum(len(by_family) for by_family in rule.fix_variants.values())
    for variant in rule.fix_variants:
        assert f"- when the cause is {variant.replace('_', ' ')}:" in page
    text = " ".join(run("rules", "explain", "PT011").stdout.split())
    assert "warning ≥ 5%" in text and "warning ≥ 5%" in page


def test_a_time_in_ms_reads_as_every_report_writes_times():
    """``{x_ms:ms}``: 1,206.79 ms is 1.207 s beside the report's other figures, not a number in another style."""
    assert fill("{a_ms:ms}, {b_ms:ms}, {c_ms:ms}", {"a_ms": 1206.79, "b_ms": 31.4234, "c_ms": 0.5}) == (
        "1.207 s, 31.423 ms, 500.0 µs"
    )


def test_every_count_the_built_in_rules_write_groups_its_thousands():
    """A figure with a fixed-point format reads 1,919 as every count perftool prints does, never 1919."""

    def strings(node: object) -> list[str]:
        if isinstance(node, dict):
            return [text for value in node.values() for text in strings(value)]
        if isinstance(node, list):
            return [text for value in node for text in strings(value)]
        return [node] if isinstance(node, str) else []

    ungrouped = [
        (path.name, field)
        for path in sorted(builtin_dir().glob("PT*.yaml"))
        for text in strings(yaml.safe_load(path.read_text()))
        for _, field, spec, _ in string.Formatter().parse(text)
        if field and spec and spec.endswith("f") and "," not in spec
    ]
    assert ungrouped == []
    assert fill("({launches_per_step:,.0f} calls)", {"launches_per_step": 1919.4}) == "(1,919 calls)"


def test_unknown_numbers_read_n_a():
    assert fill("{per_step:.2f} per step, {share:.0%}", {"per_step": float("nan"), "share": 0.5}) == "n/a per step, 50%"


def test_a_trace_without_steps_words_its_figures_over_the_trace():
    assert (
        over_the_trace("idle {share:.1%} of the steady state ({ms:.2f} ms per step); {n:.0f} calls per step traced")
        == "idle {share:.1%} of the trace ({ms:.2f} ms in the trace); {n:.0f} calls in the trace traced"
    )
    advice = "Overlap communication with compute and move less per step."
    assert over_the_trace(advice) == advice  # no figure of its own: general advice keeps its words


def no_step_launches() -> dict:
    """300 launches of 5 µs kernels, 20 µs apart, every op and kernel named once: no step marker and no repeat to
    infer steps from."""
    events = [
        {"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]
    for i in range(300):
        t = i * 20.0
        events += [
            {"ph": "X", "name": f"aten::op_{i}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": t, "dur": 18},
            {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": t + 4,
             "dur": 12, "args": {"correlation": i + 1}},
            {"ph": "X", "name": f"kernel_{i}", "cat": "kernel", "pid": 0, "tid": 7, "ts": t + 17, "dur": 5,
             "args": {"correlation": i + 1}},
        ]  # fmt: skip
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": events}


def test_a_finding_without_steps_gives_its_figures_for_the_trace_never_n_a(run, write_trace):
    path = write_trace(no_step_launches())
    (trace,) = json.loads(run("scan", path, "--format", "json", "--fail-on", "never").stdout)["traces"]
    (host,) = trace["findings"]
    assert trace["steps"] == 0 and host["impact"]["per_step_us"] is None  # null where there are no steps
    assert "(299 traced runtime calls in the trace)" in host["fix"]["text"]
    assert host["message"].startswith("The device is idle 74.9% of the trace while")
    text = run("scan", path, "--fail-on", "never").stdout
    assert "n/a" not in text and "per step" not in text.split("gain")[0]


def test_detector_settings_are_typed_and_explained(run, tmp_path):
    rules = tmp_path / "rules"
    path = _write_rule(rules, params={"max_loop_size": 1.5})
    error_line(run("rules", "list", "--rules", rules), f"{path}:", "params.max_loop_size", "expected a whole number")
    _write_rule(rules, params={"max_loop_size": 64})
    page = " ".join(run("rules", "explain", "PX001", "--rules", rules).stdout.split())
    assert "max_loop_size = 64 (int; default 1024): the largest loop size advice may name" in page
