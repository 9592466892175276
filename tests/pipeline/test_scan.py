"""perftool scan on the bundled samples and through the CLI, as a user runs it."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TORCH_FIXTURE

from perftool.analysis import host_work
from perftool.analysis import steps as steps_module
from perftool.analysis.metrics import compute_metrics
from perftool.analysis.steps import detect_steps
from perftool.api import emulate
from perftool.common import limits
from perftool.emulator.config import load_config
from perftool.emulator.evaluate import evaluate
from perftool.pipeline import scan
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import scan_files
from perftool.predict import gains
from perftool.rules import prediction
from perftool.rules.catalog import load_catalog
from perftool.rules.findings import SCHEMA
from perftool.rules.prediction import HELPS

SAMPLES = REPO / "sample_traces"
KINETO_SAMPLE = SAMPLES / "gpu_training_kineto.pt.trace.json.gz"
REAL = REPO / "tests" / "data" / "real"
INTENDED = {
    "host_bound_loop_size": "PT001",
    "host_bound_device_iterations": "PT001",
    "host_bound_no_hpu_graphs": "PT001",
    "launch_bound_no_cuda_graphs": "PT001",
    "input_bound_prefetch": "PT002",
    "recompile_remainder_loop": "PT003",
    "recompile_unpadded_last_batch": "PT003",
    "cpu_fallback": "PT004",
    "offload_stream_copies": "PT005",
    "strided_copies": "PT006",
    "strided_copies_transdata": "PT006",
    "serialised_transfers_no_io_tiles": "PT007",
    "sync_every_step": "PT008",
    "pageable_readback": "PT009",
}
EMULATOR_SAMPLES = sorted(SAMPLES.glob("*/*.trace.json.gz"))


@pytest.fixture(scope="module")
def reports():
    rules = load_catalog()
    return {path: scan_files([str(path)], rules).traces[0] for path in EMULATOR_SAMPLES}


def test_every_sample_has_an_intended_rule_or_is_healthy():
    stems = {path.name.removesuffix(".trace.json.gz") for path in EMULATOR_SAMPLES}
    assert stems - {"healthy"} == set(INTENDED)


@pytest.mark.parametrize("path", EMULATOR_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_sample_triggers_only_its_intended_rule(reports, path):
    stem = path.name.removesuffix(".trace.json.gz")
    serious = [f.rule_id for f in reports[path].findings if f.severity.value != "info"]
    if stem == "healthy":
        assert serious == []
    else:
        assert serious == [INTENDED[stem]]


@pytest.mark.parametrize("path", [p for p in EMULATOR_SAMPLES if "healthy" not in p.name], ids=lambda p: p.name)
def test_emulator_findings_carry_a_predicted_gain_that_helps(reports, path):
    finding = reports[path].findings[0]
    assert finding.gain.kind == "predicted"
    assert finding.fix.changes
    assert finding.gain.speedup >= HELPS  # over the job: a compile paid once in 30 epochs wins back little
    assert finding.gain.step_time_us_after < finding.gain.step_time_us_before


def test_host_bound_fix_computes_a_loop_size_that_divides_the_epoch(reports):
    finding = reports[SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz"].findings[0]
    loop = finding.fix.changes["loop_size"]
    assert loop > 1 and loop & (loop - 1) == 0 and 256 % loop == 0
    assert f"NPU_LOOP_SIZE={loop}" in finding.fix.text
    assert f"loop size 1 → {loop}" in finding.gain.text


def test_recompilation_names_its_cause(reports):
    remainder = reports[SAMPLES / "npu" / "recompile_remainder_loop.trace.json.gz"].findings[0]
    last_batch = reports[SAMPLES / "hpu" / "recompile_unpadded_last_batch.trace.json.gz"].findings[0]
    assert "remainder loop" in remainder.message and "set_npu_loop_size" in remainder.fix.text
    assert "last batch" in last_batch.message and last_batch.fix.changes == {"last_batch": "pad"}


def test_io_tiles_fix_is_the_fewest_tiles_holding_a_micro_batch(reports):
    """A micro-batch of 16 samples of 150 kB is 2.4 MB: 1.05 × 2.4 MB / 624 kB needs 5 tiles, and every
    tile more comes from compute, so 5 beats the power of two above it (8) in the emulator."""
    finding = reports[SAMPLES / "ipu" / "serialised_transfers_no_io_tiles.trace.json.gz"].findings[0]
    assert finding.fix.changes == {"io_tiles": 5} and "num_io_tiles=5" in finding.fix.text
    assert finding.gain.speedup is not None and finding.gain.speedup > 1.2


def test_evidence_points_at_real_events(reports):
    finding = reports[SAMPLES / "hpu" / "cpu_fallback.trace.json.gz"].findings[0]
    assert 0 < len(finding.evidence) <= 5
    assert all(e.name == "CPU fallback digamma : self=HPUBFloat16Type" for e in finding.evidence)
    assert all("Python training loop" in e.track and e.dur_us > 0 for e in finding.evidence)


def test_idle_causes_add_up_to_the_idle_time(reports):
    for report in reports.values():
        assert sum(report.idle.values()) == pytest.approx(1 - _busy(report), abs=1e-6)


def _busy(report) -> float:
    return compute_metrics(load_trace(report.path))["device.busy_fraction"]


def test_torch_fixture_gives_no_false_error():
    report = scan_files([str(TORCH_FIXTURE)], load_catalog()).traces[0]
    assert [f for f in report.findings if f.severity.value != "info"] == []


def test_findings_are_listed_the_largest_cost_first_whatever_their_severity():
    """A finding held at info for lack of steps sank below smaller warnings (a 60% exposed communication printed
    after a 14% straggler): the order is by cost, severity only between equal costs, and the report's first line
    names the largest cost."""
    from perftool.report.overall import largest_cost
    from perftool.rules.findings import Severity, biggest_first

    report = scan_files([str(KINETO_SAMPLE)], load_catalog())
    trace = report.traces[0]
    shares = [f.impact.share for f in trace.findings]
    assert len(shares) >= 2 and shares == sorted(shares, reverse=True)
    smallest = trace.findings[-1]
    held = smallest.model_copy(
        update={"severity": Severity.INFO, "capped": "too few steps", "impact": smallest.impact.model_copy(
            update={"share": shares[0] + 0.1})}
    )  # fmt: skip
    assert sorted([*trace.findings, held], key=biggest_first)[0] is held
    trace.findings = sorted([*trace.findings[:-1], held], key=biggest_first)
    lead = largest_cost(report)
    title = f"{held.title[0].lower()}{held.title[1:]}"
    assert lead == f"{shares[0] + 0.1:.1%} of each step: {title} — see {held.rule_id} (held at info: too few steps)"


def test_a_device_bound_trace_leads_with_that_and_its_findings_after_unless_one_costs_more():
    """A step whose device computes 90% of it or more is device-bound: the report says so first, and a finding
    costing less than a tenth of the step after it (a 5% host gap is not the first thing to fix); a finding costing
    more leads as before."""
    from perftool.report.overall import LESSER, largest_cost
    from perftool.rules.findings import DEVICE_BOUND

    report = scan_files([str(REAL / "flux1_aiter_mi300x_step.json.gz")], load_catalog())
    trace = report.traces[0]
    compute = trace.metrics["device.compute_fraction"]
    (finding,) = trace.findings
    assert compute >= DEVICE_BOUND and trace.device_bound == compute and finding.impact.share < LESSER
    bound = f"Device-bound: the device computes {compute:.1%} of each step, so its kernels set the pace"
    lead = largest_cost(report)
    assert lead.startswith(bound) and lead.endswith(f"; the largest finding, {finding.impact.share:.1%} of each "
                                                    "step: device idle while the host runs Python and dispatch — see "
                                                    "PT001")  # fmt: skip
    for share, leads in ((0.099, False), (0.1, True)):  # a tenth of the step or more leads
        trace.findings = [finding.model_copy(update={"impact": finding.impact.model_copy(update={"share": share})})]
        assert largest_cost(report).startswith(f"{share:.1%} of each step: device idle") == leads
    trace.findings = []
    assert largest_cost(report).startswith(bound)
    trace.device_bound = None
    assert largest_cost(report) is None


def test_device_bound_is_computing_the_threshold_s_share_on_the_run_s_own_timeline():
    """90% of the window computing is device-bound, a hair less is not; a range profiler's replay of kernel after kernel
    computes all of its window and is not the run's timeline: no verdict."""
    from perftool.analysis.confidence import Caveat
    from perftool.pipeline.scan import _device_bound
    from perftool.rules.findings import DEVICE_BOUND

    metrics = compute_metrics(load_trace(str(REAL / "flux1_aiter_mi300x_step.json.gz")))
    metrics.values["device.compute_fraction"] = DEVICE_BOUND
    assert _device_bound(metrics) == DEVICE_BOUND
    metrics.values["device.compute_fraction"] = DEVICE_BOUND - 1e-9
    assert _device_bound(metrics) is None
    metrics.values["device.compute_fraction"] = 1.0
    metrics.caveats.append(Caveat("a replay", caps=True, timeline=False))
    assert _device_bound(metrics) is None
    replayed = scan_files([str(REAL / "cupti_range_profiler.json.gz")], load_catalog()).traces[0]
    assert replayed.metrics["device.compute_fraction"] == pytest.approx(1.0) and replayed.device_bound is None
    # ResNet-50 with 4 input workers computes 87% of its steps, some of them waiting for batches: not device-bound
    fed = scan_files([str(REAL / "resnet50_pt18_workers4.json.gz")], load_catalog()).traces[0]
    assert 0.85 < fed.metrics["device.compute_fraction"] < DEVICE_BOUND and fed.device_bound is None


