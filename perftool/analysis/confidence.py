"""What limits how far a trace's verdicts hold, said plainly: too few steps, start-up, cut-off capture.

A caveat that ``caps`` means the trace has no steady state worth ranking findings on: its findings
stay at info, each saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from perftool.analysis.steps import Steps
from perftool.trace.model import Trace
from perftool.units import duration

MIN_STEADY_STEPS = 3  # fewer steady steps say nothing about the steady state
STARTUP_SHARE = 0.5  # start-up taking this share of the capture is worth saying
_CAPTURE_HINT = {
    "kineto": "capture several steps past warm-up: torch.profiler.profile(schedule=torch.profiler.schedule("
    "wait=1, warmup=1, active=5)) with prof.step() at the end of every iteration",
    "ascend": "capture several steps past warm-up: torch_npu.profiler.profile(schedule=torch_npu.profiler.schedule("
    "wait=1, warmup=1, active=5)) with prof.step() at the end of every iteration",
}
_GENERIC_HINT = "capture at least 3 steps past warm-up, each marked as a step (ProfilerStep#N)"
_RANGE_PROFILER = "cuda_profiler_range"


@dataclass(frozen=True)
class Caveat:
    text: str
    caps: bool  # findings on this trace stay at info
    short: str = ""  # the reason in a few words, for each finding held at info


def caveats(trace: Trace, steps: Steps) -> list[Caveat]:
    """Every reason the trace's figures are not a steady state, or not all of the run, in words."""
    found = []
    hint = _CAPTURE_HINT.get(trace.dialect, _GENERIC_HINT)
    span = steps.last - steps.first
    lo, hi = steps.window
    if steps.startup_end is not None and steps.startup_end - steps.first >= STARTUP_SHARE * span:
        found.append(
            Caveat(
                "start-up (runtime and library initialisation, warm-up) takes"
                f" {duration(steps.startup_end - steps.first)} of the {duration(span)} captured; it is left out,"
                f" leaving {duration(hi - lo)}",
                caps=False,
            )
        )
    if steps.count == 0:
        where = "the trace after start-up" if lo > steps.first else "the whole trace"
        found.append(
            Caveat(
                f"no step markers: figures cover {where}, and findings stay at info; to judge the steady state, {hint}",
                caps=True,
                short="no step markers",
            )
        )
    elif steps.steady < MIN_STEADY_STEPS:
        found.append(
            Caveat(
                f"only {steps.steady} steady step(s) after {steps.warmup} warm-up (at least {MIN_STEADY_STEPS} are"
                f" needed to judge the steady state), so findings stay at info; {hint}",
                caps=True,
                short=f"{steps.steady} steady step(s), {MIN_STEADY_STEPS} needed",
            )
        )
    if steps.truncated:
        found.append(Caveat("the last step was cut off by the end of the capture and is left out", caps=False))
    if trace.unclosed.size:
        found.append(
            Caveat(
                f"{trace.unclosed.size:,} span(s) were never closed (the capture stopped inside them): they are kept as"
                " markers and count in no figure",
                caps=False,
            )
        )
    if _RANGE_PROFILER in trace.cats:
        found.append(
            Caveat(
                "CUPTI range-profiler capture: kernels were replayed one at a time to collect their metrics, so their"
                " times and the gaps between them are not the run's timeline; findings stay at info",
                caps=True,
                short="range-profiler replay, not a timeline",
            )
        )
    return found
