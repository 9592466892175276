"""``perftool gate``: noise passes, real regressions fail, outputs are what CI systems read."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from conftest import REPO, complete, error_line, kernel_steps

from perftool.gate.inputs import Side
from perftool.gate.stats import p_greater, ranks
from perftool.gate.verdict import _rank_differences

SAMPLES = REPO / "sample_traces"
NPU = SAMPLES / "npu" / "healthy.yaml"


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """emulated(name, *overrides) -> path of an emulated npu trace (cached per name)."""
    from click.testing import CliRunner

    from perftool.cli.main import cli

    folder = tmp_path_factory.mktemp("gate")
    made = {}

    def make(name: str, *overrides: str, config=NPU):
        if name not in made:
            path = folder / f"{name}.trace.json.gz"
            args = ["emulate", str(config), "--trace", str(path)] + [a for o in overrides for a in ("--set", o)]
            assert CliRunner().invoke(cli, args).exit_code == 0
            made[name] = path
        return made[name]

    return make


def gate_json(run, *args):
    result = run("gate", *args, "--format", "json")
    return result.exit_code, json.loads(result.stdout) if result.stdout else None, result.stderr


def checks(document) -> dict[str, dict]:
    return {check["id"]: check for check in document["checks"]}


# --- statistics -----------------------------------------------------------------------------------------------------


def test_ranks_share_ties():
    assert ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]


def test_mann_whitney_p_value_matches_the_exact_small_case():
    # all 3 candidate values above all 3 baseline values: exact one-sided p = 1 / C(6, 3) = 0.05;
    # the normal approximation with continuity correction gives 0.04.
    p = p_greater(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]))
    assert 0.03 < p < 0.06
    assert p_greater(np.array([4.0, 5.0, 6.0]), np.array([1.0, 2.0, 3.0])) > 0.9
    same = np.arange(50.0)
    assert p_greater(same, same) == pytest.approx(0.5, abs=0.05)


def test_mann_whitney_with_ties_matches_a_reference_implementation():
    """Many ties: the tie correction and the continuity correction both move the p-value. The reference is SciPy
    1.17's mannwhitneyu(candidate, baseline, alternative="greater", method="asymptotic"): 0.0072080 (without the
    continuity correction 0.0064784, without the tie correction 0.0077822)."""
    baseline = np.array([1.0, 2, 2, 3, 3, 3, 4, 5, 5, 6])
    candidate = np.array([3.0, 4, 4, 5, 5, 6, 6, 7, 7, 8])
    assert p_greater(baseline, candidate) == pytest.approx(0.0072080462, rel=1e-6)


def test_mann_whitney_without_spread_or_with_one_step_a_side():
    """Steps all equal have no rank variance: nothing says the candidate is slower (p = 1). One step a side: U = 1 of
    1 pair, variance 1 * 1 / 12 * 3 = 0.25, z = (1 - 0.5 - 0.5) / 0.5 = 0, so p = 0.5."""
    assert p_greater(np.full(6, 100.0), np.full(6, 100.0)) == 1.0
    assert p_greater(np.array([1.0]), np.array([2.0])) == 0.5


# --- the checks the issue names ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_twenty_seeds_of_the_same_config_never_fail(run, emulated):
    baseline = emulated("seed0", "seed=0")
    for seed in range(1, 21):
        code, document, _ = gate_json(run, baseline, emulated(f"seed{seed}", f"seed={seed}"))
        assert code == 0 and document["status"] != "fail", checks(document)


@pytest.mark.parametrize(
    ("slower", "fails"),
    [(1.10, True), (1.02, False)],
)
def test_a_uniformly_slower_candidate_fails_at_ten_percent_and_passes_at_two(run, emulated, slower, fails):
    gflops = 12.3 * slower  # the healthy sample's model, made slower on the device
    candidate = emulated(f"slower{slower}", f"workload.gflops_per_sample={gflops}", "seed=8")
    code, document, _ = gate_json(run, emulated("base", "seed=7"), candidate, "--allow-mismatch")
    step = checks(document)["timing:step_time"]
    assert step["change"].startswith("+") and abs(float(step["change"].rstrip("%")) / 100 - (slower - 1)) < 0.015
    assert (code, step["verdict"]) == ((1, "fail") if fails else (0, "pass"))
    assert document["mismatches"] == [f"workload.gflops_per_sample 12.3 → {gflops}"]


def test_a_smaller_loop_size_that_costs_throughput_fails(run, emulated):
    code, document, _ = gate_json(run, emulated("base", "seed=7"), emulated("loop2", "loop_size=2", "seed=8"))
    throughput = checks(document)["timing:throughput"]
    assert code == 1 and throughput["verdict"] == "fail" and throughput["change"].startswith("-")
    assert checks(document)["metric:device.idle_fraction"]["verdict"] == "fail"


def test_one_added_recompilation_fails_even_with_the_same_step_time(run, emulated):
    base = emulated("loop32", "seed=7", "workload.steps=256")
    remainder = emulated("loop48", "loop_size=48", "seed=7", "workload.steps=256")  # 256 % 48: a remainder loop
    code, document, _ = gate_json(run, base, remainder, "--fail-on", "never")
    found = checks(document)
    assert found["counter:recompilations.count"]["verdict"] == "fail"
    assert found["counter:recompilations.count"]["candidate"] == found["counter:recompilations.count"]["baseline"] + 1
    assert code == 1


def test_one_added_cpu_fallback_fails_even_with_the_same_step_time(run, tmp_path):
    config = SAMPLES / "hpu" / "cpu_fallback.yaml"
    text = config.read_text()
    extra = text.replace("cpu_fallback_ops:\n", "cpu_fallback_ops:\n  - {op: lgamma, host_us: 1, tensor_size: 1kB}\n")
    assert extra != text
    more = tmp_path / "more.yaml"
    more.write_text(extra)
    base, cand = tmp_path / "base.json.gz", tmp_path / "cand.json.gz"
    assert run("emulate", config, "--trace", base).exit_code == 0
    assert run("emulate", more, "--trace", cand).exit_code == 0
    code, document, _ = gate_json(run, base, cand, "--fail-on", "never")
    found = checks(document)
    assert found["counter:cpu_fallback.ops"]["verdict"] == "fail"
    assert found["counter:cpu_fallback.ops"]["candidate"] == found["counter:cpu_fallback.ops"]["baseline"] + 1
    assert found["timing:step_time"]["verdict"] == "pass"  # 1 µs on the host: time alone would not fail
    assert code == 1


def test_a_new_finding_at_fail_on_fails_and_one_in_both_does_not(run, emulated):
    base = emulated("base", "seed=7")
    host_bound = emulated("loop1", "loop_size=1", "seed=8")
    code, document, _ = gate_json(run, base, host_bound, "--fail-on", "warning", "--threshold", "0.9")
    new = [c for c in document["checks"] if c["id"].startswith("finding:")]
    title = json.loads(run("scan", host_bound, "--format", "json").stdout)["traces"][0]["findings"][0]["title"]
    assert [c["verdict"] for c in new] == ["fail"] and new[0]["detail"] == f"new in the candidate: {title}"
    assert "PT001" in new[0]["name"] and new[0]["limit"] == "new finding at --fail-on or above" and code == 1
    assert (document["explanations"], document["unexplained"]) == ([], "")  # only a failed step time is explained
    code, document, _ = gate_json(run, host_bound, emulated("loop1b", "loop_size=1", "seed=9"), "--fail-on", "warning")
    both = [c for c in document["checks"] if c["id"].startswith("finding:")]
    assert [c["verdict"] for c in both] == ["pass"] and both[0]["detail"] == f"also in the baseline: {title}"
    assert code == 0
    _, document, _ = gate_json(run, host_bound, base, "--fail-on", "warning", "--threshold", "0.9")
    fixed = [c for c in document["checks"] if c["id"].startswith("finding:")]
    assert [(c["verdict"], c["detail"]) for c in fixed] == [("pass", f"fixed: only in the baseline: {title}")]


def test_a_finding_of_a_rule_the_baseline_s_scan_did_not_run_is_no_regression(run, emulated, tmp_path):
    """A stored baseline scanned before a rule existed (or with --select): the candidate's finding of that rule passes,
    saying why; a baseline document that lists no rules (written before the field) still counts it as new."""
    base, host_bound = emulated("base", "seed=7"), emulated("loop1", "loop_size=1", "seed=8")
    scanned = json.loads(run("scan", base, "--format", "json", "--fail-on", "never").stdout)
    (trace,) = scanned["traces"]
    assert "PT001" in trace["rules"] and len(trace["rules"]) == len(set(trace["rules"]))
    for rules, verdict in ((sorted(set(trace["rules"]) - {"PT001"}), "pass"), ([], "fail")):
        trace["rules"] = rules
        stored = tmp_path / f"baseline-{verdict}.findings.json"
        stored.write_text(json.dumps(scanned))
        _, document, _ = gate_json(run, stored, host_bound, "--fail-on", "warning", "--threshold", "0.9")
        (check,) = [c for c in document["checks"] if c["id"].startswith("finding:")]
        assert check["verdict"] == verdict
        said = "not judged in the baseline, whose scan ran no PT001" if rules else "new in the candidate"
        assert check["detail"].startswith(said)


def test_a_budget_holds_the_candidates_findings_to_fail_on(run, emulated, tmp_path):
    budget = tmp_path / "budget.yaml"
    budget.write_text("metrics:\n  step_time_us.median: {error: 1e9}\n")
    host_bound = emulated("loop1", "loop_size=1", "seed=8")
    (finding,) = json.loads(run("scan", host_bound, "--format", "json").stdout)["traces"][0]["findings"]
    assert finding["severity"] == "warning"
    for fail_on, verdict, code in (("warning", "fail", 1), ("error", "pass", 0)):
        exit_code, document, _ = gate_json(run, host_bound, "--budget", budget, "--fail-on", fail_on)
        held = [(c["verdict"], c["detail"]) for c in document["checks"] if c["id"].startswith("finding:")]
        assert (held, exit_code) == ([(verdict, finding["title"])], code)
    _, document, _ = gate_json(run, host_bound, "--budget", budget, "--fail-on", "never")
    assert [c["id"] for c in document["checks"]] == ["budget:step_time_us.median"]


def test_saved_scan_results_gate_like_the_traces(run, emulated, tmp_path):
    base, cand = emulated("base", "seed=7"), emulated("loop2", "loop_size=2", "seed=8")
    saved = []
    for trace in (base, cand):
        path = tmp_path / f"{trace.name}.findings.json"
        run("scan", trace, "--format", "json", "-o", path)
        saved.append(path)
    _, from_traces, _ = gate_json(run, base, cand)
    code, from_scans, _ = gate_json(run, *saved)
    assert code == 1

    def without_explanation(checks: list[dict]) -> list[dict]:
        return [c | {"detail": c["detail"].split("; step ")[0]} for c in checks]

    assert without_explanation(from_scans["checks"]) == without_explanation(from_traces["checks"])
    # the traces' diff explains the failed step time; the saved scans hold no events to diff
    assert from_traces["explanations"] and not from_scans["explanations"]
    assert from_scans["unexplained"] == "a saved scan result holds no events: diff the traces themselves to see why"
    _, one_saved, _ = gate_json(run, saved[0], cand)  # one side saved is enough to leave nothing to diff
    assert one_saved["unexplained"] == from_scans["unexplained"] and not one_saved["explanations"]


# --- budgets ----------------------------------------------------------------------------------------------


def test_gzipped_saved_scan_results_gate_like_the_plain_ones(run, emulated, tmp_path):
    saved = []
    for trace in (emulated("base", "seed=7"), emulated("loop2", "loop_size=2", "seed=8")):
        path = tmp_path / f"{trace.name}.findings.json"
        run("scan", trace, "--format", "json", "-o", path)
        packed = path.with_suffix(".json.gz")
        packed.write_bytes(gzip.compress(path.read_bytes()))
        saved.append((path, packed))
    code, plain, _ = gate_json(run, saved[0][0], saved[1][0])
    packed_code, packed, _ = gate_json(run, saved[0][1], saved[1][1])
    assert (packed_code, packed["checks"]) == (code, plain["checks"]) and code == 1
    cut = tmp_path / "cut.findings.json.gz"
    cut.write_bytes(saved[0][1].read_bytes()[:-12])  # its end (and the gzip trailer) lost
    result = run("gate", cut, saved[1][1])
    assert result.exit_code == 2 and error_line(result).startswith(f"perftool: error: {cut}")


def test_budget_limits_warn_and_fail_without_a_baseline(run, emulated, tmp_path):
    budget = tmp_path / "budget.yaml"
    budget.write_text(
        "metrics:\n"
        "  step_time_us.median: {warn: 9000, error: 20000}\n"
        "  throughput.steps_per_s: {warn: 200, error: 50}\n"
        "  recompilations.count: {error: 0}\n"
    )
    code, document, _ = gate_json(run, emulated("base", "seed=7"), "--budget", budget)
    found = checks(document)
    assert found["budget:step_time_us.median"]["verdict"] == "warn"  # ~9.2 ms: over 9 ms, under 20 ms
    assert found["budget:throughput.steps_per_s"]["verdict"] == "warn"  # ~108 steps/s: under 200, over 50
    assert found["budget:recompilations.count"]["verdict"] == "pass"
    assert code == 0 and document["status"] == "warn" and document["baseline"] is None
    budget.write_text("metrics:\n  step_time_us.median: {error: 5000}\n")
    assert run("gate", emulated("base", "seed=7"), "--budget", budget).exit_code == 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("metrics:\n  step_time.median: {error: 1}\n", "metrics: not a metric: step_time.median"),
        ("metrics:\n  step_time_us.median: {warn: 10, error: 5}\n", "warn must come before error"),
        ("metrics:\n  throughput.steps_per_s: {warn: 10, error: 50}\n", "warn must come before error"),
        ("metrics:\n  step_time_us.median: {}\n", "give warn, error or both"),
        ("metrics:\n  step_time_us.median: {error: fast}\n", "Input should be a valid number"),
        ("metrics:\n  device.idle_fraction: {warn: .nan}\n", "Input should be a finite number"),  # NaN passed all
        ("metrics:\n  device.idle_fraction: {error: .inf}\n", "Input should be a finite number"),
        ("- a list\n", "a budget must be a YAML mapping"),
    ],
)
def test_bad_budgets_are_exit_2(run, emulated, tmp_path, text, says):
    budget = tmp_path / "budget.yaml"
    budget.write_text(text)
    result = run("gate", emulated("base", "seed=7"), "--budget", budget)
    assert result.exit_code == 2 and says in result.stderr and str(budget) in result.stderr
    assert result.stderr.count("\n") == 1


# --- comparable baselines only ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"- a list\n", "a budget must be a YAML mapping with a metrics: section"),
        (b"\xff\xfemetrics: {}\n", "cannot read budget: not UTF-8 (byte 0)"),
    ],
)
def test_a_budget_that_is_no_mapping_or_no_text_is_named_as_a_budget(run, emulated, tmp_path, content, says):
    budget = tmp_path / "budget.yaml"
    budget.write_bytes(content)
    result = run("gate", emulated("base", "seed=7"), "--budget", budget)
    assert error_line(result) == f"perftool: error: {budget}: {says}"


def test_ranks_only_one_job_has_are_named_on_the_side_that_has_them():
    def job(ranks) -> Side:
        return Side("job", dict.fromkeys(ranks))  # only the ranks are read

    assert _rank_differences(job(range(16)), job(range(4))) == [
        "world size 16 → 4 ranks",
        "ranks 4, 5, 6, 7, 8, 9, 10, 11 and 4 more only in the baseline",
    ]
    assert _rank_differences(job(range(6)), job(range(7))) == ["world size 6 → 7 ranks", "rank 6 only in the candidate"]
    assert _rank_differences(job([0, 2, 1]), job([3, 0, 1])) == [
        "rank 2 only in the baseline",
        "rank 3 only in the candidate",
    ]
    assert _rank_differences(job(range(4)), job(range(4))) == []


def test_a_baseline_of_another_job_is_refused_unless_allowed(run, emulated):
    base = emulated("base", "seed=7")
    other = emulated("ipu", config=SAMPLES / "ipu" / "healthy.yaml")
    result = run("gate", base, other)
    assert result.exit_code == 2
    assert "not the same job" in result.stderr and "device family npu → ipu" in result.stderr
    assert "--allow-mismatch" in result.stderr
    heavier = emulated("heavier", "workload.weights=60MB")
    refused = run("gate", base, heavier)
    assert refused.exit_code == 2 and "workload.weights 51000000 → 60000000" in refused.stderr
    allowed = run("gate", base, heavier, "--allow-mismatch", "--format", "json")
    assert allowed.exit_code in (0, 1) and json.loads(allowed.stdout)["mismatches"]


def test_a_result_saved_before_a_workload_field_existed_is_the_same_job(run, emulated, tmp_path):
    """A field a saved result lacks is the field's default, not a difference; a value other than that is one."""
    base = emulated("base", "seed=7")
    saved = tmp_path / "saved.json"
    run("scan", base, "--format", "json", "-o", saved)
    document = json.loads(saved.read_text())
    del document["traces"][0]["emulator"]["workload"]["half_efficiency_batch"]
    saved.write_text(json.dumps(document))
    assert run("gate", saved, base).exit_code == 0
    filling = emulated("filling", "seed=7", "workload.half_efficiency_batch=32")
    refused = run("gate", saved, filling)
    assert refused.exit_code == 2 and "workload.half_efficiency_batch 0.0 → 32.0" in refused.stderr


