"""Two profiles compared: what changed per key, and each change's contribution to the step-time delta.

The delta of the mean steady step is split exactly: each key's change of time on the pacing timeline,
plus the remainders (the timeline's idle time, the time its events overlap one another, and at the op
level device work no op launched). The rows and remainders add up to the delta.

Keys are matched at the level asked for. Where fewer than :data:`MIN_MATCHED` of either side's time
matches there (traces of different device families share no kernel names), the diff compares at the
next level both share: host ops, then categories; and it says so. Between device families, names
first pass through the op map.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field
from pydantic.dataclasses import dataclass

from perftool.common.choices import LEVELS, Level
from perftool.common.errors import PerftoolError, parameter
from perftool.common.units import percent, signed_duration
from perftool.diff.names import LOADER_FETCH, OpMap, loaders_told
from perftool.diff.profile import LAUNCHERS, Profile, Table

MIN_MATCHED = 0.5  # of each side's time on the pacing timeline, matched at a level for the diff to stay there
NOTHING_US = 0.05  # a remainder under this on both sides shows as 0.0 µs: not listed for people
SMALL = 0.01  # a contribution under this share of the delta is not named in the headline
FALLBACK = ("op", "annotation", "category")  # the levels tried, in order, after the one asked for


def shown(baseline_us: float, candidate_us: float) -> bool:
    """Whether a remainder has time on either side that a table for people shows (not 0.0 µs on both)."""
    return max(abs(baseline_us), abs(candidate_us)) >= NOTHING_US


def unchanged(delta_us: float, contributions: Iterable[float]) -> bool:
    """Whether neither the change nor any part of it shows (each under :data:`NOTHING_US`): the two sides' steps are
    made alike. Parts that each round to nothing may still add up to a change (thousands of keys a little slower)."""
    return abs(delta_us) < NOTHING_US and all(abs(part) < NOTHING_US for part in contributions)


def nothing_changed(level: str) -> str:
    """What a report says in place of a change's parts where none shows (:func:`unchanged`)."""
    return f"Nothing changed: every {level} and every cause of idle time takes the same time a step on both sides."


_ROW = ConfigDict(populate_by_name=True)  # read back from JSON, what a part computes (its contribution) is ignored


@dataclass(config=_ROW)
class Row:
    """One key of the compared level, per steady step on each side."""

    key: str
    baseline_calls: Annotated[float, Field(alias="baseline_calls_per_step")]
    candidate_calls: Annotated[float, Field(alias="candidate_calls_per_step")]
    baseline_us: Annotated[
        float,
        Field(alias="baseline_us_per_step", description="the key's own time: device time, host time for host ops"),
    ]
    candidate_us: Annotated[float, Field(alias="candidate_us_per_step")]
    baseline_paced_us: Annotated[
        float,
        Field(alias="baseline_paced_us_per_step", description="its time on the timeline pacing the step (for host ops "
              "on the device's: the device time they launched)"),
    ]  # fmt: skip
    candidate_paced_us: Annotated[float, Field(alias="candidate_paced_us_per_step")]

    @computed_field(description="added, removed, or both")  # type: ignore[prop-decorator]
    @property
    def status(self) -> Literal["both", "added", "removed"]:
        if self.baseline_calls == 0:
            return "added"
        return "removed" if self.candidate_calls == 0 else "both"

    @computed_field(description="its part of the step-time delta: the change of its paced time")  # type: ignore[prop-decorator]
    @property
    def contribution_us(self) -> float:
        return self.candidate_paced_us - self.baseline_paced_us


@dataclass(config=_ROW)
class Remainder:
    """A part of the step-time delta no single key holds."""

    name: str
    baseline_us: float
    candidate_us: float
    contribution_us: float

    @classmethod
    def of(cls, name: str, baseline_us: float, candidate_us: float, counted_twice: bool = False) -> Remainder:
        """Its contribution is its change; for time the rows count twice (overlap), growing shortens the step."""
        change = candidate_us - baseline_us
        return cls(name, baseline_us, candidate_us, -change if counted_twice else change)


@dataclass(config=_ROW)
class Unmatched:
    """Events of one side whose key the other side lacks, per steady step."""

    keys: int
    events: Annotated[float, Field(description="events in the steady steps with no counterpart")]
    time_us: Annotated[float, Field(alias="us_per_step")]


