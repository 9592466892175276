"""Where a trace's columns are built: in memory, or on disk when they would not fit the memory budget.

A trace whose columns would take more memory than the budget allows (the memory available, or ``--memory``)
keeps them in files mapped into memory (:class:`OnDisk`): the kernel pages them in as the analysis reads them
and may drop them again. From then on the analysis's own arrays of 1 MiB or more, in this thread and the helpers it
starts (:func:`perftool.common.threads.in_this_context`), are files mapped the same way (``_filemem.c``, where it
was built), so what the process holds of its own is its smaller arrays and Python's objects. The files are
created unlinked (:func:`tempfile.TemporaryFile`): they have no name to leave behind, and the space returns
to the disk when the trace is dropped or the process ends, however it ends (Ctrl-C and ``kill -9`` included).

Both stores build the same columns by the same code, chunk by chunk (:meth:`ColumnStore.chunks`: a million rows
at a time in memory, four on disk), so a trace analysed either way gives the same results.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, overload

import numpy as np

from perftool.common import limits
from perftool.common.errors import TraceError, parameter

try:  # numpy's arrays in files (built with the scanner: a leaf that imports nothing of perftool)
    from perftool.trace._filemem import use_files as _arrays_in_files
except ImportError:  # an install without a C compiler keeps the analysis's arrays in memory
    _arrays_in_files = None  # type: ignore[assignment]

ARRAYS_IN_FILES = _arrays_in_files is not None
FILE_ARRAY_BYTES = 1 << 20  # arrays from this size go into files once a trace's columns are on disk
KEPT_FILE_BYTES = 64 << 20  # freed arrays' files kept for reuse, together at most (bench/bench_spill.py)

CHUNK_ROWS = 1 << 22  # rows a pass over columns on disk takes at a time: 32 MiB of a float64 column
MEMORY_CHUNK_ROWS = 1 << 20  # in memory: a pass's temporary arrays stay a few MiB however long the trace


class ColumnStore:
    """Columns in memory, each filled in place as parts are appended (so no merge at the end), with room reserved
    ahead: from the rows the trace is expected to hold (:meth:`reserve`), else half again as much each time it runs
    out. Reserved room that is never written takes no memory, only address space."""

    on_disk = False

    def __init__(self) -> None:
        self.columns: dict[str, Growing] = {}

    def reserve(self, keys: Iterable[str], rows: int) -> None:
        """Room for ``rows`` rows in each of the columns ``keys`` (once each has its first part)."""
        for key in keys:
            if key in self.columns:
                self.columns[key].reserve(rows)

    def append(self, key: str, array: np.ndarray) -> None:
        """Add ``array`` to the end of the column ``key``."""
        if key not in self.columns:
            self.columns[key] = Growing(array.dtype)
        self.columns[key].extend(array)

    def merged(self, key: str, dtype: type | np.dtype) -> np.ndarray:
        """The column ``key`` as one writable array of ``dtype``, its parts in the order they were added."""
        column = self.columns.pop(key, None)
        return column.filled.astype(dtype, copy=False) if column else np.empty(0, dtype)

    def contents(self) -> Iterator[tuple[str, np.ndarray]]:
        """Each column, as appended so far."""
        return ((key, column.filled) for key, column in self.columns.items())

    def new(self, dtype: type | np.dtype, rows: int) -> np.ndarray:
        """A new writable column of ``rows`` rows (its contents undefined until written)."""
        return np.empty(rows, dtype)

    def chunks(self, rows: int) -> Iterator[slice]:
        """The row ranges a pass over columns of ``rows`` rows takes at a time: at least one, empty for no rows (a
        trace of counters alone times no event)."""
        return _ranges(rows, MEMORY_CHUNK_ROWS)

    def loaded(self) -> None:
        """Called once the trace is loaded, its roles and kinds assigned, and what they were made from freed: that
        memory goes back to the system rather than staying with the process (a third of it after a 500 MB trace)."""
        trim_heap()


class Growing:
    """An array being appended to, with room to spare (half again as much each time it runs out): its first ``size``
    rows are filled."""

    def __init__(self, dtype: np.dtype) -> None:
        self.array = np.empty(0, dtype)
        self.size = 0

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` rows (at least half again as much as now, where it grows), where the system gives the
        address space: it is only a wish."""
        if rows > self.array.size:
            with contextlib.suppress(MemoryError):
                self._grow(max(rows, self.array.size * 3 // 2))

    def extend(self, values: np.ndarray) -> None:
        end = self.size + values.size
        if end > self.array.size:
            self.reserve(end)
            self._grow(end)  # where the wish was not granted: just the room needed
        self.array[self.size : end] = values
        self.size = end

    def _grow(self, rows: int) -> None:
        if rows > self.array.size:
            grown = np.empty(rows, self.array.dtype)  # its pages cost memory only once written
            grown[: self.size] = self.array[: self.size]
            self.array = grown

    @property
    def filled(self) -> np.ndarray:
        return self.array[: self.size]


class OnDisk(ColumnStore):
    """Columns in unlinked files under ``directory``, mapped into memory once written."""

    on_disk = True

    def __init__(self, source: str, directory: str, need: int) -> None:
        """Check that ``directory`` has ``need`` bytes free for the columns of the trace ``source``."""
        super().__init__()
        self.source = source
        self.directory = directory
        try:
            free = shutil.disk_usage(directory).free
        except OSError as exc:
            raise self._failed(exc) from None
        if free < need:
            raise TraceError(
                source,
                f"its columns do not fit the memory budget and need about {limits.size_text(need)} of disk in "
                f"{directory} to be kept there, which has {limits.size_text(free)} free: free some space, set "
                f"{limits.SPILL_DIR_ENV} (or TMPDIR) to a roomier disk, or raise {parameter('memory')}",
            )
        self.files: dict[str, IO[bytes]] = {}
        self.rows: dict[str, int] = {}
        _free_arrays_to_the_system()
        if _arrays_in_files is not None:
            _arrays_in_files(directory, FILE_ARRAY_BYTES, KEPT_FILE_BYTES)

    def reserve(self, keys: Iterable[str], rows: int) -> None:
        """Nothing to reserve: a file grows as it is written."""

    def append(self, key: str, array: np.ndarray) -> None:
        if key not in self.files:
            self.files[key] = self._file()
            self.rows[key] = 0
        try:
            self.files[key].write(np.ascontiguousarray(array).data)
        except OSError as exc:
            raise self._failed(exc) from None
        self.rows[key] += array.size

    def merged(self, key: str, dtype: type | np.dtype) -> np.ndarray:
        file = self.files.pop(key, None)
        if file is None or not self.rows[key]:
            return np.empty(0, dtype)
        file.flush()
        return _mapped(file, dtype, self.rows[key])

    def new(self, dtype: type | np.dtype, rows: int) -> np.ndarray:
        if not rows:
            return np.empty(0, dtype)
        file = self._file()
        try:
            _reserve(file, rows * np.dtype(dtype).itemsize)
        except OSError as exc:
            raise self._failed(exc) from None
        return _mapped(file, dtype, rows)

    def chunks(self, rows: int) -> Iterator[slice]:
        """As in memory, in longer ranges: each pass reads its columns from disk."""
        return _ranges(rows, CHUNK_ROWS)

    def strings(self) -> BytesOnDisk:
        """A new sequence of byte strings (a trace's kept args) in a file of its own."""
        return BytesOnDisk(self._file(), self._failed)

    def loaded(self) -> None:
        _free_arrays_to_the_system()

    def _file(self) -> IO[bytes]:
        try:
            return tempfile.TemporaryFile(prefix="perftool-columns-", dir=self.directory)
        except OSError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: OSError) -> TraceError:
        return TraceError(self.source, f"cannot keep its columns on disk in {self.directory}: {exc.strerror or exc}")


class BytesOnDisk(Sequence[bytes]):
    """Byte strings appended to one unlinked file, each read back as ``bytes``: what memory holds of each is where it
    ends (8 bytes), where a list would hold a ``bytes`` object (33 bytes and its length)."""

    def __init__(self, file: IO[bytes], failed: Callable[[OSError], TraceError]) -> None:
        self.file = file
        self.failed = failed
        self.ends = Growing(np.dtype(np.int64))
        self.mapped: mmap.mmap | None = None

    def extend(self, values: Sequence[bytes]) -> None:
        """Append ``values`` (after reading, a next append maps the file again)."""
        if not values:
            return
        try:
            self.file.write(b"".join(values))
        except OSError as exc:
            raise self.failed(exc) from None
        end = int(self.ends.filled[-1]) if self.ends.size else 0
        self.ends.extend(end + np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values))))
        self.mapped = None

    def __len__(self) -> int:
        return self.ends.size

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        ends = self.ends.filled
        start, end = (int(ends[index - 1]) if index else 0), int(ends[index])
        if start == end:
            return b""
        if self.mapped is None:
            self.file.flush()
            self.mapped = mmap.mmap(self.file.fileno(), int(ends[-1]), access=mmap.ACCESS_READ)
        return self.mapped[start:end]


