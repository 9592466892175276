"""The values a setting of the emulator may be swept over, and the space ``perftool tune`` sweeps by default on a
config: its device family's speed knobs around their values, none that change the training (what ``perftool
calibrate`` writes, and what scan's sweep of a fit tries). A setting's values are a list, ``{range: [lo, hi]}`` or
``{range: [lo, hi, step]}`` (both ends included), or ``{pow2: [lo, hi]}`` (the powers of two in ``[lo, hi]``, and
0 first when ``lo`` is 0)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perftool.emulator.config import EmulatorConfig, setting, with_settings
from perftool.emulator.evaluate import evaluate, first_job
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


def default_space(config: EmulatorConfig, absent: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A search space for ``config`` that keeps its training as it is: the speed knobs its device family has,
    around its values (what ``perftool calibrate`` writes, so ``perftool tune`` runs on a fitted job as is), less the
    settings the job has nothing to set (``absent``: :func:`~perftool.analysis.family.settings_absent`)."""
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
    work = config.workload
    fewest = 0 if config.profile.host_feeds_data else 1
    most = max(DEFAULT_MAX_WORKERS, work.input_workers, config.host.cpus)
    before = _throughput(config)

    def moving(name: str, values: Sequence[Any]) -> bool:  # a setting the job has, that moves its throughput
        return name not in absent and _moving(config, name, values, before)

    if moving("workload.input_workers", [fewest, most]):  # how many processes load the batches
        space["workload.input_workers"] = {"range": [fewest, most]}
    replicas = config.replicas
    if replicas is not None and replicas.count > 1:  # a data-parallel job: how it reduces its gradients
        buckets = [int(replicas.bucket), *(size for size in DEFAULT_BUCKETS if size != replicas.bucket)]
        if moving("replicas.bucket", buckets):
            space["replicas.bucket"] = buckets  # as written first: a bucket size only as good wins no change
        if moving("replicas.overlap", [not replicas.overlap]):
            space["replicas.overlap"] = [replicas.overlap, not replicas.overlap]
    return {name: values for name, values in space.items() if name not in absent}


def _moving(config: EmulatorConfig, name: str, values: Sequence[Any], before: float) -> bool:
    """Whether one of ``values`` of setting ``name``, set alone, moves the job's throughput (``before``: the
    config's) by :data:`MOVES` or more. Each value of a setting outside the knobs is a plan of its own to simulate,
    so one that cannot matter is not swept."""
    after = [_throughput(with_settings(config, {name: value})) for value in values if value != setting(config, name)]
    return any(moved > before * MOVES or moved < before / MOVES for moved in after)


def _throughput(config: EmulatorConfig) -> float:
    evaluation = evaluate(config)
    return first_job(evaluation.figures, evaluation.plan.replicas)["throughput"]