def test_a_device_bound_window_without_findings_still_says_what_bounds_it(run):
    window = REAL / "sglang_mi300x_qwen3_8b_prefill_window.json.gz"
    shown = " ".join(run("scan", window).stdout.split())
    assert shown.startswith("Device-bound: the device computes 99.7% of each step") and "No findings" in shown


# --- the command line ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_every_scan_report_opens_with_its_largest_cost(run, fmt):
    """The straggler job: its first words are the largest cost any finding names, the job's own or a rank's."""
    job = SAMPLES / "jobs" / "gpu_ddp_straggler"
    document = json.loads(run("scan", job, "--format", "json", "--fail-on", "never").stdout)
    found = [*document["job"]["findings"], *(f for t in document["traces"] for f in t["findings"])]
    largest = max(found, key=lambda f: f["impact"]["share"])
    lead = f"{largest['impact']['share']:.1%} of each step (the job): one rank holds the job back — see PT013"
    assert largest["rule_id"] == "PT013"
    shown = run("scan", job, "--format", fmt, "--fail-on", "never", "--workers", "1").stdout
    first = {"text": " ".join(shown.split("perftool scan job")[0].split()),
             "markdown": shown.splitlines()[2].strip("*").replace("\\", ""),
             "html": shown.split('<main><p class="warn">')[-1].split("</p>")[0]}[fmt]  # fmt: skip
    assert first == lead