def _reserve(file: IO[bytes], size: int) -> None:
    """Make ``file`` ``size`` bytes long, its blocks reserved where the system can (``posix_fallocate``): a disk too
    full for it fails here, as an error, rather than later as a fault where a page of its mapping is written."""
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(file.fileno(), 0, size)
    else:
        file.truncate(size)


def _mapped(file: IO[bytes], dtype: type | np.dtype, rows: int) -> np.ndarray:
    """The file's ``rows`` values, mapped writable into memory, as a plain array (what is computed from it is plain
    too, not a :class:`numpy.memmap` with its per-operation overhead); the mapping lives as long as the array."""
    return np.asarray(np.memmap(file, dtype=dtype, mode="r+", shape=(rows,)))


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter: allocations from this size get a mapping of their own
_OWN_MAPPING_BYTES = 1 << 20


def _free_arrays_to_the_system() -> None:
    """Have arrays of 1 MiB or more freed back to the system at once, from now on, in this process (glibc).

    glibc gives a large allocation a mapping of its own, returned when freed, but after the first such free it
    raises that threshold up to 32 MiB: the pieces of a trace and the analysis's chunk-sized arrays then come
    from the heap, and what they free stays with the process (a quarter of a large trace's memory on disk).
    A fixed threshold keeps the process to what it holds, and a trim hands back what the heap has free now (after a
    large trace's load, two thirds of the process's own memory). Elsewhere than glibc this does nothing.
    """
    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, _OWN_MAPPING_BYTES)
    except (OSError, AttributeError, TypeError):
        return
    trim_heap()


