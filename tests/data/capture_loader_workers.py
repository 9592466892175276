"""Capture the real fixtures of ``loader_workers/``: one training loop on the CPU profiled twice, its batches from a
PyTorch DataLoader with ``num_workers=0`` (``workers0.pt.trace.json.gz``: each batch loaded in the training process,
under ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``) and with ``num_workers=2``
(``workers2.pt.trace.json.gz``: the loop waits for the workers' batches under
``enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__``): the before and after of the usual fix of an
input-bound loop. Schedule wait 1, warm-up 2, active 5.

perftool does not depend on torch; run this where it is installed:

    python tests/data/capture_loader_workers.py tests/data/loader_workers
"""

from __future__ import annotations

import os
import sys

import torch
from capture_torch_trace import profiled_to, train_step  # this folder's script, run from anywhere

STEPS = 8  # wait 1, warm-up 2, active 5


class Samples(torch.utils.data.Dataset):
    """Samples made on the fly, each normalised as a transform would: loading costs the host some time."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        generator = torch.Generator().manual_seed(index)
        sample = torch.randn(64, generator=generator)
        return (sample - sample.mean()) / sample.std(), index % 10


def capture(workers: int, out: str) -> None:
    """Train for :data:`STEPS` steps on batches from ``workers`` DataLoader workers, the trace gzipped to ``out``."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Samples(), batch_size=32, num_workers=workers)
    with profiled_to(out, wait=1, warmup=2, active=5) as prof:
        for step, (inputs, labels) in enumerate(loader):
            if step == STEPS:
                break
            train_step(model, optimiser, inputs, labels)
            prof.step()


if __name__ == "__main__":
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    for workers in (0, 2):
        capture(workers, os.path.join(root, f"workers{workers}.pt.trace.json.gz"))
    print(f"wrote {root}")
