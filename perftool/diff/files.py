"""``perftool diff``: two traces, or two jobs rank by rank, read and compared."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import Field

from perftool.common.errors import PerftoolError, TraceError
from perftool.common.results import Document
from perftool.diff.compare import TraceDiff, diff_profiles
from perftool.diff.names import OpMap, load_op_map
from perftool.diff.profile import Profile, profile
from perftool.job.cluster import LOCAL, Cluster, map_tasks
from perftool.job.ranks import PROCESS_ID_RANKS, job_files, rank_from_name, rank_is_process_id
from perftool.job.signs import different_jobs, of_different_jobs, of_no_job
from perftool.pipeline.scan import DEFAULT_READ, ReadOptions, distributed
from perftool.trace.loader import json_size_hint
from perftool.trace.seen import FileSeen, seen

COMPARES = "diff compares a trace with a trace, or a job's directory with a job's directory"


class DiffResult(Document):
    """``perftool diff --format json``: two traces compared, or two jobs rank by rank."""

    schema_: Literal["perftool.diff/1"] = Field("perftool.diff/1", alias="schema")
    baseline: str
    candidate: str
    only_baseline: list[int] = Field(alias="only_baseline_ranks", description="ranks only the baseline job has")
    only_candidate: list[int] = Field(alias="only_candidate_ranks")
    diffs: list[TraceDiff] = Field(description="one for two traces; one per shared rank for two jobs, in rank order")

    @property
    def is_job(self) -> bool:
        return self.diffs[0].rank is not None

    @property
    def most_changed(self) -> TraceDiff:
        """The rank whose step time changed most (the one diff of two traces)."""
        return max(self.diffs, key=lambda d: abs(d.delta_us))


def diff_paths(
    baseline: str,
    candidate: str,
    by: str = "kernel",
    op_maps: tuple[str, ...] = (),
    read: ReadOptions = DEFAULT_READ,
    cluster: Cluster = LOCAL,
) -> DiffResult:
    """Compare ``candidate`` with ``baseline``: two traces, or two jobs' directories rank by rank. A directory that
    holds one trace (tensorboard_trace_handler's log directory of one run, a profiler's output directory) is that
    trace, as scan and gate read it."""
    op_map = load_op_map(op_maps)
    files = [job_files([baseline]), job_files([candidate])]
    if len(files[0]) == 1 and len(files[1]) == 1:
        base, cand = (profile_file(side[0], read) for side in files)
        return DiffResult(
            baseline=baseline, candidate=candidate, only_baseline=[], only_candidate=[],
            diffs=[diff_profiles(base, cand, by, op_map)],
        )  # fmt: skip
    if len(files[0]) == 1 or len(files[1]) == 1:
        held = " and ".join(f"{side} {_holds(found)}" for side, found in zip((baseline, candidate), files))
        raise PerftoolError(f"{baseline} and {candidate}: {COMPARES}; {held}")
    return _diff_jobs(baseline, candidate, files, by, op_map, read, cluster)


def _holds(files: list[str]) -> str:
    return "is one trace" if len(files) == 1 else f"holds {len(files)} traces"


def profile_file(path: str, read: ReadOptions, in_job: bool = False) -> Profile:
    """Load a trace and profile it, with what it says of its job; in a job, with its rank (the trace's own, else its
    file name's)."""
    trace = read.load(path, "diff")
    own = distributed(trace, "rank", least=0)
    stated = own if own is not None else rank_from_name(path, in_directory=False)
    rank = stated if stated is not None else rank_from_name(path)
    return profile(trace, rank if in_job else None, stated)


def _profile_or_problem(file: FileSeen, read: ReadOptions) -> Profile | str:
    """A rank's profile, or the one line saying why it has none (errors cross Dask as text), the file named as
    given."""
    try:
        file.check()
        return profile_file(file.path, read, in_job=True)
    except TraceError as exc:
        return f"{file.given}: {exc.problem}"
    except PerftoolError as exc:
        return str(exc)


def _diff_jobs(
    baseline: str, candidate: str, files: list[list[str]], by: str, op_map: OpMap, read: ReadOptions, cluster: Cluster
) -> DiffResult:
    tasks = [(seen(path), read) for side in files for path in side]
    work_bytes = sum(json_size_hint(path) for side in files for path in side)
    results = map_tasks(_profile_or_problem, tasks, cluster.scheduler, cluster.workers, work_bytes=work_bytes)
    problems = [result for result in results if isinstance(result, str)]
    if problems:
        raise PerftoolError("; ".join(problems))
    sides = (results[: len(files[0])], results[len(files[0]) :])
    for side, profiles in zip((baseline, candidate), sides):
        said = [p.signs for p in profiles]
        if (unrelated := different_jobs(said)) or all(trace.of_no_job for trace in said):
            why = of_different_jobs(len(said), unrelated) if unrelated else of_no_job(len(said))
            raise PerftoolError(f"{side}: {why}; {COMPARES}")
        ranks = Counter(p.rank for p in profiles)
        if None in ranks:
            raise PerftoolError(
                f"{side}: its traces do not each name a rank of their own (rank3 in the file "
                "name, or distributedInfo.rank in the trace)"
            )
        if (repeated := next((rank for rank, count in ranks.items() if count > 1), None)) is not None:
            raise PerftoolError(
                f"{side}: {ranks[repeated]} traces of rank {repeated} (captures at different times, as a profiler "
                "schedule that repeats writes them, or a copy): diff compares one trace of each rank; give it the "
                "files of one capture of each"
            )
    base, cand = ({p.rank: p for p in sides[0]}, {p.rank: p for p in sides[1]})
    shared = sorted(base.keys() & cand.keys())
    if not shared:
        by_process = all(rank_is_process_id(p.source, p.signs.world_size) for p in results)
        raise PerftoolError(
            f"{baseline} and {candidate} share no rank to compare" + (f": {PROCESS_ID_RANKS}" if by_process else "")
        )
    return DiffResult(
        baseline=baseline,
        candidate=candidate,
        only_baseline=sorted(k for k in base.keys() - cand.keys() if k is not None),
        only_candidate=sorted(k for k in cand.keys() - base.keys() if k is not None),
        diffs=[diff_profiles(base[r], cand[r], by, op_map) for r in shared],
    )
