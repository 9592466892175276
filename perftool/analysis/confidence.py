"""What limits how far a trace's verdicts hold, said plainly: too few steps, start-up, cut-off capture.

A caveat that ``caps`` means the trace has no steady state worth ranking findings on: its findings
stay at info, each saying why. Where the cap comes only from too few steps (one or two that disagree, or no
step markers), a finding whose evidence recurs may still stand at warning (``recurring``), unless the
capture is mostly start-up. Two steady steps that agree are a steady state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from perftool import dialects, hardware
from perftool.analysis.device_clock import DEVICE_CLOCK
from perftool.analysis.family import (
    device_properties,
    device_tracks,
    engine_said,
    framework,
    job_kind,
    serving_engine,
    told_models,
)
from perftool.analysis.graph_captures import ITSELF, replay_ops
from perftool.analysis.launches import launch_rows, replayed
from perftool.analysis.steps import STEADY_AGREEMENT, Steps, first_device_work
from perftool.common.arrays import distinct
from perftool.common.units import duration, listed, plural
from perftool.dialects.kineto import EARLY_CAPTURE, early_profiler
from perftool.dialects.vocabulary import (
    CUDA_GRAPH_LAUNCH,
    GRAPH_LAUNCH,
    GRAPH_RECORDING,
    MODEL_RUN,
    MODEL_WARMUP,
    OTHER_DEVICES,
    OTHER_RANKS,
    RECOMPILED_REGION,
    SPARSE_CORE,
)
from perftool.trace.model import Kind, Phase, Role, Trace
from perftool.trace.profiler_dirs import EXPORT_CAPPED, MSPROF_LEFT_OUT, RUNS_BESIDE, SCHEDULE, xspace_name

_MSPROF_FIGURES = {  # step_trace_time.csv's columns, in words
    "Computing": "computing",
    "Communication": "communication",
    "Communication(Not Overlapped)": "communication overlapping no compute",
    "Free": "free",
    "Stage": "stage",
}
REPLAYED_SHARE = 0.1  # device graph replays holding this share of the device's compute are said to be there
MIN_STEADY_STEPS = 3  # fewer steady steps say nothing about the steady state
ADVISED_ACTIVE = 5  # the steps a profiler's schedule is advised to keep active
_CAPTURE_HINT = {
    "kineto": "capture several steps past warm-up: torch.profiler.profile(schedule=torch.profiler.schedule("
    f"wait=1, warmup=1, active={ADVISED_ACTIVE})) with prof.step() at the end of every iteration",
    "ascend": "capture several steps past warm-up: torch_npu.profiler.profile(schedule=torch_npu.profiler.schedule("
    f"wait=1, warmup=1, active={ADVISED_ACTIVE})) with prof.step() at the end of every iteration",
    # an Ascend trace without PyTorch's host events (msprof's own timeline, MindSpore's): either framework's profiler
    "ascend, framework unknown": "capture several steps past warm-up with the framework's profiler on a schedule,"
    " stepped at the end of every iteration (prof.step()): torch_npu.profiler.profile(schedule=torch_npu.profiler"
    f".schedule(wait=1, warmup=1, active={ADVISED_ACTIVE})) in PyTorch, mindspore.Profiler(schedule=mindspore.profiler"
    f".schedule(wait=1, warmup=1, active={ADVISED_ACTIVE})) in MindSpore",
    "xla": 'capture several steps past warm-up, each inside jax.profiler.StepTraceAnnotation("train", step_num=step)',
    "xla, inference": "capture several steps past warm-up, each call of the model inside "
    'jax.profiler.StepTraceAnnotation("predict", step_num=step)',
    # a TensorFlow job's XSpace: Keras's TensorBoard callback marks each batch it profiles ("Profiled batch")
    "xla, tensorflow": "capture several steps past warm-up, each marked as a step: in Keras, the TensorBoard "
    "callback's profile_batch=(10, 15) marks the batches it profiles; in a custom loop, each step inside "
    'tf.profiler.experimental.Trace("train", step_num=step, _r=1)',
    # Keras's TensorBoard callback profiles training batches only, never predict's
    "xla, tensorflow, inference": "capture several steps past warm-up, each call of the model inside "
    'tf.profiler.experimental.Trace("predict", step_num=step, _r=1)',
}
# how torch.compile names its compile-time phases (those GRAPH_RECORDING matches record a graph and compile nothing)
_DYNAMO_TIMED = "(dynamo_timed)"
_GENERIC_HINT = "capture at least 3 steps past warm-up, each marked as a step (ProfilerStep#N)"
# A serving engine runs the profiler itself, started and stopped around requests; each engine's way, by the engine's
# name in perftool.analysis.family.ENGINES
_SERVING_HINT = "profile several of the engine's iterations past its warm-up (model loading, graph capture): "
_ENGINE_PROFILERS = {
    "vllm": "vLLM's profiler (--profiler-config, its delay_iterations and max_iterations choosing them; "
    "VLLM_TORCH_PROFILER_DIR before 0.13) started and stopped around a few requests (llm.start_profile() and "
    "llm.stop_profile(), or POST /start_profile and /stop_profile)",
    "sglang": "SGLang's profiler (SGLANG_TORCH_PROFILER_DIR, POST /start_profile with start_step and num_steps)",
}
# each engine's way to keep traces of its graphs' capture beside its profile, and to run without graphs
_ENGINE_CAPTURE_TRACES = {
    "vllm": "vLLM's profiler config capture_torch_profiler",
    "sglang": "SGLang's --enable-profile-cuda-graph",
}
_ENGINE_GRAPHS_OFF = {"vllm": "vLLM's --enforce-eager", "sglang": "SGLang's --disable-cuda-graph"}
_TORCH_GRAPHS_OFF = 'torch.compile without mode="reduce-overhead"'  # any other PyTorch job's way
_RANGE_PROFILER = "cuda_profiler_range"
LISTED_DEVICES = 3  # the other devices named in a note; the rest counted
LISTED_RUNS = 3  # the other runs of a jax.profiler log directory named in a note; the rest counted
_UNLESS_RECURRING = " unless their evidence recurs (then at warning)"


@dataclass(frozen=True)
class Caveat:
    text: str
    caps: bool  # findings on this trace stay at info
    short: str = ""  # the reason in a few words, for each finding held at info
    recurring: bool = False  # a finding whose evidence recurs may stand at warning all the same
    unjudged: str = ""  # where no figure of the trace is a steady state's: what the capture is instead (reports lead)
    timeline: bool = True  # the trace's times are the run's own (not a replay's, kernel by kernel)


def capture_hint(trace: Trace) -> str:
    """How to capture several steady steps with the profiler that wrote ``trace`` (a serving engine's own where one
    ran it), in words: where torch_npu's profiler recorded a schedule that kept too few steps, that schedule
    changed."""
    recorded = trace.metadata.get(SCHEDULE)
    if recorded and recorded["fields"]["active"] < MIN_STEADY_STEPS:
        return _schedule_hint(recorded["file"], recorded["fields"])
    return _capture_hint(trace.dialect, job_kind(trace), serving_engine(trace), framework(trace))


def _schedule_hint(file: str, fields: dict[str, int]) -> str:
    """Capture more steps by the schedule torch_npu's profiler recorded in ``file`` (its ``fields``), with more active
    steps."""

    def call(schedule: dict[str, int]) -> str:
        return f"torch_npu.profiler.schedule({', '.join(f'{name}={value}' for name, value in schedule.items())})"

    return (
        f"capture several steps past warm-up: the profiler kept {plural(fields['active'], 'step')} active "
        f"({call(fields)}, as {file} records it); give it {call(fields | {'active': ADVISED_ACTIVE})}, with "
        "prof.step() at the end of every iteration"
    )


def said_capture_hint(trace_format: str, job: str, framework_said: str) -> str:
    """:func:`capture_hint` for a trace known by its summary: the format it was read as (its dialect), its job in
    :func:`~perftool.analysis.family.job_said`'s words (``training``, ``vLLM serving``...) and its framework."""
    return _capture_hint(trace_format, "serving" if job.endswith("serving") else job, engine_said(job), framework_said)