def test_a_trace_without_steps_opens_with_its_cost_in_the_trace_s_words(run):
    """Without steady steps a finding's share is of the trace, and the first line says so as the finding does (after
    the verdict that the device computes most of the trace, also of the trace)."""
    trace = REPO / "tests" / "data" / "real" / "mtia_inference.json.gz"
    (found,) = json.loads(run("scan", trace, "--format", "json", "--fail-on", "never").stdout)["traces"]
    (finding,) = found["findings"]
    shown = " ".join(run("scan", trace, "--fail-on", "never").stdout.split())
    share = f"{finding['impact']['share']:.1%} of the trace"
    bound = f"Device-bound: the device computes {found['metrics']['device.compute_fraction']:.1%} of the trace"
    lead = f"; the largest finding, {share}: device idle while the host runs Python and dispatch — see PT001"
    assert shown.startswith(bound) and lead in shown.split("perftool scan")[0]
    assert share in shown.split("perftool scan", 1)[1]  # the finding's own words


def test_diff_text_opens_with_the_change_in_one_line(run):
    before, after = (REPO / "tests" / "data" / "vocab" / f"diff_kineto_{side}.json.gz" for side in ("before", "after"))
    headline = json.loads(run("diff", before, after, "--format", "json").stdout)["diffs"][0]["headline"]
    assert " ".join(run("diff", before, after).stdout.split("perftool diff")[0].split()) == headline


