"""Files sent in place of a trace: an archive or a compressed file perftool does not open, a report of a profiler it
does not read, a profiler's table (CSV, or printed as text), or a pickle (a memory snapshot), each told by its first
bytes (or its name), with the way to the trace; and the traces perftool reads, told the same way where one is sent in
place of a config."""

from __future__ import annotations

import gzip
import re
import shlex
import zlib
from pathlib import Path

from perftool.trace.profiler_dirs import XSPACE_SUFFIX

GZIP_MAGIC = b"\x1f\x8b"  # how a gzip stream begins, whatever the file is called
SQLITE_MAGIC = b"SQLite format 3\x00"  # how an sqlite database begins (torch_npu's and msprof's db exports)
TRACE_HEAD_BYTES = 1 << 16  # what trace_kind reads: a Kineto trace's device properties come before its events
_TAR_MAGIC, _TAR_MAGIC_AT = b"ustar", 257  # where a tar archive's first header says what it is
HEAD_BYTES = _TAR_MAGIC_AT + len(_TAR_MAGIC)  # the first bytes that tell these kinds apart
_OPENS_AS_JSON = re.compile(rb"\s*[{\[]")


def opens_as_json(head: bytes | memoryview) -> bool:
    """Whether a file's first bytes open a JSON object or array (past any whitespace), as a trace's do; read in place,
    however long ``head`` is."""
    return _OPENS_AS_JSON.match(head) is not None


# Each kind by its first bytes: what it is, the command that opens it, and what that gives
_ARCHIVE = "and scan the trace, or the profiler's folder, it holds"
_COMPRESSED = "and scan the file it gives"
_BY_MAGIC = (
    (b"PK\x03\x04", "a zip archive", "extract it (unzip FILE)", _ARCHIVE),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "extract it (7z x FILE)", _ARCHIVE),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file", "decompress it (zstd -d FILE)", _COMPRESSED),
    (b"BZh", "a bzip2-compressed file", "decompress it (bunzip2 FILE)", _COMPRESSED),
    (b"\xfd7zXZ\x00", "an xz-compressed file", "decompress it (unxz FILE)", _COMPRESSED),
)
_NSIGHT_SUFFIXES = (".nsys-rep", ".qdrep")  # Nsight Systems' reports, now and before 2021.3
_NSIGHT_COMPUTE_SUFFIX = ".ncu-rep"  # Nsight Compute's reports: kernels' counters, no timeline
_PICKLE = re.compile(rb"\x80[\x02-\x05]")  # how a Python pickle of protocol 2 to 5 begins
# Perfetto's protobuf traces, as Perfetto's tools and rocprofv3 (--output-format pftrace) name them
_PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")
# what XProf (TensorBoard's profile plugin, TensorFlow 2.2-2.3's profiler) writes beside a run's XSpace, made from it:
# HOST.<page>.pb, one page of its tools each; and one HloProto per XLA program (<program>.hlo_proto.pb)
_PROFILE_PAGES = {
    "overview_page": "overview page",
    "input_pipeline": "input-pipeline analysis",
    "kernel_stats": "kernel statistics",
    "tensorflow_stats": "TensorFlow op statistics",
    "op_profile": "op profile",
}
_HLO_PROTO_SUFFIX = ".hlo_proto.pb"
_PROTOBUF_SUFFIX = ".pb"
# a table printed as text, its first line the rule above its header ("-------  -------  ..."), as torch.profiler's
# key_averages().table() prints its summary
_TEXT_TABLE = re.compile(rb"\s*-{8,}(?: +-{3,})+ *\r?\n")
# torch.profiler's export_stacks: a stack a line, its frames joined by ";" (their spaces written "_"), then its time,
# for a flame graph; the first stack's first frame a Python one ("train.py(12):_<module>")
_FOLDED_STACKS = re.compile(rb"[^\s;]*\.py\(\d+\)[^\s;]*(?:;[^\s;]+)* \d+\r?\n")
# the names of files a directory may hold in place of traces, which :func:`not_a_trace` tells apart by their content
NAMED_IN_PLACE = (
    *_NSIGHT_SUFFIXES, _NSIGHT_COMPUTE_SUFFIX, *_PERFETTO_SUFFIXES, ".pickle", ".pkl",
    ".zip", ".tar", ".tar.gz", ".tgz", ".7z", ".zst", ".bz2", ".xz", ".csv",
)  # fmt: skip
# what a user who holds one of torch.profiler's other outputs is told to write instead
_TRACE = (
    'write the trace itself with prof.export_chrome_trace("trace.json"), or '
    "on_trace_ready=torch.profiler.tensorboard_trace_handler(dir), and scan that"
)
# what a user who holds another profiler's report is told to capture instead
PROFILE_INSTEAD = (
    "profile the job with PyTorch's profiler (torch.profiler writes Kineto's JSON trace, of CUDA and of HIP), "
    "jax.profiler or torch_npu's profiler, and scan what it writes"
)


