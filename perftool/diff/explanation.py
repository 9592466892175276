"""A change in parts, for people and CI: the largest contributors of a diff, the others together, and the
remainders, which add up to the change of the mean steady step (what ``gate`` explains a failed step time
with, and ``diff`` opens with)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from perftool.common.choices import Level
from perftool.common.results import Part
from perftool.diff.compare import TraceDiff, shown, unchanged


class Contributor(Part):
    """A part of a change: a key of the diff (its calls and time per steady step on the pacing
    timeline on each side), the keys not listed together (``others``), or a remainder."""

    name: str
    status: Literal["both", "added", "removed", "others", "remainder"]
    contribution_us: float
    baseline_calls_per_step: float | None = Field(description="null for others and remainders")
    candidate_calls_per_step: float | None
    baseline_us_per_step: float | None = Field(description="its time on the pacing timeline; null for others")
    candidate_us_per_step: float | None
    keys: int = Field(description="the keys it sums: 1, or for others how many")


class Explanation(Part):
    """What a step time's change is made of: the largest contributors of the traces' diff, the others together, and
    the remainders; they add up to the change."""

    rank: int | None
    level: Level = Field(description="the level the traces were compared at")
    headline: str
    delta_us: float = Field(description="the change of the mean steady step")
    baseline_step_us: float = Field(description="the baseline's mean steady step, as the diff measures it")
    candidate_step_us: float
    paced_time: str = Field(description="what a contributor's time is: time, or device time for host ops")
    contributors: list[Contributor] = Field(description="they add up to delta_us")

    @classmethod
    def of(cls, diff: TraceDiff, top: int) -> Explanation:
        """The diff's ``top`` largest contributors (none that rounds to nothing), the others and the remainders."""
        listed, others = diff.contributions(top)
        parts = [
            Contributor(
                name=row.key, status=row.status, contribution_us=row.contribution_us,
                baseline_calls_per_step=row.baseline_calls, candidate_calls_per_step=row.candidate_calls,
                baseline_us_per_step=row.baseline_paced_us, candidate_us_per_step=row.candidate_paced_us, keys=1,
            )
            for row in listed
        ]  # fmt: skip
        if len(diff.rows) > len(listed):
            parts.append(
                Contributor(
                    name="others", status="others", contribution_us=others, baseline_calls_per_step=None,
                    candidate_calls_per_step=None, baseline_us_per_step=None, candidate_us_per_step=None,
                    keys=len(diff.rows) - len(listed),
                )
            )  # fmt: skip
        parts += [
            Contributor(
                name=r.name, status="remainder", contribution_us=r.contribution_us, baseline_calls_per_step=None,
                candidate_calls_per_step=None, baseline_us_per_step=r.baseline_us, candidate_us_per_step=r.candidate_us,
                keys=0,
            )
            for r in diff.remainders
        ]  # fmt: skip
        return cls(
            rank=diff.rank, level=diff.level, headline=diff.headline, delta_us=diff.delta_us,
            baseline_step_us=diff.baseline.step_us, candidate_step_us=diff.candidate.step_us,
            paced_time=diff.paced_time, contributors=parts,
        )  # fmt: skip

    @property
    def unchanged(self) -> bool:
        """Whether no part of the change shows: the two sides' steps are made alike."""
        return unchanged(self.delta_us, (part.contribution_us for part in self.contributors))

    def share(self, part_us: float) -> float:
        """``part_us`` as a fraction of the change (NaN when nothing changed)."""
        return part_us / self.delta_us if self.delta_us else float("nan")

    def shown(self) -> list[Contributor]:
        """The contributors a table for people lists: all but the remainders that round to nothing on both sides."""
        return [
            part
            for part in self.contributors
            if part.status != "remainder" or shown(part.baseline_us_per_step or 0, part.candidate_us_per_step or 0)
        ]
