"""The ``perftool`` command line: parsing and dispatch only; the work lives in the library."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.table import Table

from perftool import __version__, dialects
from perftool.analysis import METRICS, compute_metrics
from perftool.emulator import config as emulator_config
from perftool.emulator.run import InfeasibleConfig
from perftool.emulator.run import run as emulate_run
from perftool.emulator.trace_writer import encode_for, trace_bytes
from perftool.errors import PerftoolError
from perftool.output import check_writable, write_bytes, write_text
from perftool.report import emulate_json, emulate_text, info_json, info_text
from perftool.trace import load_trace

SCHEMAS = {"config": emulator_config.EmulatorConfig}


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


@cli.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the trace here (.json or .json.gz).")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KNOB=VALUE",
    help="Override a knob (loop_size=32) or any field (workload.steps=400).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Summary format."
)
def emulate(config: str, output: str | None, overrides: tuple[str, ...], fmt: str) -> None:
    """Run CONFIG on the device emulator: predicted step time, throughput, utilisation, memory; -o writes its trace."""
    if output:
        check_writable(output)
    loaded = emulator_config.load_config(config, list(overrides))
    try:
        result = emulate_run(loaded)
    except InfeasibleConfig as exc:
        raise PerftoolError(f"{config}: {exc}") from None
    written = None
    if output:
        data = encode_for(output, trace_bytes(result))
        write_bytes(data, output)
        written = f"{output} ({len(data) / 1e3:,.0f} kB)"
    if fmt == "json":
        write_text(emulate_json.render(result, output), None)
    else:
        Console().print(emulate_text.render(result, written))


@cli.command()
@click.argument("name", type=click.Choice(sorted(SCHEMAS)), default="config")
def schema(name: str) -> None:
    """Print the JSON Schema of a perftool file (editors use it to complete and check configs)."""
    write_text(json.dumps(SCHEMAS[name].model_json_schema(), indent=2) + "\n", None)


def main() -> None:
    cli(prog_name="perftool")