def _capture_hint(trace_format: str, job: str, engine: str | None, framework_seen: str) -> str:
    """The hint for a trace of ``trace_format`` whose job is ``job`` (:func:`~perftool.analysis.family.job_kind`'s
    word), served by ``engine`` where one serves it, run on ``framework_seen``."""
    if job == "serving":
        return _SERVING_HINT + ", ".join(_engines_ways(engine, _ENGINE_PROFILERS))
    if trace_format == "ascend" and framework_seen != "pytorch":
        trace_format = "ascend, framework unknown"
    if trace_format == "xla":  # its framework's way; a job that trains nothing marks each call of its model
        tensorflow = ", tensorflow" if framework_seen == "tensorflow" else ""
        trace_format = f"xla{tensorflow}{', inference' if job == 'inference' else ''}"
    return _CAPTURE_HINT.get(trace_format, _GENERIC_HINT)


def _engines_ways(engine: str | None, ways: dict[str, str]) -> list[str]:
    """Of each serving engine's ``ways``, the one of ``engine`` (the one a serving job's trace names), else all."""
    return [ways[engine]] if engine else list(ways.values())


def caveats(trace: Trace, steps: Steps) -> list[Caveat]:
    """Every reason the trace's figures are not a steady state, or not all of the run, in words."""
    found = []
    hint = capture_hint(trace)
    span = steps.last - steps.first
    lo, hi = steps.window
    mostly_startup, startup = steps.mostly_startup, steps.startup_end
    if startup is not None and mostly_startup:
        left = hi - max(lo, startup)  # a step that holds the start-up: its rest; one within it: none
        found.append(
            Caveat(
                "start-up (runtime and library initialisation, warm-up) takes"
                f" {duration(startup - steps.first)} of the {duration(span)} captured; it is left out,"
                f" leaving {duration(left) if left > 0 else 'nothing'}",
                caps=False,
            )
        )
    warmup = _warmup_phases(trace, startup) if startup is not None else ""
    if warmup:
        recompiled = bool((trace.name_matches(RECOMPILED_REGION) & (trace.ts < startup)).any())
        engine_s_hint = hint if job_kind(trace) == "serving" else None
        found.append(Caveat(_warmup_text(warmup, engine_s_hint, recompiled), caps=False))
    marked_warmup = 0 < steps.count and steps.steady <= 1  # the one step marked is the warm-up itself
    first_call = startup is not None and steps.count == 0 and not _model_runs_again(trace, startup)
    warmup_only = bool(warmup) and mostly_startup and (marked_warmup or first_call)
    if warmup_only:  # a serving engine capturing its graphs; a compiled model's first call, and no second
        what, unjudged = (
            (
                "the step the capture marks is that warm-up",
                f"the one step the capture marks is a model's warm-up ({warmup})",
            )
            if marked_warmup
            else (
                "the model does not run again after it, so what is left is the rest of its first call",
                f"the capture is a model's first call, its warm-up ({warmup}) and what follows it",
            )
        )
        found.append(
            Caveat(
                f"{what}: no steady step is left, so no figure here is a steady state's and no rule judges it",
                caps=True,
                short="the capture is a model's warm-up",
                unjudged=unjudged,
            )
        )
    if steps.device_span is not None and (unseen := steps.device_span[0] - first_device_work(trace)) > 0:
        found.append(
            Caveat(
                f"the host waits {duration(unseen)} at the start of the capture while the device shows no work: it"
                " waits for device work launched before the capture began (a window cut from a longer capture, or"
                " another process on the device), so that stretch is left out of the device's figures",
                caps=False,
            )
        )
    if steps.within:
        found.append(
            Caveat(
                f"{steps.within} holds {steps.count:,} iterations, told by {steps.inferred}: each is taken as a step",
                caps=False,
            )
        )
    elif steps.inferred:
        found.append(
            Caveat(
                f"no step markers: {steps.count:,} steps inferred from {steps.inferred}",
                caps=False,
            )
        )
    if steps.count == 0 and not warmup_only:
        where = "the trace after start-up" if lo > steps.first else "the whole trace"
        found.append(
            Caveat(
                f"no step markers: figures cover {where}, and findings stay at info"
                f"{_UNLESS_RECURRING if not mostly_startup else ''}; to judge the steady state, {hint}",
                caps=True,
                short="no step markers",
                recurring=not mostly_startup,
            )
        )
    elif steps.steady == 2 and _agree(steps.steady_durations):
        found.append(
            Caveat(
                f"only 2 steady steps, within {STEADY_AGREEMENT - 1:.0%} of each other: they are taken as the steady"
                f" state; {hint}",
                caps=False,
            )
        )
    elif steps.steady < MIN_STEADY_STEPS and not warmup_only:
        recurring = not mostly_startup
        found.append(
            Caveat(
                f"only {plural(steps.steady, 'steady step')} after {steps.warmup} warm-up (at least"
                f" {MIN_STEADY_STEPS} are needed, or 2 that agree), so findings stay at info"
                f"{_UNLESS_RECURRING if recurring else ''}; {hint}",
                caps=True,
                short=f"{plural(steps.steady, 'steady step')}, {MIN_STEADY_STEPS} needed",
                recurring=recurring,
            )
        )
    if kinds := _iteration_kinds(steps):
        found.append(Caveat(kinds, caps=False))
    if steps.truncated:
        found.append(Caveat("the last step was cut off by the end of the capture and is left out", caps=False))
    if trace.unclosed.size:
        found.append(
            Caveat(
                f"{plural(trace.unclosed.size, 'span')} never closed (the capture stopped inside them): kept as"
                " markers, counted in no figure",
                caps=False,
            )
        )
    if msprof := _msprof_steps(trace):
        found.append(Caveat(msprof, caps=False))
    if left_out := trace.metadata.get(MSPROF_LEFT_OUT):
        found.append(Caveat(f"msprof's own CSVs beside the trace, left out: {'; '.join(left_out)}", caps=False))
    if (ranks := trace.metadata.get(OTHER_RANKS)) and ranks["others"]:
        found.append(Caveat(_other_ranks(ranks), caps=False))
    if devices := trace.metadata.get(OTHER_DEVICES):
        found.append(Caveat(_other_devices(devices), caps=False))
    if moved := trace.metadata.get(DEVICE_CLOCK):
        found.append(Caveat(_device_clock(moved), caps=False))
    if runs := trace.metadata.get(RUNS_BESIDE):
        found.append(Caveat(_other_runs(runs), caps=False))
    if capped := trace.metadata.get(EXPORT_CAPPED):
        found.append(Caveat(_capped_export(capped), caps=False))
    if told := _told_model(trace):
        found.append(Caveat(told, caps=False))
    if not device_tracks(trace):
        found.append(Caveat(_no_device(trace), caps=False))
    elif replays := _replayed_share(trace, lo, hi):
        found.append(Caveat(replays, caps=False))
    elif unlinked := _unlinked_graph_launches(trace, lo, hi):
        found.append(Caveat(unlinked, caps=False))
    if early_profiler(trace) and device_tracks(trace):
        found.append(
            Caveat(
                f"{EARLY_CAPTURE}: a fix that names torch.compile, scaled_dot_product_attention or TORCH_LOGS needs "
                "2.0 or later, torch.cuda.graph 1.10 or later",
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
                timeline=False,
            )
        )
    return found


