"""What a job is, as far as the emulator's settings go: those its framework and kind give it nothing to set."""

from __future__ import annotations

import pytest

from perftool.analysis.family import settings_absent


@pytest.mark.parametrize(
    ("family", "framework", "kind", "absent"),
    [
        ("gpu", "pytorch", "training", set()),
        ("npu", "pytorch", "training", {"loop_size"}),
        ("npu", "tensorflow", "training", set()),
        ("gpu", "jax", "training", {"pin_memory"}),
        ("gpu", "pytorch", "inference", {"replicas.bucket", "replicas.overlap", "gradient_accumulation",
                                         "offload_optimizer"}),
        ("gpu", "pytorch", "serving", {"prefetch_depth", "pin_memory", "workload.input_workers", "replicas.bucket",
                                       "replicas.overlap", "gradient_accumulation", "offload_optimizer"}),
    ],
)  # fmt: skip
def test_the_settings_a_job_has_nothing_to_set(family, framework, kind, absent):
    assert settings_absent(family, framework, kind) == absent
