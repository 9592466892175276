"""Loading the rule catalogue: the built-in rule files, extra directories and project overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from perftool.common.errors import PerftoolError, parameter
from perftool.common.paths import kind_of
from perftool.common.results import Document
from perftool.common.yamlfile import field_error, read_model, validation_error
from perftool.rules.detectors import COMMON_VALUES, DETECTORS
from perftool.rules.model import Rule, template_fields
from perftool.rules.settings import RuleSettings

_PACKAGED = Path(__file__).parent / "builtin"  # the top-level rules/ folder, as installed in the wheel
_SOURCE = Path(__file__).resolve().parents[2] / "rules"  # the same folder in a source checkout


class RulesReport(Document):
    """``perftool rules list --format json``: each rule as its file states it (``perftool schema rule``), with the
    project's overrides applied."""

    schema_: Literal["perftool.rules/1"] = Field("perftool.rules/1", alias="schema")
    rules: list[Rule]


def builtin_dir() -> Path:
    return _PACKAGED if _PACKAGED.is_dir() else _SOURCE


def load_rule(path: Path) -> Rule:
    """One rule file, validated: its fields, its detector, its settings and its templates."""
    source = str(path)
    rule, root = read_model(
        path, "rule file", Rule, "a rule file must be a YAML mapping (id, name, title, detector, ...)"
    )
    detector = DETECTORS.get(rule.detector)
    if detector is None:
        raise field_error(
            source, root, ("detector",), f"unknown detector {rule.detector!r} (have: {', '.join(DETECTORS)})"
        )
    for name, value in rule.params.items():
        if name not in detector.settings:
            known = ", ".join(detector.settings) or "none"
            raise field_error(
                source, root, ("params", name), f"detector {detector.name} has no such setting (has: {known})"
            )
        problem = detector.settings[name].check(value)
        if problem:
            raise field_error(source, root, ("params", name), problem)
    known_values = {**COMMON_VALUES, **detector.values}
    for where, template in rule.templates().items():
        loc = tuple(where.split("."))
        try:
            fields = template_fields(template)
        except ValueError as exc:
            raise field_error(source, root, loc, str(exc)) from None
        unknown = [name for name in fields if name not in known_values]
        if unknown:
            raise field_error(
                source,
                root,
                loc,
                f"unknown value {{{unknown[0]}}} (detector {detector.name} gives: {', '.join(known_values)})",
            )
    return rule


def load_catalog(project: RuleSettings | None = None, extra_dirs: tuple[str, ...] = ()) -> list[Rule]:
    """Every rule, built-in ones first, with the project's overrides applied; ids must be unique."""
    project = project or RuleSettings()
    directories = [builtin_dir(), *(Path(d) for d in (*project.rule_dirs, *extra_dirs))]
    rules: dict[str, tuple[Rule, Path]] = {}
    for directory in directories:
        if kind_of(directory, "rule directory") != "directory":
            raise PerftoolError(f"{directory}: rule directory does not exist")
        for path in sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml")):
            rule = load_rule(path)
            if rule.id in rules:
                raise PerftoolError(f"{path}: id {rule.id} is already used by {rules[rule.id][1]}")
            rules[rule.id] = (rule, path)
    _check_known([rule for rule, _ in rules.values()], project)
    return [_override(rule, project) for rule, _ in sorted(rules.values(), key=lambda item: item[0].id)]


def _override(rule: Rule, project: RuleSettings) -> Rule:
    change = project.rules.get(rule.id) or project.rules.get(rule.name)
    if change is None:
        return rule
    updated: dict[str, Any] = rule.model_dump()
    if change.thresholds:
        updated["thresholds"] = {**updated["thresholds"], **change.thresholds}
    if change.params:
        unknown = sorted(set(change.params) - set(DETECTORS[rule.detector].params))
        if unknown:
            raise PerftoolError(
                f"{project.source}: rules.{rule.id}.params.{unknown[0]}: detector {rule.detector} has no such setting"
            )
        updated["params"] = {**updated["params"], **change.params}
    for name in ("severity", "enabled"):
        if getattr(change, name) is not None:
            updated[name] = getattr(change, name)
    try:
        return Rule.model_validate(updated)
    except ValidationError as exc:
        raise validation_error(project.source, None, exc, prefix=("rules", rule.id)) from None


def _check_known(rules: list[Rule], project: RuleSettings) -> None:
    """Every rule the project names must exist."""
    known = {rule.id for rule in rules} | {rule.name for rule in rules}
    for name in project.rules:
        if name not in known:
            raise PerftoolError(f"{project.source}: rules.{name}: no such rule (see perftool rules list)")


def selected(rules: list[Rule], select: tuple[str, ...], ignore: tuple[str, ...]) -> list[Rule]:
    """The enabled rules, narrowed by ids or names to select (all when empty) and to ignore."""
    known = {rule.id for rule in rules} | {rule.name for rule in rules} | {"ALL"}
    for name in (*select, *ignore):
        if name not in known:
            raise PerftoolError(
                f"unknown rule {name!r} in {parameter('select')}/{parameter('ignore')} (see perftool rules list)"
            )

    def named(rule: Rule, names: tuple[str, ...]) -> bool:
        return "ALL" in names or rule.id in names or rule.name in names

    chosen = [rule for rule in rules if (named(rule, select) if select else rule.enabled)]
    return [rule for rule in chosen if not named(rule, ignore)]


def find_rule(rules: list[Rule], name: str) -> Rule:
    for rule in rules:
        if name in (rule.id, rule.name):
            return rule
    raise PerftoolError(f"unknown rule {name!r} (see perftool rules list)")
