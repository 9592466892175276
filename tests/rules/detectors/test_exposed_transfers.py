"""PT007's detector on emulated IPU traces: the IO tiles a micro-batch needs, and the power of two above them as the
alternative the emulator judges (Graphcore's guide sweeps powers of two; every tile more is taken from compute)."""

from __future__ import annotations

import pytest
from conftest import REPO

from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.rules.detectors import exposed_transfers

NO_IO_TILES = REPO / "sample_traces" / "ipu" / "serialised_transfers_no_io_tiles"


@pytest.mark.parametrize(
    ("sample_size", "tiles", "rounded"),
    [(None, 5, [8]), ("290kB", 8, [])],
    ids=["2.4 MB: 5 tiles, or 8", "4.6 MB: 8 tiles, a power of two already"],
)
def test_the_tiles_a_micro_batch_needs_and_the_power_of_two_above_them(run, tmp_path, sample_size, tiles, rounded):
    """Micro-batches of 16 samples: 1.05 × 16 × 150 kB / 624 kB needs 5 tiles; 1.05 × 16 × 290 kB / 624 kB, 8."""
    trace = NO_IO_TILES.with_suffix(".trace.json.gz")
    if sample_size is not None:
        trace = tmp_path / "trace.json"
        run(
            "emulate",
            NO_IO_TILES.with_suffix(".yaml"),
            "--set",
            f"workload.sample_size={sample_size}",
            "--trace",
            trace,
        )
    _, scope = analyse_trace(load_trace(str(trace)), [])
    found = exposed_transfers.detect(scope, {})
    assert found is not None and found.changes == {"io_tiles": tiles} and found.values["io_tiles"] == tiles
    assert [(a.changes, a.values["io_tiles"]) for a in found.alternatives] == [({"io_tiles": n}, n) for n in rounded]
