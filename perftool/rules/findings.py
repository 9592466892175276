"""Findings: what a scan reports, with a stable, versioned JSON schema (``perftool schema findings``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, PrivateAttr

from perftool.common.results import FOLDERS_NOT_READ, Framework
from perftool.rules.model import Severity

SCHEMA = "perftool.findings/1"
StepDuration = Annotated[float, Field(ge=0, le=1e15)]  # µs; a billion seconds is no step, and sums stay finite


DEVICE_BOUND = 0.9  # a window the device computes at least this share of is device-bound: its kernels set its pace


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmulatorRun(BaseModel):
    """The config behind an emulator trace, as gate compares it; other fields pass through unchecked."""

    model_config = ConfigDict(extra="allow")

    device: str
    workload: dict[str, Any]
    knobs: dict[str, Any] = Field(default_factory=dict)


class EventRef(_Record):
    """A trace event an occurrence names, as the trace file writes it: where an annotated trace draws its arrow to."""

    pid: int | str
    tid: int | str
    ts_us: float = Field(description="its start, µs on the trace's clock")


class Evidence(_Record):
    """One occurrence a person can find in Perfetto: when, where and what."""

    ts_us: float = Field(description="start, µs on the trace's clock")
    at_us: float | None = Field(
        None, description="start, µs from the trace's first event: the time Perfetto shows for it"
    )
    dur_us: float = Field(description="length, µs")
    track: str = Field(description="process / thread it ran on")
    name: str = Field(description="event name (or what the host ran during a device idle stretch)")
    event: EventRef | None = Field(
        None, description="the trace event it is, or (a device idle stretch) the host call it names, where one is"
    )


class Impact(_Record):
    lost_us: float = Field(description="time lost over the analysis window, µs")
    per_step_us: float | None = Field(description="time lost per steady-state step, µs (null without steps)")
    share: float = Field(description="share of the analysis window (the steady-state steps) lost")


class Fix(_Record):
    family: str = Field(description="device family the advice is for: npu, ipu, hpu, gpu or generic")
    text: str
    changes: dict[str, Any] = Field(description="emulator knobs the fix sets, e.g. {'loop_size': 32}")


class Gain(_Record):
    kind: Literal["predicted", "upper_bound"] = Field(
        description="predicted: the emulator re-run with the fix; upper_bound: the time lost, recovered in full"
    )
    text: str
    step_time_us_before: float | None = None
    step_time_us_after: float | None = None
    step_time_us_after_interval: tuple[float, float] | None = Field(
        None,
        description="for a prediction from a fit to the trace: the 80% interval of the mean step after, from the "
        "fit's error and the steps' spread",
    )
    speedup: float | None = Field(None, description="throughput after / before")
    over: Literal["job", "steady_state"] | None = Field(
        None,
        description="what a predicted speed-up is over: the whole job, each one-time cost paid once, or the steady "
        "state (a fit to a capture, the job's length unknown)",
    )
    up_to_share: float | None = Field(None, description="for an upper bound: the most of the run time a fix wins back")


class Finding(_Record):
    rule_id: str
    rule_name: str
    title: str
    severity: Severity
    message: str
    impact: Impact
    evidence: list[Evidence]
    fix: Fix
    gain: Gain
    fingerprint: str = Field(description="stable across runs and paths: rule, cause and the names involved")
    values: dict[str, Any] = Field(description="the measured values the message was filled from")
    capped: str | None = Field(
        None,
        description="why the severity was held at info, or at warning where its evidence recurs (the trace has no"
        " steady state to judge), else null",
    )


def biggest_first(finding: Finding) -> tuple[float, int, str]:
    """The order findings are listed in: the largest cost first, whatever its severity (one held at info for lack of
    steps does not sink below smaller ones); at equal cost the more severe, then by rule."""
    return -finding.impact.share, -finding.severity.rank, finding.rule_id


class WaitsByPeer(_Record):
    """Whom a rank's collectives waited for, where their tasks name each wait's peer in one communicator (HCCL's
    Notify_Wait from profiler level 1; how long they waited in all is the metric communication.waiting_us)."""

    rank: int = Field(description="the trace's own rank, as its collectives' tasks number the ranks")
    per_step_us: dict[int, StepDuration] = Field(
        description="per peer rank: the time per steady step the collectives waited for its signal, the longest first"
    )


class TraceFindings(_Record):
    path: str
    dialect: str
    family: str
    device: str = Field("", description="what the device tracks ran on (from the trace), or 'none (host only)'")
    framework: Framework = Field("unknown", description="the framework the trace's names show")
    job_kind: str = Field(
        "",
        description="what the job is, as the advice takes it: training, inference, or serving (vLLM serving, SGLang "
        "serving where the trace names the engine); empty where the device computes nothing",
    )
    world_size: int | None = Field(None, description="ranks in the job, where the trace records it")
    rank: int | None = Field(None, description="this trace's rank in the job: the trace's own, else its file name's")
    peer_waits: WaitsByPeer | None = Field(
        None, description="whom the collectives waited for, where their tasks name the peer of each wait (else null)"
    )
    merged_ranks: list[str] = Field(
        default_factory=list,
        description="where the trace merges ranks' traces into one (SGLang's merged profile, perftool's job "
        "timeline), the ranks it holds, the one analysed first: its figures are that rank's, and where it holds "
        "several, it has no rank of its own",
    )
    time_unit: str = Field("ms", description="the unit the trace asks viewers to show times in")
    step_clock: Literal["host", "device"] = Field(
        "host", description="device: steps timed by the device work each host step launched; host: step markers"
    )
    caveats: list[str] = Field(
        default_factory=list, description="what limits these figures: too few steps, start-up, a cut-off capture"
    )
    unjudged: str | None = Field(
        None,
        description="where no figure of this trace is a steady state's, what the capture is instead (its one marked "
        "step a model's warm-up): the report leads with it, and step counts and shares are not a steady state's",
    )
    window_us: float
    steps: int
    step_time_us: float | None
    device_bound: float | None = Field(
        None,
        description=f"the share of the window the device computes, where that is most of it ({DEVICE_BOUND} or more) "
        "on the run's own timeline: the trace is device-bound, its kernels set the pace (the report leads with it); "
        "else null",
    )
    idle: dict[str, float] = Field(
        description="share of the window the device is idle, per cause (see perftool.analysis.idle)"
    )
    findings: list[Finding]
    rules: list[str] = Field(
        default_factory=list,
        description="the ids of the rules that judged the trace (those selected; none where it was not judged): a "
        "finding of a rule its baseline's scan did not run is no regression to gate (empty in documents written "
        "before this field)",
    )
    metrics: dict[str, FiniteFloat | None] = Field(
        default_factory=dict, description="the shared metrics (`perftool metrics`), null where they do not apply"
    )
    step_durations_us: list[StepDuration] = Field(
        default_factory=list, description="every steady-state step's duration, µs, in order (what gate tests)"
    )
    warmup_durations_us: list[StepDuration] = Field(
        default_factory=list, description="the warm-up steps' durations before them, µs, in order"
    )
    step_starts_us: list[float] = Field(
        default_factory=list,
        description="each step's start, warm-up steps first, µs on the trace's clock (timed as step_clock says)",
    )
    window_at_us: list[float] = Field(
        default_factory=list, description="the analysis window's start and end, µs on the trace's clock"
    )
    step_numbers: list[int] = Field(
        default_factory=list,
        description="each step's number, warm-up steps first: the step marker's own (ProfilerStep#N), else its "
        "position; evidence names steps by these",
    )
    emulator: EmulatorRun | None = Field(
        None, description="for emulator traces: the config that made the trace (device, workload, knobs, seed)"
    )
    together: Gain | None = Field(
        None,
        description="where two or more findings predict their gains: every such fix applied at once (gains overlap "
        "and do not add)",
    )
    beyond: Gain | None = Field(
        None,
        description="for a trace fitted for a gain: the settings a sweep of the fit finds that win more than every "
        "fix above and all of them together (tune on the calibrated config sweeps every combination)",
    )


class RankSteps(_Record):
    """One rank's first steady steps one by one (those whose collectives the job view compares), µs each."""

    step: list[int] = Field(description="the step numbers, as the rank's trace gives them")
    compute_us: list[float] = Field(description="device compute in each step")
    communication_us: list[float] = Field(description="time with a collective running in each step")
    wait_us: list[float] | None = Field(
        description="time in each step waiting in collectives for later ranks (null where the rank's clock could "
        "not be aligned with the others')"
    )


