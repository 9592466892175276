"""A gate from inputs to verdict: load both sides, refuse different jobs, run the checks."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from perftool.diff.compare import TraceDiff, diff_profiles
from perftool.diff.files import profile_file
from perftool.diff.names import load_op_map
from perftool.errors import PerftoolError, parameter
from perftool.gate.checks import Check, Verdict, against_budget, compare, counted, new_findings, status
from perftool.gate.inputs import Side, differences, load_side
from perftool.gate.policy import Budget, GatePolicy
from perftool.job.cluster import Cluster
from perftool.rules.model import Rule
from perftool.trace_scan import DEFAULT_READ, ReadOptions

TIMING = ("timing:step_time", "timing:throughput")  # the checks a diff of the traces explains when they fail


@dataclass
class StepTimes:
    """The steady steps' durations (µs) of one trace (rank) on each side, as the timing test saw them."""

    rank: int | None
    baseline: list[float]
    candidate: list[float]


@dataclass
class GateResult:
    candidate: str
    baseline: str | None  # None: a budget alone
    checks: list[Check]
    mismatches: list[str] = field(default_factory=list)  # differences let through by --allow-mismatch
    explanations: list[TraceDiff] = field(default_factory=list)  # per trace (rank) whose step time failed
    unexplained: str = ""  # why a failed step time has no explanation
    step_times: list[StepTimes] = field(default_factory=list)  # per trace (rank) compared: both sides' samples
    fail_on: str = "error"  # the severity of a new finding that fails; never: a check not made only warns
    config: str | None = None  # the project config file the gate's settings came from

    @property
    def status(self) -> Verdict:
        """Fail, warn or pass: the worst of the checks, each as it counts."""
        return status(self.checks, self.fail_on)

    @property
    def failed(self) -> bool:
        """Whether the gate fails: CI's build stops (exit 1)."""
        return self.status is Verdict.FAIL

    def counted(self, check: Check) -> Verdict:
        """What ``check`` counts as: a check not made fails, or warns with ``--fail-on never``."""
        return counted(check, self.fail_on)

    def counts(self) -> dict[Verdict, int]:
        return {verdict: sum(c.verdict is verdict for c in self.checks) for verdict in Verdict}

    def tally(self) -> str:
        """``2 failed, 0 warned, 6 passed, 1 skipped`` (and how many were not checked, when any were)."""
        counts = self.counts()
        unchecked = counts[Verdict.NOT_CHECKED]
        made = f"{counts[Verdict.FAIL]} failed, {counts[Verdict.WARN]} warned, {counts[Verdict.PASS]} passed"
        return f"{made}, {counts[Verdict.SKIP]} skipped" + (f", {unchecked} not checked" if unchecked else "")


@dataclass(frozen=True)
class GateOptions:
    """What the gate holds a candidate to: the policy (thresholds, metric limits), the severity of a new
    finding that fails, whether different jobs may be compared, and where a job's ranks are analysed."""

    policy: GatePolicy = field(default_factory=GatePolicy)
    fail_on: str = "error"
    allow_mismatch: bool = False
    cluster: Cluster = field(default_factory=Cluster)


DEFAULT_OPTIONS = GateOptions()


