"""Each of gate's checks on hand-made sides: the verdict, the figures and the words, worked out by hand.

The command-line tests (test_gate.py) gate emulated traces; these hold every field of a check to a figure computed
here, so that a changed threshold, an edge moved by one, or a reworded reason fails a test.
"""

from __future__ import annotations

import pytest

from perftool.gate.checks import Check, Verdict, against_budget, compare, status
from perftool.gate.inputs import differences
from perftool.gate.policy import Budget, GatePolicy, Limit
from perftool.gate.verdict import GateResult
from perftool.rules.findings import EmulatorRun, TraceFindings

NO_METRICS = GatePolicy(metrics={})  # the default threshold (5%) and alpha (0.01), no metric limits


def side(
    steps: list[float], metrics: dict[str, float] | None = None, dialect: str = "kineto", job: str = "training"
) -> TraceFindings:
    """A scanned trace with these steady step times (µs) and metrics, read as ``dialect``, of a ``job``."""
    return TraceFindings(
        path="t.json",
        dialect=dialect,
        job_kind=job,
        family="gpu",
        window_us=sum(steps),
        steps=len(steps),
        step_time_us=None,
        idle={},
        findings=[],
        metrics=metrics or {},
        step_durations_us=list(steps),
    )


def timing(baseline: list[float], candidate: list[float]) -> tuple[Check, Check]:
    step, rate = (c for c in compare(side(baseline), side(candidate), NO_METRICS, "error") if c.id.startswith("timing"))
    return step, rate


def test_six_steps_a_side_all_slower_by_a_fifth_fail_on_the_rank_test_with_both_figures():
    baseline = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    step, rate = timing(baseline, [t * 1.2 for t in baseline])
    # U = 36 of 36 pairs; variance 6*6/12*13 = 39; z = (36 - 18 - 0.5)/sqrt(39) = 2.802; p = 0.0025
    limit = "> 5% worse and significant (p < 0.01)"
    assert (step.id, step.name, step.unit, step.verdict) == (
        "timing:step_time",
        "step time (median)",
        "us",
        Verdict.FAIL,
    )
    assert (step.baseline, step.candidate) == pytest.approx((102.5, 123.0))
    assert (step.change, step.limit, step.detail) == ("+20.0%", limit, "20.0% worse, significant (p = 0.0025 < 0.01)")
    assert (rate.id, rate.name, rate.unit, rate.verdict) == ("timing:throughput", "throughput", "steps/s", Verdict.FAIL)
    assert (rate.baseline, rate.candidate) == pytest.approx((6 / 615e-6, 6 / 738e-6), rel=1e-12)  # steps a second
    # shown as the throughput's own change, judged as how much worse it is: 615/738 - 1 = -16.7%
    assert (rate.change, rate.limit, rate.detail) == ("-16.7%", limit, "16.7% worse, significant (p = 0.0025 < 0.01)")


def test_five_steps_a_side_are_enough_for_the_rank_test():
    baseline = [100.0, 101.0, 102.0, 103.0, 104.0]
    step, _ = timing(baseline, [t * 1.2 for t in baseline])
    # U = 25; variance 5*5/12*11 = 22.9; z = (25 - 12.5 - 0.5)/4.787 = 2.507; p = 0.0061
    assert step.verdict is Verdict.FAIL and step.detail == "20.0% worse, significant (p = 0.0061 < 0.01)"


def test_a_rank_test_short_of_the_level_says_both_the_p_value_and_the_level():
    """p = 0.046 reads as significant to many a reader: the level it is held to is said beside it."""
    step, _ = timing([100.0, 101.0, 102.0, 103.0, 104.0, 105.0], [100.5, 103.5, 106.0, 120.0, 121.0, 122.0])
    assert step.verdict is Verdict.WARN
    assert step.detail == "10.2% worse, not significant (p = 0.046 ≥ 0.01): noisy, rerun or take more steps"


