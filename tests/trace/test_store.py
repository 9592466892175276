"""Columns kept on disk: a trace whose scan would not fit the memory budget gives the same results as in memory,
leaves nothing behind on any exit, and says so in one line when the disk cannot hold it."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, complete, ctrl_c_as_at_a_terminal, error_line, leaving, spy_on_disk

from perftool.common import limits, threads
from perftool.common.errors import TraceError
from perftool.pipeline.read import load_trace
from perftool.trace import decode, loader, store
from perftool.trace.loader import read_trace
from perftool.trace.model import Trace

SAMPLES = sorted((REPO / "sample_traces").rglob("*.trace.json*")) + sorted((REPO / "tests" / "data").glob("*.json*"))
COLUMNS = ("ts", "dur", "phase", "track", "name", "cat", "flow_id", "order", "args_ref", "kind", "end")
CHUNK = 97  # rows a pass takes on disk in these tests: every pass crosses chunks, at no round number


def same_trace(first: Trace, second: Trace) -> None:
    for column in COLUMNS:
        np.testing.assert_array_equal(getattr(first, column), getattr(second, column), err_msg=column)
    assert (first.names, first.cats, first.tracks) == (second.names, second.cats, second.tracks)
    assert (first.metadata, list(first.kept_args), first.dialect) == (
        second.metadata,
        list(second.kept_args),
        second.dialect,
    )
    np.testing.assert_array_equal(first.unclosed, second.unclosed)
    for field in ("ts", "value", "series", "track"):
        np.testing.assert_array_equal(getattr(first.counters, field), getattr(second.counters, field))


def nested_begin_end_trace(path: Path) -> Path:
    """B/E pairs nested on two threads (one never closed), counters, flows with string ids, args, metadata between
    events, and instants: every column the loader builds has rows on both sides of many chunk boundaries."""
    events: list[dict] = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "worker"}}]
    for i in range(300):
        t = i * 10.0
        events += [
            {"ph": "B", "name": "outer", "pid": 1, "tid": 1 + i % 2, "ts": t},
            {"ph": "B", "name": f"inner{i % 7}", "pid": 1, "tid": 1 + i % 2, "ts": t + 1},
            {"ph": "C", "name": "Memory", "pid": 1, "tid": 1, "ts": t + 2, "args": {"allocated": i, "reserved": 2 * i}},
            {"ph": "s", "name": "flow", "cat": "ac2g", "pid": 1, "tid": 1, "ts": t + 2, "id": f"f{i}"},
            {"ph": "f", "name": "flow", "cat": "ac2g", "pid": 2, "tid": 7, "ts": t + 3, "id": f"f{i}", "bp": "e"},
            complete(f"kernel{i % 5}", t + 3, 2, pid=2, tid=7, cat="kernel", args={"stream": 7}),
            {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": t + 4, "s": "t"},
            {"ph": "E", "pid": 1, "tid": 1 + i % 2, "ts": t + 5},
            {"ph": "E", "pid": 1, "tid": 1 + i % 2, "ts": t + 8},
        ]
        if i % 50 == 0:
            events.append({"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "GPU"}})
    events.append({"ph": "B", "name": "never closed", "pid": 1, "tid": 3, "ts": 5.0})
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    return path


def over_budget_until_on_disk(monkeypatch) -> None:
    """Every trace's scan is over the budget in memory and within it with its columns on disk."""
    monkeypatch.setattr(limits, "memory_to_scan", lambda *counts: 0 if counts[5] else 1 << 62)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_columns_on_disk_equal_the_columns_in_memory(path, monkeypatch):
    in_memory = load_trace(path)
    made = spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    on_disk = load_trace(path)
    assert len(made) == 1 and on_disk.on_disk and not in_memory.on_disk
    assert isinstance(on_disk.ts.base, np.memmap) and isinstance(on_disk.end.base, np.memmap)
    assert type(on_disk.ts) is np.ndarray  # what the analysis computes from them is plain arrays too
    same_trace(in_memory, on_disk)


