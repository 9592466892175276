"""Findings: what a scan reports, with a stable, versioned JSON schema (``perftool schema findings``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, PrivateAttr

from perftool.rules.model import Severity

SCHEMA = "perftool.findings/1"
StepDuration = Annotated[float, Field(ge=0, le=1e15)]  # µs; a billion seconds is no step, and sums stay finite


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmulatorRun(BaseModel):
    """The config behind an emulator trace, as gate compares it; other fields pass through unchecked."""

    model_config = ConfigDict(extra="allow")

    device: str
    workload: dict[str, Any]
    knobs: dict[str, Any] = Field(default_factory=dict)


class Evidence(_Record):
    """One occurrence a person can find in Perfetto: when, where and what."""

    ts_us: float = Field(description="start, µs on the trace's clock")
    at_us: float | None = Field(
        None, description="start, µs from the trace's first event: the time Perfetto shows for it"
    )
    dur_us: float = Field(description="length, µs")
    track: str = Field(description="process / thread it ran on")
    name: str = Field(description="event name (or what the host ran during a device idle stretch)")


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
    speedup: float | None = Field(None, description="throughput after / before")


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
        None, description="why the severity was held at info (the trace has no steady state to judge), else null"
    )


class TraceFindings(_Record):
    path: str
    dialect: str
    family: str
    device: str = Field("", description="what the device tracks ran on (from the trace), or 'none (host only)'")
    world_size: int | None = Field(None, description="ranks in the job, where the trace records it")
    time_unit: str = Field("ms", description="the unit the trace asks viewers to show times in")
    step_clock: Literal["host", "device"] = Field(
        "host", description="device: steps timed by the device work each host step launched; host: step markers"
    )
    caveats: list[str] = Field(
        default_factory=list, description="what limits these figures: too few steps, start-up, a cut-off capture"
    )
    window_us: float
    steps: int
    step_time_us: float | None
    idle: dict[str, float] = Field(
        description="share of the window the device is idle, per cause (see perftool.analysis.idle)"
    )
    findings: list[Finding]
    metrics: dict[str, FiniteFloat | None] = Field(
        default_factory=dict, description="the shared metrics (`perftool metrics`), null where they do not apply"
    )
    step_durations_us: list[StepDuration] = Field(
        default_factory=list, description="every steady-state step's duration, µs, in order (what gate tests)"
    )
    emulator: EmulatorRun | None = Field(
        None, description="for emulator traces: the config that made the trace (device, workload, knobs, seed)"
    )


class UnreadTrace(_Record):
    """A trace the scan could not read, and why (the one line it would have exited with)."""

    path: str
    problem: str


class ScanReport(_Record):
    schema_: str = Field(SCHEMA, alias="schema")
    tool: dict[str, str]
    traces: list[TraceFindings]
    unread: list[UnreadTrace] = Field(
        default_factory=list, description="traces that could not be read; the others are reported in full"
    )

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
        return [(trace, finding) for trace in self.traces for finding in trace.findings]
