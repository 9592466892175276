"""A fit is kept only where it reproduces the trace: its steady mean step within 5% of the trace's, its device busy
share and (where it models replicas) its all-reduces' share of the step within 3 points; and the steps a fit runs.
Held on figures given by hand, the emulator's own run replaced by them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from perftool.predict import fitting

TRACE = {"step_time_us.mean": 100.0, "device.busy_fraction": 0.5, "communication.time_us": 17.0}


def reproduced(monkeypatch, step: float, busy: float, buckets: list[float], replicas: bool, traced_comm: float) -> bool:
    """``reproduces`` of a config whose run gives ``step`` µs, ``busy`` and one all-reduce of each of ``buckets``
    µs a step, against a trace of a 100 µs step, busy 0.5, ``traced_comm`` µs of collectives in a 100 µs window."""
    figures = {"step_time_mean_us": np.array([step]), "device_busy_fraction": np.array([busy])}

    class Run(SimpleNamespace):  # the figures read by name, as an Evaluation gives them
        def __getitem__(self, name: str) -> np.ndarray:
            return figures[name]

    monkeypatch.setattr(fitting, "evaluate", lambda config: Run(plan=SimpleNamespace(bucket_us=buckets)))
    scope = SimpleNamespace(metrics={**TRACE, "communication.time_us": traced_comm}, window=100.0)
    return bool(fitting.reproduces(SimpleNamespace(replicas=object() if replicas else None), scope))


@pytest.mark.parametrize(
    ("step", "busy", "holds"),
    [
        (104.9, 0.5, True),  # 4.9% off the trace's step
        (105.1, 0.5, False),  # 5.1% off
        (95.1, 0.5, True),
        (94.9, 0.5, False),
        (100.0, 0.5299, True),  # busy 2.99 points off
        (100.0, 0.5301, False),  # 3.01 points off
        (100.0, 0.4701, True),
        (100.0, 0.4699, False),
    ],
)
def test_a_fit_reproduces_the_trace_s_step_within_5_percent_and_its_busy_share_within_3_points(
    monkeypatch, step, busy, holds
):
    assert reproduced(monkeypatch, step, busy, [], False, 0.0) is holds


@pytest.mark.parametrize(
    ("traced_comm", "replicas", "holds"),
    [
        (17.01, True, True),  # all-reduces 20% of the step, the trace's collectives 17.01%: 2.99 points
        (16.99, True, False),  # 3.01 points
        (23.5, True, False),  # 3.5 points the other way
        (0.0, False, True),  # a fit without replicas counts collectives as device work: not checked apart
    ],
)
def test_a_fit_with_replicas_reproduces_the_trace_s_share_of_the_step_in_collectives_within_3_points(
    monkeypatch, traced_comm, replicas, holds
):
    assert reproduced(monkeypatch, 100.0, 0.5, [20.0], replicas, traced_comm) is holds


@pytest.mark.parametrize(
    ("given", "recompiling", "knobs", "steps"),
    [
        ({"workload": {"steps": 40}}, False, (), 40),  # as many as the user states
        ({"workload": {"steps": 3}}, False, (), fitting.MIN_STEPS),  # ... at least MIN_STEPS
        ({}, True, (), 20),  # compiles mid-run: the trace's own 20 steps (its one-off's share is the trace's)
        ({"workload": {"steps": 40}}, True, (), 40),
        ({}, False, (), 256),  # else the long run whose mean step is the model's expected one
        ({}, False, ("loop_size",), 3 * 86),  # ... rounded up to the trace's loops of 3 steps
    ],
)
def test_a_fit_runs_the_steps_given_else_the_trace_s_where_it_compiles_else_256_in_whole_loops(
    monkeypatch, given, recompiling, knobs, steps
):
    monkeypatch.setattr(fitting, "_loop_size", lambda trace, scope, count: 3)
    scope = SimpleNamespace(steps=SimpleNamespace(count=20))
    assert fitting._fit_steps(None, scope, SimpleNamespace(knobs=knobs), given, recompiling) == steps


def _piecewise(configs: list) -> np.ndarray:
    """A step that stays at 50 µs until the field reaches 20, then grows 2 µs a unit up to 500 µs (at 245): the
    kinked, piecewise-linear shape of a step against the figure that paces it."""
    return np.array([min(max(50.0, 10.0 + 2.0 * c.workload.preprocess_us_per_sample), 500.0) for c in configs])


@pytest.fixture
def matching(monkeypatch):
    """``_matched`` of the input field, against :func:`_piecewise` in place of the emulator's runs."""
    import yaml
    from conftest import REPO

    from perftool.emulator.config import validate_config

    document = yaml.safe_load((REPO / "examples" / "tune" / "gpu.yaml").read_text())
    document.pop("tune")
    config = validate_config(document, "gpu.yaml")
    monkeypatch.setattr(fitting, "expected_steps", _piecewise)
    return lambda step, per=1: fitting._matched(config, fitting.INPUT_PACE, step, per).workload.preprocess_us_per_sample


@pytest.mark.parametrize(
    ("step", "value"),
    [
        (90.0, 40.0),  # in the linear piece: 10 + 2 x 40
        (52.0, 21.0),  # the first bracket [0, 24] holds the kink at 20: found in later rounds
        (40.0, 0.0),  # below any step the field gives: the nearer end of its reach
        (600.0, 320.0),  # above: the first value tried that reaches 500 µs (of 0, 160, 320, ... 2400)
    ],
)
def test_the_fit_sets_the_pacing_figure_so_that_the_expected_step_is_the_trace_s(matching, step, value):
    assert matching(step) == pytest.approx(value, abs=fitting.MATCH_TOLERANCE * step)


def test_out_of_rounds_the_fit_takes_the_last_bracket_s_false_position_point(matching, monkeypatch):
    monkeypatch.setattr(fitting, "MATCH_ROUNDS", 1)  # one round: [24, 48] brackets 90 µs (58 and 106 µs)
    assert matching(90.0) == pytest.approx(48 - 16 * (48 - 24) / (16 + 32))  # = 40, on the line through both


@pytest.mark.parametrize(
    ("step", "value"),
    [
        (70.0, 40.0),  # 50 + 0.5 x 40, within the reach: 4 x the config's own 13 (more than 70 / 10 µs paid a step)
        (80.0, 52.0),  # 60 is past that reach: its end
    ],
)
def test_the_field_is_sought_up_to_four_times_the_larger_of_its_own_value_and_the_step_over_what_pays_it(
    matching, monkeypatch, step, value
):
    def shallow(configs: list) -> np.ndarray:
        return np.array([50.0 + 0.5 * c.workload.preprocess_us_per_sample for c in configs])

    monkeypatch.setattr(fitting, "expected_steps", shallow)
    assert matching(step, per=10) == pytest.approx(value, abs=fitting.MATCH_TOLERANCE * step)
