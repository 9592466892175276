"""Whom a rank's collectives wait for: HCCL's plane tasks name the peer of each wait."""

from __future__ import annotations

import json

import pytest
from builders import VOCABULARIES, meta, span
from conftest import DATA

from perftool import load_trace
from perftool.analysis import peer_waits
from perftool.analysis.communication import collective_tasks

NO_RANK = 4294967295


def _rank_trace(waits: list[tuple[int, float, float, object, object]], moves: list[tuple[int, float, float]],
                stream: list[tuple[str, float, float]]) -> dict:  # fmt: skip
    """An Ascend trace of one all-reduce (0-1000 µs) with its tasks on plane threads: ``waits`` as (plane, start,
    length, src rank, dst rank), ``moves`` as (plane, start, length) Memcpy tasks, and the communication stream's own
    tasks in ``stream`` as (name, start, length), which name no rank. Plane N is thread 1 + N of the HCCL process, the
    op's own thread 0."""
    tracks, names, _ = VOCABULARIES["ascend"]
    hccl, ops = tracks["hccl_ops"]
    events = [
        *names,
        span("MatMulV2", *tracks["npu"], 1000, 500),
        span("hcom_allReduce__428_0_1", hccl, ops, 0, 1000),
        *(span(name, *tracks["npu_comm"], start, length) for name, start, length in stream),
    ]
    for plane, start, length, source, destination in waits:
        ranks = {"src rank": source, "dst rank": destination}
        events.append(span("Notify_Wait", hccl, ops + 1 + plane, start, length, args=ranks))
    events += [span("Memcpy", hccl, ops + 1 + plane, start, length) for plane, start, length in moves]
    return {"traceEvents": events}


def _measure(write_trace, waits, moves, lo=0.0, hi=2000.0, stream=(("Notify Wait", 2, 600),)) -> peer_waits.PeerWaits:
    """What the collectives' tasks say, in [lo, hi]; the stream holds a copy of the first wait unless told otherwise."""
    trace = load_trace(write_trace(_rank_trace(waits, moves, list(stream))))
    return peer_waits.measure(trace, lo, hi, collective_tasks(trace))


def test_each_wait_counts_for_the_peer_it_names_the_longest_first(write_trace):
    """The trace's own rank is the source its waits name; a peer's waits add up; the stream's copy of a wait, a
    wait for no rank or for the rank itself, and a wait whose ranks are no numbers or none HCCL's 32 bits hold count
    for no peer."""
    waits = [
        (1, 2, 200, 2, 3), (1, 300, 100, 2, 3), (2, 2, 250, 2, 1),
        (3, 2, 900, 2, NO_RANK), (3, 950, 10, 2, 2), (4, 2, 800, "2", "5"), (5, 2, 800, True, 6),
        (6, 2, 800, 2, NO_RANK + 1), (7, 2, 800, 2, 10**30), (8, 2, 800, 2, -1),
    ]  # fmt: skip
    found = _measure(write_trace, waits, [])
    assert found.rank == 2
    assert list(found.wait_us.items()) == [(3, pytest.approx(300.0)), (1, pytest.approx(250.0))]
    assert found.late() == [3, 1]  # 250 µs is over half the longest wait
    assert sorted(found.waits_for([3]).tolist()) == sorted(found.rows[found.peer == 3].tolist())
    assert found.waits_for([3]).size == 2


def test_a_peer_waited_on_under_half_the_longest_is_not_late(write_trace):
    found = _measure(write_trace, [(1, 2, 400, 0, 3), (2, 2, 199, 0, 1), (3, 2, 201, 0, 4)], [])
    assert found.late() == [3, 4]


def test_waits_and_moves_count_within_the_window_the_planes_moves_once(write_trace):
    """Data moving on two planes at once moves for the time of either; what lies outside the window is cut off. A
    plane is a thread of the waits: the hardware stream's copies of the tasks are left to them."""
    waits = [(1, 100, 400, 0, 3), (2, 10, 50, 0, 1)]
    found = _measure(write_trace, waits, [(1, 500, 100), (2, 550, 100), (2, 900, 95)], lo=300.0, hi=950.0)
    assert found.wait_us == {3: pytest.approx(200.0)}  # 300-500 of 100-500; rank 1's wait is before the window
    assert found.transfer_us == pytest.approx(150.0 + 50.0)  # 500-650, then 900-950 of 900-995
    assert found.waiting_us == pytest.approx(200.0)  # 300-602 waiting (the stream's copy too), less 500-650 moving


def test_a_trace_without_waits_has_none(write_trace):
    found = _measure(write_trace, [], [(1, 500, 100)], stream=())
    assert (found.waiting_us, found.transfer_us, found.rank, found.wait_us, found.late()) == (0.0, 0.0, None, {}, [])


def test_waits_that_name_no_peer_still_say_how_long_the_collectives_waited(write_trace):
    """At profiler level 0 msprof records the communication stream's tasks alone: its Notify Wait tasks say how long
    the collectives waited, for no peer it names; its SDMA tasks moved data."""
    found = _measure(
        write_trace, [], [], stream=[("Notify Wait", 10, 500), ("SDMA", 400, 200), ("Notify Wait", 700, 50)]
    )
    assert (found.waiting_us, found.transfer_us) == (pytest.approx(390.0 + 50.0), pytest.approx(200.0))
    assert (found.rank, found.wait_us, found.late()) == (None, {}, [])
    assert found.waits_for([]).size == 2 and set(found.peer.tolist()) == {NO_RANK}


@pytest.mark.parametrize("drawn_over", [(0, 505), (5, 505)], ids=["ending with the wait", "starting with it"])
def test_a_task_drawn_over_the_waits_moves_no_data(write_trace, drawn_over):
    """The db export records the op's own task on its stream over the op's tasks (named by its task type): it encloses
    them, so it is no transfer; tasks side by side on the stream that overlap each other still are."""
    siblings = [("SDMA", 600, 100), ("SDMA", 600, 99), ("SDMA", 601, 99)]
    found = _measure(write_trace, [], [], stream=[("AI_CORE", *drawn_over), ("Notify Wait", 5, 500), *siblings])
    assert (found.waiting_us, found.transfer_us) == (pytest.approx(500.0), pytest.approx(100.0))


def _two_communicators() -> dict:
    """Waits in two communicators, each numbering its ranks: the second's thread (tid 10) comes after the first's
    planes, its own planes after it."""
    tracks, names, _ = VOCABULARIES["ascend"]
    hccl, ops = tracks["hccl_ops"]
    events = [
        *names,
        meta("thread_name", hccl, 10, name="Group 1 Communication"),
        meta("thread_name", hccl, 12, name="Plane 1"),
        span("MatMulV2", *tracks["npu"], 2000, 500),
        span("hcom_allReduce__428_0_1", hccl, ops, 0, 1000),
        span("Notify_Wait", hccl, ops + 2, 10, 300, args={"src rank": 0, "dst rank": 3}),
        span("hcom_allGather__429_0_1", hccl, 10, 1000, 1000),
        span("Notify_Wait", hccl, 12, 1010, 600, args={"src rank": 2, "dst rank": 3}),
        span("Notify_Wait", hccl, 10, 1700, 100, args={"src rank": 2, "dst rank": 5}),  # on the op's own thread
    ]
    return {"traceEvents": events}


def test_each_communicator_numbers_its_own_ranks(write_trace):
    """msprof draws each communicator's thread, then its planes: a trace whose waits name peers in two communicators
    names those of the one waited on longest for one peer, with its own rank in it, and says there were two."""
    trace = load_trace(write_trace(_two_communicators()))
    found = peer_waits.measure(trace, 0.0, 3000.0, collective_tasks(trace))
    assert (found.communicators, found.communicator, found.rank) == (2, "Group 1 Communication", 2)
    assert found.wait_us == {3: pytest.approx(600.0), 5: pytest.approx(100.0)}
    assert [trace.ts[row] for row in found.waits_for([3])] == [1010.0]  # the other communicator's rank 3 is another


def test_a_scan_saves_whom_a_rank_waits_for_only_where_one_communicator_numbers_them(write_trace, run):
    """The saved waits (a job's view compares ranks by them) hold one numbering of the ranks, or none; waits that
    name no peer save nothing (their time is the metric communication.waiting_us)."""

    def saved(trace: dict) -> dict | None:
        return json.loads(run("scan", write_trace(trace), "--format", "json").stdout)["traces"][0]["peer_waits"]

    assert saved(_rank_trace([(1, 2, 500, 0, 3)], [], [])) == {"rank": 0, "per_step_us": {"3": 500.0}}
    assert saved(_two_communicators()) is None
    assert saved(_rank_trace([], [], [("Notify Wait", 2, 600)])) is None


def test_info_says_what_the_collectives_tasks_did_where_they_say(write_trace, run, monkeypatch):
    """The metrics hold the window's waiting and moving; info adds them to its communication row, and a trace whose
    collectives have no tasks (NCCL's kernels) says nothing of them."""
    trace = write_trace(_rank_trace([(1, 100, 400, 0, 3)], [(1, 600, 100)], []))
    metrics = json.loads(run("info", trace, "--format", "json").stdout)["metrics"]
    assert (metrics["communication.waiting_us"], metrics["communication.transfer_us"]) == (400.0, 100.0)
    monkeypatch.setenv("COLUMNS", "250")  # the row on one line
    assert "tasks waiting for peers 400.0 µs, moving data 100.0 µs" in " ".join(run("info", trace).stdout.split())
    nccl = " ".join(run("info", DATA / "real" / "nccl_a100_rank.json.gz").stdout.split())
    assert "exposed 39.559 ms (5.9%)" in nccl and "tasks waiting" not in nccl
