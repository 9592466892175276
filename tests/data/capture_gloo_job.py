"""Capture the real two-rank job fixture ``gloo_cpu_job/rank{0,1}.pt.trace.json.gz``.

Two processes train a small MLP with DistributedDataParallel over gloo on the CPU, each under ``torch.profiler``
(wait 1, warm-up 1, 6 active steps); rank 1 sleeps 20 ms before each step's forward (a batch prepared slowly in
Python the profiler does not trace), so rank 0 waits for it in every all-reduce: a straggler whose cause lies
outside every traced call. With ``--with-stack`` the profiler records the Python stack too
(``with_stack=True``), so the sleep is in the trace: the fixture ``gloo_cpu_job_stack/``. perftool does not depend on
torch; run this where it is installed:

    python tests/data/capture_gloo_job.py tests/data/gloo_cpu_job
    python tests/data/capture_gloo_job.py tests/data/gloo_cpu_job_stack --with-stack
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from capture_torch_trace import gzip_to  # this folder's script, run from anywhere
from torch.profiler import ProfilerActivity, profile, schedule

WORLD = 2
SLOW_RANK, SLOW_S = 1, 0.02


def train(rank: int, out: str, with_stack: bool) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    layers = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    model = torch.nn.parallel.DistributedDataParallel(layers)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(
            activities=[ProfilerActivity.CPU],
            with_stack=with_stack,
            schedule=schedule(wait=1, warmup=1, active=6, repeat=1),
            on_trace_ready=lambda prof: prof.export_chrome_trace(raw),
        ) as prof:
            for _ in range(8):
                inputs, labels = torch.randn(64, 256), torch.randint(0, 10, (64,))
                if rank == SLOW_RANK:
                    time.sleep(SLOW_S)
                loss = torch.nn.functional.cross_entropy(model(inputs), labels)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                prof.step()
        gzip_to(raw, os.path.join(out, f"rank{rank}.pt.trace.json.gz"))
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(sys.argv[1], "--with-stack" in sys.argv[2:]), nprocs=WORLD)
