"""The limits that keep a hostile or accidental input from exhausting memory or time.

Each is named in the error that enforces it; docs/limits.md lists them with figures.
"""

from __future__ import annotations

import functools
import math
import os

from pydantic import ByteSize, TypeAdapter, ValidationError

from perftool.common.errors import PerftoolError

MEMORY_PER_EXACT_BYTE = 7.0  # a trace decoded whole, at once, per byte of JSON (6.7-7.0 at 40 and 120 MB, all phases)
MEMORY_PER_TRACE_BYTE = 0.65  # peak memory to scan a trace, per byte of its JSON (bench/bench_load.py: 0.55-0.58)
DISK_PER_TRACE_BYTE = 0.5  # disk a trace's columns take when kept there, per byte of JSON (bench/bench_spill.py)
# Memory to scan what a trace holds, beyond its bytes (bench/bench_memory.py measures each; these hold above):
MEMORY_PER_EVENT = 180  # bytes an event in memory (a million tiny events: info 171-173 measured, scan 172-178)
MEMORY_PER_SIGNATURE = 700  # each distinct (phase, name, category, process, thread): 424 measured, 585 with a track
MEMORY_PER_COUNTER_SAMPLE = 350  # a counter event's values, kept until counters are built (measured ~210)
MEMORY_PER_KEPT_ARGS = 200  # an event whose args are kept, on top of their bytes (measured ~77)
MEMORY_PER_KEPT_ARGS_ON_DISK = 16  # ... with the columns on disk, its args in a file too: where they end, 8 bytes
PROCESS_MEMORY = 64 << 20  # perftool's own, counted against the budget first (a scan of one event peaks at 58-60 MB)
WORKER_MEMORY = 36 << 20  # each decoding process: 27-30 MB anonymous, and 4 MB, its share of its two 4 MiB piece slots
MAX_TRACE_SIZE_ENV = "PERFTOOL_MAX_TRACE_SIZE"
MEMORY_ENV = "PERFTOOL_MEMORY"
SPILL_DIR_ENV = "PERFTOOL_SPILL_DIR"
MAX_GZIP_RATIO = 100  # decompressed : compressed; real traces compress 5-20x, a gzip bomb up to ~1000x
GZIP_RATIO_FROM_BYTES = 64 << 20  # small files may compress as well as they like
MAX_DOCUMENT_BYTES = 256 << 20  # a config, rule, budget or saved scan result
MAX_YAML_VALUES = 1_000_000  # after aliases are expanded: refuses 'billion laughs' documents
MAX_TRACE_STEPS_WRITTEN = 200_000  # an emulated trace is built in memory: ~1.3 KB of JSON and ~6 KB of RAM a step
MAX_DURATION_US = 1e13  # 10^7 s (116 days): no event of a profiled run lasts longer
MAX_TIMESTAMP_US = 1e17  # 3,170 years from the clock's zero: a Unix time in µs is about 1.7e15
MAX_JSON_DEPTH = "about 1,000"  # msgspec's and pydantic's recursion limit, as users read it


@functools.cache
def _sizes() -> TypeAdapter[ByteSize]:
    """What reads a size: made when first needed (its schema takes 10 ms to build, which most runs never need)."""
    return TypeAdapter(ByteSize)


def parse_size(text: str, source: str) -> int:
    """A positive size such as ``8GiB`` or ``500MB`` (bytes when no unit); ``source`` names where it came from."""
    try:
        size = int(_sizes().validate_python(text))
    except ValidationError:
        raise PerftoolError(f"{source}: not a size (got {text!r}): give bytes or a unit, e.g. 8GiB") from None
    if size <= 0:
        raise PerftoolError(f"{source}: must be more than 0 bytes (got {text!r})")
    return size


def max_trace_bytes() -> int | None:
    """The trace-size limit: ``PERFTOOL_MAX_TRACE_SIZE`` when set, else none (a trace whose columns do not fit the
    memory budget keeps them on disk, whose space is checked first)."""
    value = os.environ.get(MAX_TRACE_SIZE_ENV)
    return parse_size(value, MAX_TRACE_SIZE_ENV) if value else None


def memory_budget() -> int:
    """The memory a trace's scan may take: ``PERFTOOL_MEMORY`` when set, else the memory available now (4 GiB where
    that cannot be read); columns that would not fit are kept on disk."""
    value = os.environ.get(MEMORY_ENV)
    if value:
        return parse_size(value, MEMORY_ENV)
    return available_memory() or DEFAULT_MEMORY_BUDGET


DEFAULT_MEMORY_BUDGET = 4 << 30