class Side(BaseModel):
    """One side of a diff as it was compared: its trace, device and steady steps."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    source: str = Field(alias="trace")
    device: str
    family: str
    steps: int = Field(description="steady steps compared; 0: no step markers, the capture after start-up whole")
    step_us: float = Field(alias="step_time_us", description="mean steady step")
    step_durations: list[float] = Field(alias="step_durations_us", description="each steady step, in order")
    timeline: Literal["device", "host"] = Field(description="the timeline that paces a step")

    @classmethod
    def of(cls, profile: Profile) -> Side:
        return cls(
            source=profile.source, device=profile.device, family=profile.family, steps=profile.steps,
            step_us=profile.step_us, step_durations=profile.step_durations, timeline=profile.timeline,
        )  # fmt: skip


class TraceDiff(BaseModel):
    """Two traces (or one rank of two jobs) compared: every key's change and the remainders, which add up to the
    change of the mean steady step."""

    model_config = ConfigDict(extra="forbid")

    rank: int | None
    baseline: Side
    candidate: Side
    level: Level = Field(description="the level compared at")
    asked: Level
    why: str = Field(description="why the level differs from the one asked, or how names were matched")
    delta_us: float = Field(description="the change of the mean steady step")
    change: float | None = Field(description="delta_us as a fraction of the baseline step")
    headline: str = Field(description="the change in one line, its largest parts named")
    rows: list[Row] = Field(description="every key, the largest contribution first")
    remainders: list[Remainder] = Field(description="the rest of the delta: with the rows it adds up to it")
    unmatched: dict[Literal["baseline", "candidate"], Unmatched]
    notes: list[str]
    matched: dict[str, float] = Field(
        description="per level tried (kernel, op, annotation, category): the share of time whose keys both sides "
        "hold, of the side with less; little at op level: maybe not the same workload"
    )

    @classmethod
    def made(cls, baseline: Profile, candidate: Profile, **parts: Any) -> TraceDiff:
        """The diff of two profiles from its ``parts`` (level, asked, why, rows, remainders, unmatched, notes,
        matched), with the change and its headline."""
        delta = candidate.step_us - baseline.step_us
        change = delta / baseline.step_us if baseline.step_us else None
        made = cls(
            rank=baseline.rank, baseline=Side.of(baseline), candidate=Side.of(candidate), delta_us=delta,
            change=change, headline="", **parts,
        )  # fmt: skip
        named = made.largest(3)
        made.headline = f"step {made.change_text}: {', '.join(named)}" if named else f"step {made.change_text}"
        return made

    def share(self, part_us: float) -> float:
        """``part_us`` as a fraction of the delta (NaN when nothing changed)."""
        return part_us / self.delta_us if self.delta_us else float("nan")

    def contributions(self, top: int) -> tuple[list[Row], float]:
        """Up to ``top`` rows by contribution (none that rounds to nothing), and the others' contributions summed."""
        listed = [row for row in self.rows[:top] if abs(row.contribution_us) >= NOTHING_US]
        return listed, float(sum(row.contribution_us for row in self.rows[len(listed) :]))

    def largest_keys(self, top: int) -> list[Row]:
        """The ``top`` rows with the most time on the pacing timeline on either side: where the steps go."""
        return sorted(self.rows, key=lambda row: -max(row.baseline_paced_us, row.candidate_paced_us))[:top]

    @property
    def paced_time(self) -> str:
        """What a row's time on the pacing timeline is: for host ops on the device's, the device time they launched."""
        return "device time" if self.level in LAUNCHERS and self.baseline.timeline == "device" else "time"

    def largest(self, top: int = 3) -> list[str]:
        """The ``top`` largest parts of the change, rows and remainders alike: ``new aten::index_put +0.120 ms`` (none
        that would show as 0.0 µs: two captures of one run differ in none)."""
        parts: list[Row | Remainder] = [*self.rows[:top], *self.remainders]
        parts.sort(key=lambda part: -abs(part.contribution_us))
        least = max(SMALL * abs(self.delta_us), NOTHING_US)
        kept = [part for part in parts[:top] if abs(part.contribution_us) >= least]
        return [f"{_label(part)} {signed_duration(part.contribution_us)}" for part in kept]

    @property
    def change_text(self) -> str:
        """``+8.1% (+0.810 ms)``."""
        change = float("nan") if self.change is None else self.change
        return f"{'+' if self.delta_us >= 0 else ''}{percent(change)} ({signed_duration(self.delta_us)})"

    @property
    def measured(self) -> str:
        """What the compared time is: the mean steady step, or without step markers the capture after start-up."""
        base, cand = self.baseline.steps, self.candidate.steps
        return f"step time (mean of {base} → {cand} steady steps)" if base else "capture time (no step markers)"

    @property
    def devices(self) -> str:
        """The device compared, or both when they differ."""
        base, cand = self.baseline.device, self.candidate.device
        return base if base == cand else f"{base} → {cand}"

    @property
    def attributed_us(self) -> float:
        """The rows' and remainders' contributions together: the delta, up to float rounding."""
        return sum(row.contribution_us for row in self.rows) + sum(r.contribution_us for r in self.remainders)