def test_usage_and_input_errors_are_exit_2(run, emulated, tmp_path):
    base = emulated("base", "seed=7")
    assert run("gate", base).exit_code == 2  # one trace and no budget
    assert run("gate", base, base, base).exit_code == 2
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "perftool.findings/1", "tool": {}}')
    result = run("gate", broken, base)
    assert result.exit_code == 2 and "not a perftool scan result" in result.stderr
    two = tmp_path / "two.json"
    run("scan", base, base, "--format", "json", "-o", two)
    result = run("gate", two, base)
    assert result.exit_code == 2 and "two.json: 2 traces, not the ranks of one job" in result.stderr
    missing = run("gate", tmp_path / "nope.json", base)
    assert missing.exit_code == 2 and "Traceback" not in missing.stderr


# --- output formats ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def regression(emulated):
    return emulated("base", "seed=7"), emulated("loop2", "loop_size=2", "seed=8")


def test_text_shows_a_row_per_check_and_the_verdict(run, regression):
    result = run("gate", *regression)
    assert result.exit_code == 1
    assert "throughput" in result.stdout and "steps/s" in result.stdout and "FAIL" in result.stdout
    assert "FAIL: 3 failed" in " ".join(result.stdout.split())


def test_markdown_is_a_table(run, regression):
    text = run("gate", *regression, "--format", "markdown").stdout
    lines = text.splitlines()
    assert lines[0] == "# perftool gate: ❌ fail"
    header = lines.index("| check | baseline | candidate | change | verdict | why |")
    assert lines[header + 1] == "| --- | ---: | ---: | ---: | --- | --- |"
    rows = lines[header + 2 : lines.index("", header)]
    document = json.loads(run("gate", *regression, "--format", "json").stdout)
    assert len(rows) == len(document["checks"])
    assert all(row.count(" | ") == 5 for row in rows)
    (explained,) = document["explanations"]  # the failed throughput, explained below the checks by the traces' diff
    assert "### Why the step time changed" in text and explained["headline"] in text


