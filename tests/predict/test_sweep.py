"""The sweep behind scan's better line: the values of a setting it tries, each setting alone on one plan, and which
settings it keeps together, on speed-ups given by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import REPO

from perftool.emulator.config import load_config
from perftool.emulator.evaluate import evaluate, job_figures
from perftool.predict import sweep
from perftool.rules.findings import Gain


@pytest.mark.parametrize(
    ("values", "tried"),
    [
        ((1, 2, 3, 4, 5, 6), [1, 2, 3, 4, 5, 6]),  # six values: every one
        ((1, 2, 3, 5, 6, 7, 9), [1, 2, 9]),  # more: the ends and the powers of two between
        ((3, 5, 6, 7, 8, 10, 12), [3, 8, 12]),
        ((0, 1, 2, 3, 5, 6, 7, 9), [0, 1, 2, 9]),  # 0 is no power of two, but an end
        ((-4, -2, 0, 3, 5, 6, 7), [-4, 7]),
        ((0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0), [0.5, 4.0]),  # not whole numbers: the ends alone
    ],
)
def test_a_long_range_is_tried_at_its_ends_and_its_powers_of_two(values, tried):
    assert sweep._tried(values) == tried


SLOW = {"input_workers": 0, "preprocess_us_per_sample": 3_000_000}  # 3 s a sample: under one sample a second


@pytest.mark.parametrize("workload", [{}, SLOW], ids=["as shipped", "slower than a sample a second"])
def test_each_knob_alone_is_the_throughput_of_that_change_run_on_its_own(workload):
    config = load_config(str(REPO / "sample_traces" / "npu" / "host_bound_loop_size.yaml"))
    config = config.model_copy(update={"workload": config.workload.model_copy(update=workload)})
    alone = sweep._knobs_alone(config, {"loop_size": [2, 16], "prefetch_depth": [4]})
    assert [(name, value) for name, value, _ in alone] == [("loop_size", 2), ("loop_size", 16), ("prefetch_depth", 4)]
    base = evaluate(config).figures["throughput"][0]
    for name, value, speedup in alone:
        changed = config.model_copy(update={"knobs": config.knobs.model_copy(update={name: value})})
        figures = evaluate(changed)
        own = job_figures(figures.figures, figures.plan.replicas)["throughput"][0]
        assert speedup == pytest.approx(own / base, rel=1e-9), (name, value)
    assert sweep._knobs_alone(config, {}) == []


# A fit on which each setting's speed-up is given: a setting's factor, a change of several the product of theirs.
# Input workers make deeper prefetching pointless; 1 worker cannot be emulated (no gain).
FACTORS = {
    ("loop_size", 2): 1.10,
    ("loop_size", 4): 1.20,
    ("loop_size", 8): 1.20,  # as good as 4, found after it: 4 stays
    ("prefetch_depth", 2): 1.01,
    ("device_graphs", True): 1.004,  # under HELPS alone: never tried together
    ("workload.input_workers", 2): 1.25,
    ("workload.input_workers", 4): 1.30,
    ("workload.input_workers", 8): 1.28,
}
CURRENT = {"loop_size": 1, "prefetch_depth": 1, "device_graphs": False, "workload.input_workers": 0,
           "replicas.bucket": 25}  # fmt: skip


def speedup(changes: dict) -> float | None:
    if changes.get("workload.input_workers") == 1:
        return None
    product = 1.0
    for name, value in changes.items():
        if name == "prefetch_depth" and "workload.input_workers" in changes:
            continue
        product *= FACTORS[name, value]
    return product


@pytest.fixture
def fit(monkeypatch):
    """A fit that judges the settings of ``space`` and gains as :func:`speedup` says; what it was asked is kept."""
    asked: dict[str, list] = {"alone": [], "beside": [], "what_if": [], "ahead": []}

    def knobs_alone(_config, tried, beside=()):
        asked["alone"].append(tried)
        asked["beside"].append(beside)
        return [(name, value, FACTORS.get((name, value), 1.0)) for name, values in tried.items() for value in values]

    def what_if(changes):
        asked["what_if"].append(dict(changes))
        found = speedup(changes)
        return None if found is None else Gain(kind="predicted", text="", speedup=found)

    def use(space: dict, still: frozenset[str] = frozenset()) -> SimpleNamespace:
        """``still``: settings outside the knobs whose checks show they move nothing (in the space unchecked)."""
        monkeypatch.setattr(sweep, "default_space", lambda _config, checked=True: {
            name: values for name, values in space.items() if not checked or name not in still})  # fmt: skip
        return SimpleNamespace(judges=frozenset(space), what_if=what_if, ahead=asked["ahead"].append)

    monkeypatch.setattr(sweep, "_knobs_alone", knobs_alone)
    monkeypatch.setattr(sweep, "setting", lambda _config, name: CURRENT[name])
    return use, asked


def test_the_best_value_of_each_setting_that_helps_alone_is_kept_together(fit):
    use, asked = fit
    run = use({
        "loop_size": [1, 2, 4, 8],
        "device_graphs": [False, True],
        "workload.input_workers": [0, 1, 2, 4, 8],
        "replicas.bucket": [25],  # nothing but its own value: nothing to try
    })  # fmt: skip
    together, gain = sweep.best_settings(None, run)
    assert asked["alone"] == [{"loop_size": [2, 4, 8], "device_graphs": [True]}]  # the knobs in one plan
    assert asked["what_if"][:3] == [{"workload.input_workers": 1}, {"workload.input_workers": 4},
                                    {"workload.input_workers": 8}]  # fmt: skip  # the lowest, middle and highest
    assert together == {"loop_size": 4, "workload.input_workers": 4}
    assert gain.speedup == pytest.approx(1.2 * 1.3)
    # simulated together: the plans per value beside the knobs' plan, then the settings together and each left out
    assert asked["beside"] == [asked["what_if"][:3]]
    assert asked["ahead"] == [[together, {"workload.input_workers": 4}, {"loop_size": 4}]]


def test_a_setting_that_changes_nothing_once_the_others_are_set_is_left_out(fit):
    use, asked = fit
    together, gain = sweep.best_settings(None, use({"prefetch_depth": [1, 2], "workload.input_workers": [0, 2, 4]}))
    assert together == {"workload.input_workers": 4} and gain.speedup == pytest.approx(1.3)
    assert asked["what_if"].count({"prefetch_depth": 2, "workload.input_workers": 4}) == 1  # and not tried again


def test_a_setting_helps_from_the_helps_threshold_on(fit, monkeypatch):
    use, _ = fit
    monkeypatch.setitem(FACTORS, ("prefetch_depth", 2), sweep.HELPS)
    together, gain = sweep.best_settings(None, use({"prefetch_depth": [1, 2]}))
    assert together == {"prefetch_depth": 2} and gain.speedup == sweep.HELPS
    monkeypatch.setitem(FACTORS, ("prefetch_depth", 2), 1.004)
    assert sweep.best_settings(None, use({"prefetch_depth": [1, 2], "device_graphs": [False, True]})) is None


def test_only_the_settings_asked_for_are_tried(fit):
    use, asked = fit
    run = use({"loop_size": [1, 2, 4, 8], "workload.input_workers": [0, 2, 4]})
    together, _ = sweep.best_settings(None, run, frozenset({"workload.input_workers"}))
    assert together == {"workload.input_workers": 4} and asked["alone"] == [{}]


def test_a_setting_that_moves_nothing_is_simulated_beside_the_knobs_but_never_tried(fit):
    """Its values run beside the knobs' plan, with the checks that show it moves nothing; then it is left out."""
    use, asked = fit
    workers = "workload.input_workers"
    run = use({"loop_size": [1, 4], workers: [0, 2, 4, 8]}, still=frozenset({workers}))
    together, _ = sweep.best_settings(None, run)
    assert together == {"loop_size": 4} and asked["what_if"] == [together]
    assert asked["beside"] == [[{workers: 2}, {workers: 4}, {workers: 8}]]


