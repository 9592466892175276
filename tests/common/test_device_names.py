"""A device's name as the job view compares ranks by it: which model, never which one of a machine's devices."""

from __future__ import annotations

import pytest

from perftool.common.names import device_model, names_only_a_place


@pytest.mark.parametrize(
    ("name", "model", "named"),
    [
        ("GPU 3", "GPU", False),
        ("NPU", "NPU", False),
        ("MTIA 0", "MTIA", False),
        ("pid 12", "pid", False),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", True),
        ("NPU (Ascend910B)", "NPU (Ascend910B)", True),
        ("GPU 1 (NVIDIA H100 80GB HBM3)", "GPU (NVIDIA H100 80GB HBM3)", True),
        ("AMD Instinct MI300X", "AMD Instinct MI300X", True),
        ("TPU 2", "TPU", False),
        ("GPU 0, GPU 1", "GPU, GPU", False),
    ],
)
def test_a_device_s_model_leaves_out_which_one_it_is_and_a_place_names_no_model(name, model, named):
    assert device_model(name) == model
    assert names_only_a_place(name) is not named
