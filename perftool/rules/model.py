"""What a rule file holds, validated by pydantic: one YAML file per rule in ``rules/``."""

from __future__ import annotations

import enum
import math
import re
import string
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perftool.common.units import duration

Family = Literal["npu", "ipu", "hpu", "gpu", "generic"]
FAMILIES: tuple[str, ...] = get_args(Family)
# What a fix may be told for before the device family: a framework whose knobs differ from those a family's fix names
# (JAX's jit and lax.scan, TensorFlow's tf.function, XLA and tf.data, not torch.compile, CUDA graphs or DataLoader), a
# serving job (in one engine's terms where its trace names the engine: vllm, sglang; in both engines' where it does
# not), and inference, whose jobs have no backward pass, optimizer or epochs. A fix under one of these keys is given
# for such traces on any device (TensorFlow's: where the family's own fixes are not TensorFlow's already,
# :attr:`perftool.analysis.context.TraceAnalysis.contexts`).
FIX_CONTEXTS: tuple[str, ...] = ("jax", "tensorflow", "vllm", "sglang", "serving", "inference")


class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)

    def reaches(self, fail_on: str) -> bool:
        """Whether this severity is at or above ``fail_on`` (``never``: nothing is)."""
        return fail_on != "never" and self.rank >= Severity(fail_on).rank


