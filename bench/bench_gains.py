"""Printed gains against the truth: scan each bundled sample, apply each finding's printed fix to the sample's own
config, emulate the job, and compare.

    python bench/bench_gains.py

Each sample is scanned three times: as written (its trace records its config, so the gain is that config re-run);
with the ``perftool`` key stripped, as a real profiler writes a trace (the gain comes from a fit to the trace); and
stripped with the job's length stated (``--job-steps``, as a user who knows it would). A predicted gain must be
within 10% of the truth: the share of the time the fix wins back over what the gain says it is, the whole job
(one-time costs paid once in its epochs: where the trace records its config, or for a compile's fix where the
job's length is stated) or the steady state (a fit's other gains); or, for a small gain that varies from run to
run by more than that, inside the range the same job re-run with other seeds wins back. An upper bound must hold:
the truth wins back no more than it, within 10%. Prints one line per finding and the worst errors; exits 1 when a
gain fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the oracle lives beside the tests

from oracles.gains import PRINTED, RERUNS, TOLERANCE, Checked, check_sample, samples  # noqa: E402


def _verdict(checked: Checked) -> str:
    if not checked.holds:
        return "FAIL"
    if checked.error <= TOLERANCE:
        return "ok"
    if checked.rerun is None:
        return f"ok: within {PRINTED:.1%} of the step (the same printed speed-up)"
    return f"ok: re-runs win back {checked.rerun[0]:.1%}–{checked.rerun[1]:.1%}"


def main() -> int:
    results: list[Checked] = []
    for name, config_path, trace in samples():
        results.extend(check_sample(name, config_path, trace))
    for r in results:
        verdict = _verdict(r)
        print(
            f"{r.sample:40} {r.source:10} {r.rule_id} {r.kind:11} printed {r.printed:6.1%}  truth {r.truth:6.1%}"
            f"  error {r.error:6.1%}  {verdict}"
        )
    predicted = [r for r in results if r.kind == "predicted"]
    worst = max((r.error for r in predicted), default=0.0)
    print(f"{len(predicted)} predicted gains, worst error {worst:.1%}; {len(results) - len(predicted)} bounds")
    close = [r for r in predicted if r.holds and r.error > TOLERANCE and r.rerun is None]
    print(f"{len(close)} more than {TOLERANCE:.0%} off but within {PRINTED:.1%} of the step (a small gain)")
    in_range = [r for r in predicted if r.holds and r.error > TOLERANCE and r.rerun is not None]
    print(f"{len(in_range)} more than {TOLERANCE:.0%} off but inside the range {RERUNS} re-runs of the job give")
    failed = [r for r in results if not r.holds]
    print(f"{len(failed)} fail (more than {TOLERANCE:.0%})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
