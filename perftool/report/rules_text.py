"""``perftool rules list`` and ``perftool rules explain ID``: the catalogue, one page per rule."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from perftool.rules.catalog import RulesReport
from perftool.rules.detectors import COMMON_VALUES, DETECTORS, ORIGINS
from perftool.rules.model import Rule


def catalogue(report: RulesReport) -> Table:
    """One row per rule: id and name over its title, detector over where it comes from, severity over thresholds."""
    table = Table(show_header=True, box=box.SIMPLE_HEAD)
    table.add_column("rule", min_width=24, ratio=3)
    table.add_column("detector", no_wrap=True)
    table.add_column("severity (thresholds)", min_width=16, ratio=2)
    for rule in report.rules:
        name = rule.name if rule.enabled else f"{rule.name} (disabled)"
        table.add_row(
            Text.assemble((f"{rule.id} {name}", "bold"), "\n", (rule.title, "dim")),
            Text.assemble(rule.detector, "\n", (f"from {ORIGINS.get(rule.detector, '?')}", "dim")),
            Text.assemble(rule.severity.value, "\n", (_thresholds(rule, "\n"), "dim")),  # one level a line: 80 wide
        )
    return table


def page(rule: Rule) -> Group:
    """What it finds, why it matters, how to fix it, an example: from the rule file."""
    detector = DETECTORS[rule.detector]
    parts: list[RenderableType] = [
        Text.assemble((f"{rule.id} {rule.name}", "bold"), f" — {rule.title}"),
        Text(f"detector {detector.name} (from {ORIGINS[detector.name]}): {detector.summary}", style="dim"),
        _section("What it finds", rule.explain.what),
        _section("Why it matters", rule.explain.why),
        _section("Example", rule.explain.example),
        Text("\nHow to fix", style="bold"),
    ]
    parts += [_indented(Text.assemble((family + ": ", "green"), text), 2) for family, text in rule.fix.items()]
    for variant, fixes in rule.fix_variants.items():
        parts.append(_indented(Text(f"when the cause is {variant.replace('_', ' ')}:", style="green"), 2))
        parts += [_indented(Text.assemble((family + ": ", "green"), text), 4) for family, text in fixes.items()]
    settings = {**detector.params, **rule.params}
    parts.append(
        _section(
            "Severity",
            f"at least {rule.severity.value}; by share of the steady-state step time lost: {_thresholds(rule)}",
        )
    )
    if settings:
        lines = [
            f"{name} = {value:g} ({detector.settings[name].kind.__name__}; default "
            f"{detector.settings[name].default:g}): {detector.settings[name].meaning}"
            for name, value in settings.items()
        ]
        parts.append(_section("Settings", "\n".join(lines)))
    values = {**detector.values, **COMMON_VALUES}
    parts.append(_section("Template values", "\n".join(f"{name}: {meaning}" for name, meaning in values.items())))
    if rule.references:
        parts.append(
            _section("References", "\n".join(f"{r.title}" + (f" <{r.url}>" if r.url else "") for r in rule.references))
        )
    return Group(*parts)


def _section(title: str, body: str) -> Group:
    return Group(Text("\n" + title, style="bold"), *(_indented(Text(line), 2) for line in body.splitlines()))


def _indented(text: Text, width: int) -> Padding:
    return Padding(text, (0, 0, 0, width))


def _thresholds(rule: Rule, between: str = ", ") -> str:
    levels = [(name, getattr(rule.thresholds, name)) for name in ("info", "warning", "error")]
    return between.join(f"{name} ≥ {value:.0%}" for name, value in levels if value is not None)