def _iteration_kinds(steps: Steps) -> str | None:
    """The kinds of a serving engine's steady iterations and each one's mean step, in words, where there are
    several (the mean step mixes them); None where the steady steps are of one kind."""
    modes = (steps.modes or [])[steps.warmup :]
    durations = steps.steady_durations
    kinds = list(dict.fromkeys(modes))  # in the order they first come
    if len(kinds) < 2:
        return None
    each = [
        f"{kind} {plural(len(mine), 'step')} of {duration(float(np.mean(durations[mine])))}"
        for kind in kinds
        if (mine := [i for i, mode in enumerate(modes) if mode == kind])
    ]
    return f"the engine's steady iterations are of {len(kinds)} kinds, which the mean step mixes: {listed(each, 4)}"


def _other_ranks(ranks: dict) -> str:
    """The ranks a trace merging several holds beside the one analysed, in words."""
    return (
        f"the trace merges {len(ranks['others']) + 1} ranks' traces into one: figures and findings are those of "
        f"{ranks['analysed']}, the rank whose device did the most work, the others shown, not analysed "
        f"({listed(ranks['others'], LISTED_DEVICES)}); for the job view (each rank beside the others, the one they "
        "wait for), scan the ranks' own traces together, such as the directory they were written to"
    )


def _device_clock(moved: dict[str, float]) -> str:
    """The device's events moved onto the host's clock, in words."""
    return (
        f"the device's work starts before the calls that launch it in {moved['before']:,.0f} of its "
        f"{moved['launches']:,.0f} launches, so its clock runs behind the host's (its profiler wrote its times at an "
        f"offset from the host's): its events were moved {duration(moved['shift_us'])} later to line up"
    )


