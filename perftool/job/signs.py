"""What a trace says of the distributed job it is of, and what tells traces found together apart as different jobs.

One job's ranks are captured by one profiler (one trace format), in one distributed run (one world size, where the
traces record it), on one model of device, and run collectives to work together. scan and gate read these from a
trace's analysis, diff from its profile; both decide with the functions here.
"""

from __future__ import annotations

from dataclasses import dataclass

from perftool.analysis.family import HOST_ONLY
from perftool.common.names import device_model, names_only_a_place
from perftool.common.units import listed

MAX_VALUES_LISTED = 4  # values of what traces of different jobs differ in, named; the rest counted


@dataclass(frozen=True)
class JobSigns:
    """What one trace says of its job."""

    stated_rank: int | None  # the trace's own (``distributedInfo``), else its file name's (``rank3``); no place's guess
    trace_format: str  # the dialect it was read as
    world_size: int | None  # as ``distributedInfo`` records it
    device: str  # what its device tracks ran on (``family.device_name``)
    collectives: bool  # whether its steady steps run a collective

    @property
    def of_no_job(self) -> bool:
        """Whether the trace shows nothing of a distributed job: it states no rank (no ``distributedInfo``, no rank
        in its name) and runs no collective, which every distributed job's ranks run to work together."""
        return self.stated_rank is None and self.world_size is None and not self.collectives


def different_jobs(signs: list[JobSigns]) -> str | None:
    """Why traces found together are not the ranks of one job, where what they hold says so, in words (``they differ
    in device: A, B``); None where they may be. Where every trace says it is a rank they stay one job, whose view
    warns of what they differ in; the test is for traces that only a directory (their place in it, a number in their
    names) made ranks."""
    if all(trace.stated_rank is not None for trace in signs):
        return None
    found = differences(signs)
    return f"they differ in {'; and in '.join(found)}" if found else None


def of_different_jobs(count: int, why: str) -> str:
    """``count`` traces of different jobs, and ``why`` (:func:`different_jobs`), as a refusal says them."""
    return f"{count} traces of different jobs ({why}), not the ranks of one job"


def of_no_job(count: int) -> str:
    """``count`` traces none of which shows a sign of a distributed job, as a refusal says them."""
    return (
        f"{count} traces of no distributed job (none names a rank, holds distributedInfo or runs a collective), "
        "not the ranks of a job"
    )


def differences(signs: list[JobSigns]) -> list[str]:
    """What the traces differ in of what one job's ranks share, each with its values (``device: A, B``; the first
    :data:`MAX_VALUES_LISTED`, the rest counted)."""
    return [
        f"{what}: {listed(found, MAX_VALUES_LISTED)}"
        for what, found in (
            ("trace format", sorted({trace.trace_format for trace in signs})),
            ("world size", [str(size) for size in sorted({trace.world_size or 0 for trace in signs} - {0})]),
            ("device", sorted(_named_devices(signs))),
        )
        if len(found) > 1
    ]


def _named_devices(signs: list[JobSigns]) -> set[str]:
    """The models of device the traces name (not a bare kind, ``GPU``, nor the host alone)."""
    devices = (trace.device for trace in signs)
    return {device_model(device) for device in devices if device != HOST_ONLY and not names_only_a_place(device)}