def test_junit_has_one_test_case_per_check_and_failures(run, regression, tmp_path, junit_schema):
    out = tmp_path / "gate.xml"
    assert run("gate", *regression, "--format", "junit", "-o", out).exit_code == 1
    junit_schema.validate(str(out))
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    document = json.loads(run("gate", *regression, "--format", "json").stdout)
    assert len(cases) == len(document["checks"]) == int(suite.get("tests"))
    failed = [case for case in cases if case.find("failure") is not None]
    assert len(failed) == int(suite.get("failures")) == document["counts"]["fail"] == 3
    for case in cases:
        assert case.get("name") and case.get("classname", "").startswith("perftool.gate.")


def test_sarif_lists_failed_and_warned_checks(run, regression, sarif_validator):
    document = json.loads(run("gate", *regression, "--format", "sarif").stdout)
    assert [error.message for error in sarif_validator.iter_errors(document)] == []
    assert document["version"] == "2.1.0"
    (sarif_run,) = document["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    results = sarif_run["results"]
    assert {r["level"] for r in results} == {"error", "warning"}
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["partialFingerprints"]["perftoolGateCheck/v1"]
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]


def test_a_job_s_checks_are_listed_in_sarif_under_their_kind_s_rule(run, sarif_validator):
    """A job's checks are each rank's (``rank0/timing:step_time``): one rule per kind of check, whatever the rank,
    each result naming its rank. msinsight's db job captured one step a rank: its timing is not checked."""
    job = REPO / "tests" / "data" / "real" / "torch_npu_db_l2_job"
    result = run("gate", job, job, "--format", "sarif", "--workers", "1")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert [error.message for error in sarif_validator.iter_errors(document)] == []
    (sarif_run,) = document["runs"]
    assert [rule["id"] for rule in sarif_run["tool"]["driver"]["rules"]] == ["gate/timing"]
    checks = {r["partialFingerprints"]["perftoolGateCheck/v1"]: r for r in sarif_run["results"]}
    assert sorted(checks) == [f"rank{r}/timing:{name}" for r in (0, 1) for name in ("step_time", "throughput")]
    assert all(r["ruleId"] == "gate/timing" and r["ruleIndex"] == 0 for r in checks.values())
    assert checks["rank1/timing:step_time"]["message"]["text"].startswith("rank 1: step time (median)")