def test_with_the_columns_on_disk_the_kept_args_are_in_a_file_and_read_back_alike(tmp_path, monkeypatch):
    """The kept args moved to a file when the columns go to disk, and those of the parts after, read back as in
    memory, one by one, by slices and all at once; appended after a read, the file is mapped again."""
    path = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
    in_memory = load_trace(path)
    spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    on_disk = load_trace(path)
    assert isinstance(on_disk.kept_args, store.BytesOnDisk) and len(in_memory.kept_args) > 100
    assert list(on_disk.kept_args) == in_memory.kept_args
    assert on_disk.kept_args[-1] == in_memory.kept_args[-1] and on_disk.kept_args[3:9:2] == in_memory.kept_args[3:9:2]
    rows = np.flatnonzero(in_memory.args_ref >= 0)
    assert on_disk.args_of(rows) == in_memory.args_of(rows)
    with pytest.raises(IndexError):
        on_disk.kept_args[len(in_memory.kept_args)]
    strings = store.OnDisk(str(path), str(tmp_path), 0).strings()
    strings.extend([b'{"a":1}', b"", b"[2]"])
    assert (strings[0], strings[1], strings[2], len(strings)) == (b'{"a":1}', b"", b"[2]", 3)
    strings.extend([b"x" * 5000])
    assert strings[3] == b"x" * 5000 and strings[2] == b"[2]"
    assert os.listdir(tmp_path) == []  # an unlinked file


def test_nested_spans_counters_and_flows_across_chunks(tmp_path, monkeypatch):
    path = nested_begin_end_trace(tmp_path / "nested.json")
    in_memory = read_trace(path)
    assert in_memory.unclosed.size == 1 and in_memory.counters.ts.size == 600
    spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    on_disk = read_trace(path)
    assert on_disk.on_disk
    same_trace(in_memory, on_disk)


def test_a_trace_of_counters_alone_keeps_its_columns_on_disk_as_in_memory(run, tmp_path, monkeypatch):
    """No event is timed, so every column on disk is empty: a pass over one still takes one (empty) chunk."""
    path = tmp_path / "counters.json"
    samples = [{"ph": "C", "name": "memory", "pid": 1, "tid": 1, "ts": i, "args": {"used": i}} for i in range(300)]
    path.write_text(json.dumps({"traceEvents": samples}))
    in_memory, shown = read_trace(path), run("info", path, "--format", "json")
    made = spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    on_disk = read_trace(path)
    assert made and on_disk.on_disk and len(on_disk) == 0 and on_disk.counters.ts.size == 300
    same_trace(in_memory, on_disk)
    assert run("info", path, "--format", "json").output == shown.output


def test_the_columns_do_not_depend_on_the_rows_foreseen(tmp_path, monkeypatch):
    """The loader keeps room for the rows it foresees from the file's size: foreseen well, the columns are made in
    a few allocations; foreseen too few or too many (a gzip trailer's size is a guess), or not at all, they are the
    same."""
    monkeypatch.setattr(decode, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(decode, "PIECE_BYTES", 1500)  # some hundred parts
    path = nested_begin_end_trace(tmp_path / "nested.json")
    grown: list[int] = []
    grow = store.Growing._grow

    def counted(self, rows):
        if self.array.dtype == np.float64 and rows > self.array.size:
            grown.append(rows)
        grow(self, rows)

    monkeypatch.setattr(store.Growing, "_grow", counted)
    size = path.stat().st_size
    traces, growths = {}, {}
    for foreseen in (0, 1, size, 100 * size):
        monkeypatch.setattr(loader, "json_size_hint", lambda _, foreseen=foreseen: foreseen)
        grown.clear()
        traces[foreseen] = read_trace(path, workers=1)
        growths[foreseen] = len(grown) // 2  # ts and dur
    for foreseen in (0, 1, 100 * size):
        same_trace(traces[size], traces[foreseen])
    assert max(growths[size], growths[100 * size]) <= 3 < growths[0]  # once made, grown for a better foresight


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 5, "dur": -1}, "negative duration"),
        ({"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1e18, "dur": 1}, "beyond any clock"),
        ({"ph": "E", "pid": 1, "tid": 9, "ts": 5}, "without a matching 'B'"),
    ],
)
def test_a_bad_event_past_the_first_chunk_is_named_alike_both_ways(tmp_path, monkeypatch, bad, problem):
    events = [complete("k", i, 1) for i in range(1000)]
    events.insert(700, bad)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(TraceError) as in_memory:
        read_trace(path)
    made = spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    with pytest.raises(TraceError) as on_disk:
        read_trace(path)
    assert made
    assert str(on_disk.value) == str(in_memory.value)
    assert "event 700" in str(in_memory.value) and problem in str(in_memory.value)


