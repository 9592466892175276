"""The ``perftool`` command line: parsing and dispatch only; the work lives in the library."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from perftool import __version__, dialects
from perftool.analysis import METRICS, compute_metrics
from perftool.errors import PerftoolError
from perftool.output import check_writable, write_text
from perftool.report import info_json, info_text
from perftool.trace import load_trace


class _Group(click.Group):
    """Turns PerftoolError into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except PerftoolError as exc:
            click.echo(f"perftool: error: {exc}", err=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perftool")
def cli() -> None:
    """Performance tuning and profiling for training jobs on ML accelerators."""


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here (atomically) instead of stdout.")
@click.option("--dialect", type=click.Choice(dialects.names()), help="Force a dialect instead of detecting it.")
def info(trace: str, fmt: str, output: str | None, dialect: str | None) -> None:
    """Summarise TRACE: tracks and roles, steps, step time, device utilisation, top ops."""
    if output:
        check_writable(output)
    loaded = load_trace(trace, dialect=dialect)
    metrics = compute_metrics(loaded)
    if fmt == "json":
        write_text(info_json.render(loaded, metrics), output)
    elif output:
        write_text(info_text.to_text(loaded, metrics), output)
    else:
        Console().print(info_text.render(loaded, metrics))


@cli.command("metrics")
def list_metrics() -> None:
    """List the shared metrics that info, rules, gate and tune read."""
    table = Table(show_header=True)
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("meaning")
    for name, meaning in METRICS.items():
        table.add_row(name, meaning)
    Console().print(table)


def main() -> None:
    cli(prog_name="perftool")