def test_a_passing_gate_is_valid_junit_and_sarif_too(run, emulated, tmp_path, junit_schema, sarif_validator):
    baseline, candidate = emulated("seed0", "seed=0"), emulated("seed1", "seed=1")
    junit = tmp_path / "pass.xml"
    assert run("gate", baseline, candidate, "--format", "junit", "-o", junit).exit_code == 0
    junit_schema.validate(str(junit))
    assert ET.parse(junit).getroot().find("testsuite").get("failures") == "0"
    sarif = json.loads(run("gate", baseline, candidate, "--format", "sarif").stdout)
    assert [error.message for error in sarif_validator.iter_errors(sarif)] == []
    assert sarif["runs"][0]["results"] == []


def test_github_annotations(run, regression):
    lines = run("gate", *regression, "--format", "github").stdout.splitlines()
    assert sum(line.startswith("::error ") for line in lines) == 3
    assert lines[-1].startswith("::notice title=perftool gate::fail: 3 failed")


def test_a_saved_scan_with_a_broken_emulator_config_is_bad_input(run, emulated, tmp_path):
    saved = tmp_path / "saved.findings.json"
    assert run("scan", emulated("seed0", "seed=0"), "--format", "json", "-o", saved).exit_code == 0
    document = json.loads(saved.read_text())
    document["traces"][0]["emulator"]["workload"] = None
    saved.write_text(json.dumps(document))
    result = run("gate", saved, saved)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert str(saved) in line and "traces[0].emulator.workload" in line  # field paths read the same in every file


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_a_budget_report_shows_the_limits_and_the_one_that_failed(run, tmp_path, fmt):
    budget = tmp_path / "budget.yaml"
    budget.write_text("metrics:\n  step_time_us.median: {warn: 9500, error: 11000}\n")
    candidate = REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz"
    result = run("gate", candidate, "--budget", budget, "--format", fmt)
    assert result.exit_code == 1
    assert "baseline" not in result.stdout and "—" not in result.stdout  # no empty baseline column
    words = " ".join(result.stdout.replace("\\", "").split())  # the limits may wrap inside their cell
    assert "warn above 9.500 ms, error above" in words and "11.000 ms" in words  # in the metric's unit
    assert "11.239 ms is above the error limit of 11.000 ms" in words


