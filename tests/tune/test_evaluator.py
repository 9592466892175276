"""Tune's pool of processes stopped while its workers are deep in long pieces (a million steps a configuration):
the command ends at once, and no worker outlives it, however it ended."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, child_pids, running

from perftool.common import interrupts

LONG_PIECES = """
import sys, time
import numpy as np
from perftool.common.interrupts import stop_on_termination
from perftool.tune import evaluator
from perftool.tune.space import Space
from perftool.tune.spec import load_tune_config

def long_piece(config, space, points):
    time.sleep(120)

evaluator.evaluate_points = long_piece  # the workers are forked: they run this
stop_on_termination()
config = load_tune_config(sys.argv[1], [])
with evaluator.Evaluator(config, Space.of(config.tune.space), jobs=2) as pool:
    list(pool._map([config, config], [np.zeros((1, 1)), np.zeros((1, 1))]))
"""


def _started_then(signum: int) -> tuple[subprocess.Popen, list[int], float]:
    """The pool started on two long pieces, then ``signum`` sent to its parent alone (as ``kill PID``, a job
    runner or the OOM killer do): the parent, its workers, and how long the parent took to end."""
    parent = subprocess.Popen(
        [sys.executable, "-c", LONG_PIECES, str(REPO / "examples" / "tune" / "npu.yaml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # files, not pipes: a worker left holding them would hold up this test too
    )
    deadline = time.monotonic() + 60
    while len(workers := child_pids(parent.pid)) < 2:
        assert parent.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)  # both are in their pieces
    sent = time.monotonic()
    parent.send_signal(signum)
    try:
        parent.wait(timeout=30)
    except subprocess.TimeoutExpired:
        parent.kill()
        _ended(workers, within=0)
        pytest.fail(f"the pool's parent took over 30 s to end on {signal.Signals(signum).name}")
    return parent, workers, time.monotonic() - sent


def _ended(workers: list[int], within: float = 20) -> list[int]:
    deadline = time.monotonic() + within
    while (alive := [pid for pid in workers if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in alive:  # not to leave them behind when the test fails
        subprocess.run(["kill", "-9", str(pid)], check=False)
    return alive


@pytest.mark.slow
def test_a_sweep_terminated_midway_through_long_pieces_ends_at_once_and_its_workers_with_it():
    """The pool used to wait for its workers to finish the pieces in hand (22 s in hardening round 4, D24; as long
    as a piece takes): they ignore SIGTERM, so that the pool can tell a result from half of one."""
    parent, workers, took = _started_then(signal.SIGTERM)
    assert parent.returncode != 0 and took < 10
    assert _ended(workers) == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_no_worker_outlives_a_parent_killed_outright():
    """A parent killed by SIGKILL runs no clean-up: its workers, which ignore SIGTERM, waited for more work forever."""
    parent, workers, _ = _started_then(signal.SIGKILL)
    assert parent.returncode == -signal.SIGKILL
    assert _ended(workers) == []


HALF_A_RESULT = """
import struct, sys, time
import numpy as np
from perftool.tune import evaluator
from perftool.tune.space import Space
from perftool.tune.spec import load_tune_config

def long_piece(config, space, points):
    time.sleep(120)

class Stop(Exception):
    pass

evaluator.evaluate_points = long_piece  # the workers are forked: they run this
config = load_tune_config(sys.argv[1], [])
try:
    with evaluator.Evaluator(config, Space.of(config.tune.space), jobs=2) as pool:
        pool._map([config, config], [np.zeros((1, 1)), np.zeros((1, 1))])
        # what a worker killed while it sends a result leaves: a message's length, and none of the message
        pool._pool._result_queue._writer._send(struct.pack("!i", 1 << 20))
        time.sleep(0.5)
        raise Stop  # as Ctrl-C does
except Stop:
    print("closed")
"""


@pytest.mark.slow
def test_a_stopped_sweep_closes_its_pool_when_a_worker_died_halfway_through_sending_a_result():
    """Killed as they stopped, workers could leave half a result in the pipe: the pool waited for the rest of it
    for ever (the signalled ``tune -j 2`` of test_limits hung in CI)."""
    script = [sys.executable, "-c", HALF_A_RESULT, str(REPO / "examples" / "tune" / "npu.yaml")]
    result = subprocess.run(script, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "closed\n", "")


FORKSERVER_DEFAULT = """
import multiprocessing, sys
multiprocessing.set_start_method("forkserver", force=True)  # Python 3.14's default on Linux
import numpy as np
from perftool.tune.evaluator import Evaluator
from perftool.tune.exhaustive import exhaustive
from perftool.tune.space import Space
from perftool.tune.spec import load_tune_config

config = load_tune_config(sys.argv[1], ["tune.space={prefetch_depth: {range: [1, 600]}}"])
scores = []
for jobs in (1, 2):
    with Evaluator(config, Space.of(config.tune.space), jobs=jobs) as pool:
        exhaustive(pool)
        scores.append(pool.scores)
print(len(scores[0]), scores[0] == scores[1])
"""


@pytest.mark.skipif(not interrupts.FORKS, reason="fork is this system's to give")
def test_a_sweep_s_workers_are_forked_whatever_python_s_default():
    """Workers started by a fork server have it for their parent: they took their parent for dead and left, and the
    pool broke."""
    script = [sys.executable, "-c", FORKSERVER_DEFAULT, str(REPO / "examples" / "tune" / "npu.yaml")]
    result = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "600 True\n"), result.stderr


def test_a_worker_that_ignores_termination_asks_to_die_with_its_parent(monkeypatch):
    asked = []
    monkeypatch.setattr(interrupts, "die_with_parent", lambda: asked.append(True))
    handlers = {signum: signal.getsignal(signum) for signum in interrupts.HANDLED}
    try:
        interrupts.ignore_in_worker(end_on_termination=True)
        assert asked == []  # SIGTERM ends it: its parent's signal reaches it
        interrupts.ignore_in_worker(end_on_termination=False)
        assert asked == [True]
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
