"""PT013's detector on a job's figures worked out by hand: three ranks whose third the others wait for."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from perftool.rules.catalog import load_catalog
from perftool.rules.detectors import straggler
from perftool.rules.model import fill

STEPS = 3  # steady steps of every rank


@dataclass
class Waits:
    """What the job view measures of the waits at the shared collectives (perftool.job.align.Waits' fields read)."""

    held_back_us: dict[int, float] = field(default_factory=lambda: {2: 6000.0})  # 2 ms a step
    lag_us: dict[int, float] = field(default_factory=lambda: {2: 3000.0})  # 1 ms a step
    last: dict[int, int] = field(default_factory=lambda: {2: 9})
    compared: dict[int, int] = field(default_factory=lambda: {2: 10})
    worst: dict[int, list] = field(default_factory=lambda: {2: [(1, 750.0), (0, 400.0)]})


def rank(
    compute: float, input_wait: float, path: str, findings: tuple = (), host: str | None = None
) -> SimpleNamespace:
    """One rank's summary: its step's parts (µs a step), its scan, its collectives' timeline and its host."""
    timeline = SimpleNamespace(
        start=np.array([100.0, 200.0]), type=np.array([0, 2]), group=np.array(["0", "tp1"]), step=np.array([4, 5])
    )
    scan = SimpleNamespace(findings=list(findings), path=path, steps=STEPS, window_us=STEPS * 20_000.0)
    return SimpleNamespace(
        breakdown_us={"compute": compute, "idle.input_wait": input_wait},
        scan=scan,
        timeline=timeline,
        first_us=50.0,
        host=host,
    )


def job(third_compute: float = 10_500.0, **waits) -> SimpleNamespace:
    """Ranks 0 and 1 compute 8 and 9 ms a step (median 8.5), rank 2 ``third_compute``; input waits 0.5, 0.7 and
    0.6 ms (rank 2's at the others' median); the clocks agree to 0.1 ms."""
    finding = SimpleNamespace(rule_id="PT002", title="Input-bound", fix=SimpleNamespace(text="more workers"))
    return SimpleNamespace(
        slowest=2,
        waits=Waits(**waits),
        steps_compared={0: STEPS, 1: STEPS, 2: STEPS},
        summaries={
            0: rank(8000.0, 500.0, "r0.json"),
            1: rank(9000.0, 700.0, "r1.json"),
            2: rank(third_compute, 600.0, "r2.json", (finding,)),
        },
        clock_error_us=100.0,
        evidence_count=5,
        run=None,
        steady_steps=STEPS,
    )


def test_the_rank_the_others_wait_for_is_named_with_the_part_of_its_step_above_the_median():
    found = straggler.detect(job(), {})
    assert found is not None
    assert found.values == {
        "rank": 2,
        "held_ms_per_step": 2.0,  # 6 ms over 3 steps
        "last_share": 0.9,  # last at 9 of 10
        "cause": "device compute",
        "excess_ms_per_step": 2.0,  # 10.5 ms against the others' median 8.5 ms
        "why": "Against the median rank it spends 2.00 ms more per step in device compute.",
        "rank_finding": "PT002 Input-bound: more workers",
        "python_frames": "",  # not a host-only rank's Python
        "network_check": straggler.NETWORK_CHECK["device"],  # ranks with devices: NCCL's or RCCL's network
        "node": "",  # the ranks' hosts are not known
        "host": "",
        "at_host": "",
        "host_ranks": "",
    }
    assert found.lost_us == 6000.0 and found.variant == "compute" and found.key == "rank 2 compute"
    assert found.changes == {}  # a trace that records no emulator config: no what-if


def two_hosts(fourth_compute: float) -> SimpleNamespace:
    """The job above on two hosts, ranks 0 and 1 on node-a and 2 with a fourth rank on node-b, computing
    ``fourth_compute`` µs a step (the ranks of node-a compute 8.5 ms a step in the median)."""
    scope = job()
    scope.summaries[3] = rank(fourth_compute, 600.0, "r3.json", host="node-b")
    scope.steps_compared[3] = STEPS
    for number, host in ((0, "node-a"), (1, "node-a"), (2, "node-b")):
        scope.summaries[number].host = host
    return scope


@pytest.mark.parametrize(
    ("fourth_compute", "node_slow"),
    [(9_500.0, True), (9_499.0, False)],  # half rank 2's 2 ms above node-a's pace: the node's; less: the rank's own
)
def test_a_straggler_whose_host_s_other_ranks_share_its_cause_is_the_node_s(fourth_compute, node_slow):
    found = straggler.detect(two_hosts(fourth_compute), {})
    assert found is not None and found.values["host"] == "node-b" and found.values["host_ranks"] == "2, 3"
    if node_slow:
        assert found.variant == "node"
        assert found.values["node"] == (
            " So do the other ranks on its host, node-b (rank 3): 1.00 ms more per step in device compute than the "
            "ranks of the other hosts, against its 2.00 ms. The node is slow, not the rank."
        )
        (rule,) = [rule for rule in load_catalog() if rule.id == "PT013"]
        assert fill(rule.fix_for("gpu", found.variant), found.values).startswith(
            "The ranks of node-b (2, 3) all run slower than the other hosts'"
        )
    else:
        assert found.variant == "compute"
        assert found.values["node"] == " The other ranks on its host, node-b (rank 3), keep the other hosts' pace."


@pytest.mark.parametrize(
    ("hosts", "node"),
    [
        (("node-a", "node-a", "node-b"), " It ran on node-b, the only rank there."),
        (("node-a", "node-a", "node-a"), ""),  # one host: nothing to compare
        (("node-a", "node-b", None), ""),  # the straggler's host is not known
        ((None, "node-a", "node-b"), " It ran on node-b, the only rank there."),
    ],
)
def test_a_straggler_s_host_is_said_only_where_the_ranks_ran_on_several_known_hosts(hosts, node):
    scope = job()
    for number, host in enumerate(hosts):
        scope.summaries[number].host = host
    found = straggler.detect(scope, {})
    assert found.values["node"] == node and found.variant == "compute"


def test_the_fix_for_a_slow_node_runs_the_job_again_with_all_its_ranks_at_the_other_hosts_pace():
    scope = two_hosts(9_500.0)
    scope.run = SimpleNamespace(slow_ranks=({"rank": 2, "compute": 1.2, "preprocess": 1.0},
                                            {"rank": 3, "compute": 1.1, "preprocess": 1.0}))  # fmt: skip
    found = straggler.detect(scope, {})
    assert found.variant == "node" and found.changes == {"replicas.slow_ranks": []}
    scope.run = SimpleNamespace(slow_ranks=({"rank": 0, "compute": 1.1, "preprocess": 1.0},
                                            {"rank": 2, "compute": 1.2, "preprocess": 1.0}))  # fmt: skip
    kept = straggler.detect(scope, {}).changes["replicas.slow_ranks"]
    assert kept == [  # node-b's at the median of ranks 0 and 1: 1.05
        {"rank": 0, "compute": 1.1, "preprocess": 1.0},
        {"rank": 2, "compute": 1.05, "preprocess": 1.0},
        {"rank": 3, "compute": 1.05, "preprocess": 1.0},
    ]


def test_a_part_only_the_straggler_s_host_meets_is_the_node_s():
    """Ranks 2 and 3 copy input, 3 and 2 ms a step, and node-a's ranks never do (none of their time): node-b's input
    copies are its ranks' cause (rank 2's compute, 2.5 ms above the median rank's, is not)."""
    scope = two_hosts(8_000.0)
    scope.summaries[2].breakdown_us["idle.h2d"] = 3_000.0
    scope.summaries[3].breakdown_us["idle.h2d"] = 2_000.0
    found = straggler.detect(scope, {})
    assert found.values["cause"] == "input copies" and found.variant == "node"
    assert (
        "2.00 ms more per step in input copies than the ranks of the other hosts, against its 3.00 ms"
        in (found.values["node"])
    )


def test_a_lag_no_part_explains_says_nothing_of_the_node_and_its_fix_names_the_host_to_check():
    (rule,) = [rule for rule in load_catalog() if rule.id == "PT013"]
    scope = two_hosts(9_500.0)
    scope.waits.lag_us[2] *= 10
    found = straggler.detect(scope, {})
    assert found.variant is None and found.values["node"] == ""
    fix = fill(rule.fix_for("gpu", None), found.values)
    assert "other processes on rank 2's host (node-b), or" in fix and "check the node it ran on (node-b) (other" in fix
    for summary in scope.summaries.values():
        summary.host = None
    fix = fill(rule.fix_for("npu", None), straggler.detect(scope, {}).values)
    assert "other processes on rank 2's host, or" in fix and "check the node it ran on (other jobs" in fix


def test_its_evidence_is_where_the_others_waited_longest_on_its_own_clock():
    first, second = straggler.detect(job(), {}).evidence
    assert (first.ts_us, first.at_us, first.dur_us) == (200.0, 150.0, 750.0)
    assert first.name == "others wait at all_gather (tp1, step 5)" and first.track == "rank 2"
    assert (second.ts_us, second.dur_us, second.name) == (100.0, 400.0, "others wait at all_reduce (0, step 4)")
    scope = job()
    scope.evidence_count = 1
    assert len(straggler.detect(scope, {}).evidence) == 1


@pytest.mark.parametrize(
    ("third_compute", "named"),
    [(9_000.0, True), (8_999.0, False)],  # an excess of half the 1 ms lag a step names its cause; less does not
)
def test_a_part_names_the_cause_where_it_accounts_for_half_the_lag(third_compute, named):
    found = straggler.detect(job(third_compute), {})
    assert found is not None and (found.variant == "compute") is named
    if not named:
        assert found.values["why"] == (
            "No part of its step that the trace shows explains its lag of 1.00 ms per step (the largest difference "
            "from the median rank, device compute, is 0.50 ms)."
        )


def test_a_rank_no_part_of_whose_step_is_above_the_median_names_none():
    found = straggler.detect(job(8000.0), {})
    assert found is not None and found.variant is None
    assert found.values["cause"] == "no single part of its step" and found.values["excess_ms_per_step"] == 0.0


@pytest.mark.parametrize(
    ("waits", "clock_error_us", "found"),
    [
        ({}, 499.0, True),  # late 1 ms a step: more than twice what the clocks stray
        ({}, 500.0, False),  # no more than twice: the clocks cannot tell
        ({"held_back_us": {2: 0.0}}, 100.0, False),  # nobody waits for it
        ({"held_back_us": {}}, 100.0, False),
    ],
)
def test_no_straggler_where_nobody_waits_or_the_clocks_cannot_tell(waits, clock_error_us, found):
    scope = job(**waits)
    scope.clock_error_us = clock_error_us
    assert (straggler.detect(scope, {}) is not None) is found


def test_a_job_without_a_slowest_rank_has_no_straggler():
    scope = job()
    scope.slowest = None
    assert straggler.detect(scope, {}) is None


@pytest.mark.parametrize(
    ("slow_ranks", "changes"),
    [
        (  # rank 2 at the median pace of ranks 0 (not listed: at 1) and 1
            ({"rank": 2, "compute": 0.8, "preprocess": 1.0}, {"rank": 1, "compute": 0.5, "preprocess": 0.7}),
            [{"rank": 1, "compute": 0.5, "preprocess": 0.7}, {"rank": 2, "compute": 0.75, "preprocess": 0.85}],
        ),
        (({"rank": 2, "compute": 0.8, "preprocess": 1.0},), []),  # the only slow rank: at everyone's pace
        (({"rank": 1, "compute": 0.5, "preprocess": 0.7},), None),  # the job does not say rank 2 is slow
    ],
)
def test_the_fix_runs_the_job_again_with_the_straggler_at_the_others_pace(slow_ranks, changes):
    scope = job()
    scope.run = SimpleNamespace(slow_ranks=slow_ranks)
    found = straggler.detect(scope, {})
    assert found.changes == ({} if changes is None else {"replicas.slow_ranks": changes})


def test_a_part_the_others_do_not_record_counts_as_none_of_their_time():
    scope = job()
    scope.summaries[2].breakdown_us["idle.h2d"] = 2500.0  # only rank 2 copies input: 2.5 ms above the others' none
    found = straggler.detect(scope, {})
    assert found.values["cause"] == "input copies" and found.values["excess_ms_per_step"] == 2.5
    assert found.variant == "input"


def test_a_rank_whose_step_records_no_part_names_no_cause_and_one_without_findings_says_so():
    scope = job()
    scope.summaries[2].breakdown_us = {}
    scope.summaries[2].scan.findings = []
    found = straggler.detect(scope, {})
    assert found.variant is None and found.values["cause"] == "no single part of its step"
    assert found.values["excess_ms_per_step"] == 0.0 and found.values["rank_finding"] == "no finding of its own"


def test_a_rank_late_at_its_one_shared_collective_is_last_at_all_of_them():
    found = straggler.detect(job(last={2: 1}, compared={2: 1}), {})
    assert found.values["last_share"] == 1.0


def test_without_a_measured_lag_no_rank_is_late_even_where_the_clocks_agree_exactly():
    scope = job(lag_us={})
    scope.clock_error_us = 0.0
    assert straggler.detect(scope, {}) is None


def test_a_rank_the_others_waited_for_at_no_recorded_call_has_no_evidence():
    assert straggler.detect(job(worst={}), {}).evidence == []


def test_a_host_only_rank_s_untraced_host_time_is_its_cause_and_no_device_part_is_compared():
    """Ranks without a device (gloo on CPUs) have no device parts (NaN compute); the straggler's time outside every
    traced call, 1.5 ms a step above the median rank's, is its cause, not a NaN difference."""
    scope = job()
    for number, untraced in ((0, 200.0), (1, 400.0), (2, 1_800.0)):
        scope.summaries[number].breakdown_us = {"compute": float("nan"), "host.untraced": untraced}
    found = straggler.detect(scope, {})
    assert found is not None and found.variant == "untraced"
    assert found.values["excess_ms_per_step"] == 1.5
    assert (
        found.values["why"]
        == "Against the median rank it spends 1.50 ms more per step in host time outside every traced call."
    )
    for summary in scope.summaries.values():
        summary.breakdown_us = {"compute": float("nan")}
    assert straggler.detect(scope, {}).values["excess_ms_per_step"] == 0.0


def host_only_job(python_us: dict[int, dict[str, float]]) -> SimpleNamespace:
    """The job above on CPUs, every rank's trace recording its Python stack: per rank, its time (µs a step) in the
    Python frames between its ops; the parts of each step are their sums, and no time is untraced."""
    scope = job()
    for number, frames in python_us.items():
        summary = scope.summaries[number]
        summary.breakdown_us = {"compute": float("nan"), "host.untraced": 0.0, "host.python": sum(frames.values())}
        summary.python_us = frames
    return scope


def python_of_ranks(sleep_us: float, log_us: float) -> dict[int, dict[str, float]]:
    """Ranks 0 and 1 spend 0.3 and 0.36 ms a step in Python between their ops; rank 2 ``sleep_us`` in a sleep the
    others never call, 320 µs preparing data (200 over the median's 120), about as long in the profiler's own frame
    as they do, and ``log_us`` logging (the others 100)."""
    return {
        0: {"__exit__ (profiler.py:932)": 100.0, "prepare (train.py:10)": 100.0, "log (train.py:20)": 100.0},
        1: {"__exit__ (profiler.py:932)": 120.0, "prepare (train.py:10)": 140.0, "log (train.py:20)": 100.0},
        2: {
            "<built-in function sleep>": sleep_us,
            "__exit__ (profiler.py:932)": 110.0,
            "prepare (train.py:10)": 320.0,
            "log (train.py:20)": log_us,
        },
    }


def test_a_host_only_rank_s_python_between_its_ops_is_its_cause_named_by_the_frames_it_exceeds_the_others_in():
    """Rank 2 spends 1.549 ms a step more than the median rank (0.33 ms) in Python its trace records; the frames it
    exceeds the others in by a tenth of that or more are named, the most first: not its logging, 149 µs over theirs,
    until that is 150 µs over with 1.5 ms in all (a tenth exactly)."""
    found = straggler.detect(host_only_job(python_of_ranks(1_200.0, 249.0)), {})
    assert found.variant == "python" and found.values["cause"] == "Python between its host's ops"
    assert found.values["excess_ms_per_step"] == pytest.approx(1.549)
    assert found.values["python_frames"] == "most of it in <built-in function sleep>, prepare (train.py:10)"
    assert found.values["network_check"] == straggler.NETWORK_CHECK["host"]
    found = straggler.detect(host_only_job(python_of_ranks(1_150.0, 250.0)), {})
    assert found.values["python_frames"] == (
        "most of it in <built-in function sleep>, prepare (train.py:10), log (train.py:20)"
    )


@pytest.mark.parametrize(
    ("host_only", "named", "not_named"),
    [(False, "nccl-tests", "GLOO_SOCKET_IFNAME"), (True, "GLOO_SOCKET_IFNAME", "nccl-tests")],
)
def test_a_straggler_no_part_explains_is_checked_on_the_network_its_collectives_use(host_only, named, not_named):
    """Where no part of its step explains the wait, the fix sends the user to the network: on ranks with devices,
    through NCCL's and RCCL's own tools; on ranks without one (gloo on the hosts' CPUs), through the interface gloo
    binds, which NCCL's tools cannot check."""
    scope = job(third_compute=8_500.0)  # at the others' median: no part explains the wait
    if host_only:
        for summary in scope.summaries.values():
            summary.breakdown_us = {"compute": float("nan"), "host.untraced": 0.0}
    found = straggler.detect(scope, {})
    assert found.variant is None
    (rule,) = [rule for rule in load_catalog() if rule.id == "PT013"]
    text = fill(rule.fix_for("gpu" if not host_only else "generic", found.variant), found.values)
    assert named in text and not_named not in text and "(its links or switch: " in text


def test_a_part_the_other_ranks_traces_do_not_record_is_no_cause():
    """Rank 2 was captured with its Python stack and the others without: its 1.9 ms in Python cannot be set against
    their untraced time, so no part is named; its untraced time (none) is below theirs."""
    scope = host_only_job(python_of_ranks(1_200.0, 249.0))
    for number in (0, 1):
        scope.summaries[number].breakdown_us = {"compute": float("nan"), "host.untraced": 1_500.0}
        scope.summaries[number].python_us = {}
    found = straggler.detect(scope, {})
    assert found.variant is None and found.values["cause"] == "no single part of its step"


def test_a_host_only_rank_s_untraced_time_is_not_set_against_ranks_with_devices():
    """Rank 2's trace holds no device (its host's events only) and the others' do: its 1.8 ms a step outside every
    traced call is no excess over the others, whose traces measure no such part."""
    scope = job()
    scope.summaries[2].breakdown_us = {"compute": float("nan"), "host.untraced": 1_800.0}
    found = straggler.detect(scope, {})
    assert found.variant is None and found.values["cause"] == "no single part of its step"


def test_a_host_only_rank_s_python_spread_over_frames_names_none():
    """Rank 2's 1.5 ms more in Python is 16 frames of under 0.1 ms each beyond the others: no frame is named."""
    frames = {f"f{n} (train.py:{n})": 100.0 for n in range(16)}
    scope = host_only_job({0: frames, 1: frames, 2: {name: 195.0 for name in frames}})
    found = straggler.detect(scope, {})
    assert found.variant == "python"
    assert found.values["python_frames"] == "spread over many frames, none standing out"