def test_other_device_constants_are_another_job(run, tmp_path):
    config = REPO / "sample_traces" / "npu" / "healthy.yaml"
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    run("emulate", config, "--trace", base)
    run("emulate", config, "--trace", cand, "--set", "device_overrides.efficiency=0.5")
    refused = run("gate", base, cand)
    assert refused.exit_code == 2 and "device constants as profiled → {'efficiency': 0.5" in refused.stderr


# --- too few steps to compare -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "junit", "github", "sarif", "html"])
def test_a_step_time_that_cannot_be_compared_fails_and_says_why_in_every_format(
    run, tmp_path, fmt, junit_schema, sarif_validator
):
    """Two steps a side (a 3x slower candidate): not checked, which fails the gate by default and warns with
    --fail-on never; every format names the check and why."""
    base, new = kernel_steps(tmp_path / "base.json", 2, 1), kernel_steps(tmp_path / "new.json", 2, 3)
    out = tmp_path / f"gate.{fmt}"
    result = run("gate", base, new, "--format", fmt, "-o", out)
    assert result.exit_code == 1, result.stderr
    text = out.read_text()
    words = " ".join(text.replace("│", " ").replace("┃", " ").split())  # a wrapped table cell read as one line
    assert "needs 3 steady steps a side, and the baseline has 2, the candidate 2" in words
    if fmt == "json":
        document = json.loads(text)
        assert checks(document)["timing:step_time"]["verdict"] == "not_checked" and document["status"] == "fail"
    elif fmt == "junit":
        junit_schema.validate(str(out))
        assert ET.parse(out).getroot().find("testsuite").get("failures") == "2"
    elif fmt == "sarif":
        document = json.loads(text)
        assert [error.message for error in sarif_validator.iter_errors(document)] == []
        assert {r["level"] for r in document["runs"][0]["results"]} == {"error"}
    elif fmt == "text":
        assert "NOT CHECKED" in text and "2 not checked" in text
    never = run("gate", base, new, "--format", fmt, "--fail-on", "never")
    assert never.exit_code == 0