def test_four_steps_a_side_are_held_to_a_bound_on_every_pair():
    baseline = [100.0, 101.0, 102.0, 103.0]
    step, _ = timing(baseline, [120.0, 121.0, 122.0, 123.0])
    bound = "> 5% worse, every candidate step > 5% slower than every baseline one"
    evidence = (
        "every candidate step slower: the fastest candidate step +16.5% on the slowest baseline one, 4 steps a side"
    )
    assert (step.verdict, step.limit, step.detail) == (Verdict.FAIL, bound, f"19.7% worse, {evidence}")


def test_four_overlapping_steps_a_side_with_a_slower_median_only_warn():
    step, _ = timing([100.0, 101.0, 102.0, 103.0], [100.0, 130.0, 130.0, 130.0])
    evidence = "the steps overlap: the fastest candidate step -2.9% on the slowest baseline one, 4 steps a side"
    assert step.verdict is Verdict.WARN and step.change == "+28.1%"
    assert step.detail == f"28.1% worse, {evidence}: noisy, rerun or take more steps"


def test_a_candidate_within_the_threshold_passes_with_no_reason_to_give():
    baseline = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    step, rate = timing(baseline, [t * 1.04 for t in baseline])
    assert (step.verdict, step.change, step.detail) == (Verdict.PASS, "+4.0%", "")
    assert (rate.verdict, rate.change, rate.detail) == (Verdict.PASS, "-3.8%", "")


def test_two_steps_on_a_side_leave_the_timing_not_checked_and_say_why():
    step, rate = timing([100.0, 101.0], [100.0, 101.0, 102.0])
    why = (
        "comparing step times needs 3 steady steps a side, and the baseline has 2, the candidate 3 (capture several"
        " steps past warm-up: torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=5))"
        " with prof.step() at the end of every iteration)"
    )
    assert [(c.id, c.unit, c.verdict, c.baseline, c.change, c.limit, c.detail) for c in (step, rate)] == [
        ("timing:step_time", "us", Verdict.NOT_CHECKED, None, "", "", why),
        ("timing:throughput", "steps/s", Verdict.NOT_CHECKED, None, "", "", why),
    ]


@pytest.mark.parametrize(
    ("dialect", "job", "said", "unsaid"),
    [
        ("xla", "training", 'jax.profiler.StepTraceAnnotation("train", step_num=step)', "torch"),
        ("kineto", "vLLM serving", "vLLM's profiler (--profiler-config", "SGLang"),
        ("kineto", "serving", "SGLang's profiler (SGLANG_TORCH_PROFILER_DIR", "torch.profiler.schedule"),
    ],
)
def test_too_few_steps_are_said_how_to_capture_with_the_side_s_own_profiler(dialect, job, said, unsaid):
    """The way to capture more steps is the one of the profiler (or serving engine) that wrote the side short of
    them: a JAX trace's steps are StepTraceAnnotations, a serving engine starts its own profiler; an engine the
    trace does not name leaves both engines' ways."""
    enough = [100.0, 101.0, 102.0]
    for baseline, candidate in ((side(enough), side([100.0], dialect=dialect, job=job)),
                                (side([100.0], dialect=dialect, job=job), side(enough))):  # fmt: skip
        checks = compare(baseline, candidate, NO_METRICS, "error")
        why = next(c for c in checks if c.id == "timing:step_time").detail
        assert said in why and unsaid not in why


def counter(name: str, base: float | None, cand: float | None, steps: int = 8) -> Check:
    base_metrics = {} if base is None else {name: base}
    cand_metrics = {} if cand is None else {name: cand}
    checks = compare(side([100.0] * steps, base_metrics), side([100.0] * steps, cand_metrics), NO_METRICS, "error")
    return next(c for c in checks if c.id == f"counter:{name}")


