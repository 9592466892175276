"""Every gain printed on the bundled samples (as written, stripped of their emulator record, and stripped with the
job's length stated) against the truth: the sample's own config re-run with the printed fix (bench/bench_gains.py
prints the same table), and a fit's gain held to what the trace measured."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from oracles.gains import TOLERANCE, check_sample, samples

from perftool.predict import gains
from perftool.predict.gains import _past, _sweep_holds, emulated, fix_that_holds
from perftool.rules import prediction
from perftool.rules.detectors import Detection
from perftool.rules.engine import Detected
from perftool.rules.findings import Gain

SAMPLES = samples()


@pytest.mark.parametrize(("name", "config", "trace"), SAMPLES, ids=[s[0] for s in SAMPLES])
@pytest.mark.slow
def test_each_printed_gain_is_reproduced_by_running_its_fix(name, config, trace):
    checked = check_sample(name, config, trace)
    failing = [(c.rule_id, c.source, c.kind, round(c.printed, 4), round(c.truth, 4)) for c in checked if not c.holds]
    assert not failing, f"more than {TOLERANCE:.0%} off: {failing}"
    if "healthy" not in name:  # every sample with a problem prints a prediction for it, as written
        assert any(c.kind == "predicted" and c.source == "as written" for c in checked)


@pytest.mark.parametrize(
    ("speedup", "measured", "past"),
    [
        (1.25, 0.18, True),  # wins back 20% of the run time: past 18% and its 10% slack (19.8%)
        (1.25, 0.19, False),  # within 19% and its slack (20.9%)
        (None, 0.0, False),  # no speed-up predicted wins back nothing
    ],
)
def test_a_fit_s_gain_past_what_the_trace_measured_lost_is_not_printed(speedup, measured, past):
    assert _past(Gain(kind="predicted", text="", speedup=speedup), measured) is past


@pytest.mark.parametrize(
    ("contexts", "capped", "steady", "holds"),
    [
        (("pytorch",), None, 3, True),  # a PyTorch training job of three steady steps
        (("pytorch",), None, 2, False),  # too few steps to judge on
        (("pytorch",), "too few steps", 3, False),  # a finding held for lack of them
        (("pytorch", "inference"), None, 3, False),  # the settings swept are a training job's
        (("jax",), None, 3, False),
    ],
)
def test_a_sweep_s_setting_is_named_only_for_a_pytorch_training_job_judged_on_its_steady_steps(
    contexts, capped, steady, holds
):
    scope = SimpleNamespace(contexts=contexts, steady_steps=steady)
    assert _sweep_holds(scope, [SimpleNamespace(capped=None), SimpleNamespace(capped=capped)]) is holds


def detection(changes: dict, *alternatives: Detection) -> Detection:
    return Detection(lost_us=100.0, values={}, evidence=[], changes=changes, alternatives=list(alternatives))


def emulated_on(speedups: dict, own: Detection) -> tuple[Detection, Gain, str | None]:
    """``emulated`` on a run whose what-if of each change (by its sorted items) gives the speed-up named, None where
    it cannot be run."""

    def what_if(changes: dict) -> Gain | None:
        speedup = speedups[tuple(sorted(changes.items()))]
        text = f"{changes} ×{speedup}"
        return None if speedup == "invalid" else Gain(kind="predicted", text=text, speedup=speedup)

    bound = Gain(kind="upper_bound", text="up to")
    return emulated(SimpleNamespace(run=SimpleNamespace(what_if=what_if)), own, bound)


def test_of_the_fixes_that_help_one_that_keeps_the_training_wins_then_the_larger_speed_up():
    loop, batch, prefetch = detection({"loop_size": 8}), detection({"batch_size": 64}), detection({"prefetch_depth": 4})
    speedups = {(("loop_size", 8),): 1.1, (("batch_size", 64),): 1.5, (("prefetch_depth", 4),): 1.2}
    chosen, gain, why = emulated_on(speedups, detection({"loop_size": 8}, batch, prefetch))
    assert chosen.changes == {"prefetch_depth": 4} and gain.speedup == 1.2 and why is None  # not the batch's 1.5
    speedups[("prefetch_depth", 4),] = 1.1  # a tie: the one listed first
    chosen, gain, _ = emulated_on(speedups, detection({"loop_size": 8}, batch, prefetch))
    assert chosen.changes == {"loop_size": 8}
    speedups[("workload.gradient_accumulation", 4),] = 1.5  # a setting in a section is known by its own name
    chosen, _, _ = emulated_on(speedups, detection({"workload.gradient_accumulation": 4}, loop))
    assert chosen.changes == {"loop_size": 8}


def test_a_fix_helps_from_helps_on_and_where_none_does_the_bound_stays_with_why():
    speedups = {(("loop_size", 8),): prediction.HELPS, (("batch_size", 64),): "invalid"}
    chosen, gain, why = emulated_on(speedups, detection({"loop_size": 8}))
    assert chosen.changes == {"loop_size": 8} and gain.speedup == prediction.HELPS and why is None
    speedups[("loop_size", 8),] = 1.004
    own = detection({"loop_size": 8}, detection({"batch_size": 64}))
    chosen, gain, why = emulated_on(speedups, own)
    assert chosen is own and gain.kind == "upper_bound"
    assert why == (
        "no fix with knob values helps in the emulator: {'loop_size': 8} ×1.004; "
        "{'batch_size': 64}: not a valid configuration"
    )


@pytest.mark.parametrize(
    ("bound_us", "steady", "text"),
    [
        (None, 4, "up to 25.0 µs per step (10.0%)"),  # the finding's own 100 µs over 4 steady steps, of 1,000 µs
        (150.0, 4, "up to 37.5 µs per step (15.0%, with the idle the cause leads to beyond its own cost)"),
        (100.0, 4, "up to 25.0 µs per step (10.0%)"),  # a bound no larger than the cost is the cost's
        (None, 0, "up to 10.0% of the run time"),  # no steady steps: no time per step
    ],
)
def test_a_fix_of_no_knob_gets_the_bound_of_what_the_finding_measured(bound_us, steady, text):
    scope = SimpleNamespace(steady_steps=steady, window=1000.0, per_step=lambda value: value / max(steady, 1), run=None)
    found = Detection(lost_us=100.0, values={}, evidence=[], bound_us=bound_us)
    chosen, gain, why = fix_that_holds(scope, Detected(None, found, 0.1, lambda again: None, False), None)
    assert chosen is found and why is None
    assert (gain.kind, gain.text, gain.up_to_share) == ("upper_bound", text, max(bound_us or 0.0, 100.0) / 1000.0)


def test_a_cost_under_a_microsecond_without_a_bound_is_its_own_bound():
    scope = SimpleNamespace(steady_steps=1, window=10.0, per_step=lambda value: value, run=None)
    found = Detection(lost_us=0.5, values={}, evidence=[])
    _, gain, _ = fix_that_holds(scope, Detected(None, found, 0.05, lambda again: None, False), None)
    assert (gain.text, gain.up_to_share) == ("up to 0.5 µs per step (5.0%)", 0.05)


def test_a_recorded_run_s_finding_without_changes_keeps_its_bound_and_one_with_changes_is_emulated():
    speedups = {(("loop_size", 8),): 1.3}

    def what_if(changes: dict) -> Gain:
        return Gain(kind="predicted", text="", speedup=speedups[tuple(sorted(changes.items()))])

    scope = SimpleNamespace(steady_steps=4, window=1000.0, per_step=lambda value: value / 4,
                            run=SimpleNamespace(what_if=what_if))  # fmt: skip
    plain = Detection(lost_us=100.0, values={}, evidence=[])
    chosen, gain, _ = fix_that_holds(scope, Detected(None, plain, 0.1, lambda again: None, True), None)
    assert chosen is plain and (gain.kind, gain.text) == ("upper_bound", "up to 25.0 µs per step (10.0%)")
    looped = Detection(lost_us=100.0, values={}, evidence=[], changes={"loop_size": 8})
    chosen, gain, _ = fix_that_holds(scope, Detected(None, looped, 0.1, lambda again: None, True), None)
    assert chosen is looped and gain.speedup == 1.3
    speedups[("loop_size", 8),] = 1.0  # a fix that does not help: the bound stays
    chosen, gain, why = fix_that_holds(scope, Detected(None, looped, 0.1, lambda again: None, True), None)
    assert (gain.kind, gain.text) == ("upper_bound", "up to 25.0 µs per step (10.0%)") and why is not None


@pytest.mark.parametrize(
    ("steady", "attributed", "steps", "recompiles", "fitted"),
    [
        (4, True, 600, 0, True),  # a long capture that compiles nothing in its steady state
        (0, True, 8, 0, False),  # no steady step to fit
        (4, False, 8, 0, False),  # no idle time attributed to fit the host to
        (4, True, 513, 1, False),  # compiles mid-run: fitted at its own length, past FIT_MAX_STEPS
        (4, True, 512, 1, True),  # ... up to it
    ],
)
def test_a_trace_is_fitted_with_steady_steps_and_idle_causes_and_no_compile_in_more_than_512_steps(
    monkeypatch, steady, attributed, steps, recompiles, fitted
):
    monkeypatch.setattr(gains, "fit", lambda trace, scope: "the fit")
    monkeypatch.setattr(gains, "reproduces", lambda config, scope: True)
    scope = SimpleNamespace(steady_steps=steady, idle=object() if attributed else None, trace=None, job_steps=None,
                            steps=SimpleNamespace(count=steps),
                            metrics={"recompilations.count": recompiles})  # fmt: skip
    assert gains._fitted(scope) == ("the fit" if fitted else None)