def not_a_trace(path: str, head: bytes) -> str | None:
    """Why the file at ``path`` is no trace perftool reads and what to do, where its first bytes (``head``, the first
    :data:`HEAD_BYTES` of them; a gzip file's, those it holds) or its name say it is an archive, a compressed file
    other than gzip, a CSV or text table, folded stacks, a pickle, an Nsight report or a Perfetto protobuf trace; None
    otherwise (a JSON trace, gzip'd or not, a database, an XSpace: their readers judge them)."""
    held = _gzip_head(path) if head.startswith(GZIP_MAGIC) else head
    if path.lower().endswith(".csv") and not opens_as_json(head):
        return (
            "a CSV table, not a trace: profilers write their summaries as tables beside the trace (msprof's and "
            "torch_npu's kernel_details.csv, step_trace_time.csv); scan the trace, or the profiler's output directory"
        )
    if _TEXT_TABLE.match(held):
        return (
            f"a text table, not a trace (torch.profiler's summary, prof.key_averages().table(), prints one): {_TRACE}"
        )
    if _FOLDED_STACKS.match(held):
        return (
            f"folded stacks, not a trace (torch.profiler's prof.export_stacks writes them for a flame graph): {_TRACE}"
        )
    if path.lower().endswith(_NSIGHT_SUFFIXES):
        return f"an Nsight Systems report, which perftool does not read: {PROFILE_INSTEAD}"
    if path.lower().endswith(_NSIGHT_COMPUTE_SUFFIX):
        return f"an Nsight Compute report (kernels' counters, no timeline), not a trace: {PROFILE_INSTEAD}"
    if _PICKLE.match(held):
        return (
            "a Python pickle, not a trace (torch.cuda.memory._dump_snapshot writes the allocator's history as one, "
            "which pytorch.org/memory_viz draws): scan the profiler's trace"
        )
    if path.lower().endswith(_PROTOBUF_SUFFIX) and not path.lower().endswith(XSPACE_SUFFIX):
        return _protobuf(path)
    if path.lower().endswith(_PERFETTO_SUFFIXES) and not opens_as_json(head):
        return f"a Perfetto protobuf trace, which perftool does not read (it reads JSON traces): {PROFILE_INSTEAD}"
    quoted = shlex.quote(path)
    for magic, kind, opens, gives in _BY_MAGIC:
        if head.startswith(magic):
            return f"{kind}, not a trace: {opens.replace('FILE', quoted)} {gives}"
    if head[_TAR_MAGIC_AT:].startswith(_TAR_MAGIC):
        return f"a tar archive, not a trace: extract it (tar -xf {quoted}) {_ARCHIVE}"
    if head.startswith(GZIP_MAGIC) and held[_TAR_MAGIC_AT:].startswith(_TAR_MAGIC):
        return f"a gzip'd tar archive, not a trace: extract it (tar -xzf {quoted}) {_ARCHIVE}"
    return None


def _protobuf(path: str) -> str:
    """What a protobuf file not named an XSpace is, by its name (one XProf made from a run's XSpace, or another), and
    the XSpace to scan instead."""
    name = Path(path).name
    if name.lower().endswith(_HLO_PROTO_SUFFIX):
        return (
            "one XLA program's HLO (an HloProto, which XProf writes per program), not a trace: scan the run's "
            f"HOST{XSPACE_SUFFIX}, which holds its programs' HLO with their timeline"
        )
    host, _, page = name[: -len(_PROTOBUF_SUFFIX)].rpartition(".")
    if page in _PROFILE_PAGES:
        made = f"XProf's {_PROFILE_PAGES[page]} ({page}.pb), made from a run's XSpace"
        return f"{made}, not a trace: scan the {host}{XSPACE_SUFFIX} beside it"
    return (
        f"a protobuf file, not a trace perftool reads: of protobufs it reads an XSpace, named HOST{XSPACE_SUFFIX} as "
        "jax.profiler names it (a renamed one: give it that name)"
    )


def _gzip_head(path: str, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes a gzip file holds; none where it does not decompress (its reader says why)."""
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read(size)
    except (OSError, EOFError, zlib.error):
        return b""


def trace_kind(path: str) -> str | None:
    """What kind of trace perftool reads the file at ``path`` is, by its first bytes or its name (a JSON trace, gzip'd
    or not: an object holding ``traceEvents`` or an array of events; a database export; an XSpace), in words; None
    for any other file, or one that cannot be read (whoever reads it says why)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(TRACE_HEAD_BYTES)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        return "a database export of a trace"
    if path.lower().endswith(XSPACE_SUFFIX):
        return "an XSpace trace"
    gzipped = head.startswith(GZIP_MAGIC)
    held = _gzip_head(path, TRACE_HEAD_BYTES) if gzipped else head
    if opens_as_json(held) and (b'"traceEvents"' in held or (held.lstrip()[:1] == b"[" and b'"ph"' in held)):
        return "a gzip'd JSON trace" if gzipped else "a JSON trace"
    return None