def test_two_more_recompilations_fail_and_the_same_count_passes():
    more = counter("recompilations.count", 1, 3)
    assert (more.verdict, more.baseline, more.candidate, more.change, more.limit, more.detail, more.unit) == (
        Verdict.FAIL, 1, 3, "+2", "any increase", "2 more than the baseline", "count"
    )  # fmt: skip
    same = counter("recompilations.count", 3, 3)
    assert (same.verdict, same.change, same.detail) == (Verdict.PASS, "0", "")


def test_syncs_per_step_are_counted_over_the_candidates_steps_and_half_a_sync_more_passes():
    more = counter("sync.per_step", 1.0, 1.25)  # 0.25 more a step over 8 steps: 2 more syncs
    assert (more.verdict, more.change, more.detail) == (Verdict.FAIL, "+0.25", "+2 syncs over the candidate's 8 steps")
    assert (more.baseline, more.candidate) == (1.0, 1.25)
    half = counter("sync.per_step", 1.0, 1.0625)  # exactly half a sync more over the 8 steps
    assert (half.verdict, half.detail) == (Verdict.PASS, "")


def test_syncs_per_step_of_a_candidate_without_steps_count_as_one_step():
    once = counter("sync.per_step", 1.0, 2.0, steps=0)
    assert (once.verdict, once.detail) == (Verdict.FAIL, "+1 syncs over the candidate's 1 step")


def test_a_counter_or_metric_missing_on_a_side_is_skipped_with_what_it_has():
    skipped = counter("cpu_fallback.ops", None, 4)
    assert (skipped.verdict, skipped.baseline, skipped.candidate, skipped.change, skipped.limit, skipped.unit) == (
        Verdict.SKIP, None, 4, "", "any increase", "count"
    )  # fmt: skip
    assert skipped.detail == "not measured on both traces"
    assert (counter("cpu_fallback.ops", 2, None).baseline, counter("cpu_fallback.ops", 2, None).candidate) == (2, None)
    policy = GatePolicy(metrics={"input.fraction": Limit(warn=0.02)})
    checks = compare(side([100.0] * 8, {"input.fraction": 0.1}), side([100.0] * 8), policy, "error")
    (metric,) = (c for c in checks if c.id == "metric:input.fraction")
    assert (metric.verdict, metric.baseline, metric.candidate, metric.change, metric.limit, metric.detail) == (
        Verdict.SKIP, 0.1, None, "", "warn higher by 2.0 pts", "not measured on both traces"
    )  # fmt: skip
    assert metric.unit == "fraction"
    checks = compare(side([100.0] * 8), side([100.0] * 8, {"input.fraction": 0.1}), policy, "error")
    (metric,) = (c for c in checks if c.id == "metric:input.fraction")
    assert (metric.verdict, metric.baseline, metric.candidate) == (Verdict.SKIP, None, 0.1)


def metric(name: str, limit: Limit, base: float, cand: float) -> Check:
    policy = GatePolicy(metrics={name: limit})
    checks = compare(side([100.0] * 8, {name: base}), side([100.0] * 8, {name: cand}), policy, "error")
    return next(c for c in checks if c.id == f"metric:{name}")


def test_a_metric_worse_past_its_warn_level_warns_and_past_its_error_level_fails():
    limit = Limit(warn=0.02, error=0.05)
    warned = metric("device.idle_fraction", limit, 0.10, 0.13)
    assert (warned.baseline, warned.candidate, warned.unit) == (0.10, 0.13, "fraction")
    assert (warned.verdict, warned.change, warned.detail) == (
        Verdict.WARN,
        "+3.0 pts",
        "3.0 pts higher: past the warn limit",
    )
    assert warned.limit == "warn higher by 2.0 pts, error higher by 5.0 pts"
    failed = metric("device.compute_fraction", limit, 0.80, 0.70)  # higher is better: lower is worse
    assert (failed.verdict, failed.change, failed.detail) == (
        Verdict.FAIL,
        "-10.0 pts",
        "10.0 pts lower: past the error limit",
    )
    assert failed.limit == "warn lower by 2.0 pts, error lower by 5.0 pts"
    better = metric("device.compute_fraction", limit, 0.70, 0.80)  # better is never worse
    assert (better.verdict, better.change, better.detail) == (Verdict.PASS, "+10.0 pts", "")


