"""The values a setting of the emulator may be swept over, and the space ``perftool tune`` sweeps by default on a
config: its device family's speed knobs around their values, none that change the training (what ``perftool
calibrate`` writes, and what scan's sweep of a fit tries). A setting's values are a list, ``{range: [lo, hi]}`` or
``{range: [lo, hi, step]}`` (both ends included), or ``{pow2: [lo, hi]}`` (the powers of two in ``[lo, hi]``, and
0 first when ``lo`` is 0)."""

from __future__ import annotations

from typing import Any

from perftool.emulator.config import EmulatorConfig, setting, with_settings
from perftool.emulator.evaluate import Evaluation, evaluate_all, first_job
from perftool.emulator.plan import build_plan, io_tiles_needed

MAX_VALUES_PER_KNOB = 10_000
MAX_DEFAULT_LOOP = 256  # the longest device loop a default space tries
DEFAULT_MAX_PREFETCH = 8  # batches ahead a default space tries at most (past three, the buffer seldom helps)
DEFAULT_MAX_WORKERS = 8  # input workers a default space tries at least up to (and up to the host's cores)
DEFAULT_BUCKETS = (5_000_000, 25_000_000, 100_000_000, 400_000_000)  # gradient bucket sizes a default space tries
MOVES = 1.005  # a setting outside the knobs is swept where a value of it alone moves throughput this much


def domain(given: Any) -> tuple:
    """A knob's values from a list, ``{range: [lo, hi(, step)]}`` or ``{pow2: [lo, hi]}``."""
    if isinstance(given, list):
        if not given:
            raise ValueError("empty list: give at least one value")
        repeated = next((value for i, value in enumerate(given) if value in given[:i]), None)
        if repeated is not None:
            raise ValueError(f"{repeated!r} is listed twice")
        return tuple(given)
    if isinstance(given, dict) and len(given) == 1:
        ((kind, bounds),) = given.items()
        if kind == "range":
            return _range(bounds)
        if kind == "pow2":
            return _pow2(bounds)
    raise ValueError("expected a list of values, {range: [lo, hi]}, {range: [lo, hi, step]} or {pow2: [lo, hi]}")


def _integers(bounds: Any, counts: tuple[int, ...], form: str) -> list[int]:
    if not (isinstance(bounds, list) and len(bounds) in counts and all(_is_int(b) for b in bounds)):
        raise ValueError(f"expected {form} with integers")
    return bounds


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _range(bounds: Any) -> tuple[int, ...]:
    lo, hi, *rest = _integers(bounds, (2, 3), "range: [lo, hi] or [lo, hi, step]")
    step = rest[0] if rest else 1
    if step < 1:
        raise ValueError(f"range step must be at least 1 (got {step})")
    if lo > hi:
        raise ValueError(f"empty range: lo {lo} is above hi {hi}")
    if (hi - lo) // step + 1 > MAX_VALUES_PER_KNOB:
        raise ValueError(f"range has more than {MAX_VALUES_PER_KNOB:,} values: use a step or pow2")
    return tuple(range(lo, hi + 1, step))


def _pow2(bounds: Any) -> tuple[int, ...]:
    lo, hi = _integers(bounds, (2,), "pow2: [lo, hi]")
    if lo < 0 or lo > hi:
        raise ValueError(f"pow2 needs 0 <= lo <= hi (got [{lo}, {hi}])")
    powers = [1 << k for k in range(hi.bit_length()) if max(lo, 1) <= 1 << k <= hi]
    if not powers:
        raise ValueError(f"no power of two between {lo} and {hi}")
    return tuple([0] if lo == 0 else []) + tuple(powers)


