"""perftool from Python: the same work the command line does, returning the models it renders.

    import perftool

    report = perftool.scan("trace.json.gz")                 # ScanReport: traces, findings, metrics
    for trace, finding in report.findings:
        print(finding.rule_id, finding.severity.value, finding.fix.text)
    trace = perftool.load_trace("trace.json.gz")            # the columnar Trace, roles and kinds assigned
    events = trace.to_pandas()                              # one row per event (needs pandas)
    verdict = perftool.gate("baseline.json", "candidate.json")   # GateResult: status and checks
    change = perftool.diff("before.json.gz", "after.json.gz")    # DiffResult: what changed, adding up to the delta
    roof = perftool.roofline("trace.json.gz")               # Roofline: MFU; roof.to_pandas() is the op table
    summary = perftool.info("trace.json.gz")                # the trace, its metrics and roofline (a job: ScanReport)
    fit = perftool.calibrate("trace.json.gz", ["batch_size=64"])  # Calibration: fitted config, checks, warnings
    run = perftool.emulate("config.yaml", overrides=["loop_size=32"], trace_file="run.json.gz")
    best = perftool.tune("tune.yaml", evaluations=200)      # TuneResult

Bad input raises :class:`perftool.common.errors.PerftoolError` with the one-line message the CLI prints, where what to
change is named by this API's parameters (`` `memory` ``) and the CLI names its options (``--memory SIZE``); a scan that
could read some of its traces but not all warns (:class:`perftool.common.errors.PerftoolWarning`), one that could read
none raises :class:`NothingRead`.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

from pydantic import AfterValidator, ConfigDict, Field, ValidationError, validate_call

from perftool.api.project import ProjectConfig, load_project
from perftool.common.choices import FailOn, Level, Strategy
from perftool.common.errors import PerftoolError, PerftoolWarning, invalid_arguments, parameter
from perftool.pipeline import read as reader
from perftool.rules.model import Family, Rule
from perftool.trace.loader import STDIN
from perftool.trace.model import Trace
from perftool.trace.profiler_dirs import trace_path

if TYPE_CHECKING:  # what the functions return; each loads its own modules when called
    from perftool.common.results import KnobsReport, MetricsReport
    from perftool.diff.files import DiffResult
    from perftool.emulator.full_run import Run
    from perftool.gate.verdict import GateResult
    from perftool.report.views import InfoView
    from perftool.roofline.figures import Roofline
    from perftool.rules.catalog import RulesReport
    from perftool.rules.findings import ScanReport
    from perftool.tune.calibration import Calibration
    from perftool.tune.result import TuneResult


def _no_nul(path: str | Path) -> str | Path:
    if "\0" in str(path):  # no file system holds such a name; open() would raise ValueError
        raise ValueError("a path cannot hold a NUL byte")
    return path


PathLike = Annotated[str | Path, AfterValidator(_no_nul)]
Count = Annotated[int, Field(ge=1)]
Arguments = ParamSpec("Arguments")
Result = TypeVar("Result")
_STRICT = ConfigDict(strict=True, allow_inf_nan=False, arbitrary_types_allowed=True)

__all__ = [
    "NothingRead",
    "calibrate",
    "diff",
    "emulate",
    "gate",
    "info",
    "load_trace",
    "project",
    "roofline",
    "scan",
    "tune",
    "knobs",
    "metrics",
    "rule",
    "rules",
    "schema",
]


class NothingRead(PerftoolError):
    """None of the traces given to :func:`scan` could be read: ``report.unread`` says why, for each."""

    def __init__(self, report: ScanReport) -> None:
        super().__init__(_unread(report))
        self.report = report


def _unread(report: ScanReport) -> str:
    first, more = report.unread[0], len(report.unread) - 1
    return f"{first.path}: {first.problem}" + (f" (and {more} more traces not read)" if more else "")


def _checked(function: Callable[Arguments, Result]) -> Callable[Arguments, Result]:
    """``function`` with its arguments held to their annotations first (types exactly, numbers finite and in
    range): a wrong one is a PerftoolError naming the parameter, never an error from deep inside. The check is
    built when the function is first called (ten of them take 15 ms to build, and a command calls one)."""
    arguments = functools.cache(lambda: validate_call(config=_STRICT)(_parameters_of(function)))

    @functools.wraps(function)
    def call(*args: Arguments.args, **kwargs: Arguments.kwargs) -> Result:
        try:
            arguments()(*args, **kwargs)
        except ValidationError as exc:
            raise invalid_arguments(function, exc.errors()) from None
        return function(*args, **kwargs)

    return call


def _parameters_of(function: Callable) -> Callable[..., None]:
    """A function with ``function``'s parameters that does nothing: what ``_checked`` validates calls against. Its
    return type is left out, as the result's module is imported only when ``function`` runs."""

    def stand_in(*args: Any, **kwargs: Any) -> None:
        return None

    functools.update_wrapper(stand_in, function, assigned=("__module__", "__name__", "__qualname__"), updated=())
    stand_in.__annotations__ = {k: v for k, v in function.__annotations__.items() if k != "return"}
    stand_in.__signature__ = inspect.signature(function).replace(  # type: ignore[attr-defined]
        return_annotation=inspect.Signature.empty
    )
    return stand_in


