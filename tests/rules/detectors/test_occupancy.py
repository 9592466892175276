"""PT020's test of a kernel its own launch holds back: registers or shared memory, at or below the share, with more
warps to gain from lifting that limit alone."""

from __future__ import annotations

import pytest

from perftool.analysis.kernel_launch import Occupancy
from perftool.rules.detectors.occupancy import _held_back

MOST = 0.25  # the rule's max_occupancy


@pytest.mark.parametrize(
    ("occupancy", "held"),
    [
        (Occupancy(share=0.25, limit="registers", without_limit=0.5), True),  # at the share: counted
        (Occupancy(share=0.125, limit="shared memory", without_limit=1.0), True),
        (Occupancy(share=0.3, limit="registers", without_limit=1.0), False),  # above it
        (Occupancy(share=0.25, limit="registers", without_limit=0.25), False),  # lifting registers gains nothing
        (Occupancy(share=0.125, limit="blocks", without_limit=1.0), False),  # the grid's limit, not the launch's
        (Occupancy(share=0.125, limit="threads", without_limit=1.0), False),
    ],
)
def test_a_kernel_is_held_back_by_its_own_registers_or_shared_memory(occupancy, held):
    assert _held_back(occupancy, MOST) is held
