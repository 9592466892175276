"""The ``perftool`` command line: parsing and dispatch only; the work lives in the library."""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from perftool import api, dialects
from perftool.api.project import ProjectConfig
from perftool.common import interrupts, limits, startup
from perftool.common.choices import FAIL_ON, LEVELS, STRATEGIES, FailOn, Level, Strategy
from perftool.common.errors import PARAMETER, PerftoolError, PerftoolWarning, one_line
from perftool.common.output import check_distinct, check_writable, write_text
from perftool.common.units import plural
from perftool.common.version import __version__
from perftool.emulator.profiles import PROFILES
from perftool.report.registry import emit, formats
from perftool.report.views import CalibrateView, EmulateView, InfoView, TuneView
from perftool.rules.model import FAMILIES, Family

Command = TypeVar("Command", bound=Callable[..., Any])  # a command's function, as click's decorators take it

# each command loads the modules its work needs when it runs, so a command starts in a fraction of a second

FLAGS = {  # each API parameter an error message names (perftool.common.errors.parameter), as the command line sets it
    "max_bytes": "--max-trace-size SIZE",
    "memory": "--memory SIZE",
    "allow_mismatch": "--allow-mismatch",
    "overrides": "--set",
    "at_batch": "--at-batch",
    "select": "--select",
    "ignore": "--ignore",
    "by": "--by",
    "write_best": "--write-best",
    "results": "--results",
    "emit_trace": "--emit-trace",
    "write_config": "-o",
}


def _error(message: str) -> None:
    """An error's one line on stderr, naming the options that set what it names by the API's parameters."""
    shown = PARAMETER.sub(lambda match: FLAGS.get(match[1], match[0]), message)
    click.echo(f"perftool: error: {one_line(shown)}", err=True)


def _failed(why: str) -> NoReturn:
    """Exit 1, the code for what CI fails on, saying why in one line on stderr."""
    click.echo(f"perftool: {why}: exit 1", err=True)
    sys.exit(1)


# A group named without a command (perftool rules): click 8.2 and later raise this to print the group's help, as
# perftool alone prints its own; 8.1 prints it itself
_NO_COMMAND = getattr(click.exceptions, "NoArgsIsHelpError", ())