def test_a_gate_failed_by_checks_it_could_not_make_says_so_in_its_last_line(run, tmp_path):
    """Nothing failed outright: the exit line names the checks not made, not "0 checks failed"."""
    base, same = kernel_steps(tmp_path / "base.json", 2, 1), kernel_steps(tmp_path / "same.json", 2, 1)
    result = run("gate", base, same)
    assert result.exit_code == 1
    assert result.stderr == "perftool: the gate fails: 2 checks could not be made: exit 1\n"


def test_unmarked_steps_that_cannot_be_told_apart_are_not_checked(run, tmp_path):
    """One kernel and no step markers: no step to compare, so the gate cannot pass the candidate as it did."""
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"traceEvents": [complete("gemm_kernel", 100, 8_000, pid=0, tid=7, cat="kernel")]}))
    code, document, _ = gate_json(run, one, one)
    assert code == 1 and checks(document)["timing:throughput"]["verdict"] == "not_checked"


@pytest.mark.parametrize(
    ("steps", "slowdown", "verdict", "code"), [(3, 3, "fail", 1), (4, 1.5, "fail", 1), (4, 1, "pass", 0)]
)
def test_three_or_four_steps_a_side_are_held_to_a_bound(run, tmp_path, steps, slowdown, verdict, code):
    """Below five steps a side no rank test reaches p < 0.01; every candidate step slower than every baseline step
    by more than the threshold fails instead of being skipped."""
    base, new = kernel_steps(tmp_path / "base.json", steps, 1), kernel_steps(tmp_path / "new.json", steps, slowdown)
    exit_code, document, _ = gate_json(run, base, new)
    step = checks(document)["timing:step_time"]
    assert exit_code == code and step["verdict"] == verdict
    if verdict == "fail":
        assert "every candidate step slower" in step["detail"] and f"{steps} steps a side" in step["detail"]