def test_scan_text_report(run):
    result = run("scan", SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz")
    assert result.exit_code == 0, result.output  # a warning does not fail by default (--fail-on error)
    out = result.stdout
    assert "PT001 host-bound-gaps" in out and "NPU_LOOP_SIZE=16" in out and "throughput ×1.19" in out
    assert "device idle 17.8%" in out


@pytest.mark.parametrize(("fail_on", "code"), [("never", 0), ("error", 0), ("warning", 1), ("info", 1)])
def test_fail_on(run, fail_on, code):
    assert run("scan", KINETO_SAMPLE, "--fail-on", fail_on, "--format", "json").exit_code == code


def test_an_error_fails_by_default(run):
    assert run("scan", SAMPLES / "hpu" / "cpu_fallback.trace.json.gz").exit_code == 1


def test_json_report_follows_the_schema(run):
    result = run("scan", KINETO_SAMPLE, "--format", "json")
    document = json.loads(result.stdout)
    assert document["schema"] == SCHEMA
    finding = document["traces"][0]["findings"][0]
    assert {"rule_id", "severity", "message", "impact", "evidence", "fix", "gain", "fingerprint"} <= set(finding)
    schema = json.loads(run("schema", "findings").stdout)
    assert set(schema["required"]) <= set(document)
    assert set(schema["$defs"]["Finding"]["required"]) <= set(finding)


def test_select_and_ignore(run):
    def rule_ids(*args):
        return [
            f["rule_id"]
            for f in json.loads(run("scan", KINETO_SAMPLE, "--format", "json", *args).stdout)["traces"][0]["findings"]
        ]

    everything = rule_ids()
    assert {"PT001", "PT002", "PT007"} <= set(everything)
    assert rule_ids("--select", "PT002") == ["PT002"]
    assert rule_ids("--select", "input-bound,exposed-transfers") == ["PT002", "PT007"]
    assert "PT001" not in rule_ids("--ignore", "host-bound-gaps")


def test_unknown_rule_in_select_is_a_usage_error(run):
    result = run("scan", KINETO_SAMPLE, "--select", "PT999")
    assert result.exit_code == 2 and "PT999" in result.stderr


def test_device_override_changes_the_advice(run):
    args = ("scan", SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz", "--format", "json")
    npu = json.loads(run(*args).stdout)["traces"][0]["findings"][0]["fix"]["text"]
    ipu = json.loads(run(*args, "--device", "ipu").stdout)["traces"][0]["findings"][0]["fix"]["text"]
    assert "NPU_LOOP_SIZE" in npu and "device_iterations" in ipu and "NPU_LOOP_SIZE" not in ipu


def test_several_traces_in_one_scan(run):
    result = run("scan", SAMPLES / "npu" / "healthy.trace.json.gz", KINETO_SAMPLE, "--format", "json")
    traces = json.loads(result.stdout)["traces"]
    assert [Path(t["path"]).name for t in traces] == ["healthy.trace.json.gz", KINETO_SAMPLE.name]
    assert traces[0]["findings"] == [] and traces[1]["findings"]


def test_sarif_output(run, tmp_path, sarif_validator):
    out = tmp_path / "scan.sarif"
    assert run("scan", KINETO_SAMPLE, "--format", "sarif", "--output", out).exit_code == 0
    sarif = json.loads(out.read_text())
    assert [error.message for error in sarif_validator.iter_errors(sarif)] == []
    assert sarif["version"] == "2.1.0" and sarif["$schema"].endswith("sarif-2.1.0.json")
    run_ = sarif["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(r["id"] for r in rules)
    for result in run_["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(KINETO_SAMPLE.name)
        assert len(result["partialFingerprints"]["perftoolFinding/v1"]) == 16
    again = json.loads(run("scan", KINETO_SAMPLE, "--format", "sarif").stdout)
    assert [r["partialFingerprints"] for r in again["runs"][0]["results"]] == [
        r["partialFingerprints"] for r in run_["results"]
    ]


@pytest.mark.slow
def test_sarif_of_every_bundled_sample_is_valid(run, sarif_validator):
    samples = sorted(REPO.glob("sample_traces/*/*.trace.json.gz"))
    document = json.loads(run("scan", *samples, "--format", "sarif").stdout)
    assert [error.message for error in sarif_validator.iter_errors(document)] == []
    levels = {result["level"] for result in document["runs"][0]["results"]}
    assert {"error", "warning"} <= levels


def test_fingerprints_do_not_depend_on_the_path(run, tmp_path):
    copy = tmp_path / "elsewhere.json.gz"
    copy.write_bytes(KINETO_SAMPLE.read_bytes())

    def prints(path):
        return [
            f["fingerprint"] for f in json.loads(run("scan", path, "--format", "json").stdout)["traces"][0]["findings"]
        ]

    assert prints(copy) == prints(KINETO_SAMPLE)


def test_github_annotations(run):
    lines = run("scan", KINETO_SAMPLE, "--format", "github").stdout.splitlines()
    assert lines and all(line.startswith("::warning file=") for line in lines)
    assert all(",title=PT0" in line for line in lines)
    assert not any("%" in line.split("::", 2)[2].replace("%25", "").replace("%0A", "") for line in lines)


def test_markdown_renders_a_table(run):
    text = run("scan", KINETO_SAMPLE, "--format", "markdown").stdout
    assert "| severity | rule | lost | finding |" in text and "| --- | --- | --- | --- |" in text
    assert "`PT001` host-bound-gaps" in text and "<details>" in text


def test_output_is_written_atomically_and_unwritable_paths_fail_first(run, tmp_path):
    target = tmp_path / "report.md"
    assert run("scan", KINETO_SAMPLE, "--format", "markdown", "-o", target).exit_code == 0
    assert target.read_text().startswith("# perftool scan")
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    result = run("scan", KINETO_SAMPLE, "-o", tmp_path / "missing" / "x.txt")
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_bad_trace_is_exit_2(run, write_trace):
    path = write_trace("{not json")
    result = run("scan", path)
    assert result.exit_code == 2 and str(path) in result.stderr and "Traceback" not in result.output


def test_written_files_get_the_usual_permissions(run, tmp_path):
    old = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.json"
        run("scan", KINETO_SAMPLE, "--format", "json", "-o", fresh)
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # not the temporary file's 0600
        kept = tmp_path / "kept.json"
        kept.write_text("{}")
        kept.chmod(0o640)
        run("scan", KINETO_SAMPLE, "--format", "json", "-o", kept)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text().startswith("{\n")
    finally:
        os.umask(old)


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "sarif", "github"])
def test_one_bad_trace_among_several_keeps_the_good_ones(run, tmp_path, fmt):
    good = tmp_path / "good.json.gz"
    good.write_bytes(Path(KINETO_SAMPLE).read_bytes())
    truncated = tmp_path / "truncated.json"
    truncated.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2},')
    missing = tmp_path / "missing.json"
    result = run("scan", good, truncated, missing, "--format", fmt, "--fail-on", "never")
    assert result.exit_code == 2
    errors = result.stderr.strip().splitlines()
    assert [line.split(": ")[2] for line in errors] == [str(truncated), str(missing)]
    assert "truncated JSON" in errors[0] and "no such file" in errors[1]
    unwrapped = result.stdout.replace("\n", "")  # a long path may be cut anywhere to fit the terminal's width
    assert str(good) in unwrapped and "PT001" in result.stdout  # the good trace is reported in full
    if fmt == "json":
        document = json.loads(result.stdout)
        assert [t["path"] for t in document["traces"]] == [str(good)]
        assert [u["path"] for u in document["unread"]] == [str(truncated), str(missing)]
    if fmt == "sarif":
        invocation = json.loads(result.stdout)["runs"][0]["invocations"][0]
        assert invocation["executionSuccessful"] is False
        assert len(invocation["toolExecutionNotifications"]) == 2


def test_when_no_trace_can_be_read_nothing_stands_in_for_them(run, tmp_path):
    result = run("scan", tmp_path / "missing.json", "--format", "json")
    assert result.exit_code == 2 and result.stdout == ""


def test_a_compile_paid_once_is_judged_over_the_job(reports):
    """The remainder loop's compile is paid once in the sample's 30 epochs: the gain is the whole job's, compiles
    once, and the finding's severity follows what the job wins back, not the compile's share of one epoch."""
    finding = reports[SAMPLES / "ipu" / "recompile_remainder_loop.trace.json.gz"].findings[0]
    config = load_config(SAMPLES / "ipu" / "recompile_remainder_loop.yaml")
    before, after = (evaluate(load_config(SAMPLES / "ipu" / "recompile_remainder_loop.yaml", [f"knobs.loop_size={n}"]))
                     for n in (config.knobs.loop_size, finding.fix.changes["loop_size"]))  # fmt: skip
    job = (after["job_samples"][0] / after["job_time_us"][0]) / (before["job_samples"][0] / before["job_time_us"][0])
    assert finding.gain.speedup == pytest.approx(job)
    assert finding.gain.speedup < before["step_time_mean_us"][0] / after["step_time_mean_us"][0]  # not one epoch's
    assert "the job (30 × 250 steps, compiles once)" in finding.gain.text
    assert finding.impact.share > 0.9 and finding.severity.value == "error"  # 1 - 1/1.42: 29% of the job


def test_a_straggler_gain_is_the_job_rerun_at_the_others_pace(run):
    """PT013's gain is the job emulated with the slow rank computing as the others do, not the others' wait."""
    result = run("scan", SAMPLES / "jobs" / "gpu_ddp_straggler", "--format", "json", "--workers", "1")
    straggler = next(f for f in json.loads(result.stdout)["job"]["findings"] if f["rule_id"] == "PT013")
    assert straggler["fix"]["changes"] == {"replicas.slow_ranks": []} and straggler["gain"]["kind"] == "predicted"
    truth = emulate(SAMPLES / "jobs" / "gpu_ddp_straggler" / "job.yaml", ["replicas.slow_ranks=[]"]).prediction
    assert straggler["gain"]["step_time_us_after"] == pytest.approx(truth["step_time_mean_us"])
    assert straggler["gain"]["speedup"] < 1 / (1 - straggler["impact"]["share"])  # less than the wait it removes


def test_fixes_that_overlap_print_one_combined_what_if(reports, run):
    """Two predicted fixes on one trace: 'together' is both applied at once, which is the job's truth, not a sum."""
    found = reports[SAMPLES / "ipu" / "input_bound_prefetch.trace.json.gz"]
    merged = {key: value for finding in found.findings for key, value in finding.fix.changes.items()}
    assert set(merged) == {"prefetch_depth", "loop_size"}
    truth = prediction.predicted(load_config(SAMPLES / "ipu" / "input_bound_prefetch.yaml"), merged)
    assert found.together is not None and found.together.speedup == pytest.approx(truth.speedup)
    assert found.together.speedup < found.findings[0].gain.speedup * found.findings[1].gain.speedup
    assert reports[SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz"].together is None  # one fix: nothing to add
    text = run("scan", SAMPLES / "ipu" / "input_bound_prefetch.trace.json.gz").stdout
    assert "together every predicted fix here, applied at once: prefetch depth 1 → 5, loop size 64 → 128" in " ".join(
        text.split()
    )
    sample = SAMPLES / "ipu" / "input_bound_prefetch.trace.json.gz"
    markdown = run("scan", sample, "--format", "markdown", "--fail-on", "never").stdout
    assert f"**Together:** every predicted fix here, applied at once: {found.together.text}" in markdown
    html = run("scan", sample, "--format", "html").stdout
    assert f"Together: every predicted fix here, applied at once: {found.together.text}" in html
    sarif = json.loads(run("scan", sample, "--format", "sarif", "--fail-on", "never").stdout)
    assert [t["text"] for t in sarif["runs"][0]["properties"]["together"]] == [found.together.text]


@pytest.mark.parametrize(
    "path", [KINETO_SAMPLE, SAMPLES / "gpu" / "sync_every_step.trace.json.gz"], ids=["kineto", "emulator"]
)
def test_rules_on_two_threads_find_what_they_find_on_one(path, monkeypatch):
    """The rules and their fixes run on two threads where two cores are free: the findings, their order, their
    gains (the fit behind them included) and the better setting are those one thread gives."""
    monkeypatch.setattr(scan, "free_cores", lambda: 2)
    trace = load_trace(str(path), analysis="scan")  # as a scan reads it: with its kernels' launches, for their rules
    monkeypatch.setattr(scan, "RULE_THREADS", 1)
    assert scan._rule_threads(trace) == 1
    alone = scan.scan_trace(trace, load_catalog())
    monkeypatch.setattr(scan, "RULE_THREADS", 2)
    assert scan._rule_threads(load_trace(str(path), analysis="scan")) == 2
    both = scan.scan_trace(load_trace(str(path), analysis="scan"), load_catalog())
    assert [f.gain.kind for f in both.findings].count("predicted") >= 1
    assert both.model_dump() == alone.model_dump()


def test_rules_run_on_one_thread_where_one_core_is_free_or_the_columns_are_on_disk(monkeypatch):
    monkeypatch.setattr(scan, "free_cores", lambda: 1)
    assert scan._rule_threads(load_trace(str(KINETO_SAMPLE))) == 1
    monkeypatch.setattr(scan, "free_cores", lambda: 8)
    assert scan._rule_threads(load_trace(str(KINETO_SAMPLE))) == scan.RULE_THREADS
    monkeypatch.setattr(limits, "memory_to_scan", lambda *counts: 0 if counts[5] else 1 << 62)  # over budget in memory
    on_disk = load_trace(str(KINETO_SAMPLE))
    assert on_disk.on_disk and scan._rule_threads(on_disk) == 1


def test_the_fit_is_made_once_whichever_thread_asks_first(monkeypatch):
    """Two rules' fixes ask for the fit at once: one thread fits, the other waits and gets the same fit."""
    calls = []

    def slow_fit(scope):
        calls.append(scope)
        time.sleep(0.2)  # long enough for the other thread to ask meanwhile
        return "config", "run"

    monkeypatch.setattr(gains, "_fit_run", slow_fit)
    fitted = gains.TraceFit(scope=None)
    assert fitted.made is None
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: fitted.run, range(2)))
    assert runs == ["run", "run"] and len(calls) == 1
    assert fitted.made == "run" and fitted.config == "config" and len(calls) == 1