class _Group(click.Group):
    """Turns PerftoolError and click's usage errors into one line on stderr and exit 2, Ctrl-C into exit 130,
    SIGTERM and SIGHUP into 143 and 129 (see :mod:`perftool.common.output` for how files are written); a group
    named without a command prints its help, as click does."""

    def invoke(self, ctx: click.Context) -> Any:
        interrupts.started()  # the command runs: Ctrl-C unwinds it from here, through its clean-up
        try:
            return super().invoke(ctx)
        except PerftoolError as exc:
            _error(str(exc))
            sys.exit(exc.exit_code)
        except _NO_COMMAND:
            raise
        except click.UsageError as exc:  # a bad option or argument, in the same one-line form
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            click.echo(f"perftool: error: {one_line(exc.format_message())}{where}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            interrupts.stop("perftool: interrupted", interrupts.EXIT_CODE)
        except interrupts.Terminated as exc:
            interrupts.stop(f"perftool: terminated ({exc})", exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perftool")
def cli() -> None:
    """Performance tuning and profiling for training jobs on ML accelerators."""


def _dialect(command: Command) -> Command:
    """--dialect NAME, shared by the commands that read traces."""
    return click.option(
        "--dialect", type=click.Choice(dialects.names()), help="Force a dialect instead of detecting it."
    )(command)


def _trace_limits(command: Command) -> Command:
    """--max-trace-size SIZE and --memory SIZE, shared by the commands that read traces."""
    command = click.option(
        "--memory",
        metavar="SIZE",
        callback=lambda _ctx, _param, value: limits.parse_size(value, "--memory") if value else None,
        help=f"Keep a trace's columns on disk when its scan would take more memory than this  [default: "
        f"{limits.MEMORY_ENV} or the memory available].",
    )(command)
    return click.option(
        "--max-trace-size",
        "max_trace_bytes",
        metavar="SIZE",
        callback=lambda _ctx, _param, value: limits.parse_size(value, "--max-trace-size") if value else None,
        help=f"Refuse traces of more JSON than this  [default: {limits.MAX_TRACE_SIZE_ENV} or no limit].",
    )(command)


class _OpenRange(click.FloatRange):
    """A number strictly between two bounds; NaN, which compares as inside any range, is refused."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__(low, high, min_open=True, max_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


def _scheduler(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """--scheduler, else PERFTOOL_SCHEDULER, checked before any work (None: neither is given)."""
    from perftool.job.cluster import chosen_scheduler

    return chosen_scheduler(value, "--scheduler")


def _cluster_options(command: Command) -> Command:
    """--scheduler ADDRESS and --workers N: where a job's ranks are analysed (and tune sweeps run)."""
    command = click.option(
        "--scheduler",
        metavar="ADDRESS",
        callback=_scheduler,
        help="Dask scheduler to run on (tcp://host:8786)  [default: PERFTOOL_SCHEDULER, the project's "
        "scheduler:, else local worker processes].",
    )(command)
    return click.option(
        "--workers",
        type=click.IntRange(1, 4096),
        metavar="N",
        help="Local worker processes when no scheduler is given; 1 analyses here  [default: one per CPU for work "
        "large enough to pay for starting them, else here].",
    )(command)


def _format_option(shown: str) -> Callable[[Command], Command]:
    """--format, with the choices registered for what the command shows (:mod:`perftool.report.registry`); text
    first."""
    others = formats(shown)[1:]
    tools = ", ".join(others[:-1]) + (" or " if len(others) > 1 else "") + others[-1]
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(formats(shown)),
        default="text",
        show_default=True,
        help=f"text for people; {tools} for tools and CI.",
    )


def _output_option(what: str = "report") -> Callable[[Command], Command]:
    """-o/--output FILE, written atomically instead of stdout."""
    return click.option(
        "-o", "--output", type=click.Path(dir_okay=False), help=f"Write the {what} here (atomically) instead of stdout."
    )


@cli.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=True), metavar="TRACE...")
@_format_option("info")
@_output_option()
@_dialect
@_trace_limits
@click.option(
    "--device-spec",
    type=click.Path(dir_okay=False),
    help="A device file (the fields of perftool/hardware/specs/*.yaml) for the roofline of a device perftool does "
    "not know, or in place of the one the trace names.",
)
@_cluster_options
def info(
    traces: tuple[str, ...],
    fmt: str,
    output: str | None,
    dialect: str | None,
    max_trace_bytes: int | None,
    memory: int | None,
    device_spec: str | None,
    scheduler: str | None,
    workers: int | None,
) -> None:
    """Summarise TRACE: tracks and roles, steps, step time, device utilisation, communication, top ops, and the
    roofline: model FLOPs utilisation (MFU) and the ops furthest below the device's peaks.

    A directory of traces (or several files that say their ranks) is a job of one trace per rank: the ranks side
    by side, their clocks aligned, who waits for whom, and communication per process group; traces of different
    jobs, or of no distributed job, are refused, saying why: give info one trace at a time."""
    if output:
        check_writable(output, [*traces, device_spec])
    summary = api.info(
        *traces, dialect=dialect, device_spec=device_spec, max_bytes=max_trace_bytes, memory=memory,
        scheduler=scheduler, workers=workers,
    )  # fmt: skip
    if isinstance(summary, InfoView):
        emit("info", summary, fmt, output)
        return
    emit("job-info", summary, fmt, output)
    for unread in summary.unread:
        _error(f"{unread.path}: {unread.problem}")
    if summary.unread:
        sys.exit(2)


@cli.command("metrics")
@_format_option("metrics")
def list_metrics(fmt: str) -> None:
    """List the shared metrics that info, rules, gate and tune read, with their units."""
    emit("metrics", api.metrics(), fmt)


@cli.command("knobs")
@_format_option("knobs")
def list_knobs(fmt: str) -> None:
    """List the settings tune sweeps and fixes set: where the config holds each, its unit, the values it takes, the
    device families that have it and what it does."""
    emit("knobs", api.knobs(), fmt)