@pytest.mark.parametrize("command", ["info", "scan", "diff"])
def test_the_commands_give_the_same_json_with_the_columns_on_disk(run, monkeypatch, command):
    """On disk, the analysis's arrays from 4 KiB (a few hundred rows of the sample) are files too."""
    sample = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
    args = [command, sample, *([sample] if command == "diff" else []), "--format", "json"]
    in_memory = run(*args)
    made = spy_on_disk(monkeypatch, CHUNK)
    monkeypatch.setattr(store, "FILE_ARRAY_BYTES", 4096)
    on_disk = run(*args, "--memory", leaving("900kB"))  # the sample's scan needs about 1 MB in memory, 0.5 MB with disk
    assert made and in_memory.exit_code == on_disk.exit_code
    assert on_disk.output == in_memory.output
    assert (allocator(np.empty(512)) == FILE_BACKED) is store.ARRAYS_IN_FILES


def test_a_disk_too_small_for_the_columns_is_one_line_before_any_is_written(run, tmp_path, monkeypatch):
    sample = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
    monkeypatch.setenv("PERFTOOL_SPILL_DIR", str(tmp_path))
    monkeypatch.setattr(store.shutil, "disk_usage", lambda _path: Free())
    line = error_line(
        run("info", sample, "--memory", leaving("900kB")), str(sample), "of disk in " + str(tmp_path), "--memory"
    )
    assert "PERFTOOL_SPILL_DIR" in line and "has 100 bytes free" in line


def test_a_spill_directory_that_does_not_exist_is_one_line(run, tmp_path, monkeypatch):
    sample = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
    missing = tmp_path / "missing"
    monkeypatch.setenv("PERFTOOL_SPILL_DIR", str(missing))
    error_line(run("info", sample, "--memory", leaving("900kB")), str(sample), f"on disk in {missing}", "No such file")
    error_line(run("info", "-", input=b"{}"), "-:", f"a copy of it in {missing}", "No such file")


@pytest.mark.skipif(not hasattr(os, "posix_fallocate"), reason="needs posix_fallocate")
def test_a_column_made_on_disk_reserves_its_blocks_so_a_full_disk_is_one_line(run, monkeypatch):
    """A column the loader makes on disk (the events' ends) has its blocks reserved when it is made: a disk too full
    for it is one line then, not a fault when a page of its mapping is first written."""
    sample = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
    reserved: list[int] = []

    def full(fd: int, offset: int, size: int) -> None:
        reserved.append(size)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store.os, "posix_fallocate", full)
    error_line(
        run("info", sample, "--memory", leaving("900kB")), str(sample), "cannot keep its columns on disk", "No space"
    )
    assert reserved and reserved[0] % 8 == 0  # a float64 column's bytes


