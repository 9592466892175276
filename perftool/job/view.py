"""The job view, from the ranks' summaries alone: the per-rank table, the clocks aligned, who waits for
whom, the slowest rank, imbalance, exposed communication per process group, and the job's findings."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from perftool.common.errors import PerftoolError
from perftool.common.names import device_model
from perftool.common.units import duration, plural
from perftool.emulator.config import validate_config
from perftool.job.align import Alignment, Waits, align, waits
from perftool.job.summary import RankSummary
from perftool.predict.gains import fix_that_holds
from perftool.rules.detectors import DETECTORS
from perftool.rules.engine import detected, finding_of
from perftool.rules.findings import (
    AbsentRank,
    ClockAlignment,
    JobGroup,
    JobView,
    RankRow,
    RankSteps,
    TraceFindings,
    biggest_first,
)
from perftool.rules.known_run import KnownRun
from perftool.rules.model import Rule, Severity

MAX_MISSING_LISTED = 100
EXPOSURE_DETECTOR = "exposed_communication"
WAIT_EXPLAINS = 0.5  # waiting for a straggler this share of a rank's exposed communication makes it the cause
SLOWER = 1.02  # without waits to go by, a rank's step this much longer than the median's makes it the slowest
# ranks on one host read one clock where their offsets lie within this many times the readings' stray (p95) of each
# other, or within ONE_CLOCK_US where the readings agree closer than that
ONE_CLOCK, ONE_CLOCK_US = 4.0, 10.0


@dataclass
class JobScope:
    """A job as job-level detectors see it (the figures a rule's finding is measured against are the slowest
    rank's: its steady window and step count)."""

    summaries: dict[int, RankSummary]
    waits: Waits
    slowest: int | None
    family: str
    evidence_count: int = 5
    run: KnownRun | None = None  # how the job was run, where every rank's trace records the same emulator config
    steps_compared: dict[int, int] = field(default_factory=dict)
    contexts: tuple[str, ...] = ()  # job-level fixes are the same in every framework's terms
    clock_error_us: float = 0.0  # how far single readings of the ranks' clock offsets stray (p95): lags within it
    # are the clocks', not a rank's

    @property
    def window(self) -> float:
        scan = self.summaries[self.slowest].scan if self.slowest is not None else None
        return scan.window_us if scan is not None else 0.0

    @property
    def steady_steps(self) -> int:
        return self.summaries[self.slowest].scan.steps if self.slowest is not None else 0

    def per_step(self, value: float) -> float:
        return value / self.steady_steps if self.steady_steps else value


def job_view(
    summaries: list[RankSummary],
    rules: list[Rule],
    evidence: int = 5,
    earlier: list[str] | None = None,
    beside: list[str] | None = None,
    merged: list[str] | None = None,
    other_jobs: list[str] | None = None,
) -> JobView:
    """Everything the job view says, built from ``summaries`` (one per rank, ranks distinct; ``earlier``: the paths
    of the ranks' captures before those, left out; ``beside``: the paths of processes beside the ranks, left out;
    ``merged``: the paths of traces merging several ranks' beside them, left out; ``other_jobs``: the paths of
    other jobs' traces among them, left out)."""
    by_rank = {s.rank: s for s in sorted(summaries, key=lambda s: s.rank or 0) if s.rank is not None}
    timelines = {rank: s.timeline for rank, s in by_rank.items()}
    alignment, index = align(timelines)
    waited = waits(timelines, alignment, index)
    per_step = {rank: max(s.timeline.steps, 1) for rank, s in by_rank.items()}
    rows = [_row(s, waited, per_step[rank]) for rank, s in by_rank.items()]
    slowest, held = _slowest(rows)
    family = next(iter(by_rank.values())).scan.family if by_rank else "generic"
    scope = JobScope(by_rank, waited, slowest, family, evidence, _known_run(by_rank), per_step,
                     clock_error_us=alignment.residual_p95_us or 0.0)  # fmt: skip
    job_rules = [rule for rule in rules if DETECTORS[rule.detector].level == "job"]
    found = [detection for rule in job_rules if (detection := detected(scope, rule)) is not None]
    findings = sorted(
        (finding_of(scope, one, *fix_that_holds(scope, one, None), None) for one in found), key=biggest_first
    )
    if slowest is not None and findings:
        _explain_waits(by_rank, waited, per_step, slowest, findings[0].rule_id, rules)
    world = max((s.scan.world_size or 0 for s in by_rank.values()), default=0) or None
    missing = list(islice((rank for rank in range(world or 0) if rank not in by_rank), MAX_MISSING_LISTED))
    return JobView(
        ranks=rows,
        world_size=world,
        missing_ranks=missing,
        unlike=_unlike(by_rank),
        earlier_captures=earlier or [],
        beside_ranks=beside or [],
        merged_traces=merged or [],
        other_jobs=other_jobs or [],
        alignment=_alignment(alignment, {rank: s.host for rank, s in by_rank.items()}),
        slowest_rank=slowest,
        held_back_us=held,
        late_absent=_late_absent(by_rank, held),
        imbalance=_imbalance(rows),
        groups=_groups(by_rank),
        findings=findings,
    )


def _unlike(by_rank: dict[int, RankSummary]) -> list[str]:
    """What the ranks differ in, each value with the ranks that have it (``device: A100 ranks 0-2, H100 rank 3``)."""
    differences = []
    for what, value in _SHARED:
        ranks: dict[str, list[int]] = {}
        for rank, summary in by_rank.items():
            if (shared := value(summary.scan)) is not None:  # a rank that does not say is not unlike the others
                ranks.setdefault(shared, []).append(rank)
        if len(ranks) > 1:
            differences.append(f"{what}: " + ", ".join(f"{name} {_ranks_text(of)}" for name, of in ranks.items()))
    return differences


_SHARED: tuple[tuple[str, Callable[[TraceFindings], str | None]], ...] = (  # what a job's ranks have in common
    ("device", lambda scan: device_model(scan.device) or "unknown"),
    ("device family", lambda scan: scan.family),
    ("trace format", lambda scan: scan.dialect),
    ("job", lambda scan: scan.job_kind or None),  # what each rank's advice takes it for
    ("world size", lambda scan: str(scan.world_size) if scan.world_size else None),  # ranks of other runs
)


def _ranks_text(ranks: list[int]) -> str:
    """``rank 3``, ``ranks 0-2, 5``: runs of consecutive ranks as ranges."""
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][-1] + 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    listed = ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)
    return f"rank{'s' if len(ranks) > 1 else ''} {listed}"


