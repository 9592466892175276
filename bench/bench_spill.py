"""Benchmark: a trace larger than its memory budget, its columns kept on disk, against the same trace in memory.

    python bench/bench_spill.py --gb 8 --memory 2GB            # generates bench/out/kineto_8gb.json once
    python bench/bench_spill.py --trace FILE --memory 500MB --command scan   # or diff, gate, calibrate
    python bench/bench_spill.py --gb 24 --memory 2GB --on-disk-only   # a trace larger than this machine's memory

Runs ``perftool COMMAND TRACE --format json`` (``diff`` and ``gate`` compare the trace with itself) twice in fresh
processes, one after the other: in memory (``--memory`` far above what it needs) and under the budget (``--memory``,
so the columns go to disk). For each it prints the time and the peak memory of the whole process tree (the command
and its decoding workers), sampled every 20 ms: resident in all (VmRSS, which counts the mapped columns' pages the
kernel happens to keep) and the processes' own (Pss_Anon: what the kernel cannot drop, each page the processes
share counted once, where summing RssAnon would count the decoding workers' pages shared with the process that
forked them twice). Where this user may create a cgroup (v1 memory
controller, as root), the run under the budget is repeated in a cgroup limited to the budget, page cache and
all: finishing there shows the budget holds. It checks that both runs give the same JSON. ``--on-disk-only``
skips the run in memory, for a trace larger than the machine's memory.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CGROUPS = "/sys/fs/cgroup/memory"
COMMANDS = {  # each command's arguments besides the budget and the format
    "info": lambda path: [path],
    "scan": lambda path: [path, "--fail-on", "never"],
    "diff": lambda path: [path, path],
    "gate": lambda path: [path, path],
    "calibrate": lambda path: [path],
}
FINISHED = (0, 1)  # exit 1: a finding, a failed check or a regression, all reported
IN_MEMORY = "1TB"  # a budget no trace here reaches: the columns stay in memory


def _status(pid: int) -> dict[str, int]:
    """VmRSS (Rss) and Pss_Anon of one process, in bytes (empty once it is gone)."""
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                key, _, value = line.partition(":")
                if key in ("Rss", "Pss_Anon"):
                    fields["VmRSS" if key == "Rss" else key] = int(value.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return fields


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as children:
                    queue.extend(int(child) for child in children.read().split())
        except OSError:
            pass
    return found


def run(command: list[str], output: str, cgroup: str | None = None) -> dict:
    """Run ``command`` writing its JSON to ``output``; its time, exit code and peak memory of its process tree."""
    peak = {"VmRSS": 0, "Pss_Anon": 0}
    enter = (lambda: _join(cgroup)) if cgroup else None
    start = time.perf_counter()
    child = subprocess.Popen(  # noqa: PLW1509 - preexec_fn only joins the cgroup
        [*command, "-o", output], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=enter
    )
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            totals = {"VmRSS": 0, "Pss_Anon": 0}
            for pid in _tree(child.pid):
                for key, value in _status(pid).items():
                    totals[key] += value
            for key in peak:
                peak[key] = max(peak[key], totals[key])
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, errors = child.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"seconds": seconds, "rc": child.returncode, "error": errors.decode()[-300:], **peak}


def _join(cgroup: str) -> None:
    with open(os.path.join(cgroup, "cgroup.procs"), "w", encoding="ascii") as procs:
        procs.write(str(os.getpid()))


def limited_cgroup(limit: int) -> str | None:
    """A new memory cgroup limited to ``limit`` bytes (swap included), or None where none can be made."""
    path = os.path.join(CGROUPS, f"perftool-bench-{os.getpid()}")
    try:
        os.mkdir(path)
        for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            if os.path.exists(os.path.join(path, name)):
                with open(os.path.join(path, name), "w", encoding="ascii") as control:
                    control.write(str(limit))
    except OSError:
        return None
    return path


def _same_bytes(first: str, second: str) -> bool:
    with open(first, "rb") as one, open(second, "rb") as other:
        return one.read() == other.read()


def _peak_in(cgroup: str) -> int:
    with open(os.path.join(cgroup, "memory.max_usage_in_bytes"), encoding="ascii") as usage:
        return int(usage.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=8.0, help="size of the generated trace (default 8)")
    parser.add_argument("--trace", help="benchmark this file instead of a generated one")
    parser.add_argument("--memory", default="2GB", help="the memory budget (default 2GB)")
    parser.add_argument("--command", default="info", choices=COMMANDS, help="the command (default info)")
    parser.add_argument("--on-disk-only", action="store_true", help="skip the run in memory")
    args = parser.parse_args()

    sys.path.insert(0, HERE)
    from bench_load import generated
    from kineto_synth import write_trace

    from perftool.common.limits import parse_size, size_text

    path = args.trace or generated(f"kineto_{args.gb:g}gb.json", lambda out: write_trace(out, args.gb * 1000, seed=0))
    budget = parse_size(args.memory, "--memory")
    size = os.path.getsize(path)
    base = [sys.executable, "-m", "perftool", args.command, *COMMANDS[args.command](path), "--format", "json"]
    with tempfile.TemporaryDirectory(prefix="perftool-bench-") as folder:
        outputs = [os.path.join(folder, f"{name}.json") for name in ("memory", "disk")]
        in_memory = None if args.on_disk_only else run([*base, "--memory", IN_MEMORY], outputs[0])
        on_disk = run([*base, "--memory", args.memory], outputs[1])
        runs = [("on disk", on_disk)] if in_memory is None else [("in memory", in_memory), ("on disk", on_disk)]
        for name, result in runs:
            if result["rc"] not in FINISHED:
                sys.exit(f"{name}: exit {result['rc']}: {result['error']}")
        same = in_memory is not None and _same_bytes(*outputs)
        cgroup = limited_cgroup(budget)
        limited = run([*base, "--memory", args.memory], outputs[1], cgroup) if cgroup else None
        peak_in_cgroup = _peak_in(cgroup) if cgroup else 0
        if cgroup:
            os.rmdir(cgroup)

    gib = 1 << 30
    print(f"trace        {path}: {size / 1e9:,.2f} GB of JSON, {size / budget:.1f}x the budget")
    print(f"command      perftool {args.command}, budget --memory {args.memory} ({size_text(budget)})")
    for name, result in runs:
        print(
            f"{name:12s} {result['seconds']:7.1f} s  {size / 1e6 / result['seconds']:6.0f} MB/s   peak resident "
            f"{result['VmRSS'] / gib:5.2f} GiB, own {result['Pss_Anon'] / gib:5.2f} GiB "
            f"({result['Pss_Anon'] / budget:.2f}x the budget)"
        )
    if in_memory is not None:
        print(f"ratio        on disk runs at {in_memory['seconds'] / on_disk['seconds']:.2f}x the in-memory throughput")
        print(f"results      {'identical' if same else 'DIFFERENT'} JSON")
    if limited is None:
        print("cgroup       not available to this user: the budget is not enforced by the kernel here")
    else:
        failed = f"failed (exit {limited['rc']}: {limited['error'][-120:]})"
        verdict = "finished" if limited["rc"] in FINISHED else failed
        print(
            f"cgroup       limited to the budget, page cache included: {verdict} in {limited['seconds']:.1f} s, "
            f"peak charged {peak_in_cgroup / gib:.2f} GiB"
        )


if __name__ == "__main__":
    main()