def test_the_roofline_is_made_beside_the_metrics_only_where_a_rule_reads_it():
    trace = load_trace(str(KINETO_SAMPLE))
    rules = load_catalog()
    _, without = scan.analyse_trace(trace, [rule for rule in rules if rule.id == "PT001"])
    assert without.roofline_from is None  # the host-bound rule reads no roofline: none is made for it
    _, with_all = scan.analyse_trace(trace, rules)
    assert with_all.roofline_from is not None
    made, own = with_all.roofline, without.roofline  # the helper's, and the one the rules would make themselves
    assert made.calls is not None and own.calls is not None and made.calls.rows.size > 0
    np.testing.assert_array_equal(made.calls.rows, own.calls.rows)
    np.testing.assert_array_equal(made.call_roofline_us(), own.call_roofline_us())


def test_an_error_finding_the_steps_is_the_scan_s_and_leaves_no_helper_waiting(monkeypatch):
    """The helper starts on what the rules read before the steps are found; its pieces that wait for the steps end
    with the error the steps raised, rather than waiting for ever."""

    def broken(trace):
        raise RuntimeError("no steps")

    monkeypatch.setattr(scan, "detect_steps", broken)
    trace = load_trace(str(KINETO_SAMPLE))
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="no steps"):
        scan.scan_trace(trace, load_catalog())
    for helper in set(threading.enumerate()) - before:
        helper.join(10)
        assert not helper.is_alive()


