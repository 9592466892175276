"""PT021 and PT022 on real DDP captures: the buffers broadcast at every forward, and the gradients copied out of their
buckets, where a job does so and the device waits for it; nothing where it costs the step nothing worth saying or does
not happen."""

from __future__ import annotations

import pytest
from conftest import DATA, scanned

REAL = DATA / "real"


def _findings(run, capture: str) -> dict:
    return scanned(run, str(REAL / capture))[1]


def test_a_ddp_job_that_broadcasts_its_buffers_at_every_forward_is_told_so(run):
    """One forward a step, which flattens, broadcasts and unflattens buffers twice (15 and 7 ms in
    aten::unflatten_dense_tensors) with the GPU idle, as a look at the file shows."""
    found = _findings(run, "nccl_a100_rank.json.gz")["PT021"]
    assert found["values"]["per_step"] == pytest.approx(1.0)
    assert found["values"]["idle_ms_per_step"] == pytest.approx(34.86, abs=0.01)
    assert found["severity"] == "warning"  # 15.7% of the step
    assert found["evidence"][0]["name"] == "aten::unflatten_dense_tensors"
    assert "broadcast_buffers=False" in found["fix"]["text"]


@pytest.mark.parametrize(
    "capture",
    [
        "ddp_v100_rank1.json.gz",  # DDP, no buffer broadcast in its forward
        "mi300_resnet_actckpt_ddp8_rank0.json.gz",  # a broadcast of 0.1 ms a forward: under the rule's 2%
    ],
)
def test_no_finding_where_the_broadcast_is_absent_or_cheap(run, capture):
    assert "PT021" not in _findings(run, capture)


def test_a_ddp_job_that_copies_its_gradients_out_of_the_buckets_is_told_so(run):
    """161 copies a step, one per parameter, at the end of the backward on the autograd thread: 8.8 ms of host time
    with the GPU idle 7.4 ms of it, and 0.5 ms of device-to-device copies."""
    found = _findings(run, "nccl_a100_rank.json.gz")["PT022"]
    assert found["values"]["per_step"] == pytest.approx(161.0)
    assert found["values"]["idle_ms_per_step"] == pytest.approx(7.411, abs=0.001)
    assert found["values"]["copy_ms_per_step"] == pytest.approx(0.510, abs=0.001)
    assert found["severity"] == "info"  # 3.6% of the step
    assert "gradient_as_bucket_view=True" in found["fix"]["text"]


def test_no_gradient_copies_where_the_capture_s_steps_make_none(run):
    """The MI300X job copies gradients out of its buckets only outside its steady steps; the V100 job never."""
    for capture in ("mi300_resnet_actckpt_ddp8_rank0.json.gz", "ddp_v100_rank1.json.gz"):
        assert "PT022" not in _findings(run, capture)
