"""``perftool mcp``: a Model Context Protocol server over stdio, so that a coding agent drives perftool through its API.

Each tool is a function of :mod:`perftool.api` taking the paths and options it takes, and answers with the JSON
document ``--format json`` writes for it (its schema: ``perftool schema NAME``), kept to a size an agent reads: a
scan's largest findings (``top``) with a few occurrences each (``evidence``), a diff's largest rows, a sweep's best
configurations. A bad path or option is the one line the command line would print, as the tool's error.

Needs the official SDK (``pip install 'mcp>=2'``, perftool's ``mcp`` extra); :func:`serve` says so in one line where
it is missing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from perftool import api
from perftool.common.choices import FailOn, Level
from perftool.common.errors import PerftoolError, one_line
from perftool.common.version import __version__
from perftool.report.registry import render_as
from perftool.rules.findings import ScanReport
from perftool.rules.model import Family

TOP_FINDINGS = 10  # a scan's findings per trace, the largest cost first, unless the agent asks for more
EVIDENCE = 3  # occurrences per finding
TOP_ROWS = 20  # a diff's rows per trace pair, the largest contribution first
TOP_CONFIGS = 5  # a sweep's best configurations

Tool = TypeVar("Tool", bound=Callable[..., str])


def _document(shown: str, value: Any) -> str:
    """``value`` as ``--format json`` writes it (some write it as blocks of bytes)."""
    written = render_as(shown, value, "json")
    return written if isinstance(written, str) else b"".join(written).decode()


def info(traces: list[str]) -> str:
    """Summarise a trace (or a job: a directory of one trace per rank, or several files): device, steps, where
    the time goes, the top device ops and the roofline. JSON as `perftool info --format json` writes it."""
    summary = api.info(*traces)
    return _document("job-info" if isinstance(summary, ScanReport) else "info", summary)


def scan(
    traces: list[str],
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    device: Family | None = None,
    top: int = TOP_FINDINGS,
    evidence: int = EVIDENCE,
) -> str:
    """Run perftool's rules on a trace (or a job's directory): each finding with its cost, the fix with knob
    values checked on an emulator fitted to the trace, and the predicted gain. The `top` largest findings of each
    trace are kept, each with `evidence` occurrences. JSON as `perftool scan --format json` writes it."""
    report = api.scan(*traces, select=select or (), ignore=ignore or (), device=device, evidence=evidence)
    kept = [trace.model_copy(update={"findings": trace.findings[: max(top, 0)]}) for trace in report.traces]
    return _document("scan", report.model_copy(update={"traces": kept}))


def diff(baseline: str, candidate: str, by: Level = "kernel", top: int = TOP_ROWS) -> str:
    """What changed between two traces (or two jobs): the change of the mean steady step, split by kernel, op,
    category or track (`by`), the `top` largest contributions of each pair. JSON as `perftool diff --format json`."""
    result = api.diff(baseline, candidate, by=by)
    kept = [pair.model_copy(update={"rows": pair.rows[: max(top, 0)]}) for pair in result.diffs]
    return _document("diff", result.model_copy(update={"diffs": kept}))


def gate(baseline: str, candidate: str, fail_on: FailOn | None = None, threshold: float | None = None) -> str:
    """Whether a candidate trace (or saved scan) regressed against a baseline: step time with a significance
    test, counters, new findings; status pass, warn or fail. JSON as `perftool gate --format json` writes it."""
    return _document("gate", api.gate(baseline, candidate, fail_on=fail_on, threshold=threshold))


def explain_rule(rule: str) -> str:
    """What a rule (an id such as PT001, or its name) finds, why it matters, how it is fixed, with its thresholds
    and template values. JSON as `perftool rules explain RULE --format json` writes it."""
    return _document("rule", api.rule(rule))


def calibrate(trace: str, overrides: list[str] | None = None) -> str:
    """Fit the emulator to a trace, checked on what the fit did not use; the fitted config is what `tune`
    sweeps (`overrides` such as `knobs.batch_size=64` say what the trace does not). JSON as `perftool calibrate`."""
    from perftool.report.views import CalibrateView

    return _document("calibrate", CalibrateView(api.calibrate(trace, overrides or ()), None))


def tune(
    config: str, overrides: list[str] | None = None, evaluations: int | None = None, top: int = TOP_CONFIGS
) -> str:
    """Sweep the knobs of an emulator config's `tune:` section and report the best feasible configuration with its
    predicted speed-up (the `top` best listed). JSON as `perftool tune --format json` writes it."""
    from perftool.report.views import TuneView

    result = api.tune(config, overrides or (), evaluations=evaluations)
    return _document("tune", TuneView(result, config, max(top, 1)))


TOOLS: tuple[Callable[..., str], ...] = (info, scan, diff, gate, explain_rule, calibrate, tune)


def server() -> Any:
    """The MCP server, its tools registered (an ``mcp.server.mcpserver.MCPServer``)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    made = MCPServer(
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