def trim_heap() -> None:
    """Hand what the heap has free back to the system: glibc keeps freed blocks in its arenas otherwise (elsewhere
    this does nothing). The C library is the process's own (``CDLL(None)``): ``ctypes.util.find_library`` would
    start a process, a fork of this one, to find it."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


DISK_TEMPORARY = "/var/tmp"  # where systems keep temporary files on a disk when /tmp is in memory


def spill_directory() -> str:
    """Where columns that do not fit the memory budget go: ``PERFTOOL_SPILL_DIR``, else the temporary directory
    (``TMPDIR``, ``TEMP`` or ``TMP``, else the system's). A system temporary directory whose files are memory (tmpfs,
    as many systems mount /tmp) would hold them in memory all the same, charged to the command's cgroup and never
    written back: there /var/tmp is taken instead, where it is on a disk and writable."""
    chosen = os.environ.get(limits.SPILL_DIR_ENV)
    if chosen:
        return chosen
    temporary = tempfile.gettempdir()
    if any(os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")) or not in_memory(temporary):  # as named
        return temporary
    if os.path.isdir(DISK_TEMPORARY) and os.access(DISK_TEMPORARY, os.W_OK) and not in_memory(DISK_TEMPORARY):
        return DISK_TEMPORARY
    return temporary


MOUNTS = "/proc/self/mounts"
_MEMORY_FILE_SYSTEMS = {"tmpfs", "ramfs"}


def in_memory(directory: str) -> bool:
    """Whether ``directory``'s file system keeps its files in memory: the type of the mount it lies on, the last
    mounted where several share its point (Linux: :data:`MOUNTS`; where it cannot be read, this says no)."""
    try:
        with open(MOUNTS, encoding="utf-8", errors="replace") as mounts:
            table = [fields[1:3] for fields in map(str.split, mounts) if len(fields) >= 3]
    except OSError:
        return False
    path = os.path.realpath(directory)
    deepest, memory = "", False
    for escaped, kind in table:
        point = escaped.replace("\\040", " ")  # the table writes a space in a path as \040
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(deepest):
            deepest, memory = point, kind in _MEMORY_FILE_SYSTEMS
    return memory


def _ranges(rows: int, size: int) -> Iterator[slice]:
    """``rows`` rows in ranges of ``size``: at least one range, empty for no rows."""
    return (slice(start, min(start + size, rows)) for start in range(0, max(rows, 1), size))