Share = Annotated[float, Field(ge=0, le=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Thresholds(_Strict):
    """Share of the steady-state step time lost at which a finding reaches each severity.

    A detection losing less than the lowest threshold given is not reported at all.
    """

    info: Share | None = None
    warning: Share | None = None
    error: Share | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        given = [v for v in (self.info, self.warning, self.error) if v is not None]
        if not given:
            raise ValueError("give at least one of info, warning, error")
        if given != sorted(given):
            raise ValueError("must not decrease from info to warning to error")
        return self

    def severity(self, share: float, floor: Severity) -> Severity | None:
        """The severity for a share of step time lost, never below ``floor``; None when below every threshold."""
        reached = [s for s in Severity if getattr(self, s.value) is not None and share >= getattr(self, s.value)]
        if not reached:
            return None
        return max(reached[-1], floor, key=lambda s: s.rank)


class Reference(_Strict):
    title: str = Field(min_length=1)
    url: str | None = Field(None, pattern=r"^https://\S+$")


class Explanation(_Strict):
    """The rule's documentation page, printed by ``perftool rules explain``."""

    what: str = Field(min_length=1, description="what the rule finds")
    why: str = Field(min_length=1, description="why it matters")
    example: str = Field(min_length=1, description="what it looks like in a trace")


class Rule(_Strict):
    """One rule: which detector runs, when it reports, and what it tells the user."""

    id: str = Field(pattern=r"^[A-Z]{2,5}\d{3}$", description="stable id, e.g. PT001")
    name: str = Field(pattern=r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$", description="slug, e.g. host-bound-gaps")
    title: str = Field(min_length=1)
    detector: str = Field(description="the detector module that measures it")
    severity: Severity = Field(Severity.INFO, description="the lowest severity a finding of this rule gets")
    thresholds: Thresholds
    params: dict[str, float] = Field(default_factory=dict, description="detector settings")
    message: str = Field(min_length=1, description="template filled with the detector's values")
    fix: dict[str, str] = Field(
        description="fix per device family, or per context (jax, serving, inference); 'generic' is required"
    )
    fix_variants: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="fixes for particular causes the detector names (variant -> family or context -> text)",
    )
    titles: dict[str, str] = Field(
        default_factory=dict,
        description="titles for particular causes the detector names (variant -> title), where the rule's own "
        "would name another cause",
    )
    explain: Explanation
    references: tuple[Reference, ...] = ()
    enabled: bool = True

    @field_validator("fix")
    @classmethod
    def _families(cls, fix: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(fix) - set(FAMILIES) - set(FIX_CONTEXTS))
        if unknown:
            known = ", ".join((*FAMILIES, *FIX_CONTEXTS))
            raise ValueError(f"unknown device family or context {unknown[0]!r} (choose from {known})")
        if "generic" not in fix:
            raise ValueError("needs a 'generic' fix for traces whose device family is unknown")
        return fix

    @field_validator("fix_variants")
    @classmethod
    def _variant_families(cls, variants: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for fixes in variants.values():
            cls._families(fixes)
        return variants

    @model_validator(mode="after")
    def _titled_variants(self) -> Rule:
        unknown = sorted(set(self.titles) - set(self.fix_variants))
        if unknown:
            raise ValueError(f"titles: {unknown[0]!r} is no variant of fix_variants")
        return self

    def title_for(self, variant: str | None) -> str:
        """The title of a finding of the ``variant`` the detector named: its own where the rule has one."""
        return self.titles.get(variant or "", self.title)

    def fix_for(self, family: str, variant: str | None, contexts: tuple[str, ...] = ()) -> str:
        """The fix for the ``variant`` the detector named (else the rule's own), in the terms of the first of the
        trace's ``contexts`` (its framework, inference) the rule has one for, else its device ``family``'s, else the
        generic one."""
        fixes = self.fix_variants.get(variant or "", self.fix)
        return next((fixes[c] for c in contexts if c in fixes), fixes.get(family, fixes["generic"]))

    def templates(self) -> dict[str, str]:
        """Every template in the rule, by where it sits (for checking their fields)."""
        found = {"message": self.message}
        found |= {f"fix.{family}": text for family, text in self.fix.items()}
        for variant, fixes in self.fix_variants.items():
            found |= {f"fix_variants.{variant}.{family}": text for family, text in fixes.items()}
        return found


_PLAIN_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SPEC_NUMBERS = re.compile(r"\d+")
MAX_FORMAT_WIDTH = 100  # a width or precision beyond this only makes huge strings


def template_fields(template: str) -> list[str]:
    """The value names a template uses; raises ValueError for fields that reach beyond a plain name."""
    fields = []
    for _, name, spec, _ in string.Formatter().parse(template):
        if name is None:
            continue
        if not _PLAIN_FIELD.match(name):
            raise ValueError(f"template field {{{name}}} must be a plain value name (no attributes, no indexing)")
        if spec and "{" in spec:
            raise ValueError(f"template field {{{name}}} has a nested field in its format")
        if spec and any(int(number) > MAX_FORMAT_WIDTH for number in _SPEC_NUMBERS.findall(spec)):
            raise ValueError(f"template field {{{name}:{spec}}}: widths and precisions go up to {MAX_FORMAT_WIDTH}")
        fields.append(name)
    return fields


_PER_STEP = re.compile(r"(\{\w+(?::[^{}]*)?\}[^{}.;:()]{0,60}?) per step\b")  # "{n:.0f} calls per step"


def over_the_trace(template: str) -> str:
    """A template for a trace without steps, whose window stands as one step: a figure "per step" reads "in the
    trace" (``{calls:.0f} calls per step`` → ``… calls in the trace``), a share "of the steady state" is "of the
    trace"; advice that says "per step" without a figure is left as it is."""
    return _PER_STEP.sub(r"\1 in the trace", template).replace("of the steady state", "of the trace")


def fill(template: str, values: dict[str, object]) -> str:
    """Fill a checked template with the detector's own values only: no attributes, no indexing.

    A value the trace cannot give (NaN) reads ``n/a``; ``{x_ms:ms}`` writes a time in ms as reports write times
    (:func:`~perftool.common.units.duration`: ``31.423 ms``, ``1.207 s``); a format that does not suit its value
    (``{count:.1%}`` on a string) shows the value plainly rather than failing the scan.
    """
    template_fields(template)  # refuses fields that reach beyond a plain name
    parts = []
    for literal, name, spec, conversion in string.Formatter().parse(template):
        parts.append(literal)
        if name is None:
            continue
        value = values[name]
        if isinstance(value, float) and math.isnan(value):
            parts.append("n/a")
            continue
        if spec == "ms" and isinstance(value, int | float):  # a time in ms, written as every report writes times
            parts.append(duration(value * 1e3))
            continue
        value = repr(value) if conversion == "r" else str(value) if conversion == "s" else value
        try:
            parts.append(format(value, spec or ""))
        except (ValueError, TypeError):
            parts.append(str(value))
    return "".join(parts)