MOUNTED = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw,nosuid 0 0
/dev/vdb /tmp/disk ext4 rw 0 0
tmpfs /mnt/scratch\\040space tmpfs rw 0 0
/dev/vdc /mnt/scratch\\040space xfs rw 0 0
ramfs /ram ramfs rw 0 0
"""


def test_a_directory_s_file_system_is_in_memory_as_the_mount_it_lies_on_says(tmp_path, monkeypatch):
    (tmp_path / "mounts").write_text(MOUNTED)
    monkeypatch.setattr(store, "MOUNTS", str(tmp_path / "mounts"))
    assert store.in_memory("/tmp") and store.in_memory("/tmp/perftool") and store.in_memory("/ram/x")
    assert not store.in_memory("/tmp/disk/x")  # a disk mounted inside it
    assert not store.in_memory("/tmpfoo") and not store.in_memory("/var/tmp")
    assert not store.in_memory("/mnt/scratch space/x")  # the last mount on a point is the one seen, its space escaped
    monkeypatch.setattr(store, "MOUNTS", str(tmp_path / "missing"))
    assert not store.in_memory("/tmp")  # no table (not Linux): no


def test_columns_go_to_a_disk_when_the_system_temporary_directory_is_memory(tmp_path, monkeypatch):
    """/tmp on tmpfs would hold the columns in memory all the same: /var/tmp is taken where it is on a disk; a
    directory the user names (PERFTOOL_SPILL_DIR, TMPDIR, TEMP, TMP) is taken as named."""
    (tmp_path / "mounts").write_text(MOUNTED + f"/dev/vdd {tmp_path} ext4 rw 0 0\n")  # this test's folder: a disk
    monkeypatch.setattr(store, "MOUNTS", str(tmp_path / "mounts"))
    monkeypatch.setattr(store.tempfile, "gettempdir", lambda: "/tmp")
    for name in ("PERFTOOL_SPILL_DIR", "TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    disk = tmp_path / "var-tmp"
    disk.mkdir()
    monkeypatch.setattr(store, "DISK_TEMPORARY", str(disk))
    assert store.spill_directory() == str(disk)
    monkeypatch.setattr(store, "DISK_TEMPORARY", str(tmp_path / "none"))
    assert store.spill_directory() == "/tmp"  # no such directory: the temporary one, as before
    monkeypatch.setattr(store, "DISK_TEMPORARY", str(disk))
    monkeypatch.setenv("TMP", "/tmp")
    assert store.spill_directory() == "/tmp"
    monkeypatch.setenv("PERFTOOL_SPILL_DIR", "/ram")
    assert store.spill_directory() == "/ram"
    monkeypatch.delenv("PERFTOOL_SPILL_DIR")
    monkeypatch.delenv("TMP")
    monkeypatch.setattr(store.tempfile, "gettempdir", lambda: "/tmp/disk")
    assert store.spill_directory() == "/tmp/disk"


class Free:
    """What :func:`shutil.disk_usage` says of a nearly full disk."""

    total, used, free = 10**12, 10**12 - 100, 100


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_disk_that_fills_while_the_columns_are_written_is_one_line(run, monkeypatch):
    """/dev/full fails every write with ENOSPC, as a disk that fills up does."""
    sample = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
    monkeypatch.setattr(store.tempfile, "TemporaryFile", lambda **_kw: open("/dev/full", "r+b"))  # noqa: SIM115
    error_line(
        run("scan", sample, "--memory", leaving("900kB")), str(sample), "cannot keep its columns on disk", "No space"
    )


def big_trace(path: Path, steps: int) -> Path:
    """A trace of ``steps`` steps of 200 kernels each, written fast."""
    kernel = '{{"ph":"X","cat":"kernel","name":"k{k}","pid":2,"tid":7,"ts":{ts},"dur":3}}'
    with path.open("w") as out:
        out.write('{"traceEvents":[')
        for step in range(steps):
            base = step * 1000
            out.write(f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":1,"tid":1,')
            out.write(f'"ts":{base},"dur":999}},')
            out.write(",".join(kernel.format(k=k % 20, ts=base + 4 * k) for k in range(200)) + ",")
        out.write('{"ph":"i","name":"end","pid":1,"tid":1,"ts":0}]}')
    return path


def open_deleted_files_under(pid: int, folder: Path) -> int:
    """How many files under ``folder`` the process ``pid`` holds open after they were unlinked."""
    found = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        found += target.startswith(str(folder)) and target.endswith("(deleted)")
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
@pytest.mark.slow
def test_the_columns_on_disk_leave_nothing_behind_even_on_ctrl_c(tmp_path):
    """The columns live in files unlinked as they are made: the process holds them while it runs (seen in /proc),
    and they are gone when it ends, by Ctrl-C as by a normal exit."""
    trace = big_trace(tmp_path / "big.json", 1500)
    spill = tmp_path / "spill"
    spill.mkdir()
    env = {**os.environ, "PERFTOOL_SPILL_DIR": str(spill)}
    command = [sys.executable, "-m", "perftool", "scan", str(trace), "--memory", leaving("30MB"), "--fail-on", "never"]
    finished = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr
    assert not list(spill.iterdir())

    for _ in range(3):  # a scan that ends between the look at its files and Ctrl-C exits 0: it is run again
        child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 preexec_fn=ctrl_c_as_at_a_terminal)  # fmt: skip
        held = 0
        deadline = time.monotonic() + 60
        while not held and child.poll() is None and time.monotonic() < deadline:
            held = open_deleted_files_under(child.pid, spill)
            time.sleep(0.005)
        child.send_signal(signal.SIGINT)
        _, errors = child.communicate(timeout=60)
        if child.returncode != 0:
            break
    assert held, "the scan ended before its columns were seen on disk"
    assert child.returncode == 130, errors
    assert errors.decode().strip() == "perftool: interrupted"
    assert not list(spill.iterdir())


needs_file_arrays = pytest.mark.skipif(not store.ARRAYS_IN_FILES, reason="perftool/trace/_filemem.c was not built")
FILE_BACKED = "perftool_file_backed"  # the name _filemem.c gives numpy's allocator


def allocator(array: np.ndarray) -> str:
    """The name of the numpy allocator ``array``'s data came from."""
    return getattr(np, "_core", getattr(np, "core", None)).multiarray.get_handler_name(array)


