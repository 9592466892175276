"""What gate compares: a trace, scanned on the spot, or a scan saved with ``perftool scan --format json``.

Either way one side is a :class:`~perftool.rules.findings.TraceFindings`: metrics, the per-step
samples of the steady state, findings with fingerprints, and, for emulator traces, the config; or, for
a job (a directory of rank traces, or a job's scan JSON), one per rank.
Two sides are comparable when they are the same job: the same device family, and for emulator
traces the same device and workload (the run's length, the seed and the knobs may differ: the
knobs are what a change usually tries).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from dataclasses import dataclass
from dataclasses import field as default
from typing import Any

from pydantic import ValidationError

from perftool import hardware
from perftool.common import limits
from perftool.common.errors import PerftoolError
from perftool.common.names import names_only_a_place
from perftool.common.yamlfile import read_document, validation_error
from perftool.emulator.config import Workload
from perftool.job.captures import why_no_job
from perftool.job.cluster import LOCAL, Cluster
from perftool.job.scan import scan_job
from perftool.pipeline.scan import ReadOptions, scan_trace
from perftool.rules.findings import EmulatorRun, Finding, ScanReport, TraceFindings
from perftool.rules.model import Rule
from perftool.trace.loader import GZIP_MAGIC, TrailingGzipData, inflate_gzip, read_error

_SCAN_JSON = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"perftool\.findings/')
# may differ between comparable emulator runs
FREE_WORKLOAD_FIELDS = frozenset({"steps", "dataset_samples", "epochs", "name"})


@dataclass
class Side:
    """One side of the comparison: one trace, or a job's ranks (by rank) with the job's own findings."""

    path: str
    traces: dict[int | None, TraceFindings]  # {None: the trace} for a single trace
    job_findings: list[Finding] = default(default_factory=list)
    saved: bool = False  # read from a saved scan result: the trace itself may not be at hand

    @property
    def is_job(self) -> bool:
        return None not in self.traces

    def describe(self) -> str:
        return f"a job of {len(self.traces)} ranks" if self.is_job else "one trace"


def load_side(path: str, rules: list[Rule], read: ReadOptions, cluster: Cluster = LOCAL) -> Side:
    """One side of the comparison: a scan's JSON, a trace scanned here, or a job's directory scanned on Dask."""
    if os.path.isdir(path):
        report = scan_job([path], rules, read, cluster.scheduler, cluster.workers)
        bad = [f"rank {u.rank if u.rank is not None else '?'} ({u.path}): {u.problem}" for u in report.unread]
        if bad:
            raise PerftoolError(f"{path}: a job with ranks that cannot be read: {'; '.join(bad)}")
        return _side(path, report)
    if _is_scan_json(path):
        side = _side(path, _from_scan_json(path))
        side.saved = True
        return side
    trace = scan_trace(read.load(path, "scan"), rules, read)
    return Side(path, {None: trace})


def _side(path: str, report: ScanReport) -> Side:
    if report.job is None:
        if len(report.traces) != 1:
            raise PerftoolError(f"{path}: {why_no_job(report)}; gate compares one trace with one, or a job with a job")
        return Side(path, {None: report.traces[0]})
    return Side(path, {trace.rank: trace for trace in report.traces}, report.job.findings)


def _gunzip(path: str, data: bytes) -> bytes:
    """Decompress a gzipped scan result as the trace loader does, refusing one that inflates past the document limit."""
    chunks, size = [], 0
    try:
        for chunk in inflate_gzip(io.BytesIO(data)):
            size += len(chunk)
            if size > limits.MAX_DOCUMENT_BYTES:
                raise PerftoolError(
                    f"{path}: scan results larger than {limits.size_text(limits.MAX_DOCUMENT_BYTES)} are refused"
                )
            chunks.append(chunk)
    except (EOFError, zlib.error, TrailingGzipData) as exc:
        raise read_error(path, exc) from None
    return b"".join(chunks)


def _is_scan_json(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
            if head[:2] == GZIP_MAGIC:
                with gzip.open(path, "rb") as unzipped:
                    head = unzipped.read(512)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False  # the trace loader reports what is wrong with the file
    return bool(_SCAN_JSON.match(head))


def _from_scan_json(path: str) -> ScanReport:
    data = read_document(path, "scan result")
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(path, data)
    try:
        report = ScanReport.model_validate_json(data)
    except ValidationError as exc:
        raise validation_error(f"{path}: not a perftool scan result", None, exc) from None
    return report


def differences(baseline: TraceFindings, candidate: TraceFindings) -> list[str]:
    """What makes two sides different jobs (empty when they are comparable)."""
    found = []
    if baseline.family != candidate.family:
        found.append(f"device family {baseline.family} → {candidate.family}")
    elif baseline.device and candidate.device and not _same_device(baseline.device, candidate.device):
        found.append(f"device {baseline.device} → {candidate.device}")  # a side saved before devices were named: ""
    if baseline.world_size != candidate.world_size and None not in (baseline.world_size, candidate.world_size):
        found.append(f"world size {baseline.world_size} → {candidate.world_size} ranks")
    if (baseline.emulator is None) != (candidate.emulator is None):
        kinds = ["an emulator trace" if side.emulator else "a profiler trace" for side in (baseline, candidate)]
        found.append(f"baseline is {kinds[0]}, candidate is {kinds[1]}")
    elif baseline.emulator is not None and candidate.emulator is not None:
        found += _config_differences(baseline.emulator, candidate.emulator)
    return found


def _same_device(baseline: str, candidate: str) -> bool:
    """Whether two sides may be the same device: the same name; or one names no model, only where its work ran
    (torch_npu's text export "NPU" beside its db export's "NPU (Ascend910B)"); or, where one names only its vendor
    ("AMD Instinct", as a result saved before perftool named the model its units make it), a model of that vendor."""
    if baseline == candidate or names_only_a_place(baseline) or names_only_a_place(candidate):
        return True
    vendors = [hardware.vendor_only(name) or getattr(hardware.identify({"name": name}), "vendor", None)
               for name in (baseline, candidate)]  # fmt: skip
    return vendors[0] == vendors[1] and any(map(hardware.vendor_only, (baseline, candidate)))


def _config_differences(base: EmulatorRun, cand: EmulatorRun) -> list[str]:
    found = []
    if base.device != cand.device:
        found.append(f"emulator device {base.device} → {cand.device}")
    overrides = [(side.model_extra or {}).get("device_overrides") for side in (base, cand)]
    if overrides[0] != overrides[1]:
        found.append(f"device constants {overrides[0] or 'as profiled'} → {overrides[1] or 'as profiled'}")
    for field in sorted((base.workload.keys() | cand.workload.keys()) - FREE_WORKLOAD_FIELDS):
        before, after = _workload_field(base, field), _workload_field(cand, field)
        if before != after:
            found.append(f"workload.{field} {before} → {after}")
    return found


def _workload_field(run: EmulatorRun, field: str) -> Any:
    """A workload field as the run had it: a field a result saved before it existed takes its default."""
    known = Workload.model_fields.get(field)
    unset = known.get_default() if known is not None and not known.is_required() else None
    return run.workload.get(field, unset)
