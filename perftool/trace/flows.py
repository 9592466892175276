"""Flows as trace viewers pair them: a flow is its category and id, from its start to each of its ends."""

from __future__ import annotations

import numpy as np

from perftool.trace.model import Trace


def paired_flows(trace: Trace, sources: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``targets`` (flow ends, in row order) that a flow of ``sources`` reaches, and that flow's source
    (the first of its id). A flow is its category and id, as trace viewers pair them: Kineto numbers its
    forward-to-backward flows (``fwdbwd``) apart from its launches (``ac2g``), so an id can name one of each."""
    source_cat, target_cat = trace.cat[sources], trace.cat[targets]
    paired_sources, paired_targets = [], []
    for category in np.flatnonzero(np.bincount(target_cat)).tolist():
        mine, theirs = sources[source_cat == category], targets[target_cat == category]
        if mine.size == 0:
            continue
        ids, first = np.unique(trace.flow_id[mine], return_index=True)
        where = np.minimum(np.searchsorted(ids, trace.flow_id[theirs]), ids.size - 1)
        found = ids[where] == trace.flow_id[theirs]
        paired_sources.append(mine[first[where[found]]])
        paired_targets.append(theirs[found])
    if len(paired_targets) < 2:  # one category (most traces): already in row order
        return (paired_sources[0], paired_targets[0]) if paired_targets else (np.empty(0, np.int64),) * 2
    in_rows = np.argsort(np.concatenate(paired_targets), kind="stable")
    return np.concatenate(paired_sources)[in_rows], np.concatenate(paired_targets)[in_rows]