def _known_run(by_rank: dict[int, RankSummary]) -> KnownRun | None:
    """The job's run where every rank's trace records one and the same emulator config (None otherwise)."""
    configs = [summary.scan.emulator for summary in by_rank.values()]
    first = configs[0] if configs else None
    if first is None or any(config != first for config in configs):
        return None
    try:
        return KnownRun.of(validate_config(first.model_dump(mode="json"), "job"))
    except PerftoolError:
        return None


def _explain_waits(
    by_rank: dict[int, RankSummary],
    waited: Waits,
    per_step: dict[int, int],
    slowest: int,
    rule_id: str,
    rules: list[Rule],
) -> None:
    """Hold at info a rank's exposed-communication finding that is mostly waiting for the slowest rank: the
    cause is the straggler (its finding says why), not how the rank communicates."""
    exposure_rules = {rule.id for rule in rules if rule.detector == EXPOSURE_DETECTOR}
    for rank, summary in by_rank.items():
        wait = waited.wait_us.get(rank, 0.0) / per_step[rank]
        for finding in summary.scan.findings:
            exposed = finding.impact.per_step_us
            if finding.rule_id in exposure_rules and exposed and wait >= WAIT_EXPLAINS * exposed:
                finding.capped = f"{min(wait / exposed, 1.0):.0%} of it is waiting for rank {slowest} ({rule_id})"
                finding.severity = Severity.INFO