def test_a_metric_exactly_at_its_level_is_not_past_it():
    assert metric("device.idle_fraction", Limit(warn=0.03125), 0.5, 0.53125).verdict is Verdict.PASS
    assert metric("device.idle_fraction", Limit(warn=0.03125), 0.5, 0.5625).verdict is Verdict.WARN


def budget(name: str, limit: Limit, value: float) -> Check:
    (check,) = against_budget(side([100.0] * 8, {name: value}), Budget(metrics={name: limit}), "error")
    return check


def test_a_budget_says_which_level_a_value_passed_in_the_metrics_unit():
    limit = Limit(warn=0.10, error=0.20)
    warned = budget("device.idle_fraction", limit, 0.15)
    assert (warned.id, warned.verdict, warned.baseline, warned.candidate) == (
        "budget:device.idle_fraction", Verdict.WARN, None, 0.15
    )  # fmt: skip
    assert warned.limit == "warn above 10.0%, error above 20.0%"
    assert warned.detail == "15.0% is above the warn limit of 10.0%"
    failed = budget("device.idle_fraction", limit, 0.25)
    assert (failed.verdict, failed.detail) == (Verdict.FAIL, "25.0% is above the error limit of 20.0%")
    assert budget("device.idle_fraction", limit, 0.10).verdict is Verdict.PASS  # at the level: not above it
    assert budget("device.compute_fraction", Limit(warn=0.625), 0.625).verdict is Verdict.PASS  # at a floor: not below
    floor = budget("device.compute_fraction", Limit(warn=0.6, error=0.4), 0.5)  # higher is better: a floor
    assert (floor.verdict, floor.limit, floor.detail) == (
        Verdict.WARN, "warn below 60.0%, error below 40.0%", "50.0% is below the warn limit of 60.0%"
    )  # fmt: skip


def test_a_budget_on_a_metric_the_trace_lacks_is_skipped_and_one_within_it_passes_silently():
    (skipped,) = against_budget(side([100.0] * 8), Budget(metrics={"input.fraction": Limit(warn=0.1)}), "never")
    assert (skipped.id, skipped.name, skipped.verdict, skipped.change, skipped.limit, skipped.unit) == (
        "budget:input.fraction", "input.fraction", Verdict.SKIP, "", "warn above 10.0%", "fraction"
    )  # fmt: skip
    assert skipped.detail == "not measured on this trace"
    within = budget("device.idle_fraction", Limit(warn=0.1), 0.05)
    assert (within.verdict, within.change, within.detail, within.unit) == (Verdict.PASS, "", "", "fraction")


def test_a_checks_figures_read_in_its_unit_with_its_change():
    step, _ = timing([100.0] * 6, [100.0] * 6)
    assert step.figures() == "baseline 100.0 µs, candidate 100.0 µs (+0.0%)"
    skipped = counter("cpu_fallback.ops", None, 4)
    assert skipped.figures() == "baseline —, candidate 4 (no change)"


