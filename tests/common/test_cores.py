"""How many cores perftool takes for decoding: the usable ones less those other work keeps busy (not this process's own
threads)."""

from __future__ import annotations

import os

import pytest

from perftool.common import cores


@pytest.fixture
def four_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)


def loadavg(tmp_path, *runnable: int):
    """A /proc/loadavg whose runnable count is each of ``runnable`` in turn, one a read."""
    path = tmp_path / "loadavg"
    reads = iter(runnable)
    real = cores._runnable

    def next_read(where: str) -> int | None:
        path.write_text(f"1.50 1.20 0.90 {next(reads)}/312 4242\n")
        return real(where)

    return str(path), next_read


def own_threads(tmp_path, *states: str, names: tuple[str, ...] = ()) -> str:
    """A /proc/self/task with a thread in each of ``states`` (``R`` running, ``S`` sleeping), named ``names``."""
    folder = tmp_path / "task"
    for tid, state in enumerate(states, start=100):
        (folder / str(tid)).mkdir(parents=True)
        name = names[tid - 100] if names else "python"
        (folder / str(tid) / "stat").write_text(f"{tid} ({name}) {state} 1 {tid} {tid} 0 -1 4194560 300 0\n")
    return str(folder)


def test_the_usable_cores_are_the_affinitys(four_cores):
    assert cores.usable_cores() == 4


def test_alone_on_the_machine_every_usable_core_is_free(four_cores, tmp_path, monkeypatch):
    path, read = loadavg(tmp_path, 1, 1, 1)  # this process is the one runnable task
    monkeypatch.setattr(cores, "_runnable", read)
    assert cores.free_cores(path, own_threads(tmp_path, "R")) == 4


def test_a_core_busy_through_every_read_is_not_free_and_a_moments_task_is(four_cores, tmp_path, monkeypatch):
    path, read = loadavg(tmp_path, 3, 2, 4)  # one other task in every read; a second and third for a moment
    monkeypatch.setattr(cores, "_runnable", read)
    assert cores.free_cores(path, own_threads(tmp_path, "R", "S")) == 3


def test_a_machine_busier_than_its_cores_leaves_one(four_cores, tmp_path, monkeypatch):
    path, read = loadavg(tmp_path, 40, 41, 40)
    monkeypatch.setattr(cores, "_runnable", read)
    assert cores.free_cores(path, own_threads(tmp_path, "R")) == 1


def test_this_processs_own_running_threads_are_not_other_work(four_cores, tmp_path, monkeypatch):
    """numpy's OpenBLAS threads spin for a moment after numpy loads: runnable, but this process's own."""
    path, read = loadavg(tmp_path, 3, 3, 3)  # this thread and two spinning threads of its own
    monkeypatch.setattr(cores, "_runnable", read)
    assert cores.free_cores(path, own_threads(tmp_path, "R", "R", "R", "S")) == 4


def test_other_work_beside_this_processs_running_threads_still_counts(four_cores, tmp_path, monkeypatch):
    path, read = loadavg(tmp_path, 4, 4, 4)  # two threads of this process, two other tasks
    monkeypatch.setattr(cores, "_runnable", read)
    assert cores.free_cores(path, own_threads(tmp_path, "R", "R")) == 2


def test_a_thread_whose_name_holds_spaces_and_parentheses_is_read_by_its_state(tmp_path):
    folder = own_threads(tmp_path, "R", "S", "R", names=("perftool) R (x", "a b) R", "python"))
    assert cores._running_threads(folder) == 2


def test_a_system_without_a_thread_list_counts_this_thread_alone(tmp_path):
    assert cores._running_threads(str(tmp_path / "absent")) == 1


@pytest.mark.parametrize("text", [None, "", "1.0 1.0 1.0\n", "1.0 1.0 1.0 x/10 4\n"])
def test_a_system_that_does_not_say_what_runs_leaves_every_usable_core(four_cores, tmp_path, text):
    path = tmp_path / "loadavg"
    if text is not None:
        path.write_text(text)
    assert cores.free_cores(str(path), own_threads(tmp_path, "R")) == 4
