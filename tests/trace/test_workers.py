"""The decoding processes: results in task order, errors in their place, pieces through shared memory."""

from __future__ import annotations

import operator
import os
import threading
import time
from pathlib import Path

import pytest
from conftest import running

from perftool.trace import workers


def _checked_square(limit: int, value: int) -> int:
    if value > limit:
        raise ValueError(f"{value} is over {limit}")
    return value * value


def _piece_summary(tag: str, piece: bytes | memoryview) -> tuple[str, int, bytes]:
    data = bytes(piece)
    return tag, len(data), data[:3] + data[-3:]


def _exit_on(bad: int, value: int) -> int:
    if value == bad:
        os._exit(9)  # as if the kernel had killed the process
    return value


@pytest.mark.parametrize("count", [1, 2, 3])
def test_results_come_back_in_task_order(count):
    with workers.processes(count, _checked_square, 10**9) as pool:
        assert list(pool.run((v,) for v in range(50))) == [v * v for v in range(50)]


@pytest.mark.parametrize("count", [1, 2])
def test_an_error_is_raised_after_the_results_before_it(count):
    received = []
    with workers.processes(count, _checked_square, 6) as pool, pytest.raises(ValueError, match="7 is over 6"):
        for result in pool.run((v,) for v in range(20)):
            received.append(result)
    assert received == [v * v for v in range(7)]


@pytest.mark.parametrize("count", [1, 2])
def test_pieces_of_every_size_arrive_whole(count, monkeypatch):
    """Pieces up to the slot size go through shared memory, larger ones through the pipe."""
    sent = []
    put = workers._Slots.put
    monkeypatch.setattr(workers._Slots, "put", lambda slots, *args: sent.append(put(slots, *args)) or sent[-1])
    pieces = [bytes([65 + i % 26]) * size for i, size in enumerate([10, 100, 100, 1000, 5000, 1, 1024, 3000] * 3)]
    views = [memoryview(b"xx" + piece + b"yy")[2:-2] for piece in pieces]  # views, as the stream cutter gives
    with workers.processes(count, _piece_summary, "tag", piece_bytes=1024) as pool:
        received = list(pool.run_pieces(views))
    assert received == [_piece_summary("tag", piece) for piece in pieces]
    if count > 1 and workers.FORKS:
        assert [isinstance(length, int) for _slot, length in sent] == [len(p) <= 1024 for p in pieces]


def test_a_process_that_dies_is_reported_not_waited_for():
    with workers.processes(2, _exit_on, 5) as pool, pytest.raises(workers.WorkerDied, match="exit code 9"):
        list(pool.run((v,) for v in range(10)))


@pytest.mark.slow
def test_without_fork_the_processes_are_spawned_and_pieces_piped(monkeypatch):
    monkeypatch.setattr(workers, "FORKS", False)
    with workers.processes(2, operator.add, 1) as pool:
        assert list(pool.run((v,) for v in range(6))) == [1, 2, 3, 4, 5, 6]
    with workers.processes(2, len, piece_bytes=16) as pool:
        assert list(pool.run_pieces([b"abc", memoryview(b"de"), b"x" * 40])) == [3, 2, 40]


def test_a_piece_is_drawn_only_when_a_process_has_a_slot_free():
    """So that a shared slot is never overwritten while a process still reads it, and each process has its next
    piece ready when it finishes one."""
    drawn = []

    def pieces():
        for value in range(12):
            drawn.append(value)
            yield bytes([value]) * (value + 1)

    with workers.processes(2, _piece_summary, "t", piece_bytes=64) as pool:
        for index, (_tag, size, _ends) in enumerate(pool.run_pieces(pieces())):
            assert size == index + 1
            assert len(drawn) == min(12, index + 2 * workers.PIECES_IN_FLIGHT)  # the answered, and the most in flight


def test_each_process_takes_its_own_slots_in_turn():
    slots = workers._Slots(2, 8)
    sent = [slots.put(member, bytes([value]) * 3) for value, member in enumerate([0, 1, 0, 1, 0, 0, 1])]
    assert sent == [(0, 3), (2, 3), (1, 3), (3, 3), (0, 3), (1, 3), (2, 3)]
    assert bytes(slots.take(0, 3)) == bytes([4]) * 3  # slot 0's latest piece
    assert slots.put(1, b"x" * 9) == (-1, b"x" * 9)  # too large for a slot: the piece itself