def _row(summary: RankSummary, waited: Waits, steps: int) -> RankRow:
    scan, part = summary.scan, summary.breakdown_us
    top = scan.findings[0] if scan.findings else None
    rank = summary.rank
    return RankRow(
        rank=rank,
        path=scan.path,
        host=summary.host,
        steps=scan.steps,
        step_time_us=scan.step_time_us,
        compute_us=_number(part.get("compute")),
        exposed_communication_us=_number(part.get("exposed_communication")),
        idle_us=_number(part.get("idle")),
        wait_us=waited.wait_us[rank] / steps if rank in waited.wait_us else None,
        held_back_us=waited.held_back_us[rank] / steps if rank in waited.held_back_us else None,
        mfu=summary.mfu,
        mfu_is_lower_bound=summary.mfu_is_lower_bound,
        findings=len(scan.findings),
        top_finding=f"{top.rule_id} {top.rule_name}" if top else None,
        per_step=_per_step(summary, waited),
    )


def _per_step(summary: RankSummary, waited: Waits) -> RankSteps | None:
    """The rank's first steady steps one by one: those its waits were measured over where it has them."""
    parts, scan = summary.steps, summary.scan
    step_wait = waited.step_wait_us.get(summary.rank, {}) if summary.rank is not None else {}
    aligned = summary.rank in waited.wait_us
    measured = parts.compute.size
    shown = min(measured, summary.timeline.steps) if aligned and summary.timeline.steps else measured
    if shown == 0:
        return None
    numbers = scan.step_numbers[len(scan.warmup_durations_us) :][:shown]
    return RankSteps(
        step=numbers,
        compute_us=parts.compute[:shown].tolist(),
        communication_us=parts.communication[:shown].tolist(),
        wait_us=[step_wait.get(number, 0.0) for number in numbers] if aligned else None,
    )


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _slowest(rows: list[RankRow]) -> tuple[int | None, float | None]:
    """The rank the others wait for most; without waits, the one with the longest step."""
    held = [r for r in rows if r.held_back_us]
    if held:
        worst = max(held, key=lambda r: r.held_back_us or 0.0)
        return worst.rank, worst.held_back_us
    timed = [r for r in rows if r.step_time_us is not None]
    if len(timed) < 2:
        return None, None
    longest = max(timed, key=lambda r: r.step_time_us or 0.0)
    typical = float(np.median([r.step_time_us or 0.0 for r in timed]))
    return (longest.rank, None) if (longest.step_time_us or 0.0) > SLOWER * typical else (None, None)


def _late_absent(by_rank: dict[int, RankSummary], held_back_us: float | None) -> AbsentRank | None:
    """A rank without a trace here that every rank here waits for longer than any rank here holds the others back:
    the one every rank here waits for longest, where every rank's collectives' tasks name the peer of each wait in the
    job's own numbering (each rank's tasks give it its own rank); ranks unnamed, where no rank's tasks name one and
    every rank's collectives wait, moving no data (communication.waiting_us); else None."""
    waits = [s.scan.peer_waits for s in by_rank.values()]
    said = [w.per_step_us for rank, w in zip(by_rank, waits) if w is not None and w.rank == rank and w.per_step_us]
    if by_rank and len(said) == len(by_rank):
        latest = {max(per_peer, key=per_peer.__getitem__) for per_peer in said}
        if len(latest) != 1:  # one peer, the latest of every rank here: none of them (a rank's waits are for others)
            return None
        late = latest.pop()
        return _absent(late, [per_peer[late] for per_peer in said], held_back_us)
    if by_rank and all(w is None for w in waits):  # no peer named: how long each waits (0 where it records no wait)
        scans = [s.scan for s in by_rank.values()]
        waiting = [(scan.metrics.get("communication.waiting_us") or 0.0) / max(scan.steps, 1) for scan in scans]
        return _absent(None, waiting, held_back_us)
    return None


