"""One line per tuned knob saying why its best value is best, from the emulator's own figures.

Loop size, prefetch depth and IO tiles are explained by the physics that sets them (host work
amortised per device call, preprocessing jitter against the step, the micro-batch the IO tiles
must hold); every knob also gets how its neighbouring values compare, with the others at the best.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perftool.emulator.config import TUNABLES
from perftool.emulator.plan import Plan, build_plan, io_tiles_needed
from perftool.emulator.profiles import DeviceProfile, knob_name
from perftool.tune.evaluator import cause
from perftool.tune.result import KnobLine, LinePoint, TuneResult
from perftool.tune.sensitivity import knob_lines

SAME = 0.0005  # changes smaller than this read as "the same"


@dataclass
class _Context:
    result: TuneResult
    plan: Plan  # of the best configuration
    step_us: float  # its mean step time

    @property
    def profile(self) -> DeviceProfile:
        return self.result.config.profile


def why(result: TuneResult) -> dict[str, str]:
    """For each tuned knob, in the space's order: why the best value was chosen."""
    best = result.best_config()
    context = _Context(result, build_plan(best), float(result.rows.figures["step_time_mean_us"][result.best]))
    lines = {line.knob: line for line in result.sensitivity or knob_lines(result)}
    reasons = {}
    for name in result.space.names:
        line = lines[name]
        own = _PHYSICS.get(name)
        parts = [own(context, line.best_value)] if own else []
        parts.append(_compared(result, line))
        alias = knob_name(context.profile, name, (result.config.calibration or {}).get("job") or {})
        head = f"{TUNABLES[name].label} {shown(line.best_value)}" + (f" ({alias})" if alias else "")
        reasons[name] = f"{head}: " + "; ".join(part for part in parts if part)
    return reasons


def _compared(result: TuneResult, line: KnobLine) -> str:
    best = line.at(line.best_value)
    if best is None:  # the best value is always on its own line; this only narrows the type
        return "the only value tried"
    phrases = [_versus(result, best, point) for point in line.neighbours()]
    if not phrases:
        return "no other value looked at" if len(line.points) > 1 else "the only value tried"
    return ", ".join(phrases)


def _versus(result: TuneResult, best: LinePoint, other: LinePoint) -> str:
    value = shown(other.value)
    if other.reason:
        return f"{value} is {cause(other.reason)}"
    change = other.objective / best.objective - 1
    if abs(change) < SAME:
        return f"{value} the same (±{SAME:.2%})"
    if result.objective.higher_is_better:
        within = " (within tolerance)" if change > 0 else ""
        return f"{value} {'gains' if change > 0 else 'loses'} {abs(change):.1%}{within}"
    within = " (within tolerance)" if change < 0 else ""
    return f"{value} {'shortens' if change < 0 else 'lengthens'} the step {abs(change):.1%}{within}"


def shown(value: object) -> str:
    """A knob value as written in YAML."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _loop_size(context: _Context, loop: int) -> str:
    host_us = float(context.plan.python_us[0] + context.plan.dispatch_us[0])
    share = host_us / (loop * context.step_us)
    steps = int(context.plan.total_steps[0])
    remainder = f", and {steps} steps leave a remainder loop of {steps % loop} that compiles" if steps % loop else ""
    return (
        f"{host_us / 1e3:.2f} ms of host work per device call (Python + launch) spread over {loop} "
        f"step{'s' if loop > 1 else ''} is {share:.1%} of a {context.step_us / 1e3:.2f} ms step{remainder}"
    )


def _last_batch(context: _Context, policy: str) -> str:
    left = int(context.plan.last_samples[0])
    if not left:
        return "the epoch divides into full batches, so the policy does not matter"
    return {
        "drop": f"the {left} samples left over are skipped: no extra step, no new shape",
        "pad": f"the {left} samples left over are padded to a full batch: one more step at the same shape",
        "partial": f"the {left} samples left over run as a smaller batch: a new shape to compile",
    }[policy]


def _prefetch_depth(context: _Context, depth: int) -> str:
    plan, step = context.plan, context.step_us
    workers = int(plan.workers[0])
    if not workers:
        return "the training loop loads each batch itself (no input workers): nothing is prepared ahead to buffer"
    if not plan.preprocess_us[0]:
        return "the job prepares no input batches (none take time to load): there is nothing to buffer"
    every_us = float(plan.preprocess_us[0]) / workers  # a batch this often, on average
    delivering = f"{workers} input workers deliver" if workers > 1 else "the input worker delivers"
    supply = f"{delivering} a batch every {every_us / 1e3:.2f} ms on average"
    if every_us > step:
        return (
            f"{supply}, slower than the {step / 1e3:.2f} ms step: the run is input-bound and more "
            "workers would help more than depth"
        )
    if plan.preprocess_jitter == 0:
        return f"{supply} against a {step / 1e3:.2f} ms step with no jitter to absorb, so depth hardly matters"
    return (
        f"{supply} against a {step / 1e3:.2f} ms step, with jitter cv {plan.preprocess_jitter:.1f}: "
        f"{depth} batch{'es' if depth > 1 else ''} ready ahead absorb{'s' if depth == 1 else ''} the slow ones"
    )


def _io_tiles(context: _Context, tiles: int) -> str:
    plan, total = context.plan, context.profile.tiles
    size_kb = float(plan.input_bytes[0]) / 1e3
    needed = int(io_tiles_needed(plan.input_bytes[0]))
    if tiles == 0:
        return f"input copies ({plan.transfer_us[0] / 1e3:.2f} ms a step) run before compute instead of beside it"
    return (
        f"a {size_kb:,.0f} kB micro-batch needs at least {needed} (1.05 × bytes / 624 kB) for copies to "
        f"overlap compute; {tiles} of {total} tiles make compute {total / (total - tiles) - 1:.1%} slower"
    )


def _batch_size(context: _Context, batch: int) -> str:
    plan = context.plan
    return f"needs {plan.memory_bytes[0] / 1e9:.2f} GB of {plan.capacity_bytes[0] / 1e9:.2f} GB device memory"


_PHYSICS: dict[str, Callable[[_Context, Any], str]] = {
    "loop_size": _loop_size,
    "prefetch_depth": _prefetch_depth,
    "io_tiles": _io_tiles,
    "batch_size": _batch_size,
    "last_batch": _last_batch,
}