def run_gate(
    candidate: str,
    baseline: str | None,
    budget: Budget | None,
    rules: list[Rule],
    options: GateOptions = DEFAULT_OPTIONS,
    read: ReadOptions = DEFAULT_READ,
) -> GateResult:
    """Compare ``candidate`` with ``baseline`` and/or hold it to ``budget``; jobs rank by rank."""
    cand = load_side(candidate, rules, read, options.cluster)
    checks: list[Check] = []
    mismatches: list[str] = []
    explanations: list[TraceDiff] = []
    unexplained = ""
    step_times: list[StepTimes] = []
    policy, fail_on = options.policy, options.fail_on
    if baseline is not None:
        base = load_side(baseline, rules, read, options.cluster)
        if base.is_job != cand.is_job:
            raise PerftoolError(f"{baseline} is {base.describe()} and {candidate} {cand.describe()}: gate compares "
                                "a trace with a trace, or a job with a job")  # fmt: skip
        mismatches = _rank_differences(base, cand)
        for rank in _in_order(base.traces.keys() & cand.traces.keys()):
            mismatches += [_on(rank, m) for m in differences(base.traces[rank], cand.traces[rank])]
        if mismatches and not options.allow_mismatch:
            raise PerftoolError(
                f"{baseline} and {candidate} are not the same job ({'; '.join(mismatches[:3])}"
                f"{'; …' if len(mismatches) > 3 else ''}); pass {parameter('allow_mismatch', flag_only=True)} to "
                "compare them anyway"
            )
        for rank in _in_order(base.traces.keys() & cand.traces.keys()):
            step_times.append(StepTimes(rank, base.traces[rank].step_durations_us, cand.traces[rank].step_durations_us))
            compared = compare(base.traces[rank], cand.traces[rank], policy, fail_on)
            if any(c.id in TIMING and c.verdict is Verdict.FAIL for c in compared):
                if base.saved or cand.saved:
                    unexplained = "a saved scan result holds no events: diff the traces themselves to see why"
                else:
                    try:
                        explained = _explanation(base.traces[rank].path, cand.traces[rank].path, read, rank)
                    except PerftoolError as exc:  # the verdict stands without its explanation
                        unexplained = f"the traces could not be diffed: {exc}"
                    else:
                        explanations.append(explained)
                        compared = [_with_reason(c, explained) for c in compared]
            checks += [_ranked(rank, c) for c in compared]
        if cand.is_job:
            checks += [_ranked("job", c) for c in new_findings(base.job_findings, cand.job_findings, fail_on)]
    if budget is not None:
        for rank, trace in cand.traces.items():
            checks += [
                _ranked(rank, c) for c in against_budget(trace, budget, fail_on if baseline is None else "never")
            ]
    return GateResult(candidate, baseline, checks, mismatches, explanations, unexplained, step_times, fail_on)


def _explanation(baseline: str, candidate: str, read: ReadOptions, rank: int | None) -> TraceDiff:
    """Why one trace's (rank's) step time changed: the diff of its two traces, per kernel where they share them."""
    base, cand = profile_file(baseline, read), profile_file(candidate, read)
    base.rank = cand.rank = rank
    return diff_profiles(base, cand, "kernel", load_op_map())


def _with_reason(check: Check, explained: TraceDiff) -> Check:
    """A failed timing check, its detail followed by what the step time's change is made of."""
    if check.id not in TIMING or check.verdict is not Verdict.FAIL:
        return check
    return replace(check, detail=f"{check.detail}; {explained.headline()}")


def _rank_differences(base: Side, cand: Side) -> list[str]:
    """A job's ranks that only one side has: a different world size."""
    if not cand.is_job or base.traces.keys() == cand.traces.keys():
        return []
    found = [f"world size {len(base.traces)} → {len(cand.traces)} ranks"]
    only = _in_order(base.traces.keys() - cand.traces.keys())
    if only:
        found.append(f"ranks {', '.join(map(str, only[:8]))} only in the baseline")
    return found


def _in_order(ranks: set[int | None]) -> list[int | None]:
    """Ranks in order (a single trace's None alone)."""
    return sorted(ranks, key=lambda rank: -1 if rank is None else rank)


def _on(rank: int | None, text: str) -> str:
    return text if rank is None else f"rank {rank}: {text}"


def _ranked(rank: int | str | None, check: Check) -> Check:
    """A check of one rank (or of the job as a whole), named so."""
    if rank is None:
        return check
    where = f"rank {rank}" if rank != "job" else "job"
    return replace(check, id=f"{where.replace(' ', '')}/{check.id}", name=f"{where}: {check.name}")