class RankRow(_Record):
    """One rank in the job view; times are per steady step, µs."""

    rank: int
    path: str
    host: str | None = Field(
        None,
        description="the host it ran on, as its trace (Kineto's host_name) or its file's name (its handler's) says",
    )
    steps: int
    step_time_us: float | None
    compute_us: float | None = Field(description="device compute per step")
    exposed_communication_us: float | None = Field(description="communication with no compute beside it, per step")
    idle_us: float | None = Field(description="device idle per step")
    wait_us: float | None = Field(description="time per step this rank waits in collectives for later ranks")
    held_back_us: float | None = Field(description="time per step the other ranks wait in collectives for this one")
    mfu: float | None = Field(
        None, description="model FLOPs utilisation of the steady steps, where the trace records shapes and its device"
    )
    mfu_is_lower_bound: bool = Field(False, description="part of the device time is in ops without a model")
    findings: int
    top_finding: str | None = Field(description="the rank's most severe finding: rule id and title")
    per_step: RankSteps | None = Field(None, description="the rank's first steady steps one by one")


class ClockAlignment(_Record):
    """How the ranks' clocks were put on one timeline (on the collectives they share)."""

    reference: int | None = Field(description="the rank whose clock the others were aligned to")
    offsets_us: dict[int, float] = Field(description="per rank: its clock minus the reference's, µs")
    matched: dict[int, int] = Field(description="per rank: the shared collectives its offset was measured on")
    residual_p95_us: float | None = Field(description="95th percentile of how far single readings stray, µs")
    unaligned: list[int] = Field(description="ranks sharing too few collectives to align")
    host_agreement_us: float | None = Field(
        None,
        description="where ranks share a host, and so its clock: the widest gap between two such ranks' offsets, µs "
        "(a check of the alignment)",
    )
    text: str = Field(description="the alignment in one sentence")


