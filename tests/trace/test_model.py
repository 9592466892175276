"""The trace model's own bookkeeping: track roles assigned by id."""

from __future__ import annotations

import numpy as np
from conftest import REPO

from perftool.pipeline.read import load_trace
from perftool.trace.model import Role

KINETO_SAMPLE = str(REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz")


def test_roles_replace_the_tracks_whose_role_changes_and_keep_the_others():
    """A trace of many threads is given roles a few at a time: the tracks a call leaves as they were stay the same
    records (replacing each one was a quarter of info's time on a trace of 100,000 threads), the one it changes is
    replaced, and the per-event role masks follow."""
    trace = load_trace(KINETO_SAMPLE)
    before = list(trace.tracks)
    host = next(t for t in before if t.role == Role.HOST)
    kept = next(t for t in before if t.role != Role.HOST)
    was_host = trace.on_roles(Role.HOST).copy()
    trace.with_roles({host.id: Role.UNKNOWN, kept.id: kept.role})  # one changed, one given the role it has
    assert [t.id for t in trace.tracks] == [t.id for t in before]
    assert {t.id: t.role for t in trace.tracks}[host.id] == Role.UNKNOWN and host.role == Role.HOST
    assert all(new is old for new, old in zip(trace.tracks, before) if new.id != host.id)
    on_host = trace.track == host.id
    assert on_host.any() and np.array_equal(trace.on_roles(Role.HOST), was_host & ~on_host)