def file_mappings(directory: Path) -> list[range]:
    """The address ranges of the mappings of deleted files in ``directory``, as /proc/self/maps lists them."""
    found = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, *_, path = line.split(maxsplit=5)
        if path.startswith(str(directory)) and path.endswith("(deleted)"):
            start, end = (int(bound, 16) for bound in span.split("-"))
            found.append(range(start, end))
    return found


def in_unlinked_file_under(array: np.ndarray, directory: Path) -> bool:
    """Whether ``array``'s data lies in a mapping of a deleted file in ``directory``."""
    return any(array.ctypes.data in mapping for mapping in file_mappings(directory))


def mapped_length(size: int) -> int:
    """The length of the mapping that holds an array of ``size`` bytes in a file: its header too, in whole pages."""
    page = os.sysconf("SC_PAGE_SIZE")
    return -(-(size + 16) // page) * page


@needs_file_arrays
def test_with_its_columns_on_disk_the_analysis_s_large_arrays_are_unlinked_files(tmp_path, monkeypatch):
    """Once a trace's columns go to disk, the arrays of FILE_ARRAY_BYTES or more made after, in this thread and in
    the helpers it starts, are mappings of files in the spill directory that have no name; smaller ones are not."""
    monkeypatch.setenv("PERFTOOL_SPILL_DIR", str(tmp_path))
    monkeypatch.setattr(store, "FILE_ARRAY_BYTES", 4096)
    spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    before = np.arange(512)
    load_trace(REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz")
    large, small = np.arange(512), np.arange(511)  # 4096 bytes, and 8 fewer
    assert allocator(before) != FILE_BACKED and not in_unlinked_file_under(before, tmp_path)
    assert allocator(large) == FILE_BACKED and in_unlinked_file_under(large, tmp_path)
    assert not in_unlinked_file_under(small, tmp_path)
    np.testing.assert_array_equal(large[-3:], [509, 510, 511])
    large.resize(2048, refcheck=False)  # moved by the allocator into a larger file, what it held kept
    assert in_unlinked_file_under(large, tmp_path) and large[511] == 511 and large.sum() == 511 * 512 // 2
    assert not np.zeros(1024).any()  # a new file reads as zeros
    with threads.Helper([lambda: np.ones(1024)]) as helper:
        made_beside = helper.result(0)
    assert in_unlinked_file_under(made_beside, tmp_path) and made_beside.sum() == 1024
    assert os.listdir(tmp_path) == []


@needs_file_arrays
def test_a_freed_array_s_file_is_kept_for_the_next_array_of_its_size(tmp_path, monkeypatch):
    """Up to KEPT_FILE_BYTES of freed files are kept: the next array of about the same size (a quarter more at most)
    takes one, zeroed where it must read as zeros; a much smaller one gets a file of its own."""
    monkeypatch.setenv("PERFTOOL_SPILL_DIR", str(tmp_path))
    monkeypatch.setattr(store, "FILE_ARRAY_BYTES", 4096)
    monkeypatch.setattr(store, "KEPT_FILE_BYTES", 1 << 20)
    spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    load_trace(REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz")
    first = np.full(10_000, 7.0)
    address = first.ctypes.data
    del first
    again = np.zeros(9_000)  # 10% smaller: the same file, zeroed
    assert again.ctypes.data == address and not again.any() and in_unlinked_file_under(again, tmp_path)
    del again
    assert np.zeros(4_000).ctypes.data != address  # less than four fifths of it: a new file
    assert mapped_length(80_000) in map(len, file_mappings(tmp_path))  # the kept file is still mapped
    too_large = np.ones(200_000)  # 1.6 MB: more than may be kept, so unmapped when freed
    assert mapped_length(1_600_000) in map(len, file_mappings(tmp_path))
    del too_large
    assert mapped_length(1_600_000) not in map(len, file_mappings(tmp_path))


@needs_file_arrays
def test_an_array_whose_file_cannot_be_made_is_made_in_memory(tmp_path, monkeypatch):
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setenv("PERFTOOL_SPILL_DIR", str(spill))
    monkeypatch.setattr(store, "FILE_ARRAY_BYTES", 4096)
    spy_on_disk(monkeypatch, CHUNK)
    over_budget_until_on_disk(monkeypatch)
    load_trace(REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz")
    spill.rmdir()  # the directory gone: no file can be made there
    array = np.arange(100_000)
    assert not in_unlinked_file_under(array, spill) and int(array.sum()) == 99_999 * 100_000 // 2
    array.resize(200_000, refcheck=False)  # grown in place by the allocator, what it held kept
    assert int(array.sum()) == 99_999 * 100_000 // 2