def _label(part: Row | Remainder) -> str:
    if isinstance(part, Remainder):
        return part.name
    return {"added": "new ", "removed": "gone "}.get(part.status, "") + part.key


def diff_profiles(baseline: Profile, candidate: Profile, asked: str, op_map: OpMap) -> TraceDiff:
    """Compare ``candidate`` with ``baseline`` at ``asked``, or at the first level both share enough of."""
    if asked not in LEVELS:
        raise PerftoolError(f"{parameter('by')} {asked}: not a level (one of {', '.join(LEVELS)})")
    if (baseline.steps == 0) != (candidate.steps == 0):
        marked, unmarked = (baseline, candidate) if baseline.steps else (candidate, baseline)
        raise PerftoolError(
            f"{unmarked.source} has no step markers and {marked.source} has: diff compares time per step, or two "
            "captures without steps whole"
        )
    if baseline.timeline != candidate.timeline:
        raise PerftoolError(
            f"{baseline.source} and {candidate.source} share nothing comparable: one is paced by its "
            f"device ({'baseline' if baseline.timeline == 'device' else 'candidate'}), the other has no device work"
        )
    across = baseline.family != candidate.family
    levels = dict.fromkeys((asked, *FALLBACK))
    keyed = {
        level: (_keyed(baseline, level, op_map, across), _keyed(candidate, level, op_map, across)) for level in levels
    }
    shares = {
        level: min(_matched_share(base, cand, _unlinked(baseline, level)),
                   _matched_share(cand, base, _unlinked(candidate, level)))
        for level, (base, cand) in keyed.items()
    }  # fmt: skip
    enough = [level for level, share in shares.items() if share >= MIN_MATCHED]
    level = enough[0] if enough else max(shares, key=lambda name: shares[name])
    if shares[level] == 0:
        raise PerftoolError(
            f"{baseline.source} and {candidate.source} share nothing comparable: no kernel, host op, annotation "
            "or category of one is in the other"
        )
    passed = list(levels)[: list(levels).index(level)] if enough else [name for name in levels if name != level]
    why = _why({name: shares[name] for name in passed}, level, across, baseline, candidate)
    return _compared(baseline, candidate, level, asked, why, shares, *keyed[level])


def _keyed(side: Profile, level: str, op_map: OpMap, across: bool) -> Table:
    """The side's table at ``level``; ``across`` device families, its names mapped to the op map's shared names."""
    table = side.tables[level]
    if not across or level not in ("kernel", "op"):
        return table
    return table.regrouped({key: shared for key in table.keys if (shared := op_map.shared(key)) is not None})


def _unlinked(side: Profile, level: str) -> float:
    return side.unlinked_us.get(level, 0.0)


def _matched_share(mine: Table, theirs: Table, unlinked_us: float) -> float:
    """The share of ``mine``'s paced time (and the time no key of the level holds) whose key ``theirs`` has too;
    all of it when there is none (a capture idle throughout has nothing to match)."""
    total = float(mine.paced_us.sum()) + unlinked_us
    if total <= 0:
        return 1.0
    held = set(theirs.keys)  # hashed: np.isin on object arrays compares every pair
    both = np.fromiter((key in held for key in mine.keys), dtype=bool, count=len(mine.keys))
    return float(mine.paced_us[both].sum()) / total


def _why(too_little: dict[str, float], level: str, across: bool, baseline: Profile, candidate: Profile) -> str:
    """Why the diff compares where it does: the levels passed over for matching too little, and the op map
    across device families."""
    parts = []
    if across and level in ("kernel", "op"):
        parts.append(f"{baseline.family} and {candidate.family} names matched through the op map")
    if too_little:
        shown = ", ".join(f"{name} {share:.0%}" for name, share in too_little.items())
        parts.append(f"time matched at {shown}, under {MIN_MATCHED:.0%}")
    return "; ".join(parts)