@_checked
def load_trace(
    path: PathLike,
    dialect: str | None = None,
    workers: Count | None = None,
    max_bytes: Count | None = None,
    memory: Count | None = None,
) -> Trace:
    """Read a trace file, or the trace of a profiler's output directory, through its dialect
    (:func:`perftool.pipeline.read.load_trace`, which says what each parameter does)."""
    return reader.load_trace(path, dialect, workers, max_bytes, memory=memory)


def _trace_paths(traces: tuple[PathLike, ...], command: str) -> list[str]:
    """The paths of ``traces`` as given to ``command``; at least one, as on the command line."""
    if not traces:
        raise PerftoolError(f"{command}(): traces: give at least one trace")
    return [trace_path(str(t)) for t in traces]


@_checked
def info(
    *traces: PathLike,
    dialect: str | None = None,
    device_spec: PathLike | None = None,
    max_bytes: Count | None = None,
    memory: Count | None = None,
    scheduler: str | None = None,
    workers: Count | None = None,
) -> InfoView | ScanReport:
    """The summary of one trace (an :class:`~perftool.report.views.InfoView`: the trace, its metrics and roofline),
    or of a job (several traces, or a directory of one trace per rank): the ranks' :class:`ScanReport` without
    rules, its ``job`` the view across ranks. ``device_spec``: a device file for the roofline of a device perftool
    does not know, or to override the one the trace names. One uncompressed trace with a ``scheduler`` is decoded by
    the cluster's workers."""
    from perftool.analysis.metrics import compute_metrics
    from perftool.analysis.steps import detect_steps
    from perftool.hardware import load_spec
    from perftool.job.cluster import chosen_scheduler, cluster_decoders
    from perftool.job.ranks import job_listing
    from perftool.report.views import InfoView
    from perftool.roofline.figures import roofline as measure_roofline

    spec = load_spec(str(device_spec)) if device_spec else None
    paths = _trace_paths(traces, "info")
    address = chosen_scheduler(scheduler)
    folders_left: list[str] = []  # beside a directory's one trace: named, not read
    if len(paths) == 1 and os.path.isdir(paths[0]) and len((listing := job_listing(paths)).files) == 1:
        paths, folders_left = listing.files, listing.folders_left
    if len(paths) > 1 or os.path.isdir(paths[0]):
        from perftool.job.captures import why_no_job
        from perftool.job.scan import scan_job
        from perftool.pipeline.scan import ReadOptions

        read = ReadOptions(dialect=dialect, max_bytes=max_bytes, memory=memory)
        report = scan_job(paths, [], read, address, workers)
        if report.job is None:
            raise PerftoolError(f"{', '.join(paths)}: {why_no_job(report)}; give info one trace at a time")
        return report
    decoders = cluster_decoders(address) if address and paths[0] != STDIN else None
    loaded = reader.load_trace(paths[0], dialect=dialect, max_bytes=max_bytes, decoders=decoders, memory=memory)
    steps = detect_steps(loaded)
    return InfoView(loaded, compute_metrics(loaded, steps), measure_roofline(loaded, steps, spec), folders_left)


