"""Every gain printed on the bundled samples (as written, stripped of their emulator record, and stripped with the
job's length stated) against the truth: the sample's own config re-run with the printed fix (bench/bench_gains.py
prints the same table), and a fit's gain held to what the trace measured."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import REPO
from oracles.gains import TOLERANCE, check_sample, samples

from perftool.emulator.config import load_config
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
        (("pytorch", "inference"), None, 3, True),  # the settings swept are a PyTorch job's, training or not
        (("pytorch", "vllm", "serving", "inference"), None, 3, False),  # not a serving engine's
        (("jax",), None, 3, False),
    ],
)
def test_a_sweep_s_setting_is_named_only_for_a_pytorch_job_judged_on_its_steady_steps(contexts, capped, steady, holds):
    scope = SimpleNamespace(contexts=contexts, steady_steps=steady)
    assert _sweep_holds(scope, [SimpleNamespace(capped=None), SimpleNamespace(capped=capped)]) is holds


def detection(changes: dict, *alternatives: Detection) -> Detection:
    return Detection(lost_us=100.0, values={}, evidence=[], changes=changes, alternatives=list(alternatives))


def emulated_on(speedups: dict, own: Detection, ahead: list | None = None) -> tuple[Detection, Gain, str | None]:
    """``emulated`` on a run whose what-if of each change (by its sorted items) gives the speed-up named, None where
    it cannot be run; what it asks ahead is added to ``ahead``."""

    def what_if(changes: dict) -> Gain | None:
        speedup = speedups[tuple(sorted(changes.items()))]
        text = f"{changes} ×{speedup}"
        return None if speedup == "invalid" else Gain(kind="predicted", text=text, speedup=speedup)

    bound = Gain(kind="upper_bound", text="up to")
    asked = ahead if ahead is not None else []
    return emulated(SimpleNamespace(run=SimpleNamespace(what_if=what_if, ahead=asked.append)), own, bound)


def test_of_the_fixes_that_help_one_that_keeps_the_training_wins_then_the_larger_speed_up():
    loop, batch, prefetch = detection({"loop_size": 8}), detection({"batch_size": 64}), detection({"prefetch_depth": 4})
    speedups = {(("loop_size", 8),): 1.1, (("batch_size", 64),): 1.5, (("prefetch_depth", 4),): 1.2}
    chosen, gain, why = emulated_on(speedups, detection({"loop_size": 8}, batch, prefetch))
    assert chosen.changes == {"prefetch_depth": 4} and gain.speedup == 1.2 and why is None  # not the batch's 1.5
    speedups[("prefetch_depth", 4),] = 1.1  # a tie: the one listed first
    chosen, gain, _ = emulated_on(speedups, detection({"loop_size": 8}, batch, prefetch))
    assert chosen.changes == {"loop_size": 8}
    speedups[("workload.gradient_accumulation", 4),] = 1.5  # a setting in a section is known by its own name
    ahead: list = []
    chosen, _, _ = emulated_on(speedups, detection({"workload.gradient_accumulation": 4}, loop), ahead)
    assert chosen.changes == {"loop_size": 8}
    assert ahead == [[{"workload.gradient_accumulation": 4}, {"loop_size": 8}]]  # every fix's what-if, in one run


@pytest.mark.parametrize(
    ("setting", "changes", "keeps"), [("last_batch", "drop", "pad"), ("transfer_dtype", "int8", "fp16")]
)
def test_a_setting_s_value_says_whether_it_changes_the_training(setting, changes, keeps):
    """Dropping the last batch or quantising the inputs changes the training, padding it or fp16 does not: the
    value, not the setting, decides which of two helping fixes wins."""
    speedups = {((setting, changes),): 1.5, ((setting, keeps),): 1.2}
    chosen, gain, _ = emulated_on(speedups, detection({setting: changes}, detection({setting: keeps})))
    assert chosen.changes == {setting: keeps} and gain.speedup == 1.2


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
                            run=SimpleNamespace(what_if=what_if, ahead=lambda changes: None))  # fmt: skip
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
    scope = SimpleNamespace(steady_steps=steady, idle=_idle(0.0) if attributed else None, trace=None, job_steps=None,
                            steps=SimpleNamespace(count=steps), window=1000.0,
                            metrics={"recompilations.count": recompiles})  # fmt: skip
    assert gains._fitted(scope) == ("the fit" if fitted else None)


def _idle(other_device_us: float) -> SimpleNamespace:
    """An idle attribution whose device waited ``other_device_us`` for other devices its host drives, no more."""
    return SimpleNamespace(time=lambda cause: other_device_us if cause == "other_device" else 0.0)


@pytest.mark.parametrize(("waiting_us", "fitted"), [(19.9, True), (20.0, False)])
def test_a_device_waiting_two_percent_of_its_window_for_other_devices_is_not_fitted(monkeypatch, waiting_us, fitted):
    """The emulator runs one device: 20 µs of a 1 ms window spent waiting for the other devices' turns is too much
    for a fit of one device to stand for."""
    monkeypatch.setattr(gains, "fit", lambda trace, scope: "the fit")
    monkeypatch.setattr(gains, "reproduces", lambda config, scope: True)
    scope = SimpleNamespace(steady_steps=4, idle=_idle(waiting_us), trace=None, job_steps=None, window=1000.0,
                            steps=SimpleNamespace(count=8), metrics={"recompilations.count": 0})  # fmt: skip
    assert gains._fitted(scope) == ("the fit" if fitted else None)


@pytest.mark.parametrize(("job_steps", "epochs"), [(100, 1), (250, 1), (874, 3), (1_000, 4)])
def test_a_stated_job_length_is_fitted_as_whole_epochs_one_at_least(monkeypatch, job_steps, epochs):
    """The fit's epoch is the capture's 250 steps: a job of 100 steps still runs one, 874 steps round to three."""
    config = load_config(str(REPO / "sample_traces" / "npu" / "recompile_remainder_loop.yaml"))
    assert config.epoch[0] == 250
    monkeypatch.setattr(gains, "fit", lambda trace, scope: config)
    monkeypatch.setattr(gains, "reproduces", lambda config, scope: True)
    scope = SimpleNamespace(steady_steps=4, idle=_idle(0.0), trace=None, job_steps=job_steps, window=1000.0,
                            steps=SimpleNamespace(count=8), metrics={"recompilations.count": 0})  # fmt: skip
    assert gains._fitted(scope).workload.epochs == epochs


class Fitted:
    """A fit some fix asked for (``made``), or none (its config is then never read: reading it would fit)."""

    def __init__(self, made: bool, pin_memory: bool = False, pin_readback: bool = True) -> None:
        self.made = SimpleNamespace(name="fit's run") if made else None
        self._config = SimpleNamespace(knobs=SimpleNamespace(pin_memory=pin_memory, pin_readback=pin_readback))

    @property
    def config(self) -> SimpleNamespace:
        assert self.made is not None, "a fit no fix asked for is made for the sweep"
        return self._config


def found(speedup: float, changes: dict | None = None) -> tuple[dict, Gain]:
    return changes or {"device_graphs": True}, Gain(kind="predicted", text=f"sweep ×{speedup}", speedup=speedup)


def printed(kind: str, speedup: float | None, changes: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(capped=None, fix=SimpleNamespace(changes=changes or {}), gain=Gain(kind=kind, text="",
                           speedup=speedup))  # fmt: skip


def beyond_on(monkeypatch, sweep, findings, together=None, fitted=None, idle=0.5, graphs=False, captured=False,
              run=None, contexts=("pytorch",), copies=0.0, readback=0.0):  # fmt: skip
    """``gains.beyond`` on a scope whose idle share, share of input copies with nothing computing beside them, share
    in the read-back, graphs and capture are given, its sweep finding ``sweep``; returns the gain and the settings
    the sweep was asked to try (None: not asked)."""
    asked = []
    monkeypatch.setattr(gains, "best_settings", lambda config, fit, names, ahead: asked.append(names) or sweep)
    monkeypatch.setattr(gains, "graphs_in_use", lambda trace, rows: graphs)
    monkeypatch.setattr(gains, "serial_copies", lambda scope: copies * scope.window)
    monkeypatch.setattr(gains, "readback_time", lambda trace, scope: readback * scope.window)
    trace = SimpleNamespace(source="run.json", name_matches=lambda pattern: np.array([captured]))
    scope = SimpleNamespace(run=run, contexts=contexts, steady_steps=8, idle=SimpleNamespace(total=idle * 1e6),
                            window=1e6, trace=trace, in_window=None)  # fmt: skip
    gain = gains.beyond(scope, findings, gains.swept_settings(scope, fitted or Fitted(True), findings), together)
    return gain, (asked[0] if asked else None)


def test_the_sweep_s_setting_is_named_with_how_to_sweep_every_combination(monkeypatch):
    """Wins more than every predicted fix and all of them together by 2%: named, with the commands that sweep every
    combination; the settings tried are those the findings' fixes set, and pinned memory where the fit reads it off."""
    findings = [printed("predicted", 1.2, {"workload.input_workers": 2}), printed("upper_bound", 3.0, {"loop_size": 4})]
    gain, tried = beyond_on(monkeypatch, found(1.5), findings, together=Gain(kind="predicted", text="", speedup=1.3))
    assert gain.text == "sweep ×1.5; perftool calibrate run.json -o fit.yaml, then perftool tune fit.yaml, sweeps " \
        "every combination"  # fmt: skip
    assert gain.speedup == 1.5 and tried == frozenset({"workload.input_workers", "loop_size", "pin_memory"})
    _, pinned = beyond_on(monkeypatch, found(1.5), findings, fitted=Fitted(True, pin_memory=True))
    assert pinned == frozenset({"workload.input_workers", "loop_size"})
    _, reading = beyond_on(monkeypatch, found(1.5), findings, fitted=Fitted(True, True, pin_readback=False))
    assert reading == frozenset({"workload.input_workers", "loop_size", "pin_readback"})