def _other_devices(devices: dict) -> str:
    """The devices a trace holds beside the one analysed, in words; a TPU chip's SparseCores apart, as the coprocessors
    they are."""
    others = {name: share for name, share in devices["others"].items() if not SPARSE_CORE.search(name)}
    cores = {name: share for name, share in devices["others"].items() if SPARSE_CORE.search(name)}
    hosts = devices.get("their_hosts", 0)
    theirs = f"; {plural(hosts, 'host process')} launching only on the others left out with them" if hosts else ""
    said = []
    if others:
        said.append(
            f"the trace holds {len(others) + 1} devices with work: figures and findings are {devices['analysed']}'s,"
            f" the one with the most device time ({listed(list(others), LISTED_DEVICES)} ran {_shares(others)} of its"
            f" device time){theirs}; taken together, each step would count once per device and one device's idle time"
            " would hide under the others' work"
        )
    if cores:
        said.append(
            f"{plural(len(cores), 'SparseCore')} ran work too ({listed(list(cores), LISTED_DEVICES)}, {_shares(cores)}"
            f" of {devices['analysed']}'s device time): a chip's coprocessor beside its TensorCore, shown, not"
            " analysed; figures and findings are the TensorCore's"
        )
    return "; ".join(said)


def _shares(others: dict[str, float]) -> str:
    """The range of the others' device time, as shares of the analysed device's."""
    low, high = (f"{share:.0%}" for share in (min(others.values()), max(others.values())))
    return low if low == high else f"{low}–{high}"