def _compared(
    baseline: Profile,
    candidate: Profile,
    level: str,
    asked: str,
    why: str,
    matched: dict[str, float],
    base: Table,
    cand: Table,
) -> TraceDiff:
    keys = sorted(set(base.keys) | set(cand.keys))
    columns = [_aligned(base, keys), _aligned(cand, keys)]
    order = np.lexsort((np.arange(len(keys)), -np.abs(columns[1][2] - columns[0][2])))
    rows = [
        Row(keys[i], *(float(columns[side][figure][i]) for figure in range(3) for side in (0, 1)))
        for i in order.tolist()
    ]
    remainders = _idle(baseline, candidate)
    remainders.append(
        Remainder.of("overlap (counted twice above)", baseline.overlap_us, candidate.overlap_us, counted_twice=True)
    )
    if level in LAUNCHERS:
        held_by = "no host op launched" if baseline.timeline == "device" else "outside any host op"
        outside = held_by if level == "op" else "outside any annotation"
        remainders.append(
            Remainder.of(
                f"{baseline.timeline} work {outside}", baseline.unlinked_us[level], candidate.unlinked_us[level]
            )
        )
    notes = []
    if baseline.steps == 0:
        notes.append(
            "no step markers: each capture after its start-up is compared whole, as one step; compare captures of "
            f"the same work (the same iterations), or {baseline.capture_hint}"
        )
    elif baseline.steps != candidate.steps:
        notes.append(f"steady steps differ ({baseline.steps} → {candidate.steps}); figures are per step")
    if baseline.device != candidate.device:
        notes.append(
            f"the devices differ ({baseline.device} → {candidate.device}): the change is the hardware's and the "
            "work's together"
        )
    if baseline.loaders and candidate.loaders and baseline.loaders != candidate.loaders:
        notes.append(
            f"the DataLoader's iterator changed: {loaders_told(baseline.loaders)} → {loaders_told(candidate.loaders)};"
            f" each batch's fetch is compared as one, {LOADER_FETCH}"
        )
    unmatched = {
        "baseline": _unmatched(base, set(cand.keys), max(baseline.steps, 1)),
        "candidate": _unmatched(cand, set(base.keys), max(candidate.steps, 1)),
    }
    if baseline.compiled != candidate.compiled:
        compiled, eager = ("candidate", "baseline") if candidate.compiled else ("baseline", "candidate")
        notes.append(
            f"the {compiled} runs torch.compile'd regions (Torch-Compiled Region) where the {eager} runs eagerly: "
            "compiled, the same model runs other, fused kernels and ops, so few names match"
        )
    elif matched.get("op", 1.0) < MIN_MATCHED and _ops_hold_time(baseline, candidate):
        notes.append(
            f"little of the work is common to both: {percent(matched['op'])} of the time is in host ops both ran "
            "(of the side with less); they may not be the same workload"
        )
    return TraceDiff.made(
        baseline, candidate, level=level, asked=asked, why=why, rows=rows, remainders=remainders, unmatched=unmatched,
        notes=notes, matched=matched,
    )  # fmt: skip


def _ops_hold_time(baseline: Profile, candidate: Profile) -> bool:
    """Whether host ops hold any of either side's time: where none does (no flow links a kernel to an op, as in
    an XLA capture), how much the ops share says nothing about the work."""
    return any(float(side.tables["op"].paced_us.sum()) > 0 for side in (baseline, candidate) if "op" in side.tables)


def _idle(baseline: Profile, candidate: Profile) -> list[Remainder]:
    """The pacing timeline's idle time: on the device by cause, when both sides split it so."""
    if not (baseline.idle_causes and candidate.idle_causes):
        return [Remainder.of(f"{baseline.timeline} idle", baseline.idle_us, candidate.idle_us)]
    names = [*baseline.idle_causes, *(name for name in candidate.idle_causes if name not in baseline.idle_causes)]
    return [
        Remainder.of(f"device idle: {name}", baseline.idle_causes.get(name, 0.0), candidate.idle_causes.get(name, 0.0))
        for name in names
    ]


def _aligned(table: Table, keys: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The table's calls, time and paced time in the order of ``keys`` (0 for keys it lacks)."""
    position = {key: i for i, key in enumerate(table.keys)}
    index = np.array([position.get(key, -1) for key in keys], dtype=np.int64)
    present = index >= 0

    def column(values: np.ndarray) -> np.ndarray:
        out = np.zeros(len(keys))
        out[present] = values[index[present]]
        return out

    return column(table.calls), column(table.time_us), column(table.paced_us)


def _unmatched(table: Table, other: set[str], steps: int) -> Unmatched:
    alone = np.array([key not in other for key in table.keys], dtype=bool)
    return Unmatched(int(alone.sum()), float(table.calls[alone].sum()) * steps, float(table.time_us[alone].sum()))
