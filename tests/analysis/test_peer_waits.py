"""Whom a rank's collectives wait for: HCCL's plane tasks name the peer of each wait."""

from __future__ import annotations

import pytest
from builders import VOCABULARIES, span

from perftool import load_trace
from perftool.analysis import peer_waits
from perftool.analysis.communication import collective_parts

NO_RANK = 4294967295


def _rank_trace(waits: list[tuple[int, float, float, object, object]], moves: list[tuple[int, float, float]]) -> dict:
    """An Ascend trace of one all-reduce (0-1000 µs) with its tasks on plane threads: ``waits`` as (plane, start,
    length, src rank, dst rank), ``moves`` as (plane, start, length) Memcpy tasks; the hardware stream's own copy of
    the first wait, which names no rank. Plane N is thread 1 + N of the HCCL process, the op's own thread 0."""
    tracks, names, _ = VOCABULARIES["ascend"]
    (hccl, ops), stream = tracks["hccl_ops"], tracks["npu_comm"]
    events = [
        *names,
        span("MatMulV2", *tracks["npu"], 1000, 500),
        span("hcom_allReduce__428_0_1", hccl, ops, 0, 1000),
        span("Notify Wait", *stream, 2, 600),
    ]
    for plane, start, length, source, destination in waits:
        ranks = {"src rank": source, "dst rank": destination}
        events.append(span("Notify_Wait", hccl, ops + 1 + plane, start, length, args=ranks))
    events += [span("Memcpy", hccl, ops + 1 + plane, start, length) for plane, start, length in moves]
    return {"traceEvents": events}


def _measure(write_trace, waits, moves, lo: float = 0.0, hi: float = 2000.0) -> peer_waits.PeerWaits:
    trace = load_trace(write_trace(_rank_trace(waits, moves)))
    return peer_waits.measure(trace, lo, hi, collective_parts(trace))


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


def test_a_trace_without_plane_waits_has_none(write_trace):
    found = _measure(write_trace, [], [(1, 500, 100)])
    assert (found.rank, found.wait_us, found.transfer_us, found.late()) == (None, {}, 0.0, [])


def test_the_collective_drawn_on_its_tasks_thread_moves_no_data_itself(write_trace):
    """Where the op lies on the thread of its tasks (plane -1 is the op's own thread), only its tasks move data."""
    found = _measure(write_trace, [(-1, 10, 100, 0, 3)], [(-1, 200, 50)])
    assert found.transfer_us == pytest.approx(50.0)
