"""Numbers people read: never in scientific notation, each in its unit, plurals right."""

from __future__ import annotations

import json
import math

import pytest
from conftest import REPO
from hypothesis import given
from hypothesis import strategies as st

from perftool import load_trace
from perftool.analysis import METRICS, compute_metrics
from perftool.analysis.metrics import unit_of
from perftool.common.units import axis_durations, change, estimate, figure, listed, number, plural

SAMPLES = REPO / "sample_traces"


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15))
def test_a_number_is_never_in_scientific_notation_and_reads_back_close(value):
    shown = number(value)
    assert "e" not in shown.lower()
    back = float(shown.replace(",", ""))
    assert math.isclose(back, value, rel_tol=1e-3, abs_tol=1e-6)  # four significant digits, or whole


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (4.754e-14, "fraction", "0.0%"),
        (0.178, "fraction", "17.8%"),
        (9243.0, "us", "9.243 ms"),
        (107.6, "steps/s", "107.6 steps/s"),
        (1990.5, "count", "1,990"),
        (2.5e9, "bytes", "2.5 GB"),
        (None, "us", "—"),
    ],
)
def test_a_figure_is_shown_in_its_unit(value, unit, shown):
    assert figure(value, unit) == shown


def test_a_change_is_signed_and_a_fraction_moves_in_points():
    assert change(0.172, "fraction") == "+17.2 pts" and change(-0.002, "fraction") == "-0.2 pts"
    assert change(4.754e-14, "fraction") == "0.0 pts" and change(1996.0, "us") == "+1.996 ms"
    assert change(0.5, "count") == "+0.5" and change(0, "count") == "0" and change(-3, "count") == "-3"


@pytest.mark.parametrize(
    ("count", "noun", "shown"),
    [
        (1, "idle stretch", "1 idle stretch"),
        (2, "idle stretch", "2 idle stretches"),
        (1.5, "copy", "1.5 copies"),
        (1, "configuration", "1 configuration"),
        (1990, "trace", "1,990 traces"),
        (0, "finding", "0 findings"),
    ],
)
def test_plurals(count, noun, shown):
    assert plural(count, noun) == shown


def test_every_metric_has_the_unit_its_description_and_its_values_give():
    for name, meaning in METRICS.items():
        assert (unit_of(name) == "us") == ("µs" in meaning), name
    for sample in ("npu/host_bound_loop_size.trace.json.gz", "gpu_training_kineto.pt.trace.json.gz"):
        values = compute_metrics(load_trace(SAMPLES / sample)).values
        shares = {name: value for name, value in values.items() if unit_of(name) == "fraction"}
        assert shares and all(math.isnan(v) or 0 <= v <= 1 for v in shares.values()), shares  # read as percentages
        counts = {name: value for name, value in values.items() if unit_of(name) == "count" and "per_step" not in name}
        assert all(math.isnan(v) or float(v).is_integer() for v in counts.values()), counts  # read as whole numbers


def test_gate_writes_plain_numbers_with_their_units(run):
    result = run("gate", SAMPLES / "baselines" / "npu__healthy.findings.json",
                 SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz", "--format", "json")  # fmt: skip
    checks = json.loads(result.stdout)["checks"]
    by_name = {check["name"]: check for check in checks}
    assert by_name["step time (median)"]["unit"] == "us" and by_name["throughput"]["unit"] == "steps/s"
    assert by_name["device.idle_fraction"]["unit"] == "fraction"
    assert by_name["device.idle_fraction"]["change"].endswith(" pts")
    text = run("gate", SAMPLES / "baselines" / "npu__healthy.findings.json",
               SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz").stdout  # fmt: skip
    assert "e-" not in text and "e+" not in text and "9.243 ms" in text and "17.8%" in text


def test_gate_check_figures_are_python_floats():
    from perftool import api

    result = api.gate(SAMPLES / "baselines" / "npu__healthy.findings.json",
                      SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz")  # fmt: skip
    figures = [value for check in result.checks for value in (check.baseline, check.candidate) if value is not None]
    assert figures and all(type(value) is float for value in figures)  # not numpy's float64


@pytest.mark.parametrize(
    "ticks, shown",
    [
        ([0, 200_000, 400_000, 600_000, 800_000], ["0 ms", "200 ms", "400 ms", "600 ms", "800 ms"]),
        ([0, 2_500, 5_000, 7_500], ["0.0 ms", "2.5 ms", "5.0 ms", "7.5 ms"]),
        ([600, 700, 800, 900], ["600 µs", "700 µs", "800 µs", "900 µs"]),
        ([0, 250, 500, 750, 1_000], ["0.00 ms", "0.25 ms", "0.50 ms", "0.75 ms", "1.00 ms"]),
        ([0, 1.5e6, 3e6], ["0.0 s", "1.5 s", "3.0 s"]),
    ],
)
def test_an_axis_shows_every_tick_in_one_unit(ticks, shown):
    assert axis_durations(ticks) == shown


def test_a_trace_recorded_to_the_nanosecond_shows_ns_only_below_a_microsecond():
    """jax.profiler writes displayTimeUnit "ns" for its nanosecond ticks: 3.6 ms stays 3.614 ms, not 3,614,205 ns."""
    from perftool.common.units import duration

    assert duration(3614.205, "ns") == "3.614 ms"
    assert duration(26.84, "ns") == "26.8 µs"
    assert duration(0.25, "ns") == "250 ns"
    assert duration(0.25) == "0.2 µs"


@pytest.mark.parametrize(
    ("us", "low", "high", "shown"),
    [
        (124_000, 118_000, 130_000, "≈ 124 ms (118–130 ms)"),  # ±6 ms: whole milliseconds
        (123_800, 123_450, 124_150, "≈ 123.8 ms (123.5–124.2 ms)"),  # ±0.35 ms: tenths
        (1_630, 1_550, 1_720, "≈ 1.63 ms (1.55–1.72 ms)"),
        (900, 850, 950, "≈ 900 µs (850–950 µs)"),
        (2.5e6, 2.0e6, 3.0e6, "≈ 2.5 s (2.0–3.0 s)"),
        (5_000, 5_000, 5_000, "≈ 5.000 ms (5.000–5.000 ms)"),  # no width: the most digits a duration shows
    ],
)
def test_an_estimate_shows_no_more_digits_than_its_interval_allows(us, low, high, shown):
    assert estimate(us, low, high) == shown


def test_a_list_names_its_first_few_and_counts_the_rest():
    assert listed(["a", "b", "c"], 3) == "a, b, c"
    assert listed(["a", "b", "c", "d", "e"], 3) == "a, b, c and 2 more"
    assert listed([], 3) == ""
    assert listed([str(n) for n in range(2000)], 4) == "0, 1, 2, 3 and 1,996 more"  # counted as every count is
