"""``perftool mcp``: a Model Context Protocol server over stdio, so that a coding agent drives perftool through its API.

Each tool is a function of :mod:`perftool.api` taking the paths and options it takes, and answers with the JSON
document ``--format json`` writes for it (its schema: ``perftool schema NAME``), kept to a size an agent reads: a
scan's largest findings (``top``) with a few occurrences each (``evidence``), a diff's largest rows, a sweep's best
configurations, and each per-step series its first ``steps`` steps (the document's count says how many there are: a
scan's ``steps``, the metric ``steps.steady``). A bad path, option or argument is the one line the command line
(or the API) would print, as the tool's error; standard input, which carries the protocol, is never read as a trace.

Needs the official SDK (``pip install 'mcp>=2'``, perftool's ``mcp`` extra); :func:`serve` says so in one line where
it is missing.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable
from typing import Any, TypeVar

from perftool import api
from perftool.common.choices import FailOn, Level
from perftool.common.errors import PerftoolError, invalid_arguments, one_line
from perftool.common.version import __version__
from perftool.report.registry import render_as
from perftool.rules.findings import ScanReport
from perftool.rules.model import Family

TOP_FINDINGS = 10  # a scan's findings per trace, the largest cost first, unless the agent asks for more
EVIDENCE = 3  # occurrences per finding
TOP_ROWS = 20  # a diff's rows per trace pair, the largest contribution first
TOP_CONFIGS = 5  # a sweep's best configurations
RANKS = 8  # a job's per-rank documents: its slowest ranks' (the job view keeps a row for every rank)
STEPS = 32  # each per-step series' first steps: a trace's steps grow with the capture, an agent's reading does not
SERIES = frozenset(  # the keys of the documents' per-step series: a list, or an object of lists (a rank's per_step)
    {"step_durations_us", "warmup_durations_us", "step_starts_us", "step_numbers", "step_times_us", "per_step"}
)
SERIES_PER_RANK = "step_times"  # gate's: a list of ranks, each an object of series

Tool = TypeVar("Tool", bound=Callable[..., str])


def _document(shown: str, value: Any, steps: int = STEPS) -> str:
    """``value`` as ``--format json`` writes it (some write it as blocks of bytes), each per-step series cut to its
    first ``steps`` steps."""
    written = render_as(shown, value, "json")
    text = written if isinstance(written, str) else b"".join(written).decode()
    return json.dumps(_first_steps(json.loads(text), max(steps, 0)), indent=2, ensure_ascii=False)


def _first_steps(value: Any, steps: int) -> Any:
    """A decoded document whose per-step series (:data:`SERIES`) hold their first ``steps`` steps."""
    if isinstance(value, list):
        return [_first_steps(item, steps) for item in value]
    if not isinstance(value, dict):
        return value
    return {
        key: _series(item, steps)
        if key in SERIES
        else [_series(rank, steps) for rank in item]
        if key == SERIES_PER_RANK and isinstance(item, list)
        else _first_steps(item, steps)
        for key, item in value.items()
    }


def _series(value: Any, steps: int) -> Any:
    """A per-step series cut to its first ``steps``: a list, or each list of an object."""
    if isinstance(value, list):
        return value[:steps]
    if isinstance(value, dict):
        return {key: _series(item, steps) for key, item in value.items()}
    return value


def _slowest(report: ScanReport, ranks: int) -> ScanReport:
    """A job's report holding the documents of its ``ranks`` slowest ranks (the rank the others wait for first,
    then the longest steady step), in rank order, beside the job view of all; a trace alone as it is."""
    if report.job is None or len(report.traces) <= ranks:
        return report
    job = report.job
    order = sorted(job.ranks, key=lambda row: (row.rank != job.slowest_rank, -(row.step_time_us or 0.0)))
    kept = {row.path for row in order[: max(ranks, 0)]}
    return report.model_copy(update={"traces": [trace for trace in report.traces if trace.path in kept]})


def _files(*paths: str) -> None:
    """Refuse standard input as a file to read: over stdio it carries the protocol, and a trace read from it would
    take the client's messages. Refuse a pipe or a device too: opening one waits for a writer, and the server with
    it."""
    try:
        stdin = os.fstat(0)
    except OSError:  # closed: no file is standard input
        stdin = None
    for path in paths:
        try:
            found = os.stat(path) if path != "-" else None
        except (OSError, ValueError):  # missing, unreadable or a NUL in the name: the API says which, in one line
            continue
        if found is None or (stdin is not None and os.path.samestat(found, stdin)):
            raise PerftoolError(f"{path}: standard input carries this server's protocol: give the trace's file")
        if not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode)):
            raise PerftoolError(f"{path}: not a file or a directory (a pipe or a device would hold up the server)")


def info(traces: list[str], steps: int = STEPS, ranks: int = RANKS) -> str:
    """Summarise a trace (or a job: a directory of one trace per rank, or several files): device, steps, where
    the time goes, the top device ops and the roofline; each per-step series holds its first `steps` steps, and a
    job the documents of its `ranks` slowest ranks beside its view of every rank. JSON as `perftool info --format
    json` writes it."""
    _files(*traces)
    summary = api.info(*traces)
    if isinstance(summary, ScanReport):
        return _document("job-info", _slowest(summary, ranks), steps)
    return _document("info", summary, steps)


def scan(
    traces: list[str],
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    device: Family | None = None,
    top: int = TOP_FINDINGS,
    evidence: int = EVIDENCE,
    steps: int = STEPS,
    ranks: int = RANKS,
) -> str:
    """Run perftool's rules on a trace (or a job's directory): each finding with its cost, the fix with knob
    values checked on an emulator fitted to the trace, and the predicted gain. The `top` largest findings of each
    trace are kept, each with `evidence` occurrences, each per-step series its first `steps` steps, and of a job
    the traces of its `ranks` slowest ranks beside the job view of every rank. JSON as `perftool scan --format json`
    writes it."""
    _files(*traces)
    report = _slowest(
        api.scan(*traces, select=select or (), ignore=ignore or (), device=device, evidence=evidence), ranks
    )
    kept = [trace.model_copy(update={"findings": trace.findings[: max(top, 0)]}) for trace in report.traces]
    return _document("scan", report.model_copy(update={"traces": kept}), steps)


def diff(baseline: str, candidate: str, by: Level = "kernel", top: int = TOP_ROWS, steps: int = STEPS) -> str:
    """What changed between two traces (or two jobs): the change of the mean steady step, split by kernel, op,
    category or track (`by`), the `top` largest contributions of each pair; each side's steps, the first `steps`.
    JSON as `perftool diff --format json`."""
    _files(baseline, candidate)
    result = api.diff(baseline, candidate, by=by)
    kept = [pair.model_copy(update={"rows": pair.rows[: max(top, 0)]}) for pair in result.diffs]
    return _document("diff", result.model_copy(update={"diffs": kept}), steps)


def gate(
    baseline: str,
    candidate: str,
    fail_on: FailOn | None = None,
    threshold: float | None = None,
    allow_mismatch: bool = False,
    steps: int = STEPS,
) -> str:
    """Whether a candidate trace (or saved scan) regressed against a baseline: step time with a significance
    test, counters, new findings; status pass, warn or fail. Two different jobs (device, world size) are refused
    unless `allow_mismatch`. Each side's steps tested, the first `steps`. JSON as `perftool gate --format json`."""
    _files(baseline, candidate)
    result = api.gate(baseline, candidate, fail_on=fail_on, threshold=threshold, allow_mismatch=allow_mismatch)
    return _document("gate", result, steps)


