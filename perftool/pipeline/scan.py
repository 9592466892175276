"""A trace scanned: read, analysed (steps, metrics, the device's idle time by cause), what its rules detect,
each fix's gain predicted (:mod:`perftool.predict.gains`: the run the trace records, or a fit to it), and the
findings assembled (:mod:`perftool.rules.engine`). Each stage reads what the one before produced."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from perftool.analysis.communication import find_collectives
from perftool.analysis.family import device_family, device_properties, job_said
from perftool.analysis.host_calls import blocking_copies, driving_threads
from perftool.analysis.host_work import typical_launches
from perftool.analysis.idle import CAUSES, attribute_idle
from perftool.analysis.launches import launch_rows
from perftool.analysis.metrics import Metrics, compute_metrics
from perftool.analysis.steps import Steps, detect_steps, initialising
from perftool.common.cores import free_cores
from perftool.common.errors import PerftoolError, TraceError
from perftool.common.threads import Helper, ordered_map
from perftool.common.version import __version__
from perftool.dialects.merged import merged_ranks
from perftool.emulator.config import EmulatorConfig, validate_config
from perftool.pipeline.read import load_trace
from perftool.predict.gains import TraceFit, fix_that_holds, together_and_beyond
from perftool.roofline.figures import programs_note, roofline
from perftool.rules.detectors import DETECTORS, Scope
from perftool.rules.engine import Cap, detected, finding_of, plain
from perftool.rules.findings import (
    DEVICE_BOUND,
    Finding,
    ScanReport,
    TraceFindings,
    UnreadTrace,
    WaitsByPeer,
    biggest_first,
)
from perftool.rules.known_run import KnownRun
from perftool.rules.model import Rule
from perftool.trace.loader import Decoders
from perftool.trace.model import Trace

RULE_THREADS = 2  # a third gains little: the fit and the Python between the numpy passes hold the GIL


@dataclass(frozen=True)
class ReadOptions:
    """How traces are read and advised on: the device family and dialect (None: detected), the occurrences
    listed per finding, the most JSON a trace may hold (None: the default limit), the steps the whole job
    runs where a trace does not record it (None: unknown), and the memory budget past which a trace's columns are
    kept on disk (None: the memory available)."""

    family: str | None = None
    dialect: str | None = None
    evidence: int = 5
    max_bytes: int | None = None
    job_steps: int | None = None
    memory: int | None = None

    def load(self, path: str, analysis: str, decoders: Decoders | None = None) -> Trace:
        """The trace at ``path`` read as these options say, for ``analysis`` (the command whose memory per event the
        budget counts: :func:`perftool.common.limits.memory_to_scan`). In a Dask worker (a daemon process) it is decoded
        in the worker itself, so that a worker holds one trace's load at a time."""
        in_worker = multiprocessing.current_process().daemon
        return load_trace(
            path,
            dialect=self.dialect,
            workers=1 if in_worker else None,
            max_bytes=self.max_bytes,
            decoders=decoders,
            memory=self.memory,
            analysis=analysis,
        )


DEFAULT_READ = ReadOptions()


def scan_files(
    paths: list[str], rules: list[Rule], read: ReadOptions = DEFAULT_READ, decoders: Decoders | None = None
) -> ScanReport:
    """Load and scan each trace in turn (one in memory at a time), decoded by ``decoders`` where given (a
    cluster's workers).

    A trace that cannot be read is listed in the report's ``unread`` with the reason; the others are
    scanned all the same. The report remembers the rules that ran (SARIF describes them).
    """
    traces, unread = [], []
    for path in paths:
        try:
            trace = read.load(path, "scan", decoders)
        except TraceError as exc:
            unread.append(UnreadTrace(path=exc.path, problem=exc.problem))
            continue
        traces.append(scan_trace(trace, rules, read))
    report = ScanReport(tool={"name": "perftool", "version": __version__}, traces=traces, unread=unread)
    report.rules_run = rules
    return report


def scan_trace(trace: Trace, rules: list[Rule], read: ReadOptions = DEFAULT_READ) -> TraceFindings:
    """Findings of ``rules`` on one loaded trace, the largest impact first (``read``: the family advised on, the
    occurrences listed, the job's length)."""
    return analyse_trace(trace, rules, read)[0]


def analyse_trace(trace: Trace, rules: list[Rule], read: ReadOptions = DEFAULT_READ) -> tuple[TraceFindings, Scope]:
    """The findings of :func:`scan_trace`, and the scope they came from (steps, metrics, idle attribution).
    A helper thread finds what the rules read of the trace whatever the window while this one finds the steps; then
    it attributes the device's idle time while the metrics are computed, and makes the roofline where a rule reads
    it (numpy frees the GIL, so the two take two cores where there are two); then it takes rules beside this
    thread, which starts on them once the metrics are done."""
    trace_rules = [rule for rule in rules if DETECTORS[rule.detector].level == "trace"]
    threads = _rule_threads(trace)  # the cores free before this scan's helper takes one
    steps_found: Future[Steps] = Future()
    ahead: dict[str, Callable[[], Any]] = {}
    if not trace.on_disk:  # columns on disk: one pass at a time, so that the budget counts one pass's arrays
        ahead["facts"] = partial(_window_free_facts, trace)
    if rules:
        ahead["idle"] = lambda: attribute_idle(trace, *steps_found.result().window)
    if _roofline_first(trace, trace_rules):
        ahead["roofline"] = lambda: roofline(trace, steps_found.result())
    with Helper(list(ahead.values())) as helper:
        try:
            steps = detect_steps(trace)
        except BaseException as exc:  # the helper's pieces waiting for the steps end too
            steps_found.set_exception(exc)
            raise
        steps_found.set_result(steps)
        metrics = compute_metrics(trace, steps)
        emulator = _emulator_config(trace)
        run = KnownRun.of(emulator) if emulator is not None else None
        made = {name: partial(helper.result, index) for index, name in enumerate(ahead)}  # each waits for its piece
        scope = Scope(trace, steps, metrics, read.family or device_family(trace), run, read.evidence, read.job_steps,
                      idle_from=made.get("idle"), roofline_from=made.get("roofline"))  # fmt: skip
        unjudged = next((c.unjudged for c in metrics.caveats if c.unjudged), None)
        judged = trace_rules if unjudged is None else []  # a capture that is no steady state has no finding of one
        capping = [c for c in metrics.caveats if c.caps]
        cap = Cap("; ".join(c.short for c in capping), all(c.recurring for c in capping)) if capping else None
        fitted = TraceFit(scope)  # fitted to the trace when a fix first asks for it

        def finding(rule: Rule) -> Finding | None:
            detection = detected(scope, rule)
            if detection is None:
                return None
            return finding_of(scope, detection, *fix_that_holds(scope, detection, fitted), cap)

        findings = [found for found in ordered_map(finding, judged, threads, helper) if found is not None]
    findings.sort(key=biggest_first)
    idle = scope.idle
    window = scope.window
    joint, further = together_and_beyond(scope, fitted, findings)
    merged = merged_ranks(trace)
    found = TraceFindings(
        path=trace.source,
        dialect=trace.dialect,
        family=scope.family,
        device=metrics.device,
        framework=scope.framework,
        job_kind=job_said(trace),
        world_size=distributed(trace, "world_size"),
        rank=None if len(merged) > 1 else distributed(trace, "rank", least=0),  # a merge's is its first file's
        peer_waits=_peer_waits(scope),
        merged_ranks=merged,
        time_unit=trace.display_time_unit,
        step_clock=metrics.step_clock,
        caveats=[c.text for c in metrics.caveats] + ([missing] if (missing := programs_note(trace)) else []),
        unjudged=unjudged,
        window_us=window,
        steps=scope.steady_steps,
        step_time_us=plain(metrics["step_time_us.mean"]),
        device_bound=_device_bound(metrics),
        idle={cause: idle.time(cause) / window for cause in CAUSES} if idle and window > 0 else {},
        findings=findings,
        rules=[rule.id for rule in judged],
        metrics={name: plain(value) for name, value in metrics.values.items()},
        step_durations_us=metrics.step_times_us,
        warmup_durations_us=(steps.end - steps.start)[: steps.warmup].tolist(),
        step_starts_us=steps.start.tolist(),
        window_at_us=[scope.lo, scope.hi],
        step_numbers=steps.numbers().tolist(),
        emulator=emulator.model_dump(mode="json") if emulator is not None else None,
        together=joint,
        beyond=further,
    )
    return found, scope


def _device_bound(metrics: Metrics) -> float | None:
    """The share of the window the device computes, where it is :data:`DEVICE_BOUND` or more and the trace's times are
    the run's own timeline (a range profiler's replay of kernel after kernel is not); None otherwise."""
    compute = metrics["device.compute_fraction"]
    timeline = all(caveat.timeline for caveat in metrics.caveats)
    return plain(compute) if timeline and compute is not None and compute >= DEVICE_BOUND else None


def _peer_waits(scope: Scope) -> WaitsByPeer | None:
    """Whom the collectives waited for per steady step, where the trace names the peer of each wait, all in one
    communicator (each numbers its ranks its own way)."""
    peers = scope.metrics.communication.peers
    if peers.rank is None or peers.communicators > 1:
        return None
    return WaitsByPeer(rank=peers.rank, per_step_us={peer: scope.per_step(us) for peer, us in peers.wait_us.items()})


def _window_free_facts(trace: Trace) -> None:
    """Find what the rules and the fit read of the trace whatever its window (each kept in the trace), while this
    thread finds the steps, whose work they do not wait for."""
    launch_rows(trace)  # the steps read these two too: found here, while they start on the rest
    blocking_copies(trace)
    device_properties(trace)
    driving_threads(trace)
    initialising(trace)  # the steps' start-up, then the idle's
    find_collectives(trace)  # the metrics'
    device_family(trace)  # the rules'
    typical_launches(trace)  # the host-bound rule's


def _roofline_first(trace: Trace, rules: list[Rule]) -> bool:
    """Whether the roofline is made in the helper thread, beside the metrics: where a rule reads it and the columns
    are in memory (on disk, one pass at a time)."""
    return not trace.on_disk and any(DETECTORS[rule.detector].reads_roofline for rule in rules)


def _rule_threads(trace: Trace) -> int:
    """The threads the rules run on: two where two cores are free (the detectors' numpy passes free the GIL, the fit
    behind the first fix holds it), one where the trace's columns are on disk, so that the budget counts one
    detector's working arrays at a time."""
    return 1 if trace.on_disk else min(free_cores(), RULE_THREADS)


def _emulator_config(trace: Trace) -> EmulatorConfig | None:
    """The config an emulator trace records about itself (None for other traces, an unreadable record, or a job
    timeline merging several ranks, which records its first rank's config whichever rank is analysed)."""
    if trace.dialect != "emulator" or len(merged_ranks(trace)) > 1:
        return None
    try:
        return validate_config(trace.metadata["perftool"]["emulator"]["config"], trace.source)
    except (KeyError, TypeError, PerftoolError):
        return None


def distributed(trace: Trace, key: str, least: int = 1) -> int | None:
    """``rank`` or ``world_size`` from Kineto's ``distributedInfo`` (None when the trace does not say)."""
    info = trace.metadata.get("distributedInfo")
    value = info.get(key) if isinstance(info, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= least else None