def _read_slowly(piece: bytes | memoryview) -> bytes:
    time.sleep(0.02)  # a piece written to this one's slot meanwhile would show in what it returns
    return bytes(piece)


@pytest.mark.skipif(not workers.FORKS, reason="pieces go through shared slots where processes are forked")
def test_no_piece_is_overwritten_while_its_process_reads_it():
    pieces = [bytes([value]) * 32 for value in range(16)]
    with workers.processes(2, _read_slowly, piece_bytes=32) as pool:
        assert list(pool.run_pieces(pieces)) == pieces


def _large_answer(piece: bytes | memoryview) -> bytes:
    return bytes(piece[:1]) * (3 * workers.RESULT_PIPE_BYTES)  # more than its pipe holds: sent as the parent reads


@pytest.mark.skipif(not workers.FORKS, reason="pieces go through shared slots where processes are forked")
def test_pieces_larger_than_a_slot_with_answers_larger_than_a_pipe_all_come_back():
    """A piece too large for its slot goes through the task pipe; sent to a process still busy, the parent would wait
    for it to read the piece while the process waits for the parent to read its answer."""
    pieces = [bytes([value]) * 200_000 for value in range(6)]  # larger than a slot and than a pipe's 64 KiB
    answers: list[bytes] = []
    with workers.processes(2, _large_answer, piece_bytes=16) as pool:
        reading = threading.Thread(target=lambda: answers.extend(pool.run_pieces(pieces)), daemon=True)
        reading.start()
        reading.join(timeout=60)  # finished in well under a second; never, where the two wait on each other
        finished = not reading.is_alive()
    assert finished, "the parent and a decoding process waited on each other"
    assert answers == [_large_answer(piece) for piece in pieces]


def _noted(folder: str, size: int, index: int) -> bytes:
    Path(folder, str(index)).touch()  # the task began
    return b"p" * size


def _pipes_grow_to(size: int) -> bool:
    limit = Path("/proc/sys/fs/pipe-max-size")
    return hasattr(workers.fcntl, "F_SETPIPE_SZ") and limit.exists() and int(limit.read_text()) >= size


@pytest.mark.skipif(not _pipes_grow_to(workers.RESULT_PIPE_BYTES), reason="pipes are resized on Linux, to its limit")
def test_a_process_goes_on_to_its_next_piece_before_its_part_is_read(tmp_path):
    """A part as large as a 4 MiB piece's fits its pipe, so sending it does not wait for the parent to read it."""
    with workers.processes(2, _noted, str(tmp_path), 600_000) as pool:
        tasks = pool.tasks[0]
        tasks.send((0,))
        tasks.send((1,))  # nothing is read back until the second task has begun
        for _ in range(500):
            if (tmp_path / "1").exists():
                break
            time.sleep(0.01)
        assert (tmp_path / "1").exists(), "the process waited for its first part to be read"
        assert [pool.results[0].recv(), pool.results[0].recv()] == [(True, b"p" * 600_000)] * 2


@pytest.mark.skipif(not workers.FORKS, reason="forked processes inherit the parent's ends")
def test_no_decoding_process_outlives_a_parent_killed_outright(tmp_path):
    """A parent killed by SIGKILL (or the OOM killer) runs no cleanup: its decoding processes held the parent's own
    ends of their pipes and blocked forever writing an answer no one would read (hardening round 4, D09). They
    close those ends, so each sees its parent gone and ends."""
    import signal
    import subprocess
    import sys

    script = """
import os, signal, sys, time
from perftool.trace import workers
with workers.processes(2, time.sleep) as pool:
    answers = pool.run((0.3,) for _ in range(8))
    next(answers)
    print(" ".join(str(member.pid) for member in pool.members), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""
    printed = tmp_path / "pids"
    with printed.open("w") as out:  # a file, not a pipe: the parent's end is not awaited while children hold it
        parent = subprocess.run([sys.executable, "-c", script], stdout=out, timeout=60)
    assert parent.returncode == -signal.SIGKILL
    children = [int(pid) for pid in printed.read_text().split()]
    assert len(children) == 2
    deadline = time.monotonic() + 20
    while (alive := [pid for pid in children if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive == []
