"""The trace model's own bookkeeping: track roles assigned by id, per-event lookups in tables of codes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO

from perftool.pipeline.read import load_trace
from perftool.trace.model import FEW_ENTRIES, Kind, Role, among_kinds, looked_up

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


@pytest.mark.parametrize("chosen", [0, 1, 3, FEW_ENTRIES, FEW_ENTRIES + 1, len(Kind) - FEW_ENTRIES - 1,
                                    len(Kind) - FEW_ENTRIES, len(Kind) - 1, len(Kind)])  # fmt: skip
def test_a_table_is_read_per_code_whether_it_sets_few_entries_many_or_all_but_a_few(chosen):
    """Each code's entry in a table, read by comparing codes where it sets few (or leaves few unset), else taken:
    the same as indexing the table, for kinds chosen from none to all, and for the kinds of a real trace's events."""
    kinds = [Kind(k) for k in np.random.default_rng(chosen).choice([k.value for k in Kind], chosen, replace=False)]
    table = np.zeros(max(Kind) + 1, dtype=bool)
    table[kinds] = True
    trace = load_trace(KINETO_SAMPLE)
    codes = np.r_[trace.kind, np.array([k.value for k in Kind], dtype=trace.kind.dtype)]  # every kind at least once
    assert np.array_equal(among_kinds(codes, kinds), table[codes])
    assert np.array_equal(looked_up(table, codes[::-1]), table[codes[::-1]])
    assert looked_up(table, codes).sum() == np.isin(codes, kinds).sum() and (chosen == 0) == (not table[codes].any())
