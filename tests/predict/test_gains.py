"""Every gain printed on the bundled samples (as written, stripped of their emulator record, and stripped with the
job's length stated) against the truth: the sample's own config re-run with the printed fix (bench/bench_gains.py
prints the same table), and a fit's gain held to what the trace measured."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from oracles.gains import TOLERANCE, check_sample, samples

from perftool.predict.gains import _past, _sweep_holds, emulated
from perftool.rules import prediction
from perftool.rules.detectors import Detection
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