def test_overlapping_steps_below_five_a_side_only_warn(run, tmp_path):
    base = kernel_steps(tmp_path / "base.json", 4, 1)
    document = json.loads(base.read_text())  # one slow baseline step: the sides overlap
    next(e for e in document["traceEvents"] if e["name"] == "ProfilerStep#1")["dur"] = 40_000
    base.write_text(json.dumps(document))
    exit_code, result, _ = gate_json(run, base, kernel_steps(tmp_path / "new.json", 4, 1.5))
    step = checks(result)["timing:step_time"]
    assert exit_code == 0 and step["verdict"] == "warn" and "the steps overlap" in step["detail"]


def test_a_finding_in_both_traces_is_neither_fixed_nor_new_whatever_the_order_of_its_names(run, write_trace):
    """Two captures of one job whose two sync calls take equal time and come in the other order: the finding's
    fingerprint followed the names' order, and gate reported it both fixed and new, failing CI (hardening round 4).
    A fingerprint holds the names as a set."""

    def capture(first: str, second: str) -> str:
        events = []
        for step in range(8):
            at = step * 1000
            events += [
                complete(f"ProfilerStep#{step}", at, 990, cat="user_annotation"),
                complete("cudaLaunchKernel", at + 5, 5, cat="cuda_runtime", args={"correlation": step + 1}),
                complete("gemm", at + 20, 400, pid=0, tid=7, cat="kernel", args={"correlation": step + 1}),
                complete(first, at + 20, 200, cat="cuda_runtime"),
                complete(second, at + 230, 200, cat="cuda_runtime"),
            ]
        return write_trace({"traceEvents": events}, f"{first}.json")

    baseline = capture("cudaStreamSynchronize", "cudaDeviceSynchronize")
    candidate = capture("cudaDeviceSynchronize", "cudaStreamSynchronize")
    verdict = json.loads(run("gate", baseline, candidate, "--format", "json").stdout)
    findings = [check for check in verdict["checks"] if check["id"].startswith("finding:")]
    assert [(check["verdict"], check["detail"]) for check in findings] == [
        ("pass", "also in the baseline: Host-device synchronisation every step")
    ]