@_checked
def scan(
    *traces: PathLike,
    rule_dirs: Sequence[PathLike] = (),
    config: PathLike | ProjectConfig | None = None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    device: Family | None = None,
    dialect: str | None = None,
    evidence: Annotated[int, Field(ge=0, le=100)] | None = None,
    max_bytes: Count | None = None,
    memory: Count | None = None,
    scheduler: str | None = None,
    workers: Count | None = None,
    job_steps: Count | None = None,
) -> ScanReport:
    """Run the rules on each trace; the project config (``config``, else the nearest ``perftool.yaml`` or
    ``pyproject.toml`` up to the repository's root) supplies what the arguments leave out. Traces that cannot be
    read are in the report's ``unread`` and a :class:`PerftoolWarning` (:class:`NothingRead` when none could be read).
    ``job_steps``: the steps the whole job runs, where a trace does not record it;
    a fix of a cost paid once (a compile) is then predicted over the job, else bounded over the capture.
    ``memory``: the budget past which a trace's columns are kept on disk (default: the memory available).

    A directory, or several files that say their ranks, is a job of one trace per rank: the ranks are analysed on
    Dask (``scheduler``, an address, else ``workers`` local processes; one worker: here, without Dask) and the
    report carries the job view; traces of different jobs, or of no distributed job, are each reported on their
    own (the report's ``different_jobs`` says what tells the first apart). One uncompressed trace with a
    ``scheduler`` is decoded by the cluster's workers, which read its byte ranges at the same path and send back
    their columns."""
    from perftool.job.cluster import chosen_scheduler, cluster_decoders
    from perftool.job.scan import scan_job
    from perftool.pipeline.scan import ReadOptions, scan_files
    from perftool.rules import catalog

    settings = project(config)
    chosen = catalog.selected(
        catalog.load_catalog(settings, tuple(map(str, rule_dirs))),
        tuple(select) or tuple(settings.select),
        tuple(ignore) + tuple(settings.ignore),
    )
    shown = next(e for e in (evidence, settings.evidence, 5) if e is not None)
    read = ReadOptions(device or settings.device, dialect, shown, max_bytes, job_steps, memory)
    paths = _trace_paths(traces, "scan")
    if STDIN in paths and len(paths) > 1:  # a job's ranks are read where they are analysed, not in this process
        raise PerftoolError(f"{STDIN} (standard input) is scanned only on its own: save it to a file to scan it "
                            "with other traces")  # fmt: skip
    if len(paths) > 1 or any(os.path.isdir(p) for p in paths):
        report = scan_job(paths, chosen, read, scheduler or settings.scheduler, workers or settings.workers)
    else:  # one trace: with a scheduler, its byte ranges are decoded on the cluster
        address = chosen_scheduler(scheduler or settings.scheduler)
        report = scan_files(paths, chosen, read, cluster_decoders(address) if address and paths != [STDIN] else None)
    report.config = settings.file
    if report.unread and not report.traces:
        raise NothingRead(report)
    if report.unread:
        warnings.warn(f"not every trace was read: {_unread(report)}", PerftoolWarning, stacklevel=3)
    return report


@_checked
def gate(
    baseline: PathLike | None,
    candidate: PathLike,
    budget: PathLike | None = None,
    *,
    config: PathLike | ProjectConfig | None = None,
    rule_dirs: Sequence[PathLike] = (),
    fail_on: FailOn | None = None,
    threshold: Annotated[float, Field(gt=0, lt=1)] | None = None,
    alpha: Annotated[float, Field(gt=0, lt=0.5)] | None = None,
    allow_mismatch: bool = False,
    device: Family | None = None,
    dialect: str | None = None,
    max_bytes: Count | None = None,
    memory: Count | None = None,
    scheduler: str | None = None,
    workers: Count | None = None,
) -> GateResult:
    """Compare ``candidate`` with ``baseline`` (traces, jobs' directories, or saved scan JSON), and/or hold it to
    ``budget``; jobs are compared rank by rank, their ranks analysed on Dask as :func:`scan` does."""
    from perftool.gate.policy import load_budget
    from perftool.gate.verdict import GateOptions, run_gate
    from perftool.job.cluster import Cluster
    from perftool.pipeline.scan import ReadOptions
    from perftool.rules import catalog

    if baseline is None and budget is None:
        raise PerftoolError("gate needs a baseline, a budget, or both")
    settings = project(config)
    changed = {"threshold": threshold, "alpha": alpha}
    options = GateOptions(
        policy=settings.gate.model_copy(update={k: v for k, v in changed.items() if v is not None}),
        fail_on=fail_on or settings.fail_on or ("error" if baseline is not None else "never"),
        allow_mismatch=allow_mismatch,
        cluster=Cluster(scheduler or settings.scheduler, workers or settings.workers),
    )
    chosen = catalog.selected(
        catalog.load_catalog(settings, tuple(map(str, rule_dirs))), tuple(settings.select), tuple(settings.ignore)
    )
    result = run_gate(
        trace_path(str(candidate)),
        None if baseline is None else trace_path(str(baseline)),
        load_budget(str(budget)) if budget else None,
        chosen,
        options,
        ReadOptions(device or settings.device, dialect, max_bytes=max_bytes, memory=memory),
    )
    result.config = settings.file
    return result