class JobGroup(_Record):
    """One process group's communication, averaged over the ranks that use it."""

    name: str
    parallelism: str = Field(description="data, tensor, pipeline, expert, context, or unknown")
    ranks: int
    time_us: float = Field(description="collective time per step, mean over its ranks")
    exposed_us: float = Field(description="exposed collective time per step, mean over its ranks")


class AbsentRank(_Record):
    """A rank the job's traces do not hold, which the ranks here wait for."""

    rank: int | None = Field(description="its rank, where the ranks' tasks name it (null: they do not)")
    wait_us: list[float] = Field(description="the least and the most time per step a rank here waits for it, µs")


class JobView(_Record):
    """A job of many ranks, built from the ranks' summaries."""

    ranks: list[RankRow]
    world_size: int | None
    missing_ranks: list[int] = Field(description="ranks of the world size with no trace given (at most 100 listed)")
    unlike: list[str] = Field(
        default_factory=list,
        description="what the ranks differ in (device, device family, trace format, world size, job), each value with "
        "its ranks: a job's ranks share them all, and where they do not, the view compares unlike ranks",
    )
    earlier_captures: list[str] = Field(
        default_factory=list,
        description="traces of the job's ranks captured before the ones the view compares (a profiler schedule that "
        "repeats writes one per cycle): left out of the view, each can be scanned on its own",
    )
    beside_ranks: list[str] = Field(
        default_factory=list,
        description="traces of processes beside the job's ranks, with no rank and no device work (a serving engine's "
        "front end, a launcher): left out of the view, each can be scanned on its own",
    )
    merged_traces: list[str] = Field(
        default_factory=list,
        description="traces that merge the job's ranks' traces into one file (SGLang's merged profile beside the "
        "ranks' own traces): left out of the view, which reads each rank's own trace",
    )
    other_jobs: list[str] = Field(
        default_factory=list,
        description="traces among the ranks' of other jobs (they say no rank, and differ from the ranks in trace "
        "format, world size or model of device): left out of the view, each can be scanned on its own",
    )
    alignment: ClockAlignment
    slowest_rank: int | None = Field(description="the rank the others wait for most, else the slowest step")
    held_back_us: float | None = Field(description="time per step the other ranks wait for the slowest rank")
    late_absent: AbsentRank | None = Field(
        None,
        description="a rank with no trace here that every rank here waits for longest, where their collectives' "
        "tasks name it (HCCL's Notify_Wait) and it costs more than any rank here holds the others back; where no "
        "task names a peer, ranks with no trace here, where every rank here waits in its collectives, moving no data, "
        "for longer than any rank here holds the others back",
    )
    imbalance: dict[str, float] = Field(
        description="(max - mean) / mean over ranks of compute and of busy time (step time less waits) per step"
    )
    groups: list[JobGroup]
    findings: list[Finding] = Field(description="findings about the job as a whole (stragglers)")