@cli.command()
@click.argument("config", type=click.Path())
@click.option(
    "--trace",
    "trace_file",
    type=click.Path(),
    help="Write the run's Chrome trace here (.json or .json.gz; opens in Perfetto UI); with replicas, a "
    "directory that gets one rank<N>.trace.json.gz per rank.",
)
@_output_option("summary")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Override a knob (loop_size=32) or any field (workload.steps=400).",
)
@_format_option("emulate")
def emulate(config: str, trace_file: str | None, output: str | None, overrides: tuple[str, ...], fmt: str) -> None:
    """Run CONFIG on the device emulator: predicted step time, throughput, utilisation, memory; --trace writes
    its trace."""
    if output:
        check_writable(output, [config])
    check_distinct((trace_file, output))
    result = api.emulate(config, overrides, trace_file=trace_file)
    written = None
    if trace_file and result.plan.replicas > 1:
        ranks = sum(os.path.getsize(path) for path in result.trace_files(trace_file))
        written = f"{trace_file}/ ({result.plan.replicas} ranks, {ranks / 1e3:,.0f} kB)"
    elif trace_file:
        written = f"{trace_file} ({os.path.getsize(trace_file) / 1e3:,.0f} kB)"
    emit("emulate", EmulateView(result, written), fmt, output)


@cli.command()
@click.argument("trace", type=click.Path())
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the fitted config here (YAML, atomically); the comparison still goes to stdout.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="FIELD=VALUE",
    help="What the trace does not say: the batch size (batch_size=64), epochs (workload.epochs=90), ...",
)
@click.option("--device", type=click.Choice(sorted(PROFILES)), help="Device family to fit  [default: the trace's].")
@click.option(
    "--at-batch",
    metavar="N=TRACE",
    help="A capture of the same job at batch size N: fits how efficiency rises with the batch, and checks the "
    "fit's prediction of that capture's step (needs --set batch_size=...).",
)
@_format_option("calibrate")
@_dialect
@_trace_limits
@_cluster_options
def calibrate(
    trace: str,
    output: str | None,
    overrides: tuple[str, ...],
    device: str | None,
    at_batch: str | None,
    fmt: str,
    dialect: str | None,
    max_trace_bytes: int | None,
    memory: int | None,
    scheduler: str | None,
    workers: int | None,
) -> None:
    """Fit an emulator config to TRACE and check it on what it was not fitted to: a fit to half the steady steps
    must predict the other half (within 5%, or their spread), emulating the fit must reproduce where the time goes
    (device idle by cause, work by category: within 3 points; the steps' spread), and a 500-step run must keep the
    step time (within 2%). A failed check exits 1 naming the figure. -o writes the config, for emulate and tune.

    For a job's directory, the rank fitted is the one that sets the job's pace (the slowest in its job view)."""
    from perftool.tune.calibration import CalibrationFailed

    other = _batch_and_trace(at_batch) if at_batch else None
    fitted = api.calibrate(
        trace, overrides, device=device, at_batch=other, dialect=dialect, max_bytes=max_trace_bytes, memory=memory,
        scheduler=scheduler, workers=workers, write_config=output,
    )  # fmt: skip
    emit("calibrate", CalibrateView(fitted, output), fmt, None)
    if fitted.warnings:
        raise CalibrationFailed(f"{trace}: the fit fails its check: {fitted.warnings[0]}")


def _batch_and_trace(text: str) -> tuple[int, str]:
    """``64=run/b64.json`` as (64, "run/b64.json")."""
    size, sep, path = text.partition("=")
    if not sep or not path or not size.strip().isdigit() or int(size) < 1:
        raise PerftoolError(f"--at-batch {text!r}: expected N=TRACE, a batch size and a capture at it (64=b64.json)")
    return int(size), path