def _capped_export(capped: dict) -> str:
    """What was read of a jax.profiler JSON export cut at its cap, in words: the XSpace beside it instead, or the
    export's earliest events and where the rest are."""
    export, events = os.path.basename(capped["export"]), f"{capped['events']:,}"
    if capped["read"]:
        return (
            f"read from {os.path.basename(capped['read'])}, the XSpace {export} was made from: the export holds "
            f"{events} events, as many as jax.profiler's JSON export keeps (the earliest), and the XSpace every one"
        )
    return (
        f"{export} holds {events} events, as many as jax.profiler's JSON export keeps (the earliest): the capture's "
        f"later events are not in it, so its figures cover the capture's start; scan {xspace_name(export)}, the "
        "XSpace it was made from (jax.profiler writes it in the same run folder), to read them all"
    )


def _other_runs(runs: dict) -> str:
    """The trace's run among the others of its jax.profiler log directory, in words: which it is, and the others
    (the nearest named first)."""
    earlier, later = runs["earlier"][::-1], runs["later"]
    which = "the latest" if not later else "the first" if not earlier else "one"
    others = " and ".join(
        f"the {plural(len(names), f'{when} run')} ({listed(names, LISTED_RUNS)})"
        for when, names in (("later", later), ("earlier", earlier))
        if names
    )
    verb = "is" if len(earlier) + len(later) == 1 else "are"
    return (
        f"the log directory holds {len(earlier) + len(later) + 1} jax.profiler runs and this trace is {which}, "
        f"{runs['run']}; {others} {verb} left out: give a run's folder (plugins/profile/RUN) to read another"
    )