@_checked
def diff(
    baseline: PathLike,
    candidate: PathLike,
    *,
    by: Level = "kernel",
    op_maps: Sequence[PathLike] = (),
    dialect: str | None = None,
    max_bytes: Count | None = None,
    memory: Count | None = None,
    scheduler: str | None = None,
    workers: Count | None = None,
) -> DiffResult:
    """What changed between two traces (or two jobs' directories, rank by rank; a directory holding one trace is
    that trace) per ``by`` (kernel, op, category or track): each key's change, and contributions that add up to the
    change of the mean steady step."""
    from perftool.diff.files import diff_paths
    from perftool.job.cluster import Cluster
    from perftool.pipeline.scan import ReadOptions

    read = ReadOptions(dialect=dialect, max_bytes=max_bytes, memory=memory)
    return diff_paths(
        trace_path(str(baseline)),
        trace_path(str(candidate)),
        by,
        tuple(map(str, op_maps)),
        read,
        Cluster(scheduler, workers),
    )


@_checked
def emulate(config: PathLike, overrides: Sequence[str] = (), *, trace_file: PathLike | None = None) -> Run:
    """Run an emulator config (``overrides`` as ``--set`` takes them: ``loop_size=32``). ``trace_file``: write the
    run's trace there (``.json`` or ``.json.gz``), or for a config of several replicas a directory of one trace per
    rank; a path that cannot be written, or a trace too long to build, is refused before the run."""
    from perftool.common.output import check_directory, check_writable
    from perftool.emulator import config as emulator_config
    from perftool.emulator.full_run import InfeasibleConfig
    from perftool.emulator.full_run import run as run_emulator
    from perftool.emulator.trace_writer import check_job_directory, check_length, write_job, write_trace

    loaded: emulator_config.EmulatorConfig = emulator_config.load_config(config, list(overrides))
    replicas = loaded.replicas.count if loaded.replicas is not None else 1
    job = replicas > 1
    if trace_file is not None:
        if job:
            check_directory(str(trace_file))
            check_job_directory(str(trace_file), replicas)
        else:
            check_writable(str(trace_file), [str(config)])
        check_length(loaded, str(trace_file))
    try:
        run = run_emulator(loaded)
    except InfeasibleConfig as exc:
        raise PerftoolError(f"{config}: {exc}") from None
    if trace_file is not None:
        (write_job if job else write_trace)(run, str(trace_file))
    return run


