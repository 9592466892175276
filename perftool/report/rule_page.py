"""One rule's page, as ``perftool rules explain`` shows it in text or Markdown: the parts, from the rule file and its
detector, in the order they are read."""

from __future__ import annotations

from dataclasses import dataclass

from perftool.rules.detectors import COMMON_VALUES, DETECTORS, ORIGINS
from perftool.rules.model import Rule


@dataclass(frozen=True)
class Fix:
    """One fix: for which family (``generic`` and the rest), under which cause (None: whatever the cause)."""

    family: str
    text: str
    cause: str | None = None


@dataclass(frozen=True)
class RulePage:
    heading: str  # "PT001 host-bound-gaps"
    title: str
    detector: str  # the detector, where it comes from, what it finds
    sections: list[tuple[str, str]]  # what it finds, why it matters, an example
    fixes: list[Fix]
    after_fixes: list[tuple[str, str]]  # severity, settings, template values, references


def rule_page(rule: Rule) -> RulePage:
    """``rule``'s page."""
    detector = DETECTORS[rule.detector]
    fixes = [Fix(family, text) for family, text in rule.fix.items()]
    fixes += [
        Fix(family, text, variant.replace("_", " "))
        for variant, by_family in rule.fix_variants.items()
        for family, text in by_family.items()
    ]
    after = [("Severity", f"at least {rule.severity.value}; by share of the steady-state step time lost: "
                          f"{thresholds(rule)}")]  # fmt: skip
    if rule.titles:
        after.append(("Titles", "\n".join(f"{v.replace('_', ' ')}: {title}" for v, title in rule.titles.items())))
    settings = {**detector.params, **rule.params}
    if settings:
        after.append((
            "Settings",
            "\n".join(
                f"{name} = {value:g} ({detector.settings[name].kind.__name__}; default "
                f"{detector.settings[name].default:g}): {detector.settings[name].meaning}"
                for name, value in settings.items()
            ),
        ))  # fmt: skip
    values = {**detector.values, **COMMON_VALUES}
    after.append(("Template values", "\n".join(f"{name}: {meaning}" for name, meaning in values.items())))
    if rule.references:
        after.append(
            ("References", "\n".join(f"{r.title}" + (f" <{r.url}>" if r.url else "") for r in rule.references))
        )
    return RulePage(
        heading=f"{rule.id} {rule.name}",
        title=rule.title,
        detector=f"detector {detector.name} (from {ORIGINS[detector.name]}): {detector.summary}",
        sections=[
            ("What it finds", rule.explain.what),
            ("Why it matters", rule.explain.why),
            ("Example", rule.explain.example),
        ],  # fmt: skip
        fixes=fixes,
        after_fixes=after,
    )


def thresholds(rule: Rule, between: str = ", ") -> str:
    """The rule's severity thresholds in words: ``info ≥ 2%, warning ≥ 5%``."""
    levels = [(name, getattr(rule.thresholds, name)) for name in ("info", "warning", "error")]
    return between.join(f"{name} ≥ {value:.0%}" for name, value in levels if value is not None)
