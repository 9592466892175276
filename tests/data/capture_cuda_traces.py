"""Capture the real CUDA PyTorch profiler fixtures (``cuda_*.pt.trace.json.gz``) on a machine with a GPU.

Two small training loops under ``torch.profiler`` with a wait/warmup/active schedule, each with one
known pathology, as a user's script produces it:

- ``cuda_input_bound_pageable``: a DataLoader with ``num_workers=0`` whose batches take a few ms to
  prepare on the CPU, inputs copied from pageable memory, and a large result read back to pageable
  memory every step (``.cpu()``);
- ``cuda_launch_bound``: a step of hundreds of tiny elementwise ops, each its own kernel launch.

perftool does not depend on torch or a GPU; run this where both are (CI never does):

    python tests/data/capture_cuda_traces.py tests/data
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule


class SlowDataset(torch.utils.data.Dataset):
    """Samples whose preparation costs CPU time, as decoding and augmentation do."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(index)
        image = torch.rand(3, 64, 64, generator=generator)
        deadline = time.perf_counter() + 0.0001  # ~0.1 ms of "augmentation" per sample
        while time.perf_counter() < deadline:
            image = image.flip(-1)
        return image, index % 10


def capture(out_dir: str, name: str, step, steps: int = 8) -> None:
    """Profile ``steps`` calls of ``step`` (2 skipped, 1 warm-up, the rest recorded) into ``name``."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=1, warmup=1, active=steps - 2),
            on_trace_ready=lambda prof: prof.export_chrome_trace(raw),
        ) as prof:
            for _ in range(steps):
                step()
                prof.step()
        with open(raw, "rb") as src, gzip.GzipFile(os.path.join(out_dir, name), "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)


def input_bound_pageable(out_dir: str) -> None:
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 10),
    ).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = iter(torch.utils.data.DataLoader(SlowDataset(), batch_size=64, num_workers=0))  # no workers, no pinning
    big = torch.zeros(16 << 20, device=device)  # 64 MB read back every step

    def step() -> None:
        images, labels = next(loader)
        images, labels = images.to(device), labels.to(device)  # from pageable memory
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        big.add_(1.0)
        big.cpu()  # a blocking copy to pageable memory

    capture(out_dir, "cuda_input_bound_pageable.pt.trace.json.gz", step)


def launch_bound(out_dir: str) -> None:
    device = torch.device("cuda")
    weights = [torch.randn(64, device=device, requires_grad=True) for _ in range(8)]
    optimiser = torch.optim.SGD(weights, lr=0.01)
    x = torch.randn(64, device=device)

    def step() -> None:
        value = x
        for _ in range(25):
            for w in weights:
                value = torch.tanh(value * w + 0.1)
        loss = value.sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    capture(out_dir, "cuda_launch_bound.pt.trace.json.gz", step)


if __name__ == "__main__":
    torch.manual_seed(0)
    target = sys.argv[1] if len(sys.argv) > 1 else "."
    input_bound_pageable(target)
    launch_bound(target)
    print(torch.__version__, torch.cuda.get_device_name())