@_checked
def calibrate(
    trace: PathLike,
    overrides: Sequence[str] = (),
    *,
    device: str | None = None,
    at_batch: tuple[Count, PathLike] | None = None,
    dialect: str | None = None,
    max_bytes: Count | None = None,
    memory: Count | None = None,
    scheduler: str | None = None,
    workers: Count | None = None,
    write_config: PathLike | None = None,
) -> Calibration:
    """Fit an emulator config to ``trace`` (a job's directory: its slowest rank) and check the fit on what it was not
    fitted to; ``overrides`` (``batch_size=64``) say what the trace does not. ``at_batch`` (batch size, trace): a
    capture of the same job at another batch size, whose step the fit must then predict. The result's ``warnings``
    name each check that failed; ``.document()`` is the fitted config, for :func:`emulate` and :func:`tune`, which
    ``write_config`` writes as YAML (the path checked before the fit)."""
    import yaml

    from perftool.common.output import check_writable, write_text
    from perftool.emulator import config as emulator_config
    from perftool.job.cluster import Cluster
    from perftool.pipeline.scan import ReadOptions
    from perftool.tune.calibration import calibrate as fit_trace

    other = (at_batch[0], str(at_batch[1])) if at_batch else None
    if write_config is not None:
        check_writable(str(write_config), [str(trace), *([other[1]] if other else [])])
    given: dict[str, Any] = {}
    for item in overrides:
        emulator_config.apply_override(given, item, "--set", None)
    read = ReadOptions(dialect=dialect, max_bytes=max_bytes, memory=memory)
    fitted = fit_trace(trace_path(str(trace)), device, given, Cluster(scheduler, workers), other, read)
    if write_config is not None:
        write_text(yaml.safe_dump(fitted.document(), sort_keys=False), str(write_config))
    return fitted