def test_a_setting_whose_run_gives_no_speed_up_is_not_named(fit):
    """The knobs alone come from one plan; where the run of the chosen setting then gives no speed-up (the job
    cannot be emulated so), nothing is named."""
    use, _ = fit
    run = use({"loop_size": [1, 4]})
    run.what_if = lambda changes: Gain(kind="predicted", text="", speedup=None)
    assert sweep.best_settings(None, run) is None


def _what_if_where(cannot_run):
    """A what-if of the FACTORS, where ``cannot_run(changes)`` says the emulator predicts the changes do not run."""

    def what_if(changes: dict) -> Gain:
        if cannot_run(set(changes)):
            return Gain(kind="predicted", text="does not run")
        return Gain(kind="predicted", text="", speedup=speedup(changes))

    return what_if


SPACE = {"loop_size": [1, 4], "prefetch_depth": [1, 2], "workload.input_workers": [0, 4]}


def test_a_setting_that_keeps_the_others_from_running_is_the_one_left_out(fit):
    """Deeper prefetching and input workers cannot run together: leaving out the loop size (the first) does not make
    them run, so it stays; leaving out the prefetch does, and the loop and the workers are named together."""
    use, _ = fit
    run = use(SPACE)
    run.what_if = _what_if_where(lambda changes: {"prefetch_depth", "workload.input_workers"} <= changes)
    together, gain = sweep.best_settings(None, run)
    assert together == {"loop_size": 4, "workload.input_workers": 4} and gain.speedup == pytest.approx(1.2 * 1.3)


def test_settings_that_cannot_run_together_whichever_is_left_out_give_the_best_one_alone(fit):
    use, _ = fit
    run = use(SPACE)
    run.what_if = _what_if_where(lambda changes: len(changes) >= 2)
    together, gain = sweep.best_settings(None, run)
    assert together == {"workload.input_workers": 4} and gain.speedup == pytest.approx(1.3)


def test_a_setting_that_helps_only_once_the_others_are_set_joins_them(fit, monkeypatch):
    """Pinned inputs alone change nothing while a read-back into pageable memory stalls the host each step; with the
    read-back pinned they win 2%: joined, at its best value. One that helps less than HELPS then is left out."""
    use, _ = fit
    monkeypatch.setitem(FACTORS, ("pin_readback", True), 1.25)
    monkeypatch.setitem(FACTORS, ("pin_memory", True), 1.001)
    monkeypatch.setitem(CURRENT, "pin_readback", False)
    monkeypatch.setitem(CURRENT, "pin_memory", False)
    run = use({"pin_readback": [False, True], "pin_memory": [False, True], "device_graphs": [False, True]})
    once_read_back = {frozenset({"pin_readback", "pin_memory"}): 1.02}

    def what_if(changes: dict) -> Gain:
        extra = once_read_back.get(frozenset(changes) - {"device_graphs"}, 1.0)
        return Gain(kind="predicted", text="", speedup=speedup(changes) * extra)

    run.what_if = what_if
    together, gain = sweep.best_settings(None, run)
    assert together == {"pin_readback": True, "pin_memory": True}
    assert gain.speedup == pytest.approx(1.25 * 1.001 * 1.02)
    once_read_back[frozenset({"pin_readback", "pin_memory"})] = (sweep.HELPS - 1e-4) / 1.001  # short of HELPS
    assert sweep.best_settings(None, run)[0] == {"pin_readback": True}
