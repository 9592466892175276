"""Capture the real PyTorch profiler fixture ``torch_cpu_train.pt.trace.json.gz``.

A small MLP trained for a few steps on the CPU under ``torch.profiler`` with a wait/warmup/active
schedule, so the trace holds ``ProfilerStep#N`` annotations, ``cpu_op`` events, a data-loading
span and ``aten::item`` sync points, as a real training loop produces them. perftool does not
depend on torch; run this with any environment that has it (``pip install torch``):

    python tests/data/capture_torch_trace.py tests/data/torch_cpu_train.pt.trace.json.gz
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def main(out: str) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(512, 64), torch.randint(0, 10, (512,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    batches = iter(loader)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=4),
            record_shapes=True,
            on_trace_ready=lambda prof: prof.export_chrome_trace(raw),
        ) as prof:
            for _ in range(6):
                with record_function("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
                    inputs, labels = next(batches)
                train_step(model, optimiser, inputs, labels)
                prof.step()
        gzip_to(raw, out)
    print(f"wrote {out}")


def train_step(
    model: torch.nn.Module, optimiser: torch.optim.Optimizer, inputs: torch.Tensor, labels: torch.Tensor
) -> None:
    """One step of classification training, reading the loss back as a training loop logs it."""
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    loss.item()


@contextmanager
def profiled_to(out: str, wait: int, warmup: int, active: int) -> Iterator[profile]:
    """A CPU profiler over one cycle of the schedule (wait, warm-up, active steps), its trace gzipped to ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            on_trace_ready=lambda prof: prof.export_chrome_trace(raw),
        ) as prof:
            yield prof
        gzip_to(raw, out)


def gzip_to(raw: str, out: str) -> None:
    """The profiler's JSON at ``raw``, gzipped to ``out`` with no timestamp in the header (the same bytes each run)."""
    with open(raw, "rb") as src, gzip.GzipFile(out, "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch_cpu_train.pt.trace.json.gz")
