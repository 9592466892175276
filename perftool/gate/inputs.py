"""What gate compares: a trace, scanned on the spot, or a scan saved with ``perftool scan --format json``.

Either way one side is a :class:`~perftool.rules.findings.TraceFindings`: metrics, the per-step
samples of the steady state, findings with fingerprints, and, for emulator traces, the config.
Two sides are comparable when they are the same job: the same device family, and for emulator
traces the same device and workload (the run's length, the seed and the knobs may differ: the
knobs are what a change usually tries).
"""

from __future__ import annotations

import gzip
import io
import re
import zlib

from pydantic import ValidationError

from perftool import limits
from perftool.errors import PerftoolError
from perftool.rules.engine import ReadOptions, scan_trace
from perftool.rules.findings import EmulatorRun, ScanReport, TraceFindings
from perftool.rules.model import Rule
from perftool.trace.loader import GZIP_MAGIC, TrailingGzipData, inflate_gzip, read_error
from perftool.traces import load_trace
from perftool.yamlfile import read_document, validation_error

_SCAN_JSON = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"perftool\.findings/')
FREE_WORKLOAD_FIELDS = frozenset({"steps", "name"})  # may differ between comparable emulator runs


def load_side(path: str, rules: list[Rule], read: ReadOptions) -> TraceFindings:
    """One side of the comparison, from a scan's JSON or by scanning a trace."""
    if _is_scan_json(path):
        return _from_scan_json(path)
    return scan_trace(load_trace(path, dialect=read.dialect, max_bytes=read.max_bytes), rules, read.family)


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


def _from_scan_json(path: str) -> TraceFindings:
    data = read_document(path, "scan result")
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(path, data)
    try:
        report = ScanReport.model_validate_json(data)
    except ValidationError as exc:
        raise validation_error(f"{path}: not a perftool scan result", None, exc) from None
    if len(report.traces) != 1:
        raise PerftoolError(f"{path}: holds {len(report.traces)} traces; gate compares one trace with one")
    return report.traces[0]


def differences(baseline: TraceFindings, candidate: TraceFindings) -> list[str]:
    """What makes two sides different jobs (empty when they are comparable)."""
    found = []
    if baseline.family != candidate.family:
        found.append(f"device family {baseline.family} → {candidate.family}")
    elif baseline.device and candidate.device and baseline.device != candidate.device:  # saved before names: unknown
        found.append(f"device {baseline.device} → {candidate.device}")
    if baseline.world_size != candidate.world_size and None not in (baseline.world_size, candidate.world_size):
        found.append(f"world size {baseline.world_size} → {candidate.world_size} ranks")
    if (baseline.emulator is None) != (candidate.emulator is None):
        kinds = ["an emulator trace" if side.emulator else "a profiler trace" for side in (baseline, candidate)]
        found.append(f"baseline is {kinds[0]}, candidate is {kinds[1]}")
    elif baseline.emulator is not None and candidate.emulator is not None:
        found += _config_differences(baseline.emulator, candidate.emulator)
    return found


def _config_differences(base: EmulatorRun, cand: EmulatorRun) -> list[str]:
    found = []
    if base.device != cand.device:
        found.append(f"emulator device {base.device} → {cand.device}")
    for field in sorted((base.workload.keys() | cand.workload.keys()) - FREE_WORKLOAD_FIELDS):
        if base.workload.get(field) != cand.workload.get(field):
            found.append(f"workload.{field} {base.workload.get(field)} → {cand.workload.get(field)}")
    return found