def default_space(config: EmulatorConfig, absent: frozenset[str] = frozenset(), checked: bool = True) -> dict[str, Any]:
    """A search space for ``config`` that keeps its training as it is: the speed knobs its device family has,
    around its values (what ``perftool calibrate`` writes, so ``perftool tune`` runs on a fitted job as is), less the
    settings the job has nothing to set (``absent``: :func:`~perftool.analysis.family.settings_absent`). A setting
    outside the knobs (a plan per value) is in it where one of its values alone moves the job's throughput by
    :data:`MOVES` or more (:func:`moving_checks`, simulated in one run); with ``checked`` False, whether or not."""
    profile, knobs = config.profile, config.knobs
    steps, _ = config.epoch
    space: dict[str, Any] = {}
    if "loop_size" in profile.knobs:
        space["loop_size"] = {"pow2": [1, 2 ** min(steps.bit_length() - 1, MAX_DEFAULT_LOOP.bit_length() - 1)]}
    space["prefetch_depth"] = {"range": [1, max(DEFAULT_MAX_PREFETCH, knobs.prefetch_depth)]}
    if "io_tiles" in profile.knobs:
        fewest = int(io_tiles_needed(build_plan(config).input_bytes[0]))
        tiles = {0, fewest, knobs.io_tiles, *(2**k for k in range(10) if fewest <= 2**k < profile.tiles)}
        space["io_tiles"] = sorted(t for t in tiles if t < profile.tiles)
    if "device_graphs" in profile.knobs:
        space["device_graphs"] = [knobs.device_graphs, not knobs.device_graphs]
    if "offload_optimizer" in profile.knobs and config.workload.optimizer_state:
        space["offload_optimizer"] = [knobs.offload_optimizer, not knobs.offload_optimizer]
    if knobs.layout_mismatch:
        space["layout_mismatch"] = [True, False]
    if not knobs.pin_memory:
        space["pin_memory"] = [False, True]
    if not knobs.pin_readback and config.workload.readback_per_step:
        space["pin_readback"] = [False, True]
    outside = {name: entry for name, (entry, _) in _outside_knobs(config).items() if name not in absent}
    moving = _moving(config, absent) if checked else set(outside)
    space.update((name, entry) for name, entry in outside.items() if name in moving)
    return {name: values for name, values in space.items() if name not in absent}


def moving_checks(config: EmulatorConfig, absent: frozenset[str] = frozenset()) -> list[EmulatorConfig]:
    """The configs :func:`default_space` simulates to find the settings outside the knobs that move throughput: the
    config as written, and each checked value of each such setting (less those ``absent``) set alone."""
    return _checking(config, _checked(config, absent))


def _checking(config: EmulatorConfig, checks: list[tuple[str, Any]]) -> list[EmulatorConfig]:
    """The config as written, then the config with each of ``checks`` (setting, value) set alone."""
    return [config] + [with_settings(config, {name: value}) for name, value in checks]


def _checked(config: EmulatorConfig, absent: frozenset[str]) -> list[tuple[str, Any]]:
    """(setting, value) for each value :func:`moving_checks` sets alone."""
    return [(name, value) for name, (_, checks) in _outside_knobs(config).items() if name not in absent
            for value in checks if value != setting(config, name)]  # fmt: skip


def _outside_knobs(config: EmulatorConfig) -> dict[str, tuple[Any, list[Any]]]:
    """The settings outside the knobs a default space may sweep: each one's values in the space, and those whose
    throughput alone says whether it moves the job's."""
    work = config.workload
    fewest = 0 if config.profile.host_feeds_data else 1
    most = max(DEFAULT_MAX_WORKERS, work.input_workers, config.host.cpus)
    settings: dict[str, tuple[Any, list[Any]]] = {
        "workload.input_workers": ({"range": [fewest, most]}, [fewest, most])  # how many processes load the batches
    }
    replicas = config.replicas
    if replicas is not None and replicas.count > 1:  # a data-parallel job: how it reduces its gradients
        buckets = [int(replicas.bucket), *(size for size in DEFAULT_BUCKETS if size != replicas.bucket)]
        settings["replicas.bucket"] = (buckets, buckets)  # as written first: a bucket size only as good wins no change
        settings["replicas.overlap"] = ([replicas.overlap, not replicas.overlap], [not replicas.overlap])
    return settings


def _moving(config: EmulatorConfig, absent: frozenset[str]) -> set[str]:
    """The settings outside the knobs one of whose checked values, set alone, moves the job's throughput by
    :data:`MOVES` or more: every value of every setting simulated in one run (each a plan of its own), so that one
    that cannot matter is not swept."""
    checks = _checked(config, absent)
    before, *after = map(_throughput, evaluate_all(_checking(config, checks)))
    return {name for (name, _), moved in zip(checks, after) if moved > before * MOVES or moved < before / MOVES}


def _throughput(evaluation: Evaluation) -> float:
    return first_job(evaluation.figures, evaluation.plan.replicas)["throughput"]
