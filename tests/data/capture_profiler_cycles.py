"""Capture the real fixtures of ``profiler_cycles/``: directories as ``torch.profiler.tensorboard_trace_handler`` writes
them when the profiler's schedule repeats, one trace per cycle, each named ``{host}_{pid}.{time}.pt.trace.json.gz``.

- ``one_process/``: a small MLP trained on the CPU, schedule wait 1, warm-up 1, active 4, repeat 2: two captures of
  one process (steps 2-5 and 8-11);
- ``gloo_job/``: two ranks training it with DistributedDataParallel over gloo, the same schedule: two captures of
  each rank;
- ``two_runs/``: the one-process training run twice, one process after the other, into one directory (as a log
  directory collects runs): two processes of no distributed job, two captures each.

perftool does not depend on torch; run this where it is installed:

    python tests/data/capture_profiler_cycles.py tests/data/profiler_cycles
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from capture_torch_trace import train_step  # this folder's script, run from anywhere
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

WORLD = 2
STEPS = 12  # two cycles of wait 1, warm-up 1, active 4


def train(rank: int, out: str, distributed: bool) -> None:
    """Train for :data:`STEPS` steps under a repeating profiler schedule, each cycle's trace written to ``out``."""
    if distributed:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29534")
        dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model: torch.nn.Module = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=4, repeat=2),
        on_trace_ready=tensorboard_trace_handler(out, use_gzip=True),
    ) as prof:
        for _ in range(STEPS):
            train_step(model, optimiser, torch.randn(32, 64), torch.randint(0, 10, (32,)))
            prof.step()
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    root = sys.argv[1]
    train(0, os.path.join(root, "one_process"), distributed=False)
    mp.spawn(train, args=(os.path.join(root, "gloo_job"), True), nprocs=WORLD)
    for _ in range(2):  # a process each time
        mp.spawn(train, args=(os.path.join(root, "two_runs"), False), nprocs=1)
    print(f"wrote {root}")