def explain_rule(rule: str) -> str:
    """What a rule (an id such as PT001, or its name) finds, why it matters, how it is fixed, with its thresholds
    and template values. JSON as `perftool rules explain RULE --format json` writes it."""
    return _document("rule", api.rule(rule))


def calibrate(trace: str, overrides: list[str] | None = None) -> str:
    """Fit the emulator to a trace, checked on what the fit did not use; the fitted config is what `tune`
    sweeps (`overrides` such as `knobs.batch_size=64` say what the trace does not). JSON as `perftool calibrate`."""
    from perftool.report.views import CalibrateView

    _files(trace)
    return _document("calibrate", CalibrateView(api.calibrate(trace, overrides or ()), None))


def tune(
    config: str, overrides: list[str] | None = None, evaluations: int | None = None, top: int = TOP_CONFIGS
) -> str:
    """Sweep the knobs of an emulator config's `tune:` section and report the best feasible configuration with its
    predicted speed-up (the `top` best listed). JSON as `perftool tune --format json` writes it."""
    from perftool.report.views import TuneView

    _files(config)
    result = api.tune(config, overrides or (), evaluations=evaluations)
    return _document("tune", TuneView(result, config, max(top, 1)))


TOOLS: tuple[Callable[..., str], ...] = (info, scan, diff, gate, explain_rule, calibrate, tune)


def server() -> Any:
    """The MCP server, its tools registered (an ``mcp.server.mcpserver.MCPServer``)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class Server(MCPServer):
        """The SDK's server, whose arguments of the wrong type or value are the one line the API gives them."""

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                tool = next(tool for tool in TOOLS if tool.__name__ == name)  # a known tool: its arguments were checked
                problem = invalid_arguments(tool, exc.__cause__.errors())
                raise ToolError(f"Error executing tool {name}: perftool: error: {one_line(str(problem))}") from None

    made = Server(
        "perftool",
        version=__version__,
        instructions="perftool reads ML training and inference traces (PyTorch/Kineto, torch_npu, jax.profiler) "
        "and says what is slow, what it costs and which knob fixes it. Start with scan on the trace.",
        log_level="WARNING",
    )
    for tool in TOOLS:
        made.add_tool(_one_line_errors(tool, ToolError), name=tool.__name__, description=tool.__doc__)
    return made


def _one_line_errors(tool: Tool, error: type[Exception]) -> Tool:
    """``tool``, whose bad input is the tool's error in the one line the command line prints (never a traceback)."""

    @functools.wraps(tool)
    def answered(*args: Any, **kwargs: Any) -> str:
        try:
            return tool(*args, **kwargs)
        except PerftoolError as exc:
            raise error(f"perftool: error: {one_line(str(exc))}") from None

    return answered  # type: ignore[return-value]


def serve() -> None:
    """Run the server over stdio until the client closes it."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise PerftoolError(
            "perftool mcp needs the Model Context Protocol SDK: pip install 'mcp>=2' (perftool's mcp extra)"
        ) from None
    server().run("stdio")