@_checked
def tune(
    config: PathLike,
    overrides: Sequence[str] = (),
    *,
    strategy: Strategy | None = None,
    evaluations: Count | None = None,
    jobs: Annotated[int, Field(ge=1, le=256)] = 1,
    scheduler: str | None = None,
    write_best: PathLike | None = None,
    results: PathLike | None = None,
    emit_trace: PathLike | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> TuneResult:
    """Sweep the knobs in the config's ``tune:`` section on the emulator, in ``jobs`` processes or on the Dask
    cluster at ``scheduler``; ``on_start(strategy, total)`` and ``on_progress(evaluations, pruned)`` report it.
    After the sweep, ``write_best`` gets the best configuration as a config :func:`emulate` runs, ``results`` every
    configuration's figures (``.json`` or ``.csv``) and ``emit_trace`` the best configuration's trace: each path is
    checked before the sweep, and all are rendered before any is written."""
    from perftool.common.output import check_distinct, check_writable, write_bytes
    from perftool.emulator.full_run import run as run_emulator
    from perftool.emulator.trace_writer import check_length, encode_for, trace_bytes
    from perftool.report import tune_best_yaml, tune_results_csv, tune_results_json
    from perftool.tune.search import tune as run_tune
    from perftool.tune.spec import load_tune_config

    outputs = {"write_best": write_best, "results": results, "emit_trace": emit_trace}
    for path in outputs.values():
        if path is not None:
            check_writable(str(path), [str(config)])
    check_distinct(str(path) for path in outputs.values() if path is not None)
    if results is not None and Path(results).suffix not in (".json", ".csv"):
        raise PerftoolError(f"{results}: {parameter('results')} writes .json or .csv")
    settings = {"strategy": strategy, "budget": evaluations}
    loaded = load_tune_config(config, [*overrides, *(f"tune.{k}={v}" for k, v in settings.items() if v)])
    result = run_tune(loaded, jobs, on_start, on_progress, scheduler)
    files: dict[str, bytes] = {}
    if write_best is not None:
        files[str(write_best)] = tune_best_yaml.render(result, str(config)).encode()
    if results is not None:
        written = tune_results_json if Path(results).suffix == ".json" else tune_results_csv
        files[str(results)] = written.render(result).encode()
    if emit_trace is not None:
        best = result.best_config()
        check_length(best, str(emit_trace))
        files[str(emit_trace)] = encode_for(str(emit_trace), trace_bytes(run_emulator(best)))
    for path, data in files.items():
        write_bytes(data, path)
    return result


@_checked
def roofline(trace: PathLike | Trace, *, device_spec: PathLike | None = None, dialect: str | None = None) -> Roofline:
    """How far the trace's steady window runs from its device's peaks: MFU, and per op its FLOPs, bytes, achieved
    TFLOP/s and time lost below the roofline (``.to_pandas()`` gives the op table). ``device_spec``: a device file
    for a device perftool does not know, or to override the one the trace names."""
    from perftool.hardware import load_spec
    from perftool.roofline.figures import roofline as measure_roofline

    loaded = trace if isinstance(trace, Trace) else reader.load_trace(str(trace), dialect=dialect)
    spec = load_spec(str(device_spec)) if device_spec else None
    return measure_roofline(loaded, spec=spec)


@_checked
def project(config: PathLike | ProjectConfig | None = None) -> ProjectConfig:
    """The project settings: ``config`` as given or read from its file, else the nearest found from the working
    directory up to its repository's root, else none."""
    if isinstance(config, ProjectConfig):
        return config
    return load_project(None if config is None else str(config)) or ProjectConfig()


@_checked
def rules(rule_dirs: Sequence[PathLike] = (), *, config: PathLike | ProjectConfig | None = None) -> RulesReport:
    """The rule catalogue: the built-in rules, then those in ``rule_dirs`` and the project's, with the project's
    overrides applied (severities, thresholds, rules turned off), in id order."""
    from perftool.rules import catalog

    return catalog.RulesReport(rules=catalog.load_catalog(project(config), tuple(map(str, rule_dirs))))


@_checked
def rule(name: str, rule_dirs: Sequence[PathLike] = (), *, config: PathLike | ProjectConfig | None = None) -> Rule:
    """One rule of the catalogue (:func:`rules`), by id (``PT001``) or name."""
    from perftool.rules import catalog

    return catalog.find_rule(rules(rule_dirs, config=config).rules, name)


def metrics() -> MetricsReport:
    """The shared metrics that info, the rules, gate and tune read: each one's name, unit and meaning."""
    from perftool.analysis import METRICS
    from perftool.analysis.metrics import unit_of
    from perftool.common.results import Metric, MetricsReport

    listed = [Metric(name=name, unit=unit_of(name), meaning=meaning) for name, meaning in METRICS.items()]
    return MetricsReport(metrics=listed)


def knobs() -> KnobsReport:
    """The settings tune sweeps and fixes set: where the config holds each, its unit, the values it takes, the
    device families that have it and what it does."""
    from perftool.common.results import Knob, KnobsReport
    from perftool.emulator.config import TUNABLES, section_of

    return KnobsReport(
        knobs=[
            Knob(
                name=name,
                config=".".join(section_of(name)),
                label=tunable.label,
                unit=tunable.unit,
                accepts=tunable.accepts,
                families=tunable.families,
                swept=tunable.swept,
                meaning=tunable.meaning,
            )
            for name, tunable in TUNABLES.items()
        ]
    )


READ: dict[str, str] = {  # files perftool reads, described as it checks them: name -> "module:class" of the model
    "config": "perftool.emulator.config:EmulatorConfig",
    "tune": "perftool.tune.spec:TuneConfig",
    "findings": "perftool.rules.findings:ScanReport",  # gate reads saved scan results too
    "rule": "perftool.rules.model:Rule",
    "project": "perftool.api.project:ProjectConfig",
    "budget": "perftool.gate.policy:Budget",
}
WRITTEN: dict[str, str] = {  # documents perftool writes, described as it writes them (computed fields included)
    "info": "perftool.common.results:InfoReport",
    "job-info": "perftool.rules.findings:JobInfoReport",
    "emulate-result": "perftool.common.results:EmulateReport",
    "tune-result": "perftool.tune.documents:TuneReport",
    "tune-rows": "perftool.tune.documents:TuneRowsReport",
    "calibrate-result": "perftool.common.results:CalibrateReport",
    "gate-result": "perftool.gate.verdict:GateResult",
    "diff-result": "perftool.diff.files:DiffResult",
    "metrics": "perftool.common.results:MetricsReport",
    "knobs": "perftool.common.results:KnobsReport",
    "rules": "perftool.rules.catalog:RulesReport",
}
SCHEMAS = {**READ, **WRITTEN}


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a file perftool reads or writes, by its name in :data:`SCHEMAS` (``config``,
    ``findings``, ``gate-result``, …)."""
    import importlib

    if name not in SCHEMAS:
        raise PerftoolError(f"no schema {name!r} (known: {', '.join(sorted(SCHEMAS))})")
    module, _, model = SCHEMAS[name].partition(":")
    mode = "validation" if name in READ else "serialization"
    described: dict[str, Any] = getattr(importlib.import_module(module), model).model_json_schema(
        by_alias=True, mode=mode
    )
    return described