class UnreadTrace(_Record):
    """A trace the scan could not read, and why (the one line it would have exited with)."""

    path: str
    problem: str
    rank: int | None = Field(None, description="the rank it should have been, in a job")


class ScanReport(_Record):
    schema_: str = Field(SCHEMA, alias="schema")
    tool: dict[str, str]
    traces: list[TraceFindings]
    unread: list[UnreadTrace] = Field(
        default_factory=list, description="traces that could not be read; the others are reported in full"
    )
    job: JobView | None = Field(None, description="for a job of many ranks (one trace each): the job view")
    different_jobs: str | None = Field(
        None, description="where traces found together are of different jobs (so no job view), what tells them apart"
    )
    folders_not_read: list[str] = Field(default_factory=list, description=FOLDERS_NOT_READ)
    config: str | None = Field(None, description="the project config the scan used (perftool.yaml or pyproject.toml)")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    _rules: list[Any] = PrivateAttr(default_factory=list)

    @property
    def rules_run(self) -> list[Any]:
        """The rules the scan ran (not saved in the JSON; a report read back from a file has none)."""
        return self._rules

    @rules_run.setter
    def rules_run(self, rules: list[Any]) -> None:
        self._rules = list(rules)

    @property
    def findings(self) -> list[tuple[TraceFindings, Finding]]:
        """Every finding with the trace it is about; a job's findings are about its slowest rank's trace."""
        slowest = [t for t in self.traces if self.job and t.rank == self.job.slowest_rank][:1]
        job = [(slowest[0], f) for f in self.job.findings] if self.job and slowest else []
        return job + [(trace, finding) for trace in self.traces for finding in trace.findings]


JOB_INFO_SCHEMA = "perftool.job-info/1"


class JobInfoReport(_Record):
    """``perftool info DIR --format json``: a job's ranks side by side, their clocks aligned, no rules run."""

    schema_: str = Field(JOB_INFO_SCHEMA, alias="schema")
    tool: dict[str, str]
    job: JobView
    traces: list[TraceFindings] = Field(description="each rank's summary, as scan's (findings empty: info runs none)")
    unread: list[UnreadTrace] = Field(description="ranks that could not be read; the others are reported in full")
    folders_not_read: list[str] = Field(default_factory=list, description=FOLDERS_NOT_READ)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