@cli.command()
@click.argument("config", type=click.Path())
@click.option("--strategy", type=click.Choice(STRATEGIES), help="Override tune.strategy.")
@click.option(
    "--evaluations",
    "budget",
    type=click.IntRange(min=1),
    metavar="N",
    help="Simulate at most N configurations (overrides tune.budget).",
)
@click.option(
    "-j",
    "--workers",
    "--jobs",
    "jobs",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Local processes to simulate in, as --workers is in every command (--jobs: its former name).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    callback=_scheduler,
    help="Simulate on the workers of this Dask cluster (tcp://host:8786) instead of --workers local processes  "
    "[default: PERFTOOL_SCHEDULER].",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Override a knob, a field or a tune setting (tune.objective=step_time).",
)
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="Configurations listed.")
@_format_option("tune")
@_output_option("summary")
@click.option("--write-best", type=click.Path(dir_okay=False), help="Write the best config as YAML for emulate.")
@click.option("--results", type=click.Path(dir_okay=False), help="Write every configuration's figures (.json or .csv).")
@click.option(
    "--emit-trace", type=click.Path(dir_okay=False), help="Write the best config's trace (.json or .json.gz)."
)
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr  [default: when a terminal].")
def tune(
    config: str,
    strategy: Strategy | None,
    budget: int | None,
    jobs: int,
    scheduler: str | None,
    overrides: tuple[str, ...],
    top: int,
    fmt: str,
    output: str | None,
    write_best: str | None,
    results: str | None,
    emit_trace: str | None,
    progress: bool | None,
) -> None:
    """Sweep the knobs in CONFIG's tune: section on the emulator and explain the best configuration."""
    from perftool.report.progress import SweepProgress

    if output:
        check_writable(output, [config])
    check_distinct((output, write_best, results, emit_trace))
    with SweepProgress(progress) as bar, interrupts.never_lost():
        result = api.tune(
            config, overrides, strategy=strategy, evaluations=budget, jobs=jobs, scheduler=scheduler,
            write_best=write_best, results=results, emit_trace=emit_trace, on_start=bar.start, on_progress=bar.advance,
        )  # fmt: skip
    emit("tune", TuneView(result, config, top), fmt, output)


def _rule_options(command: Command) -> Command:
    """--rules DIR and --config FILE, shared by the commands that load the rule catalogue."""
    command = click.option(
        "--rules",
        "rule_dirs",
        multiple=True,
        type=click.Path(file_okay=False),
        help="Also load the rule files in DIR (repeatable).",
    )(command)
    return click.option(
        "--config",
        "project_file",
        type=click.Path(dir_okay=False),
        help="Project settings: perftool.yaml or pyproject.toml [default: the nearest from here up to the repository "
        "root].",
    )(command)


def _settings_read(settings: ProjectConfig, rule_dirs: tuple[str, ...]) -> list[str]:
    """The files and directories a command reads its settings from: the project config it found (or was given) and
    every rule directory, given or the project's. Each is an input, which no output may replace or land in."""
    return [*([settings.file] if settings.file else []), *rule_dirs, *settings.rule_dirs]


def _names(values: tuple[str, ...], option: str) -> tuple[str, ...]:
    """Rule ids or names given repeatedly or comma-separated; a value naming none (an empty variable in a script)
    is refused, not read as every rule."""
    names = [[name.strip() for name in value.split(",") if name.strip()] for value in values]
    if not all(names):
        raise PerftoolError(f"{option}: an empty value names no rule (give rule ids, e.g. PT001,PT004)")
    return tuple(name for given in names for name in given)


