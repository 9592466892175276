"""Configurations simulated together: each gets the figures it has alone, in as few runs as their plans allow."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from conftest import REPO

from perftool.emulator import evaluate as evaluating
from perftool.emulator import space
from perftool.emulator.config import load_config, with_settings
from perftool.emulator.plan import Plan, build_plan
from perftool.predict import fitting, sweep
from perftool.rules import prediction
from perftool.rules.known_run import KnownRun
from perftool.tune import evaluator
from perftool.tune.spec import load_tune_config

FED = REPO / "sample_traces" / "npu" / "input_bound_prefetch.yaml"  # two input workers, the device waits for them
DEEP = {"prefetch_depth": 4}  # batches a worker keeps ready: deeper than one, the workers' turns bind, not the slots
REPLICATED = REPO / "sample_traces" / "jobs" / "npu_exposed_allreduce" / "job.yaml"  # 8 ranks, 200 MB buckets
WORKERS = [0, 1, 2, 3, 8]


@pytest.fixture
def runs(monkeypatch):
    """The simulations run from here on (configurations per run), with nothing evaluated before."""
    monkeypatch.setattr(evaluating, "_AS_WRITTEN", OrderedDict())
    simulate, sizes = evaluating.simulate, []

    def counted(plan, seed, record=False):
        sizes.append(plan.n)
        return simulate(plan, seed, record)

    monkeypatch.setattr(evaluating, "simulate", counted)
    return sizes


def _alone(config) -> dict[str, np.ndarray]:
    return evaluating.evaluate_plan(build_plan(config), config.seed).figures


def _same(figures: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(figures[name], expected[name], equal_nan=True) for name in expected)


def test_configurations_fed_by_different_numbers_of_input_workers_run_together_as_each_runs_alone():
    """Input workers are a figure per configuration: plans of 0 (the loop loads its batches), 1, 2, 3 and 8 workers
    join into one, and each column of its run is the run of its plan alone, to the last bit."""
    configs = [with_settings(load_config(FED), {**DEEP, "workload.input_workers": workers}) for workers in WORKERS]
    plans = [build_plan(config) for config in configs]
    joined = Plan.concat(plans)
    assert joined.workers.tolist() == WORKERS
    together = evaluating.evaluate_plan(joined, configs[0].seed).figures
    for column, config in enumerate(configs):
        assert _same({name: values[column : column + 1] for name, values in together.items()}, _alone(config))
    steps = together["step_time_mean_us"]
    assert steps[0] > steps[1] > steps[2]  # the workers matter here, up to two


def test_what_was_not_evaluated_before_is_simulated_in_one_run_and_kept(runs):
    """evaluate_all runs the configurations it has not seen in one simulation, each with its figures alone, and
    keeps them: evaluating one again, alone or among others, simulates nothing."""
    configs = [with_settings(load_config(FED), {"workload.input_workers": workers}) for workers in WORKERS]
    expected = [_alone(config) for config in configs]
    runs.clear()
    evaluations = evaluating.evaluate_all(configs)
    assert runs == [len(WORKERS)]
    assert all(_same(e.figures, x) for e, x in zip(evaluations, expected))
    assert [e.plan.workers.tolist() for e in evaluations] == [[w] for w in WORKERS]
    assert evaluating.evaluate(configs[2]) is evaluations[2] and runs == [len(WORKERS)]
    fresh = with_settings(load_config(FED), {"workload.input_workers": 5})
    again = evaluating.evaluate_all([configs[0], fresh, configs[4]])
    assert runs == [len(WORKERS), 1] and again[0] is evaluations[0] and again[2] is evaluations[4]


@pytest.mark.parametrize("apart", ["bucket", "seed"])
def test_plans_that_differ_in_what_their_configurations_share_run_one_each(runs, apart):
    """A gradient bucket sets what every configuration of its plan reduces, and a seed the jitter all of a run's
    configurations share: configurations that differ in one are simulated one run each, with their own figures."""
    config = load_config(REPLICATED)
    configs = (
        [with_settings(config, {"replicas.bucket": size}) for size in (50_000_000, 200_000_000)]
        if apart == "bucket"
        else [config.model_copy(update={"seed": seed}) for seed in (3, 4)]
    )
    expected = [_alone(each) for each in configs]
    runs.clear()
    evaluations = evaluating.evaluate_all(configs)
    assert runs == [8, 8]  # one run a configuration, each of its 8 ranks a column
    assert all(_same(e.figures, x) for e, x in zip(evaluations, expected))
    assert not _same(evaluations[0].figures, evaluations[1].figures)


def test_what_ifs_asked_ahead_are_simulated_together_and_cost_nothing_after(runs):
    """prediction.ahead simulates the valid what-ifs of a list at once (an invalid one is left out); each
    prediction after reads what was simulated, and says what it says without it."""
    config = load_config(FED)
    changes = [{"workload.input_workers": 4}, {"prefetch_depth": 4}, {"batch_size": -1}]
    expected = [prediction.predicted(config, each) for each in changes]
    evaluating._AS_WRITTEN.clear()
    runs.clear()
    prediction.ahead(config, changes)
    assert runs == [3]  # the config as written and the two valid what-ifs
    assert [prediction.predicted(config, each) for each in changes] == expected and runs == [3]
    assert expected[0] is not None and expected[0].speedup > 1 and expected[2] is None


def test_a_sweep_of_input_workers_is_one_run_and_a_sweep_of_buckets_one_run_a_value(runs, tmp_path):
    """tune's plans of each input worker count join into one run, with the figures each gives alone; plans of
    each gradient bucket size cannot, and run one each, with theirs."""
    config = load_tune_config(REPO / "examples" / "tune" / "gpu.yaml")
    grid = {"prefetch_depth": np.array([1, 2, 1, 2, 1, 2]), "workload.input_workers": np.array([0, 0, 2, 2, 6, 6])}
    rows = evaluator.evaluate_grid(config, grid)
    assert runs == [6]
    for row, (depth, workers) in enumerate(zip(grid["prefetch_depth"], grid["workload.input_workers"])):
        alone = _alone(with_settings(config, {"prefetch_depth": int(depth), "workload.input_workers": int(workers)}))
        assert rows.figures["throughput"][row] == alone["throughput"][0]
    assert len(set(rows.figures["throughput"][::2].tolist())) == 3  # each worker count gives its own
    job = tmp_path / "job.yaml"
    job.write_text(REPLICATED.read_text() + "tune: {space: {prefetch_depth: [1, 3]}}\n")
    replicated = load_tune_config(job)
    buckets = {"prefetch_depth": np.array([1, 3, 1, 3]), "replicas.bucket": np.array([50, 50, 200, 200]) * 10**6}
    runs.clear()
    by_bucket = evaluator.evaluate_grid(replicated, buckets)
    assert runs == [16, 16]  # one run a bucket size: its two configurations, 8 ranks each
    for row, (depth, bucket) in enumerate(zip(buckets["prefetch_depth"], buckets["replicas.bucket"])):
        alone = _alone(with_settings(replicated, {"prefetch_depth": int(depth), "replicas.bucket": int(bucket)}))
        assert by_bucket.figures["throughput"][row] == alone["throughput"].sum()


def test_a_default_space_checks_the_settings_outside_the_knobs_in_one_run(runs):
    """Which settings outside the knobs move throughput is one run: the config as written and each value checked;
    unchecked, the space holds them all and runs nothing."""
    fed, steady = load_config(FED), load_config(REPO / "sample_traces" / "ipu" / "healthy.yaml")
    assert "workload.input_workers" in space.default_space(fed)
    assert runs == [3]  # as written, the fewest and the most workers
    runs.clear()
    assert "workload.input_workers" not in space.default_space(steady)  # its workers keep ahead of the device
    assert runs == [2]  # as written (the fewest, one worker) and the most, one a core
    runs.clear()
    assert "workload.input_workers" in space.default_space(steady, checked=False) and runs == []
    assert [config.workload.input_workers for config in space.moving_checks(fed)] == [2, 1, 16]  # one a core


def test_a_sweeps_knob_plan_runs_with_the_moving_checks_and_the_values_asked_next(runs):
    """The sweep behind scan's better line runs its knobs' plan, the configs that say which settings outside the
    knobs move and those settings' values in one run; the space and each what-if after read what it simulated,
    each with the figures it has alone."""
    config, workers = load_config(FED), {"workload.input_workers": 4}
    expected = _alone(with_settings(config, workers))
    runs.clear()
    alone = sweep._knobs_alone(config, {"prefetch_depth": [4]}, [workers])
    assert runs == [6]  # as written and depth 4 (the knobs' plan), 1 and 16 workers (the checks), 4 workers
    assert [(name, value) for name, value, _ in alone] == [("prefetch_depth", 4)]
    assert "workload.input_workers" in space.default_space(config)
    assert prediction.predicted(config, workers) is not None and runs == [6]
    assert _same(evaluating.evaluate(with_settings(config, workers)).figures, expected) and runs == [6]


def test_the_what_ifs_a_sweep_is_asked_to_run_ahead_cost_no_run_after_it(runs):
    """Scan asks its sweep to run the joint what-if of every printed fix in its first run: asking for it after the
    sweep then simulates nothing, and gives what the what-if gives alone; without it, one run more."""
    config = load_config(FED)
    joint = {"prefetch_depth": 4, "workload.input_workers": 4}
    run = KnownRun.of(config, recorded=False, judges=frozenset({"prefetch_depth", "workload.input_workers"}))
    (fixed,) = prediction.what_if_configs(config, [joint])
    expected = _alone(fixed)
    runs.clear()
    sweep.best_settings(config, run, None, ahead=[joint])
    swept = len(runs)
    assert run.what_if(joint) is not None and len(runs) == swept
    assert _same(evaluating.evaluate(fixed).figures, expected) and len(runs) == swept
    evaluating._AS_WRITTEN.clear()
    runs.clear()
    sweep.best_settings(config, run)
    assert len(runs) == swept and run.what_if(joint) is not None and len(runs) == swept + 1


def test_the_value_a_fit_matches_keeps_its_run_for_the_fit_s_checks(runs):
    """The rounds that match the input's pacing figure to a step run each value once (the bracket's ends, kept from
    the round before, not again); the value matched is the fit, whose expected step and evaluation then run
    nothing, and are what it gives alone, to the last bit."""
    config = load_config(FED)
    step = float(fitting.expected_steps([config])[0]) * 1.5  # a slower input than the config's: a larger figure
    runs.clear()
    matched = fitting._matched(config, fitting.INPUT_PACE, step)
    assert len(runs) >= 2 and runs[0] == fitting.MATCH_CANDIDATES and max(runs[1:]) <= fitting.MATCH_CANDIDATES
    simulated = len(runs)
    assert fitting.expected_step(matched) == pytest.approx(step, rel=fitting.MATCH_TOLERANCE)
    kept = evaluating.evaluate(matched).figures
    assert len(runs) == simulated and _same(kept, _alone(matched))


def test_a_round_of_the_fit_s_values_with_its_false_position_point_stays_kept_for_the_next(runs):
    """A matching round runs its sixteen values and the false-position point (seventeen configs); the next round
    keeps the bracket's ends from it, and the fit's checks the value matched: none is simulated again."""
    config = load_config(FED)
    section, name = fitting.INPUT_PACE
    values = [*np.linspace(0.0, 4e4, fitting.MATCH_CANDIDATES), 1234.5]
    part = getattr(config, section)
    configs = [config.model_copy(update={section: part.model_copy(update={name: value})}) for value in values]
    runs.clear()
    fitting.expected_steps(configs)
    assert runs == [fitting.MATCH_CANDIDATES + 1]
    fitting.expected_steps(configs[::-1])
    for each in configs:
        evaluating.evaluate(each)
    assert runs == [fitting.MATCH_CANDIDATES + 1]


def test_a_setting_whose_checked_values_only_slow_the_job_moves_it(runs):
    """A GPU job whose four input workers keep ahead of the device: none (the loop loading its batches) slows it by
    nearly half, one a core gains nothing; a value that slows it moves its throughput as much as one that speeds it,
    so the workers are swept (a sweep then finds the fewest that keep up)."""
    healthy = load_config(REPO / "sample_traces" / "gpu" / "healthy.yaml")
    assert [config.workload.input_workers for config in space.moving_checks(healthy)] == [4, 0, 16]
    assert "workload.input_workers" in space.default_space(healthy) and runs == [3]