def _msprof_steps(trace: Trace) -> str:
    """msprof's own breakdown of the steps (``step_trace_time.csv`` beside a torch_npu trace), per step, in words, to
    set beside perftool's; empty where the profiler wrote none."""
    rows = trace.metadata.get("msprof.step_trace_time") or []
    if not rows:
        return ""
    mean = {key: sum(row.get(key, 0.0) for row in rows) / len(rows) for key in _MSPROF_FIGURES}
    parts = [f"{words} {duration(mean[key])}" for key, words in _MSPROF_FIGURES.items() if any(key in r for r in rows)]
    steps = ", ".join(str(int(row["Step"])) for row in rows if "Step" in row) or "?"
    return f"msprof's own step_trace_time.csv beside the trace (step {steps}), per step: {', '.join(parts)}"


def _unlinked_graph_launches(trace: Trace, lo: float, hi: float) -> str:
    """Where the window's device graph launches link to none of the work they started (no flow from them: a profiler
    that writes flows for kernel launches only) while device work after them is linked to no launch, in words: their
    replays cannot be told from work launched kernel by kernel. Empty elsewhere, and in a trace with no flow at all."""
    launch = (trace.kind == Kind.RUNTIME) & trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE)
    graphs = np.flatnonzero(launch & trace.name_matches(GRAPH_LAUNCH) & (trace.ts >= lo) & (trace.ts < hi))
    if graphs.size == 0 or np.isin(graphs, replayed(trace)[0]).any():
        return ""
    sources, spans = launch_rows(trace)
    if sources.size == 0:  # no flow at all: no launch is linked, a graph's or another (the roofline says so)
        return ""
    work = trace.on_roles(Role.DEVICE) & (trace.phase == Phase.COMPLETE) & (trace.kind == Kind.COMPUTE)
    work &= (trace.ts >= trace.ts[graphs[0]]) & (trace.ts < hi)
    work[spans] = False
    if not work.any():
        return ""
    return (
        f"no flow links the window's {plural(graphs.size, 'device graph launch')} to the kernels replayed (the "
        "profiler wrote none from a graph launch): each replay's kernels read as work of their own, the gaps between "
        "them as device idle, and none is given an op"
    )