def _absent(rank: int | None, waits_us: list[float], held_back_us: float | None) -> AbsentRank | None:
    """The absent rank (None: unnamed) the ranks here wait ``waits_us`` per step for, where the least of those waits
    is longer than any rank here holds the others back."""
    least = min(waits_us)
    return AbsentRank(rank=rank, wait_us=[least, max(waits_us)]) if least > (held_back_us or 0.0) else None


def _imbalance(rows: list[RankRow]) -> dict[str, float]:
    """(max - mean) / mean over ranks: of compute per step, and of busy time (step time less waits) per step."""
    found = {}
    compute = np.array([r.compute_us for r in rows if r.compute_us is not None])
    busy = np.array([r.step_time_us - (r.wait_us or 0.0) for r in rows if r.step_time_us is not None])
    for name, values in (("compute", compute), ("busy", busy)):
        if values.size > 1 and values.mean() > 0:
            found[name] = float((values.max() - values.mean()) / values.mean())
    return found


def _groups(by_rank: dict[int, RankSummary]) -> list[JobGroup]:
    """Per process group: collective and exposed time per step, averaged over the ranks that use it."""
    totals: dict[str, list] = {}
    for summary in by_rank.values():
        steps = summary.scan.steps or 1
        for group in summary.groups:
            entry = totals.setdefault(group.name, [group.parallelism, 0, 0.0, 0.0])
            entry[1] += 1
            entry[2] += group.time_us / steps
            entry[3] += group.exposed_us / steps
    found = [
        JobGroup(name=n, parallelism=p, ranks=k, time_us=t / k, exposed_us=e / k) for n, (p, k, t, e) in totals.items()
    ]
    return sorted(found, key=lambda g: -g.exposed_us)


def _alignment(found: Alignment, hosts: dict[int, str | None]) -> ClockAlignment:
    """The alignment as the job view gives it, in a sentence; where ranks share a host, and so its clock, how far
    their offsets lie apart: a check of the offsets against clocks known to be one."""
    agreement = _host_agreement(found.offsets_us, hosts)
    if len(found.offsets_us) + len(found.unaligned) == 1:  # a job view of one rank: the others were not read
        text = "only one rank read, so no other clock to align with"
    elif found.reference is None:
        text = "clocks not aligned: no rank traced a collective to align on; times are each rank's own"
    else:
        aligned = len(found.offsets_us)
        widest = max(found.offsets_us.values(), key=abs)
        spread = duration(found.residual_p95_us, "us") if found.residual_p95_us is not None else "—"
        text = (
            f"{plural(aligned, 'rank')} aligned to rank {found.reference} on the collectives they share "
            f"(median {int(np.median(list(found.matched.values())))} each); clocks differ by up to "
            f"{duration(abs(widest), 'us')}, and single readings stray {spread} (p95) from the offset"
        )
        if agreement is not None and agreement <= max(ONE_CLOCK * (found.residual_p95_us or 0.0), ONE_CLOCK_US):
            text += f"; ranks on one host, which share its clock, align within {duration(agreement, 'us')}"
        elif agreement is not None:
            text += (
                f"; ranks on one host lie up to {duration(agreement, 'us')} apart: their traces do not read one clock"
            )
        if found.unaligned:
            text += f"; not aligned (too few shared collectives): ranks {', '.join(map(str, found.unaligned))}"
    return ClockAlignment(
        reference=found.reference,
        offsets_us=found.offsets_us,
        matched=found.matched,
        residual_p95_us=found.residual_p95_us,
        unaligned=found.unaligned,
        host_agreement_us=agreement,
        text=text,
    )


def _host_agreement(offsets: dict[int, float], hosts: dict[int, str | None]) -> float | None:
    """The widest gap between the offsets of two aligned ranks on one host (µs); None where no host holds two."""
    by_host: dict[str, list[float]] = {}
    for rank, offset in offsets.items():
        if (host := hosts.get(rank)) is not None:
            by_host.setdefault(host, []).append(offset)
    gaps = [max(held) - min(held) for held in by_host.values() if len(held) > 1]
    return max(gaps) if gaps else None