def stepped(path, durations_ms: list[float]):
    """A trace of marked steps lasting ``durations_ms``, each filled by one kernel but for 100 µs."""
    events, start = [], 0.0
    for step, length in enumerate(durations_ms):
        events.append(complete(f"ProfilerStep#{step}", start, length * 1e3, cat="user_annotation"))
        events.append(complete("gemm_kernel", start + 50, length * 1e3 - 100 + step, pid=0, tid=7, cat="kernel"))
        start += length * 1e3 + 10
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_slower_median_that_the_rank_test_cannot_tell_from_noise_only_warns(run, tmp_path):
    """Eight steps a side of 20 and 30 ms: the candidate has more of the slow ones, so its median is 20% worse, but
    the two sides overlap step for step and the rank test finds no significance: the gate warns, never fails."""
    base = stepped(tmp_path / "base.json", [20, 30] * 4)
    new = stepped(tmp_path / "new.json", [20, 30, 30, 30] * 2)
    code, document, _ = gate_json(run, base, new)
    step = checks(document)["timing:step_time"]
    assert step["change"] == "+20.0%" and step["verdict"] == "warn" and "not significant" in step["detail"]
    assert code == 0
    separated = stepped(tmp_path / "slow.json", [36, 37] * 4)  # every step slower: the same median change fails
    code, document, _ = gate_json(run, stepped(tmp_path / "fast.json", [30, 31] * 4), separated)
    assert code == 1 and checks(document)["timing:step_time"]["verdict"] == "fail"


def test_a_directory_of_one_process_s_captures_is_no_side_to_gate(run):
    """tests/data/profiler_cycles/one_process: two cycles of a repeating profiler schedule. gate compares one trace
    with one: it says these are one process's captures, not a job, in one line."""
    captures = REPO / "tests" / "data" / "profiler_cycles" / "one_process"
    error_line(
        run("gate", captures, captures, "--workers", "1"),
        f"{captures}: 2 captures of one process at different times (a profiler schedule that repeats), not the ranks "
        "of a job; gate compares one trace with one, or a job with a job",
    )