def _replayed_share(trace: Trace, lo: float, hi: float) -> str:
    """How much of the window's device compute runs in device graph replays, and which op each replayed kernel is
    given: the one that made it, where a capture trace beside names it (:mod:`~perftool.analysis.graph_captures`),
    else the one that replays the graph (a graph is captured once, not traced op by op); empty below
    :data:`REPLAYED_SHARE`, and for XLA, whose kernels are its programs' ops by name, replayed (as command buffers)
    or not."""
    if trace.dialect == "xla":
        return ""
    launches, spans = replayed(trace)
    spans = spans[(trace.ts[spans] >= lo) & (trace.ts[spans] < hi) & (trace.kind[spans] == Kind.COMPUTE)]
    compute = (trace.kind == Kind.COMPUTE) & trace.on_roles(Role.DEVICE) & (trace.ts >= lo) & (trace.ts < hi)
    total = float(trace.dur[compute].sum())
    share = float(trace.dur[spans].sum()) / total if total > 0 else 0.0
    if share < REPLAYED_SHARE:
        return ""
    ops = replay_ops(trace, (lo, hi))
    refused = f" (not read: {'; '.join(ops.refused)})" if ops.refused else ""
    if ops.used:
        untold = (
            f"; {ops.unmatched} of {ops.replays} replays match no captured graph one for one, and their kernels stay "
            "with the op that replays them"
            if ops.unmatched else ""
        )  # fmt: skip
        return (
            f"{share:.0%} of the device's compute runs in device graph replays: the roofline and diff --by op give "
            f"each replayed kernel to the op that launched it as the graph was captured ({_captured_in(ops.used)})"
            f"{untold}{refused}"
        )
    beside = (
        f"The graphs captured in {_captured_in(ops.captures)} hold none whose launches are these replays' kernels one "
        f"for one{refused}. "
        if ops.captures
        else ""
    )
    serving = job_kind(trace) == "serving"
    keep = (
        "keep the engine's traces of the graphs' capture beside the profile (a capture_traces/ folder: "
        f"{', '.join(_engines_ways(serving_engine(trace), _ENGINE_CAPTURE_TRACES))}), or "
        if serving
        else ""
    )
    ways_off = _engines_ways(serving_engine(trace), _ENGINE_GRAPHS_OFF) if serving else [_TORCH_GRAPHS_OFF]
    cuda = trace.name_matches(CUDA_GRAPH_LAUNCH, launches).any()  # PyTorch annotates CUDA's graphs only
    annotations = (
        "; in a trace viewer, PyTorch's CUDA graph kernel annotations label them too (torch.cuda.graph(..., "
        "enable_annotations=True) with mark_kernels, CUDA 13.1 or later)"
        if cuda
        else ""
    )
    return (
        f"{share:.0%} of the device's compute runs in device graph replays, whose kernels no op of their own names: "
        f"per-op figures (diff --by op, the roofline) give them to the op that replays the graph. {beside}To see them "
        f"by op, {keep}profile one run with graphs off ({', '.join(ways_off)}){annotations}"
    )


def _captured_in(sources: list[str]) -> str:
    """Where graphs were captured, in words: the trace itself, and the capture traces beside it."""
    beside = [source for source in sources if source != ITSELF]
    return " and ".join([*([ITSELF] if ITSELF in sources else []), *([f"{', '.join(beside)} beside it"] if beside
                                                                    else [])])  # fmt: skip


def _model_runs_again(trace: Trace, moment: float) -> bool:
    """Whether a compiled model runs again from ``moment`` on (:data:`MODEL_RUN`: a compiled region called, a device
    graph replayed): a run whose name ran before it. The first run of each is its first call's, which holds the
    compile in some releases and follows it in others."""
    rows = np.flatnonzero(trace.name_matches(MODEL_RUN))
    rows = rows[np.argsort(trace.ts[rows], kind="stable")]
    again = np.ones(rows.size, dtype=bool)
    again[np.unique(trace.name[rows], return_index=True)[1]] = False
    return bool((again & (trace.ts[rows] >= moment)).any())


def _warmup_phases(trace: Trace, startup_end: float) -> str:
    """What a compiled model's warm-up in the start-up did, in words ("torch.compile compiling and device graphs
    captured"); empty where the start-up held none."""
    names = {trace.names[n] for n in distinct(trace.name[trace.name_matches(MODEL_WARMUP) & (trace.ts < startup_end)])}
    timed = [n for n in names if n.endswith(_DYNAMO_TIMED)]
    compiling = any(not GRAPH_RECORDING.search(n) for n in timed)
    capturing = len(timed) < len(names) or any(GRAPH_RECORDING.search(n) for n in timed)
    return " and ".join(
        [*(["torch.compile compiling"] if compiling else []), *(["device graphs captured"] if capturing else [])]
    )


