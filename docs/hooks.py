"""MkDocs hooks: the pages generated from perftool itself when the site is built, so they never drift from it.

- ``rules/index.md`` and ``rules/PTnnn.md``: every built-in rule, the page ``perftool rules explain`` prints;
- ``reference/cli.md``: every command's ``--help``, as the command line prints it.
"""

from __future__ import annotations

from typing import Any

import click
from click.testing import CliRunner
from mkdocs.structure.files import File, Files

from perftool.cli.main import cli
from perftool.report.escape import markdown
from perftool.report.rule_markdown import page
from perftool.report.rule_page import thresholds
from perftool.rules.catalog import load_catalog


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages to the site's files."""
    rules = sorted(load_catalog(), key=lambda rule: rule.id)
    rows = [f"| [{rule.id}]({rule.id}.md) | {rule.name} | {markdown(rule.title)} | {rule.severity.value} "
            f"({thresholds(rule)}) |" for rule in rules]  # fmt: skip
    index = [
        "# Rules",
        "",
        "Every built-in rule, as `perftool rules list` lists it; each page is what `perftool rules explain ID` prints.",
        "",
        "| rule | name | finds | severity (thresholds) |",
        "| --- | --- | --- | --- |",
        *rows,
    ]
    files.append(File.generated(config, "rules/index.md", content="\n".join(index) + "\n"))
    for rule in rules:
        files.append(File.generated(config, f"rules/{rule.id}.md", content=page(rule)))
    files.append(File.generated(config, "reference/cli.md", content=_cli_reference()))
    return files


def _cli_reference() -> str:
    """Each command's help, in the order ``perftool --help`` lists them."""
    lines = ["# Command reference", "", "Every command's `--help`, as the command line prints it.", ""]
    for path in _commands(cli, []):
        shown = " ".join(["perftool", *path])
        result = CliRunner().invoke(cli, [*path, "--help"], prog_name="perftool", terminal_width=100)
        lines += [f"## `{shown}`", "", "```text", result.output.rstrip(), "```", ""]
    return "\n".join(lines)


def _commands(group: click.Group, path: list[str]) -> list[list[str]]:
    found = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, [*path, name])
        else:
            found.append([*path, name])
    return found
