"""Capture the real fixtures of ``compile_pair/``: one training loop on the CPU profiled twice, its model run eagerly
(``eager.pt.trace.json.gz``) and under ``torch.compile`` (``compiled.pt.trace.json.gz``: each step calls the compiled
model's ``Torch-Compiled Region``, Inductor's C++ kernels inside it). The model compiles in the warm-up steps of the
schedule (wait 0, warm-up 3, active 5), so the five steps recorded are steady. The same work either way, whose names
match little: the before and after of compiling a model.

perftool does not depend on torch; run this where torch and a C++ compiler are installed:

    python tests/data/capture_compile_pair.py tests/data/compile_pair
"""

from __future__ import annotations

import os
import sys

import torch
from capture_torch_trace import profiled_to, train_step  # this folder's script, run from anywhere

STEPS = 8  # warm-up 3 (the compile among them), active 5


def capture(compiled: bool, out: str) -> None:
    """Train for :data:`STEPS` steps, the model compiled or not, the trace gzipped to ``out``."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    run = torch.compile(model) if compiled else model
    with profiled_to(out, wait=0, warmup=3, active=5) as prof:
        for _ in range(STEPS):
            train_step(run, optimiser, torch.randn(32, 64), torch.randint(0, 10, (32,)))
            prof.step()


if __name__ == "__main__":
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    for compiled in (False, True):
        capture(compiled, os.path.join(root, f"{'compiled' if compiled else 'eager'}.pt.trace.json.gz"))
    print(f"wrote {root}")
