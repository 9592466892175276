"""Benchmark: ``perftool diff`` time per event as the number of distinct kernel names grows.

    python bench/bench_diff_names.py                       # 10k, 100k and 1M distinct names
    python bench/bench_diff_names.py --names 10000 10000000

For each count N, two Kineto-like traces of N kernels with N distinct names (8 steps, names shared by both traces,
every third kernel 10% slower in the candidate) are written under bench/out, and ``perftool diff`` of them runs in a
fresh process. Printed per N: seconds, µs per event, the ratio to the smallest N's µs per event — flat when name
matching is linear (hashing); it grew with N when names were matched pairwise — and the peak memory, per name.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
STEPS = 8
METADATA = [
    {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python3"}},
    {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
    {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
    {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
]


def _name(i: int) -> str:
    """A distinct kernel name of letters only (numbers in names are normalised away by diff's matching)."""
    letters = []
    while True:
        i, digit = divmod(i, 26)
        letters.append(chr(97 + digit))
        if i == 0:
            return "kernel_" + "".join(letters)


def write(path: str, names: int, slower: bool) -> None:
    """A trace of ``names`` kernels, each its own name, over :data:`STEPS` steps, written event by event."""
    per_step = -(-names // STEPS)
    with open(path, "w") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        out.write(",\n".join(json.dumps(event) for event in METADATA))
        ts = 0.0
        for step in range(STEPS):
            first, last = step * per_step, min(names, (step + 1) * per_step)
            marker = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 100, "tid": 1,
                      "ts": ts, "dur": (last - first) * 3.0 + 5}  # fmt: skip
            out.write(",\n" + json.dumps(marker))
            for i in range(first, last):
                dur = 2.2 if slower and i % 3 == 0 else 2.0
                out.write(
                    f',\n{{"ph": "X", "cat": "kernel", "name": "{_name(i)}", "pid": 0, "tid": 7, '
                    f'"ts": {ts + 1 + (i - first) * 3.0:.1f}, "dur": {dur}}}'
                )
            ts += (last - first) * 3.0 + 10
        out.write("\n]}\n")


def measure(names: int, fmt: str) -> tuple[float, int]:
    """Seconds ``perftool diff`` of the two traces of ``names`` names takes in a fresh process, and its peak
    resident memory in bytes (the largest of the command and the decoding processes it waited for)."""
    paths = [os.path.join(OUT, f"diff_names_{names}_{side}.json") for side in ("base", "new")]
    for path, slower in zip(paths, (False, True)):
        if not os.path.exists(path):
            os.makedirs(OUT, exist_ok=True)
            write(path, names, slower)
    start = time.perf_counter()
    command = [sys.executable, "-m", "perftool", "diff", *paths, "--format", fmt]
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode not in (0, 1):
            errors.seek(0)
            raise SystemExit(errors.read().decode()[-500:])
    return seconds, usage.ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument(
        "--format", default="json", choices=("json", "text", "html", "markdown"), help="diff's output (default json)"
    )
    args = parser.parse_args()
    base = None
    print(f"cores {os.cpu_count()}; each trace has as many kernel events as distinct names, over {STEPS} steps; "
          f"diff --format {args.format}")  # fmt: skip
    for names in sorted(args.names):
        seconds, peak = measure(names, args.format)
        per_event = seconds / (2 * names) * 1e6
        base = base or per_event
        print(
            f"{names:>12,} names   {seconds:8.2f} s   {per_event:6.2f} µs/event   ×{per_event / base:.2f} of the first"
            f"   peak {peak / 1e9:6.2f} GB ({peak / names:,.0f} bytes a name)"
        )


if __name__ == "__main__":
    main()
