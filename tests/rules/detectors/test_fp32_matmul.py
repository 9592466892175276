"""PT014's choice of the dtype an fp32 job's matrix maths moves to, on peaks given by hand."""

from __future__ import annotations

import pytest

from perftool.hardware import DeviceSpec
from perftool.rules.detectors.fp32_matmul import faster_dtype


@pytest.mark.parametrize(
    ("peaks", "chosen"),
    [
        ({"fp32": 67, "tf32": 495, "bf16": 989}, ("tf32", 495e12)),  # TF32 keeps fp32 storage: the least change
        ({"fp32": 47.9, "bf16": 383, "fp16": 383}, ("bf16", 383e12)),  # no TF32 in hardware: bf16 autocast
        ({"fp32": 15.7, "fp16": 125}, ("fp16", 125e12)),  # neither TF32 nor bf16: fp16
        ({"fp32": 100, "tf32": 100, "bf16": 200}, ("bf16", 200e12)),  # a TF32 no faster than fp32 is passed over
        ({"fp32": 100, "tf32": 100}, None),  # nothing beats fp32
        ({"bf16": 100}, None),  # no fp32 figure to beat
    ],
)
def test_the_first_of_tf32_bf16_fp16_that_beats_fp32_in_hardware(peaks, chosen):
    assert faster_dtype(DeviceSpec.model_construct(peak_tflops=peaks)) == chosen