@cli.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=True))
@_format_option("scan")
@_output_option()
@click.option(
    "--select",
    multiple=True,
    metavar="IDS",
    help="Run only these rules (ids or names, comma-separated; ALL: every rule, those the project turns off too).",
)
@click.option("--ignore", multiple=True, metavar="IDS", help="Skip these rules (ids or names, comma-separated; ALL).")
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    help="Exit 1 when a finding reaches this severity  [default: error].",
)
@click.option(
    "--device", type=click.Choice(FAMILIES), help="Give advice for this device family instead of detecting it."
)
@_dialect
@click.option("--evidence", type=click.IntRange(0, 100), help="Occurrences listed per finding  [default: 5].")
@click.option(
    "--job-steps",
    type=click.IntRange(1),
    metavar="N",
    help="Steps the whole job runs, for traces that do not record it: a one-time cost (a compile) is then "
    "predicted over the job, as the capture repeats, instead of bounded over the capture.",
)
@_trace_limits
@_cluster_options
@_rule_options
def scan(
    traces: tuple[str, ...],
    fmt: str,
    output: str | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: FailOn | None,
    device: Family | None,
    dialect: str | None,
    evidence: int | None,
    job_steps: int | None,
    max_trace_bytes: int | None,
    memory: int | None,
    scheduler: str | None,
    workers: int | None,
    rule_dirs: tuple[str, ...],
    project_file: str | None,
) -> None:
    """Find what makes each of TRACES slow, what it costs and the knob that fixes it (- reads standard input).

    A directory of traces, or several files that say their ranks, is a job of one trace per rank: each rank is
    analysed on Dask and the report adds the job view (ranks, clocks aligned, stragglers, communication per process
    group). Traces of different jobs (formats, world sizes or devices that differ), or of no distributed job, are
    each reported on their own, the report saying why."""
    settings = api.project(project_file)
    if output:
        check_writable(output, [*traces, *_settings_read(settings, rule_dirs)])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PerftoolWarning)  # each trace not read gets its error line below
            report = api.scan(
                *traces,
                rule_dirs=rule_dirs,
                config=settings,
                select=_names(select, "--select"),
                ignore=_names(ignore, "--ignore"),
                device=device,
                dialect=dialect,
                evidence=evidence,
                max_bytes=max_trace_bytes,
                memory=memory,
                scheduler=scheduler,
                workers=workers,
                job_steps=job_steps,
            )
    except api.NothingRead as nothing:
        report = nothing.report
    if report.traces:  # when nothing was read, the errors below say why and no report stands in for the traces
        emit("scan", report, fmt, output)
    for unread in report.unread:  # every trace that loaded is reported above; each bad one gets its line
        _error(f"{unread.path}: {unread.problem}")
    if report.unread:
        sys.exit(2)
    threshold = _first(fail_on, settings.fail_on, "error")
    reached = [f for _, f in report.findings if f.severity.reaches(threshold)]
    if reached:
        _failed(f"{plural(len(reached), 'finding')} at {threshold} or above (--fail-on {threshold})")


def _first(*choices: Any) -> Any:
    return next(choice for choice in choices if choice is not None)


@cli.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=True), metavar="[BASELINE] CANDIDATE")
@click.option("--budget", type=click.Path(dir_okay=False), help="Hold the candidate to this budget file's limits.")
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    help="Fail on new findings at this severity  [default: error; never with a budget alone].",
)
@click.option(
    "--threshold",
    type=_OpenRange(0, 1),
    help="Relative step-time / throughput change that is a regression  [default: 0.05].",
)
@click.option(
    "--alpha",
    type=_OpenRange(0, 0.5),
    help="Significance level of the timing test  [default: 0.01].",
)
@click.option("--allow-mismatch", is_flag=True, help="Compare traces of different jobs (device, workload) anyway.")
@_format_option("gate")
@_output_option()
@click.option("--device", type=click.Choice(FAMILIES), help="Device family for advice instead of detecting it.")
@_dialect
@_trace_limits
@_cluster_options
@_rule_options
def gate(
    traces: tuple[str, ...],
    budget: str | None,
    fail_on: FailOn | None,
    threshold: float | None,
    alpha: float | None,
    allow_mismatch: bool,
    fmt: str,
    output: str | None,
    device: Family | None,
    dialect: str | None,
    max_trace_bytes: int | None,
    memory: int | None,
    scheduler: str | None,
    workers: int | None,
    rule_dirs: tuple[str, ...],
    project_file: str | None,
) -> None:
    """Fail CI when CANDIDATE regresses against BASELINE (traces, scan JSON, or jobs: directories of one trace
    per rank, compared rank by rank), or breaks --budget.

    Exit 0 pass (warnings included), 1 fail, 2 bad input.
    """
    settings = api.project(project_file)
    if output:
        check_writable(output, [*traces, budget, *_settings_read(settings, rule_dirs)])
    if len(traces) > 2 or (len(traces) == 1 and budget is None):
        raise click.UsageError("give BASELINE CANDIDATE, or CANDIDATE with --budget FILE")
    baseline, candidate = (traces[0], traces[1]) if len(traces) == 2 else (None, traces[0])
    result = api.gate(
        baseline,
        candidate,
        budget,
        config=settings,
        rule_dirs=rule_dirs,
        fail_on=fail_on,
        threshold=threshold,
        alpha=alpha,
        allow_mismatch=allow_mismatch,
        device=device,
        dialect=dialect,
        max_bytes=max_trace_bytes,
        memory=memory,
        scheduler=scheduler,
        workers=workers,
    )
    emit("gate", result, fmt, output)
    if result.failed:
        _failed(f"the gate fails: {result.why_failed()}")


