"""Capture the real PyTorch profiler fixture ``torch_cpu_compile_recompile.pt.trace.json.gz``.

A small MLP under ``torch.compile`` trained for 12 steps on the CPU under ``torch.profiler`` with a schedule
that records every step from the first: step 0 holds the first compile (TorchDynamo's timed phases, Inductor
writing and building its C++ kernels), and step 7 feeds a batch of another size, so the guard on the input's
shape fails and the model compiles again (compile id 0/1) in the steady state. perftool does not depend on
torch; run this where torch and a C++ compiler are installed (``pip install torch``):

    python tests/data/capture_torch_compile_trace.py tests/data/torch_cpu_compile_recompile.pt.trace.json.gz
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
from capture_torch_trace import gzip_to, train_step  # this folder's script, run from anywhere
from torch.profiler import ProfilerActivity, profile, schedule

STEPS = 12
OTHER_BATCH_STEP = 7  # the step fed 17 rows instead of 32: a new shape, compiled again


def compiled_mlp() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The MLP the fixtures train, under torch.compile, and its optimiser (seeded: the same weights each run)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
    return torch.compile(model), torch.optim.SGD(model.parameters(), lr=0.01)


def main(out: str) -> None:
    compiled, optimiser = compiled_mlp()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=0, active=STEPS, repeat=1),
            record_shapes=True,
            on_trace_ready=lambda prof: prof.export_chrome_trace(raw),
        ) as prof:
            for step in range(STEPS):
                rows = 17 if step == OTHER_BATCH_STEP else 32
                train_step(compiled, optimiser, torch.randn(rows, 64), torch.randint(0, 10, (rows,)))
                prof.step()
        gzip_to(raw, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch_cpu_compile_recompile.pt.trace.json.gz")
