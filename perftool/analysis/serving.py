"""What a serving engine's step annotations say of its iterations beyond their time: the sequences each attends over."""

from __future__ import annotations

import numpy as np

from perftool.analysis.nesting import owners
from perftool.dialects.op_families import StepLengths
from perftool.dialects.vocabulary import ENGINE_STEP_LENGTHS
from perftool.trace.model import Kind, Trace


def step_lengths(trace: Trace, rows: np.ndarray) -> list[StepLengths | None]:
    """Per row (a host event): the sequence lengths of the engine iteration whose step annotation holds it on its
    thread, its prefills' and decodes' together; None where no annotation around it counts them."""
    named = np.flatnonzero(trace.of_kinds(Kind.ANNOTATION, Kind.STEP) & trace.name_matches(ENGINE_STEP_LENGTHS))
    if not (named.size and rows.size):
        return [None] * rows.size
    named = named[np.lexsort((trace.ts[named], trace.track[named]))]
    parsed: dict[int, StepLengths] = {}
    found: list[StepLengths | None] = []
    for at in owners(trace, named, rows).tolist():
        if at >= 0 and at not in parsed:
            match = ENGINE_STEP_LENGTHS.match(trace.names[trace.name[named[at]]])
            assert match is not None, "the annotations were chosen by this pattern"
            prefills, decodes = (int(n) for n in match.groups()[:4]), (int(n) for n in match.groups()[4:])
            parsed[at] = StepLengths(*(a + b for a, b in zip(prefills, decodes)))
        found.append(parsed[at] if at >= 0 else None)
    return found