def _warmup_text(phases: str, engine_s_hint: str | None, recompiled: bool) -> str:
    """The caveat on a model's warm-up in the start-up: what it did, and how to profile past it and shorten it; a
    serving engine's job is told its engine's way to profile (``engine_s_hint``), and no compile setting, which the
    engine makes itself. Sizes that vary are named only where the warm-up compiled a frame again (``recompiled``)."""
    if engine_s_hint:
        advice = engine_s_hint[0].upper() + engine_s_hint[1:]
    else:
        advice = "Profile steps after warm-up (a profiler schedule whose wait and warmup steps cover it)"
    if "compiling" in phases and not engine_s_hint:
        advice += (
            "; to shorten warm-up itself, keep Inductor's caches across runs (TORCHINDUCTOR_CACHE_DIR on persistent "
            "storage)"
        )
        if recompiled:
            advice += (
                " and, as it compiled a function again, mark sizes that vary with torch._dynamo.mark_dynamic, so that "
                "new shapes do not compile again"
            )
    return f"the capture holds a model's warm-up ({phases}), left out as start-up: not a steady step. {advice}"


def _told_model(trace: Trace) -> str:
    """Where the trace names its device only by its vendor: the model its compute units and memory make it, or the
    models they fit alike whose peaks are the same, in words; empty otherwise (the roofline's note says why it has no
    peaks)."""
    properties = device_properties(trace)
    models = told_models(properties)
    if not models or (len(models) > 1 and hardware.shared_figures(models) is None):
        return ""
    memory = properties.get("totalGlobalMem")
    size = f" and {memory / 2**30:,.0f} GiB of memory" if isinstance(memory, int | float) and memory > 0 else ""
    said = f'the trace names the device only "{properties["name"]}": its {properties["numSms"]} compute units{size}'
    if len(models) == 1:
        return f"{said} make it an {models[0].model}, whose figures the roofline and the fit use"
    return (
        f"{said} fit {' and '.join(m.model for m in models)} alike, which nothing in the trace tells apart; their peaks"
        " and memory bandwidth are the same, so the roofline uses them, and the fit, which needs one model, a"
        " generic device's figures"
    )


def _no_device(trace: Trace) -> str:
    """Why the trace shows no device, in words: where it names devices it holds no work of, a capture of the host
    alone; where perftool does not know its producer, what it saw and what it reads."""
    shown = [t.process_name or f"pid {t.pid}" for t in trace.tracks if t.role != Role.SUMMARY and str(t.pid)]
    processes = list(dict.fromkeys(shown))
    seen = listed(processes, 4)
    named = trace.metadata.get("deviceProperties")
    if trace.dialect == dialects.GENERIC.name and not named:
        return (
            f"no device found, and perftool does not know what wrote this trace (processes: {seen}): it reads device "
            "work from PyTorch's profiler (Kineto, and the autograd profiler before it), torch_npu/msprof, "
            "jax.profiler, rocmProfileData, Graphcore, Gaudi and its own emulator; --dialect NAME reads it as one of "
            f"them ({', '.join(d.name for d in dialects.REGISTERED)})"
        )
    if isinstance(named, list) and named:
        models = sorted({str(d.get("name")) for d in named if isinstance(d, dict) and d.get("name")})
        return (
            f"no device activity: the trace names {plural(len(named), 'device')} ({', '.join(models) or 'unnamed'}) "
            "but holds none of their work, so only the host is measured; capture device activities too "
            "(torch.profiler.ProfilerActivity.CUDA, or your device's)"
        )
    return f"no device activity: a capture of the host alone (processes: {seen}); figures and findings are the host's"


def _agree(durations: np.ndarray) -> bool:
    """Whether steps take the same time within ``STEADY_AGREEMENT``."""
    return bool(durations.max() <= STEADY_AGREEMENT * durations.min())
