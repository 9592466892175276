"""The truth the printed gains are held to: each bundled sample's own config re-run with a finding's printed fix
(the share of the step it wins back), within :data:`TOLERANCE`, or inside what re-runs of the same job win back.
bench/bench_gains.py prints the table; tests/predict/test_gains.py asserts it."""

from __future__ import annotations

import gzip
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perftool.api import scan
from perftool.emulator.config import EmulatorConfig, load_config
from perftool.rules import prediction
from perftool.rules.findings import Finding

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
TOLERANCE = 0.10  # a predicted gain this far (relative) from the truth fails; a bound exceeded by this much fails
RERUNS = 8  # seeds of the job whose range a prediction further off than TOLERANCE must lie in
PRINTED = 0.005  # a predicted share of the step this close to the truth prints the same speed-up (×1.01)


@dataclass
class Checked:
    """One printed gain against the truth: the share of the step it wins back, printed and emulated."""

    sample: str
    source: str  # as written | stripped | job stated (stripped, with the job's length given)
    rule_id: str
    kind: str  # predicted | upper_bound
    printed: float
    truth: float

    @property
    def error(self) -> float:
        """Relative error of a prediction; for a bound, how far the truth exceeds it (0 when it holds)."""
        if self.kind == "upper_bound":
            return max(self.truth - self.printed, 0.0) / self.printed if self.printed else 0.0
        return abs(self.printed - self.truth) / self.truth if self.truth else float("inf")

    rerun: tuple[float, float] | None = None  # the least and most the fix wins back in re-runs of the job (seeds)

    @property
    def holds(self) -> bool:
        """Within :data:`TOLERANCE` of the truth, or (a prediction) within what its printed speed-up can tell apart
        (:data:`PRINTED`) or inside what re-runs of the same job win back."""
        if self.error <= TOLERANCE or self.kind == "predicted" and abs(self.printed - self.truth) < PRINTED:
            return True
        return self.kind == "predicted" and self.rerun is not None and self.rerun[0] <= self.printed <= self.rerun[1]


def won_back(speedup: float) -> float:
    """The share of the job's time a fix of this throughput speed-up wins back."""
    return 1 - 1 / speedup


def samples() -> list[tuple[str, Path, Path]]:
    """Each bundled sample: its name, its config, and its trace (a job's: the directory of its ranks' traces)."""
    found = [
        (str(c.relative_to(SAMPLES).with_suffix("")), c, c.with_suffix(".trace.json.gz"))
        for c in SAMPLES.glob("*/*.yaml")
    ]
    found += [(f"jobs/{c.parent.name}", c, c.parent) for c in SAMPLES.glob("jobs/*/job.yaml")]
    return sorted(found)


def findings_of(trace: Path, stripped: bool, job_steps: int | None = None) -> list[Finding]:
    """The findings on a sample's trace (stripped of its config when asked, scanned knowing the job runs
    ``job_steps``): a job's own, and each rule's first finding on its ranks."""
    with tempfile.TemporaryDirectory() as scratch:
        if stripped:
            files = sorted(trace.glob("rank*.trace.json.gz")) if trace.is_dir() else [trace]
            copy = Path(scratch) / trace.name
            if trace.is_dir():
                copy.mkdir()
            for path in files:
                document = json.loads(gzip.decompress(path.read_bytes()))
                document.pop("perftool", None)
                (copy / path.name if trace.is_dir() else copy).write_bytes(gzip.compress(json.dumps(document).encode()))
            trace = copy
        report = scan(trace, workers=1, job_steps=job_steps)
    ranks = [finding for found in report.traces for finding in found.findings]
    if report.job is None:
        return ranks
    first_of_rule = {finding.rule_id: finding for finding in reversed(ranks)}  # a job's ranks share their config
    return [*report.job.findings, *first_of_rule.values()]


def check_sample(name: str, config_path: Path, trace: Path) -> list[Checked]:
    """Every gain printed on the sample, as written, stripped and stripped with the job's length stated, against
    the sample's own config re-run with the printed fix (for a stripped trace's bound: with the fix the trace as
    written gets for the same finding)."""
    config = load_config(str(config_path))
    written = findings_of(trace, stripped=False)
    fixes = {finding.rule_id: finding.fix.changes for finding in written}
    checked = [c for f in written if (c := _check(name, "as written", config, f, f.fix.changes)) is not None]
    job_steps = config.workload.steps * config.workload.epochs
    for source, stated in (("stripped", None), ("job stated", job_steps)):
        for finding in findings_of(trace, stripped=True, job_steps=stated):
            changes = finding.fix.changes if finding.gain.kind == "predicted" else fixes.get(finding.rule_id, {})
            if (c := _check(name, source, config, finding, changes)) is not None:
                checked.append(c)
    return checked


def _check(name: str, source: str, config: EmulatorConfig, finding: Finding, changes: dict) -> Checked | None:
    """A predicted gain against the same fix on the true config, over what the gain says it is (the whole job or
    its steady state); a bound against the true fix's steady gain, where a fix names knobs."""
    gain = finding.gain
    if not changes or (gain.kind == "predicted" and gain.speedup is None):
        return None
    over_job = gain.over == "job"
    printed = won_back(gain.speedup) if gain.kind == "predicted" and gain.speedup else gain.up_to_share or 0.0
    checked = Checked(name, source, finding.rule_id, gain.kind, printed, _won_back(config, changes, over_job))
    if not checked.holds and gain.kind == "predicted":  # a small gain may vary from run to run by more than 10%
        reruns = [_won_back(config.model_copy(update={"seed": seed}), changes, over_job) for seed in range(RERUNS)]
        checked.rerun = (min(reruns), max(reruns))
    return checked


def _won_back(config: EmulatorConfig, changes: dict, over_job: bool) -> float:
    """The share of the time the fix wins back on ``config`` (NaN where the changed config does not run)."""
    truth = prediction.predicted(config, changes, over_job=over_job)
    return won_back(truth.speedup) if truth is not None and truth.speedup is not None else float("nan")
