"""Benchmark: hostile shapes of input at three sizes each, to show every path linear in what the input holds.

    python bench/bench_hostile.py                 # every shape, at its three sizes
    python bench/bench_hostile.py --shape threads

Each shape is generated under bench/out (once) at a small, a middle and a large size, and the command runs on it in a
fresh process. Printed per size: seconds, µs per element (a dimension, a character, a thread, a step, a name), the
ratio to the smallest size's µs per element — the target is at most 2x, where a quadratic path grows with the size —
and the peak memory of the command and the processes it waited for.

Shapes (each was super-linear once):

* ``dims``: one ``aten::mm`` whose recorded input shape has N sizes (``perftool info``);
* ``thread-name``: a thread named ``preprocess`` repeated to N characters (``perftool info``);
* ``threads``: N threads with one ``aten::mm`` each (``perftool scan``);
* ``steps``: an emulated run of N steps (``perftool emulate``);
* ``diff-html``: two traces of N distinct kernel names, compared (``perftool diff --format html``);
* ``npu-kernels``: msprof's ``kernel_details.csv`` of N kernels beside a torch_npu trace (the real rank's rows of
  ``tests/data/real``, repeated), read with it (``perftool info``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
sys.path.insert(0, HERE)


def _events(path: str, events: list[dict]) -> None:
    with open(path, "w") as out:
        json.dump({"traceEvents": events}, out)


def _dims(path: str, n: int) -> None:
    op = {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
          "args": {"Input Dims": [list(range(1, n + 1)), [64, 64]]}}  # fmt: skip
    _events(path, [{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0,
                    "dur": 100}, op])  # fmt: skip


def _thread_name(path: str, n: int) -> None:
    name = ("preprocess" * (n // 10 + 1))[:n]
    _events(path, [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": name}},
                   {"ph": "X", "name": "work", "pid": 1, "tid": 2, "ts": 0, "dur": 5}])  # fmt: skip


def _threads(path: str, n: int) -> None:
    events = [{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1, "tid": 0, "ts": 0,
               "dur": n * 10 + 10}]  # fmt: skip
    events += [{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": i + 1, "ts": i * 10, "dur": 5,
                "args": {"Input Dims": [[64, 64], [64, 64]]}} for i in range(n)]  # fmt: skip
    _events(path, events)


def _diff_names(path: str, n: int) -> None:
    from bench_diff_names import write

    write(path, n, slower=False)
    write(path.replace(".json", "_new.json"), n, slower=True)


def _npu_kernels(path: str, n: int) -> None:
    """A torch_npu trace (one step, one kernel) with msprof's table of ``n`` kernels beside it."""
    _events(path, [{"ph": "X", "name": "ProfilerStep#1", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
                   {"ph": "X", "name": "MatMulV2", "pid": 2, "tid": 3, "ts": 10, "dur": 50}])  # fmt: skip
    real = os.path.join(REPO, "tests", "data", "real", "torch_npu_text_l2_rank0_kernel_details.csv")
    with open(real) as table:
        header, *rows = table.read().splitlines()
    with open(os.path.join(os.path.dirname(path), "kernel_details.csv"), "w") as out:
        out.write(header + "\n")
        for at in range(n):
            out.write(rows[at % len(rows)] + "\n")


SHAPES: dict[str, tuple[str, tuple[int, int, int], Callable[[str, int], None] | None, list[str]]] = {
    # name: (what an element is, sizes, the input's writer, the command ({path}, {n}))
    "dims": ("dimension", (100_000, 300_000, 1_000_000), _dims, ["info", "{path}"]),
    "thread-name": ("character", (50_000, 200_000, 800_000), _thread_name, ["info", "{path}"]),
    "threads": ("thread", (30_000, 100_000, 300_000), _threads, ["scan", "{path}", "--fail-on", "never"]),
    "steps": ("step", (10_000, 100_000, 1_000_000), None,
              ["emulate", os.path.join(REPO, "sample_traces", "gpu", "healthy.yaml"), "--set", "workload.steps={n}"]),
    "diff-html": ("name", (10_000, 100_000, 300_000), _diff_names,
                  ["diff", "{path}", "{new}", "--format", "html"]),
    "npu-kernels": ("kernel", (100_000, 300_000, 1_000_000), _npu_kernels, ["info", "{path}"]),
}  # fmt: skip
FILES = {"npu-kernels": os.path.join("hostile_{shape}_{n}", "ASCEND_PROFILER_OUTPUT", "trace_view.json")}  # a layout


def measure(shape: str, n: int) -> tuple[float, int]:
    """Seconds the shape's command takes on its input of size ``n`` in a fresh process, and the peak resident memory
    in bytes of it and the processes it waited for."""
    _, _, writer, command = SHAPES[shape]
    path = os.path.join(OUT, FILES.get(shape, "hostile_{shape}_{n}.json").format(shape=shape, n=n))
    if writer is not None and not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        writer(path, n)
    argv = [part.format(path=path, n=n, new=path.replace(".json", "_new.json")) for part in command]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen([sys.executable, "-m", "perftool", *argv], stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            errors.seek(0)
            raise SystemExit(f"{shape} at {n}: {errors.read().decode()[-500:]}")
    return seconds, usage.ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append", help="only these (default: all)")
    args = parser.parse_args()
    print(f"cores {os.cpu_count()}; each size in a fresh process; target: µs per element at most 2x the smallest's")
    for shape in args.shape or list(SHAPES):
        element, sizes, _, _ = SHAPES[shape]
        first = None
        for n in sizes:
            seconds, peak = measure(shape, n)
            per = seconds / n * 1e6
            first = first or per
            print(f"{shape:<12} {n:>10,} {element}s  {seconds:7.2f} s  {per:8.3f} µs/{element}  "
                  f"x{per / first:.2f} of the smallest  peak {peak / 1e6:7.1f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