def test_two_sides_are_different_jobs_by_device_world_size_and_kind_of_trace():
    gpu = side([100.0] * 8)
    run = EmulatorRun(device="npu", workload={"batch_size": 8, "steps": 100})
    assert differences(gpu, gpu.model_copy(update={"family": "npu"})) == ["device family gpu → npu"]
    assert differences(gpu.model_copy(update={"device": "A"}), gpu.model_copy(update={"device": "B"})) == [
        "device A → B"
    ]
    assert differences(gpu, gpu.model_copy(update={"device": "B"})) == []  # a side saved before devices were named
    # a side saved when the trace's vendor-only name was the device's: the model its units make it is the same device
    vendor, model = (gpu.model_copy(update={"device": d}) for d in ("AMD Instinct", "AMD Instinct MI300X (192 GB)"))
    assert differences(vendor, model) == differences(model, vendor) == []
    assert differences(vendor, gpu.model_copy(update={"device": "NVIDIA H100 80GB HBM3"})) == [
        "device AMD Instinct → NVIDIA H100 80GB HBM3"
    ]
    assert differences(model, gpu.model_copy(update={"device": "AMD Instinct MI250X"})) == [
        "device AMD Instinct MI300X (192 GB) → AMD Instinct MI250X"
    ]
    # a side whose trace names only where its work ran (torch_npu's text export, PyTorch 1.8, an XLA JSON export)
    for place in ("NPU", "GPU 0", "/device:GPU:0", "device 3", "2 × GPU 0", "GPU 0, GPU 1"):
        placed = gpu.model_copy(update={"device": place})
        assert differences(placed, model) == differences(model, placed) == [], place
    for named in ("GPU 0 (NVIDIA A10G)", "NPU (Ascend910B)", "GPU 0, NVIDIA A10G"):  # a model beside the place
        assert differences(gpu.model_copy(update={"device": named}), model) == [f"device {named} → {model.device}"]
    assert differences(gpu.model_copy(update={"world_size": 8}), gpu.model_copy(update={"world_size": 4})) == [
        "world size 8 → 4 ranks"
    ]
    assert differences(gpu.model_copy(update={"world_size": 8}), gpu) == []  # one side does not say
    assert differences(gpu.model_copy(update={"emulator": run}), gpu) == [
        "baseline is an emulator trace, candidate is a profiler trace"
    ]
    longer = run.model_copy(update={"workload": {"batch_size": 8, "steps": 400}})  # the run's length may differ
    assert differences(gpu.model_copy(update={"emulator": run}), gpu.model_copy(update={"emulator": longer})) == []
    bigger = run.model_copy(update={"workload": {"batch_size": 16, "steps": 100}, "device": "gpu"})
    assert differences(gpu.model_copy(update={"emulator": run}), gpu.model_copy(update={"emulator": bigger})) == [
        "emulator device npu → gpu", "workload.batch_size 8 → 16"
    ]  # fmt: skip


def test_a_p_value_below_one_in_ten_thousand_is_shown_as_a_bound():
    baseline = [100.0 + i for i in range(20)]
    step, _ = timing(baseline, [t * 1.5 for t in baseline])
    # U = 400 of 400; variance 20*20/12*41 = 1,366.7; z = (400 - 200 - 0.5)/36.97 = 5.40; p = 3.4e-8
    assert step.detail == "50.0% worse, significant (p < 0.0001)"


def test_a_gate_with_nothing_to_check_passes():
    assert status([], "error") is Verdict.PASS


@pytest.mark.parametrize(
    ("verdicts", "fail_on", "why"),
    [
        ([Verdict.FAIL] * 4 + [Verdict.PASS], "error", "4 checks failed"),
        ([Verdict.NOT_CHECKED] * 2, "error", "2 checks could not be made"),
        ([Verdict.FAIL, Verdict.NOT_CHECKED, Verdict.NOT_CHECKED], "warning", "1 check failed and 2 could not be made"),
        ([Verdict.FAIL, Verdict.NOT_CHECKED], "never", "1 check failed"),
    ],
)
def test_a_failed_gate_says_what_failed_it_in_one_phrase(verdicts, fail_on, why):
    """CI's last line: the failed checks and, unless --fail-on never, the ones that could not be made."""
    made = [Check(f"c{i}", "check", verdict, None, None, "", "") for i, verdict in enumerate(verdicts)]
    result = GateResult(fail_on=fail_on, baseline="base.json", candidate="new.json", checks=made)
    assert result.failed and result.why_failed() == why
