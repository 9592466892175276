"""Capture the real PyTorch profiler fixture ``torch_cpu_compile_first_call.pt.trace.json.gz``.

The first training step of a small MLP under ``torch.compile`` on the CPU, profiled alone and without a schedule
(no step marker): TorchDynamo and Inductor compile the forward and the backward, the compiled regions run once for
that step's result, and the optimizer steps; the model never runs again. The capture is a model's first call and
nothing more. perftool does not depend on torch; run this where torch and a C++ compiler are installed
(``pip install torch``), with Inductor's caches empty as on a first run (the fixture was: with them filled, the
compile reads its code back and takes a third of the time):

    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) python tests/data/capture_torch_compile_first_call.py \
        tests/data/torch_cpu_compile_first_call.pt.trace.json.gz
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
from capture_torch_compile_trace import compiled_mlp  # this folder's scripts, run from anywhere
from capture_torch_trace import gzip_to, train_step
from torch.profiler import ProfilerActivity, profile


def main(out: str) -> None:
    compiled, optimiser = compiled_mlp()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            train_step(compiled, optimiser, torch.randn(32, 64), torch.randint(0, 10, (32,)))
        prof.export_chrome_trace(raw)
        gzip_to(raw, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch_cpu_compile_first_call.pt.trace.json.gz")
