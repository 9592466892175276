"""PT024 on real training captures: PyTorch 1.8's zero_grad fills each gradient with zeros while the GPU waits; later
PyTorch drops them (set_to_none=True, its default since 2.0), and a capture that does is told nothing."""

from __future__ import annotations

import pytest
from conftest import DATA, scanned

REAL = DATA / "real"


def _findings(run, capture: str) -> dict:
    return scanned(run, str(REAL / capture))[1]


def test_a_zero_grad_filling_every_gradient_is_told_to_drop_them(run):
    """ResNet-50 on PyTorch 1.8: zero_grad launches a fill for each of its 161 parameters, 9.5 ms of host time a step
    with the GPU idle for 7.8 ms of it, as a look at the file shows; and PT001 names it first of what the host runs
    and dispatches while the GPU idles."""
    findings = _findings(run, "resnet50_pt18_workers4.json.gz")
    found = findings["PT024"]
    assert found["values"]["launches_per_step"] == pytest.approx(161.0)
    assert found["values"]["idle_ms_per_step"] == pytest.approx(7.805, abs=0.01)
    assert found["severity"] == "warning"  # 6.5% of a 124.5 ms step
    assert found["evidence"][0]["name"] == "Optimizer.zero_grad#SGD.zero_grad"
    assert "zero_grad(set_to_none=True)" in found["fix"]["text"]
    for names in ("host_names", "dispatched_names"):  # by the idle in each, not its length (Optimizer.step: 21 ms)
        assert findings["PT001"]["values"][names].startswith("Optimizer.zero_grad#SGD.zero_grad, ")


@pytest.mark.parametrize(
    "capture",
    [
        "nccl_a100_rank.json.gz",  # PyTorch 2.x: zero_grad launches nothing
        "mi300_resnet18_nopool.json.gz",  # it frees the gradients (the allocator's calls, PT001's), launching nothing
    ],
)
def test_no_finding_where_zero_grad_launches_nothing(run, capture):
    assert "PT024" not in _findings(run, capture)