AHEAD = (
    "launch_rows",
    "host_calls.blocking_copies",
    "family.device_properties",
    "host_calls.driving_threads",
    "steps.initialising",
    "communication.collectives",
    "family.device_family",
    "host_work.typical_launches",
)


def test_what_the_rules_read_whatever_the_window_is_found_while_the_steps_are(monkeypatch):
    trace = load_trace(str(KINETO_SAMPLE))
    found_ahead = []

    def steps_after_the_facts(trace):
        waited = 0
        while AHEAD[-1] not in trace.derived and waited < 1000:  # the helper finds them meanwhile
            time.sleep(0.01)
            waited += 1
        found_ahead.extend(key for key in AHEAD if key in trace.derived)
        return detect_steps(trace)

    monkeypatch.setattr(scan, "detect_steps", steps_after_the_facts)
    scan.scan_trace(trace, load_catalog())
    assert found_ahead == list(AHEAD)


@pytest.mark.parametrize(
    ("module", "finding"),
    [
        (steps_module, "_initialising"),  # start-up's calls: where start-up ends (the steps), and an idle cause
        (host_work, "_typical"),  # the launches that are launch overhead: the host-bound rule's measure, its dispatch
    ],
)
def test_what_two_analyses_of_a_scan_read_is_found_once(monkeypatch, module, finding):
    found = []
    own = getattr(module, finding)
    monkeypatch.setattr(module, finding, lambda trace, *rest: found.append(trace) or own(trace, *rest))
    findings = scan.scan_trace(load_trace(str(KINETO_SAMPLE)), load_catalog())
    assert findings.idle and any(f.rule_id == "PT001" for f in findings.findings) and len(found) == 1


def test_with_the_columns_on_disk_nothing_is_found_ahead_beside_the_steps(monkeypatch):
    """Columns on disk keep to one pass at a time, so that the memory budget counts one pass's working arrays."""
    ahead = []
    monkeypatch.setattr(scan, "_window_free_facts", ahead.append)
    scan.scan_trace(load_trace(str(KINETO_SAMPLE)), load_catalog())  # in memory: found ahead
    assert len(ahead) == 1
    monkeypatch.setattr(limits, "memory_to_scan", lambda *counts: 0 if counts[5] else 1 << 62)  # over budget in memory
    on_disk = load_trace(str(KINETO_SAMPLE))
    assert on_disk.on_disk
    scan.scan_trace(on_disk, load_catalog())
    assert len(ahead) == 1