def available_memory() -> int | None:
    """Bytes of memory available for new work (Linux's MemAvailable), or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


_DECIMAL_UNITS = (("GB", 10**9), ("MB", 10**6), ("kB", 10**3))
_BINARY_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def size_text(size: int) -> str:
    """A size as people read it, in the units it was most likely given in: '100 MB' for 100MB, '4 GiB' for
    4GiB, else binary units to one decimal ('1.5 GiB', '300 MiB', '12 KiB', '900 bytes')."""
    return _in_unit(size, _unit_of(size))


def size_text_as(size: int, like: int) -> str:
    """``size`` in the unit :func:`size_text` writes ``like`` in, to one decimal: two sizes compared in one message
    read in one unit ('500.6 MB' beside '500 MB', not '477.4 MiB')."""
    return _in_unit(size, _unit_of(like))


def budget_above(size: int) -> str:
    """A memory budget to give (``--memory``) that holds ``size`` bytes: rounded up to two significant figures in MB
    or GB, as a person writes it ('600MB', '1.2GB')."""
    unit, scale = ("GB", 10**9) if size >= 10**9 else ("MB", 10**6)
    value = size / scale
    step = 10 ** (math.floor(math.log10(value)) - 1) if value >= 1 else 0.1
    rounded = math.ceil(value / step - 1e-9) * step
    return f"{rounded:.{max(0, -math.floor(math.log10(step)))}f}{unit}"


def _unit_of(size: int) -> tuple[str, int] | None:
    """The unit :func:`size_text` writes ``size`` in and its scale (None: bytes)."""
    for unit, scale in _DECIMAL_UNITS:
        if size >= scale and size % scale == 0 and size % (1 << 10):  # a round decimal size, not a binary one
            return unit, scale
    return next(((unit, scale) for unit, scale in _BINARY_UNITS if size >= scale), None)


def _in_unit(size: int, unit: tuple[str, int] | None) -> str:
    if unit is None:
        return f"{size} bytes"
    return f"{size / unit[1]:,.1f}".removesuffix(".0") + f" {unit[0]}"


MEMORY_PER_EVENT_ON_DISK = 38  # bytes an event with its columns on disk: info's arrays (18-41 measured, docs/limits.md)
# ... and the analysis's large arrays in files too (perftool/trace/_filemem.c): what stays on the heap, such as a
# stable sort's buffer (4 bytes an event); info, scan, diff and calibrate each held 0.21-0.22 GiB on 8.4 M events
MEMORY_PER_EVENT_IN_FILES = 6
# What each command's analysis holds an event beyond info's, in memory or on disk with its arrays in memory
# (bench/bench_spill.py --command, with the columns on disk, less info's: diff 12, scan 20 (gate 23), calibrate 32):
ANALYSIS_MEMORY_PER_EVENT = {"info": 0, "diff": 12, "scan": 24, "calibrate": 32}
# What a command's report holds a track while it is made: info's document lists every track (a million tracks, one
# event each: 1,904 bytes an event measured by bench/bench_memory.py --command info, 880 counted without this)
REPORT_MEMORY_PER_TRACK = {"info": 1_100}


def memory_to_scan(
    events: int,
    signatures: int,
    counter_samples: int,
    kept_args: int,
    args_bytes: int,
    on_disk: bool = False,
    analysis: str = "info",
    arrays_in_files: bool = False,
    kept_bytes: int = 0,
    tracks: int = 0,
) -> int:
    """Bytes of memory scanning a trace of these parts needs, beyond the interpreter: many tiny or distinct
    events need more per byte of JSON than :data:`MEMORY_PER_TRACE_BYTE` allows for. With its columns kept on
    disk (``on_disk``), an event needs only what the analysis's working arrays take, and those are made after the
    counter samples are built into counters and let go: the larger of the two counts, not both. ``analysis`` names
    the command the trace is read for (:data:`ANALYSIS_MEMORY_PER_EVENT`): a scan holds more an event than info,
    except where the analysis's large arrays go into files with the columns (``arrays_in_files``). Of
    ``args_bytes`` (the kept args' and the counter events'), ``kept_bytes`` are the kept args': on disk they are in
    a file too. What the command's report holds of each of the trace's ``tracks`` (:data:`REPORT_MEMORY_PER_TRACK`)
    counts either way."""
    tables = signatures * MEMORY_PER_SIGNATURE + tracks * REPORT_MEMORY_PER_TRACK.get(analysis, 0)
    counters = counter_samples * MEMORY_PER_COUNTER_SAMPLE
    extra = ANALYSIS_MEMORY_PER_EVENT[analysis]
    if on_disk:
        kept = kept_args * MEMORY_PER_KEPT_ARGS_ON_DISK + args_bytes - kept_bytes
        per_event = MEMORY_PER_EVENT_IN_FILES if arrays_in_files else MEMORY_PER_EVENT_ON_DISK + extra
        return tables + kept + max(events * per_event, counters)
    kept = kept_args * MEMORY_PER_KEPT_ARGS + args_bytes
    return tables + kept + events * (MEMORY_PER_EVENT + extra) + counters