@cli.command()
@click.argument("baseline", type=click.Path())
@click.argument("candidate", type=click.Path())
@click.option(
    "--by",
    type=click.Choice(LEVELS),
    default="kernel",
    show_default=True,
    help="Compare per device kernel, host op or user annotation (the device time each launched), category, or track.",
)
@click.option(
    "--op-map",
    "op_maps",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A YAML map of names across vendors, before the built-in one (repeatable).",
)
@_format_option("diff")
@_output_option()
@_dialect
@_trace_limits
@_cluster_options
def diff(
    baseline: str,
    candidate: str,
    by: Level,
    op_maps: tuple[str, ...],
    fmt: str,
    output: str | None,
    dialect: str | None,
    max_trace_bytes: int | None,
    memory: int | None,
    scheduler: str | None,
    workers: int | None,
) -> None:
    """What changed between BASELINE and CANDIDATE (two traces, or two jobs' directories rank by rank; a directory
    holding one trace, as a run's log directory does, is that trace): per kernel, op, annotation, category or track,
    calls and time per steady step, what appeared and went, and each change's part of the step-time change; the
    parts add up to it."""
    if output:
        check_writable(output, [baseline, candidate, *op_maps])
    result = api.diff(
        baseline, candidate, by=by, op_maps=op_maps, dialect=dialect, max_bytes=max_trace_bytes, memory=memory,
        scheduler=scheduler, workers=workers,
    )  # fmt: skip
    emit("diff", result, fmt, output)


@cli.group()
def rules() -> None:
    """The rule catalogue: what each rule finds and how to fix it."""


@rules.command("list")
@_rule_options
@_format_option("rules")
def list_rules(rule_dirs: tuple[str, ...], project_file: str | None, fmt: str) -> None:
    """List every rule with its detector, default severity and thresholds."""
    emit("rules", api.rules(rule_dirs, config=project_file), fmt)


@rules.command()
@click.argument("rule")
@_rule_options
@_format_option("rule")
def explain(rule: str, rule_dirs: tuple[str, ...], project_file: str | None, fmt: str) -> None:
    """What RULE (an id or name) finds, why it matters, how to fix it, with an example."""
    emit("rule", api.rule(rule, rule_dirs, config=project_file), fmt)


@cli.command()
def mcp() -> None:
    """Serve perftool's API to coding agents: a Model Context Protocol server over stdio (tools info, scan, diff,
    gate, explain_rule, calibrate, tune, each answering with the JSON --format json writes). Needs
    pip install 'mcp>=2' (perftool's mcp extra)."""
    from perftool.cli.mcp import serve

    serve()


@cli.command(
    help="Print the JSON Schema of perftool's file NAME (default config; editors use it to complete and check "
    f"configs): one of {', '.join(sorted(api.SCHEMAS))}."
)
@click.argument("name", type=click.Choice(sorted(api.SCHEMAS)), default="config", metavar="[NAME]")
def schema(name: str) -> None:
    write_text(json.dumps(api.schema(name), indent=2) + "\n", None)


def main() -> None:
    startup.loaded()
    interrupts.stop_on_termination()
    try:
        cli(prog_name="perftool")
    except interrupts.Terminated as exc:  # while click reads the options, before the command runs
        interrupts.stop(f"perftool: terminated ({exc})", exc.exit_code)
    finally:
        interrupts.finished()