@pytest.mark.parametrize(
    ("speedup", "findings", "together", "named"),
    [
        (1.3, [printed("predicted", 1.28)], None, False),  # within 2% of a printed fix (1.3056)
        (1.3, [printed("predicted", 1.2)], Gain(kind="predicted", text="", speedup=1.28), False),  # or of all together
        (1.25 * gains.BEYOND, [printed("predicted", 1.25)], None, False),  # exactly 2% more is not more
        (1.3, [printed("predicted", 1.2), printed("predicted", None)], None, True),  # a fix of no speed-up is 1.0
        (1.3, [printed("upper_bound", 2.0)], None, True),  # a bound is no printed gain
        (1.03, [], None, True),  # nothing printed: 2% over no change
        (1.01, [], None, False),
    ],
)
def test_the_sweep_s_setting_is_named_only_where_it_wins_2_percent_more_than_every_printed_gain(
    monkeypatch, speedup, findings, together, named
):
    gain, _ = beyond_on(monkeypatch, found(speedup), findings, together)
    assert (gain is not None) is named


@pytest.mark.parametrize(
    ("changes", "idle", "copies", "readback", "graphs", "captured", "named"),
    [
        ({"device_graphs": True}, 0.5, 0.0, 0.0, False, False, True),
        ({"device_graphs": True}, 0.3, 0.0, 0.0, False, False, False),  # wins back 33% of the step: past the idle
        ({"device_graphs": True}, 0.3, 0.1, 0.1, False, False, False),  # copies in the way are no graphs' to give
        ({"pin_memory": True}, 0.3, 0.0, 0.0, False, False, False),
        ({"pin_memory": True}, 0.3, 0.01, 0.0, False, False, True),  # but pinned memory's: 31% and 10% slack hold 33%
        ({"pin_memory": True}, 0.3, 0.0, 0.01, False, False, False),  # not a read-back's: pinned inputs leave it
        ({"pin_readback": True}, 0.3, 0.0, 0.01, False, False, True),  # a pinned read-back copies faster
        ({"pin_readback": True}, 0.3, 0.01, 0.0, False, False, False),  # and leaves the input copies as they are
        ({"device_graphs": True}, 0.5, 0.0, 0.0, True, False, False),  # graphs the job replays already
        ({"device_graphs": True}, 0.5, 0.0, 0.0, False, True, False),  # or captures
        ({"pin_memory": True}, 0.5, 0.0, 0.0, True, True, True),  # other settings where the job makes graphs
    ],
)
def test_the_sweep_s_setting_is_not_named_past_what_the_trace_could_give_back_or_for_graphs_the_job_makes(
    monkeypatch, changes, idle, copies, readback, graphs, captured, named
):
    gain, _ = beyond_on(
        monkeypatch,
        found(1.5, changes),
        [],
        idle=idle,
        copies=copies,
        readback=readback,
        graphs=graphs,
        captured=captured,
    )
    assert (gain is not None) is named


