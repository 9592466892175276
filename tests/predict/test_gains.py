"""Every gain printed on the bundled samples (as written, stripped of their emulator record, and stripped with the
job's length stated) against the truth: the sample's own config re-run with the printed fix (bench/bench_gains.py
prints the same table), and a fit's gain held to what the trace measured."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from oracles.gains import TOLERANCE, check_sample, samples

from perftool.predict.gains import _past, _sweep_holds
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
