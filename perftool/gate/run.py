"""A gate from inputs to verdict: load both sides, refuse different jobs, run the checks."""

from __future__ import annotations

from dataclasses import dataclass, field

from perftool.errors import PerftoolError
from perftool.gate.checks import Check, against_budget, compare, status
from perftool.gate.inputs import differences, load_side
from perftool.gate.policy import Budget, GatePolicy
from perftool.rules.engine import DEFAULT_READ, ReadOptions
from perftool.rules.model import Rule


@dataclass
class GateResult:
    candidate: str
    baseline: str | None  # None: a budget alone
    checks: list[Check]
    mismatches: list[str] = field(default_factory=list)  # differences let through by --allow-mismatch

    @property
    def status(self) -> str:
        return status(self.checks)

    def counts(self) -> dict[str, int]:
        return {verdict: sum(c.verdict == verdict for c in self.checks) for verdict in ("fail", "warn", "pass", "skip")}


@dataclass(frozen=True)
class GateOptions:
    """What the gate holds a candidate to: the policy (thresholds, metric limits), the severity of a new
    finding that fails, and whether different jobs may be compared."""

    policy: GatePolicy = field(default_factory=GatePolicy)
    fail_on: str = "error"
    allow_mismatch: bool = False


DEFAULT_OPTIONS = GateOptions()


def run_gate(
    candidate: str,
    baseline: str | None,
    budget: Budget | None,
    rules: list[Rule],
    options: GateOptions = DEFAULT_OPTIONS,
    read: ReadOptions = DEFAULT_READ,
) -> GateResult:
    """Compare ``candidate`` with ``baseline`` and/or hold it to ``budget``."""
    cand = load_side(candidate, rules, read)
    checks: list[Check] = []
    mismatches: list[str] = []
    policy, fail_on = options.policy, options.fail_on
    if baseline is not None:
        base = load_side(baseline, rules, read)
        mismatches = differences(base, cand)
        if mismatches and not options.allow_mismatch:
            raise PerftoolError(
                f"{baseline} and {candidate} are not the same job ({'; '.join(mismatches)}); "
                "pass --allow-mismatch to compare them anyway"
            )
        checks += compare(base, cand, policy, fail_on)
    if budget is not None:
        checks += against_budget(cand, budget, fail_on if baseline is None else "never")
    return GateResult(candidate, baseline, checks, mismatches)
