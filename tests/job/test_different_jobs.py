"""What tells traces found together apart as different jobs, on hand-made summaries: each rule of
:func:`perftool.job.signs.different_jobs`, :attr:`~perftool.job.signs.JobSigns.of_no_job` and
:func:`perftool.job.captures.of_other_jobs` held to its words."""

from __future__ import annotations

import pytest

from perftool.job.captures import of_other_jobs
from perftool.job.signs import MAX_VALUES_LISTED, JobSigns, different_jobs
from perftool.job.summary import RankSummary
from perftool.rules.findings import TraceFindings


def summary(device: str, stated: int | None = None, dialect: str = "kineto", world: int | None = None) -> RankSummary:
    """A scanned trace on ``device``, the rank it states (if any), its format and the world size it records."""
    scan = TraceFindings(path=f"{device}.json", dialect=dialect, family="gpu", device=device, world_size=world,
                         window_us=1.0, steps=1, step_time_us=None, idle={}, findings=[])  # fmt: skip
    return RankSummary(stated, scan, {}, stated_rank=stated)


def signs(device: str, stated: int | None = None, dialect: str = "kineto", world: int | None = None) -> JobSigns:
    """What such a trace says of its job."""
    return summary(device, stated, dialect, world).signs


def test_many_devices_are_named_up_to_a_few_and_the_rest_counted():
    devices = [f"NVIDIA H{100 + n}" for n in range(MAX_VALUES_LISTED + 3)]
    said = different_jobs([signs(device) for device in devices])
    assert said == f"they differ in device: {', '.join(sorted(devices)[:MAX_VALUES_LISTED])} and 3 more"


def test_the_same_model_on_other_devices_of_a_machine_or_a_bare_kind_is_no_difference():
    assert different_jobs([signs("GPU 0"), signs("GPU 3"), signs("NVIDIA A100"), signs("none (host only)")]) is None
    assert different_jobs([signs("GPU 1 (NVIDIA A100)"), signs("GPU 0 (NVIDIA A100)")]) is None


def test_formats_and_world_sizes_are_said_in_order_and_numbers_sort_as_numbers():
    traces = [signs("GPU 0", world=300), signs("GPU 0", world=8), signs("GPU 0", dialect="xla", world=None)]
    assert different_jobs(traces) == "they differ in trace format: kineto, xla; and in world size: 8, 300"


def test_traces_that_all_say_their_rank_are_never_said_apart():
    assert different_jobs([signs("NVIDIA A100", 0), signs("NVIDIA H100", 1, dialect="xla")]) is None


def test_another_job_s_trace_is_one_that_says_no_rank_beside_two_ranks_that_agree():
    ranks = [summary("NVIDIA A100", 0, world=2), summary("NVIDIA A100", 1, world=2)]
    stray, alike = summary("AMD Instinct MI300X"), summary("GPU 0")
    assert of_other_jobs([*ranks, stray, alike]) == [stray]  # a bare kind differs from nothing
    assert of_other_jobs([ranks[0], stray]) == []  # one rank is no job to set it beside
    assert of_other_jobs([ranks[0], summary("NVIDIA H100", 1, world=2), stray]) == []  # ranks that disagree


@pytest.mark.parametrize(
    ("stated", "world", "collectives", "of_no_job"),
    [(None, None, False, True), (0, None, False, False), (None, 2, False, False), (None, None, True, False)],
)
def test_a_trace_of_no_job_states_no_rank_records_no_world_runs_no_collective(stated, world, collectives, of_no_job):
    said = JobSigns(stated, "kineto", world, "NVIDIA A100", collectives)
    assert said.of_no_job is of_no_job