@pytest.mark.parametrize(
    ("case", "options"),
    [
        ("no fit made", {"fitted": Fitted(False)}),  # no fix asked for a fit: none is made for the sweep
        ("a recorded run", {"run": SimpleNamespace()}),  # an emulator trace: its fixes are its config's own
        ("a serving job", {"contexts": ("pytorch", "sglang", "serving", "inference")}),
    ],
)
def test_no_sweep_runs_without_a_fit_a_fix_asked_for_on_a_pytorch_job_s_capture(monkeypatch, case, options):
    gain, tried = beyond_on(monkeypatch, found(2.0), [], **options)
    assert gain is None and tried is None, case


@pytest.mark.parametrize(("joint_speedup", "named"), [(1.28, False), (1.2, True)])
def test_the_joint_what_if_runs_in_the_sweep_s_first_run_and_the_sweep_s_setting_is_judged_against_it(
    monkeypatch, joint_speedup, named
):
    """The sweep is asked to simulate every printed fix together in its first run, and that what-if is asked for
    after it (then free); the sweep's setting (×1.3) is named only where it wins 2% more than that."""
    events = []
    monkeypatch.setattr(
        gains, "best_settings", lambda config, fit, names, ahead: events.append(("sweep", list(ahead))) or found(1.3)
    )
    monkeypatch.setattr(gains, "graphs_in_use", lambda trace, rows: False)
    fitted = Fitted(True)
    fitted.made.what_if = lambda changes: (
        events.append(("what if", changes)) or Gain(kind="predicted", text="", speedup=joint_speedup)
    )
    trace = SimpleNamespace(source="run.json", name_matches=lambda pattern: np.array([False]))
    scope = SimpleNamespace(run=None, contexts=("pytorch",), steady_steps=8, idle=SimpleNamespace(total=0.5e6),
                            window=1e6, trace=trace, in_window=None)  # fmt: skip
    findings = [printed("predicted", 1.2, {"loop_size": 8}), printed("predicted", 1.1, {"prefetch_depth": 4})]
    joint, further = gains.together_and_beyond(scope, fitted, findings)
    both = {"loop_size": 8, "prefetch_depth": 4}
    assert events == [("sweep", [both]), ("what if", both)]
    assert joint.speedup == joint_speedup and (further is not None) is named


def test_only_predicted_fixes_are_put_together_and_the_more_severe_finding_s_value_stands():
    """Two or more predicted fixes make one what-if of all of them (a setting both set: the first finding's value,
    the more severe); a fix printed with a bound is none of them."""
    asked = []
    run = SimpleNamespace(what_if=lambda changes: asked.append(changes) or Gain(kind="predicted", text="", speedup=1.4))
    scope = SimpleNamespace(run=run)
    loop, prefetch = printed("predicted", 1.2, {"loop_size": 8}), printed("predicted", 1.1, {"prefetch_depth": 4})
    bounded = printed("upper_bound", 2.0, {"device_graphs": True})
    assert gains.together(scope, Fitted(False), [loop, bounded]) is None and asked == []
    both = printed("predicted", 1.05, {"loop_size": 2, "prefetch_depth": 4})
    assert gains.together(scope, Fitted(False), [loop, bounded, prefetch, both]).speedup == 1.4
    assert asked == [{"loop_size": 8, "prefetch_depth": 4}]
