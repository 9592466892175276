"""A gate from inputs to verdict: load both sides, refuse different jobs, run the checks."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

from pydantic import Field as PydanticField
from pydantic import model_validator
from pydantic.dataclasses import dataclass as model_dataclass

from perftool.common.choices import FailOn
from perftool.common.errors import PerftoolError, parameter
from perftool.common.results import Document
from perftool.common.units import plural
from perftool.diff.compare import TraceDiff, diff_profiles
from perftool.diff.explanation import Explanation
from perftool.diff.files import profile_file
from perftool.diff.names import load_op_map
from perftool.gate.checks import Check, Verdict, against_budget, compare, counted, new_findings, status
from perftool.gate.inputs import Side, differences, load_side
from perftool.gate.policy import Budget, GatePolicy
from perftool.job.cluster import Cluster
from perftool.job.ranks import PROCESS_ID_RANKS, rank_is_process_id
from perftool.pipeline.scan import DEFAULT_READ, ReadOptions
from perftool.rules.model import Rule

TIMING = ("timing:step_time", "timing:throughput")  # the checks a diff of the traces explains when they fail
EXPLAINED = 5  # contributors to a failed step time listed by name
RANKS_NAMED = 8  # ranks named where only one side of a job has them; the rest counted


@model_dataclass
class StepTimes:
    """The steady steps' durations (µs) of one trace (rank) on each side, as the timing test saw them."""

    rank: int | None
    baseline: Annotated[list[float], PydanticField(description="the baseline's steady steps' durations, µs, in order")]
    candidate: list[float]


class GateResult(Document):
    """``perftool gate --format json``: the verdict, every check, and what a failed step time's change is made of."""

    schema_: Literal["perftool.gate/1"] = PydanticField("perftool.gate/1", alias="schema")
    status: Verdict = PydanticField(
        Verdict.PASS, description="pass, warn or fail: the worst of the checks, each as it counts (set from them)"
    )
    fail_on: FailOn = PydanticField(
        "error", description="the severity of a new finding that fails the gate; never: a check not made only warns"
    )
    baseline: str | None = PydanticField(description="null: the candidate held to a budget alone")
    candidate: str
    mismatches: list[str] = PydanticField(
        default_factory=list, description="differences let through by allow_mismatch (--allow-mismatch)"
    )
    counts: dict[Verdict, int] = PydanticField(default_factory=dict, description="checks per verdict (set from them)")
    checks: list[Check]
    explanations: list[Explanation] = PydanticField(
        default_factory=list,
        description="per trace (rank) whose step time failed: what its change is made of (perftool diff)",
    )
    unexplained: str = PydanticField("", description="why a failed step time has no explanation, else empty")
    step_times: list[StepTimes] = PydanticField(
        default_factory=list, description="per trace (rank) compared: both sides' steady steps"
    )
    config: str | None = PydanticField(
        None, description="the project config the gate used (perftool.yaml or pyproject.toml)"
    )

    @model_validator(mode="after")
    def _tallied(self) -> GateResult:
        """The status and counts, from the checks: never given, always what the checks say."""
        self.status = status(self.checks, self.fail_on)
        self.counts = {verdict: sum(c.verdict is verdict for c in self.checks) for verdict in Verdict}
        return self

    @property
    def failed(self) -> bool:
        """Whether the gate fails: CI's build stops (exit 1)."""
        return self.status is Verdict.FAIL

    def counted(self, check: Check) -> Verdict:
        """What ``check`` counts as: a check not made fails, or warns with ``--fail-on never``."""
        return counted(check, self.fail_on)

    def why_failed(self) -> str:
        """``4 checks failed``, ``2 checks could not be made``, or both: what fails the gate, in CI's one line."""
        failed, unmade = self.counts[Verdict.FAIL], self.counts[Verdict.NOT_CHECKED]
        unmade = unmade if self.fail_on != "never" else 0  # with --fail-on never, a check not made warns
        said = [f"{plural(failed, 'check')} failed"] if failed else []
        if unmade:
            said.append(f"{unmade} could not be made" if said else f"{plural(unmade, 'check')} could not be made")
        return " and ".join(said)

    def tally(self) -> str:
        """``2 failed, 0 warned, 6 passed, 1 skipped`` (and how many were not checked, when any were)."""
        counts = self.counts
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
    explanations: list[Explanation] = []
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
                        explanations.append(Explanation.of(explained, EXPLAINED))
                        compared = [_with_reason(c, explained) for c in compared]
            checks += [_ranked(rank, c) for c in compared]
        if cand.is_job:
            checks += [_ranked("job", c) for c in new_findings(base.job_findings, cand.job_findings, fail_on)]
    if budget is not None:
        for rank, trace in cand.traces.items():
            checks += [
                _ranked(rank, c) for c in against_budget(trace, budget, fail_on if baseline is None else "never")
            ]
    return GateResult(
        candidate=candidate, baseline=baseline, checks=checks, mismatches=mismatches, explanations=explanations,
        unexplained=unexplained, step_times=step_times, fail_on=fail_on,
    )  # fmt: skip


def _explanation(baseline: str, candidate: str, read: ReadOptions, rank: int | None) -> TraceDiff:
    """Why one trace's (rank's) step time changed: the diff of its two traces, per kernel where they share them."""
    base, cand = profile_file(baseline, read), profile_file(candidate, read)
    base.rank = cand.rank = rank
    return diff_profiles(base, cand, "kernel", load_op_map())


def _with_reason(check: Check, explained: TraceDiff) -> Check:
    """A failed timing check, its detail followed by what the step time's change is made of."""
    if check.id not in TIMING or check.verdict is not Verdict.FAIL:
        return check
    return replace(check, detail=f"{check.detail}; {explained.headline}")


def _rank_differences(base: Side, cand: Side) -> list[str]:
    """A job's ranks that only one side has, on each side, and the world size where it differs; first, where the sides
    share no rank because their ranks are process ids, why and how to name them."""
    if not cand.is_job or base.traces.keys() == cand.traces.keys():
        return []
    found = (
        [f"world size {len(base.traces)} → {len(cand.traces)} ranks"] if len(base.traces) != len(cand.traces) else []
    )
    for side, only in [
        ("baseline", base.traces.keys() - cand.traces.keys()),
        ("candidate", cand.traces.keys() - base.traces.keys()),
    ]:
        if only:
            found.append(f"{_ranks_named(only)} only in the {side}")
    traces = [*base.traces.values(), *cand.traces.values()]
    if not base.traces.keys() & cand.traces.keys() and all(rank_is_process_id(t.path, t.world_size) for t in traces):
        found.insert(0, PROCESS_ID_RANKS)  # first: the reason the others follow from
    return found


def _ranks_named(ranks: set[int | None]) -> str:
    """``rank 3``, ``ranks 4, 5``; past :data:`RANKS_NAMED` of them, how many more."""
    ordered = _in_order(ranks)
    named = ", ".join(map(str, ordered[:RANKS_NAMED]))
    more = f" and {len(ordered) - RANKS_NAMED:,} more" if len(ordered) > RANKS_NAMED else ""
    return f"rank{'s' if len(ordered) > 1 else ''} {named}{more}"


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
