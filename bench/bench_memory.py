"""Benchmark: the memory a scan (or info) takes per event, of each kind, against what the memory guard budgets.

    python bench/bench_memory.py                 # 1,000,000 events of each kind
    python bench/bench_memory.py --events 200000
    python bench/bench_memory.py --command info  # perftool info, writing its JSON document

For each kind of event (all alike; a distinct name each; a distinct name and thread each; counter samples;
events with args) it writes a trace of that many events to bench/out, runs ``perftool scan`` (or ``perftool info
--format json``, whose document lists every track) on it in a fresh process, samples the summed resident memory of
the process and its decoding workers every 10 ms, and prints the peak beyond the same command's on a trace of
1,000 events, per event, next to :func:`perftool.common.limits.memory_to_scan`'s estimate for the same trace and
command. The guard holds where the estimate is at least the measured figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from perftool.common import limits
from perftool.pipeline.read import load_trace
from perftool.trace.columns import ColumnBuilder

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
KINDS = {  # an event of each kind, by its index
    "alike": lambda i: f'{{"ph":"X","name":"a","pid":1,"tid":1,"ts":{i},"dur":1}}',
    "names": lambda i: f'{{"ph":"X","name":"k{i}","pid":1,"tid":1,"ts":{i},"dur":1}}',
    "tracks": lambda i: f'{{"ph":"X","name":"k{i}","pid":1,"tid":{i},"ts":{i},"dur":1}}',
    "counters": lambda i: f'{{"ph":"C","name":"c","pid":1,"tid":1,"ts":{i},"args":{{"v":{i}}}}}',
    "args": lambda i: f'{{"ph":"X","name":"a","pid":1,"tid":1,"ts":{i},"dur":1,"args":{{"x":{i}}}}}',
}


def write(kind: str, events: int) -> str:
    path = os.path.join(OUT, f"memory_{kind}_{events}.json")
    if not os.path.exists(path):
        os.makedirs(OUT, exist_ok=True)
        with open(path, "w") as fh:
            fh.write('{"traceEvents":[' + ",".join(map(KINDS[kind], range(events))) + "]}")
    return path


def tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and every process below it, in KB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry))
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/status") as fh:
                total += next((int(line.split()[1]) for line in fh if line.startswith("VmRSS")), 0)
        except OSError:
            pass
        pending += children.get(pid, [])
    return total


COMMANDS = {  # each command as the bench runs it, the trace's path after its name
    "scan": ["scan", "--max-trace-size", "64GB", "--fail-on", "never"],
    "info": ["info", "--max-trace-size", "64GB", "--format", "json", "-o", os.devnull],
}


def peak_mb(path: str, command: str) -> float:
    """Peak summed resident memory of ``perftool COMMAND PATH`` and its workers, in MB."""
    name, *options = COMMANDS[command]
    with tempfile.TemporaryFile("w+") as said:  # info says where it wrote its document: kept out of the table
        process = subprocess.Popen([sys.executable, "-m", "perftool", name, path, *options],
                                   stdout=subprocess.DEVNULL, stderr=said)  # fmt: skip
        peak = 0
        while process.poll() is None:
            peak = max(peak, tree_rss_kb(process.pid))
            time.sleep(0.01)
        if process.returncode:
            said.seek(0)
            raise SystemExit(f"perftool {command} {path} exited {process.returncode}: {said.read().strip()}")
    return peak / 1024


def estimate_mb(path: str, command: str) -> float:
    """What the guard budgets for ``command`` on the trace at ``path``, in MB."""
    built: list[int] = []
    finish = ColumnBuilder.finish
    ColumnBuilder.finish = lambda self, metadata: (built.append(self.memory_needed), finish(self, metadata))[1]
    try:
        load_trace(path, workers=1, analysis=command)  # what the guard budgets for the command measured
    finally:
        ColumnBuilder.finish = finish
    return built[-1] / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--command", choices=COMMANDS, default="scan")
    args = parser.parse_args()
    empty = peak_mb(write("alike", 1_000), args.command)
    print(f"perftool {args.command} of 1,000 events: {empty:.0f} MB; {args.events:,} events of each kind")
    print(f"{'kind':10} {'JSON MB':>8} {'measured MB':>12} {'B/event':>8} {'guard MB':>9} {'B/event':>8}  holds")
    for kind in KINDS:
        path = write(kind, args.events)
        measured, budgeted = peak_mb(path, args.command) - empty, estimate_mb(path, args.command)
        per, budget_per = measured * 1e6 / args.events, budgeted * 1e6 / args.events
        size = os.path.getsize(path) / 1e6
        print(f"{kind:10} {size:8.1f} {measured:12.0f} {per:8.0f} {budgeted:9.0f} {budget_per:8.0f}  "
              f"{'yes' if budgeted >= measured else 'NO'}")  # fmt: skip
    print(
        f"per event {limits.MEMORY_PER_EVENT} B and a scan's {limits.ANALYSIS_MEMORY_PER_EVENT['scan']} B, per "
        f"distinct signature {limits.MEMORY_PER_SIGNATURE} B, per "
        f"counter sample {limits.MEMORY_PER_COUNTER_SAMPLE} B, per kept args {limits.MEMORY_PER_KEPT_ARGS} B, per "
        f"track info's document lists {limits.REPORT_MEMORY_PER_TRACK['info']} B"
    )


if __name__ == "__main__":
    main()
