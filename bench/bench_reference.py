"""Benchmark: ``perftool info`` against the best plain-Python pipeline on the same trace, as ratios of one run.

    python bench/bench_reference.py --mb 500          # the Kineto-like trace bench_load.py generates
    python bench/bench_reference.py --trace FILE

The reference pipeline is what a careful engineer writes without perftool: the whole file decoded by msgspec into
typed structs (the fields a summary needs), columns built with numpy (names, categories and tracks interned once
each), then the device's busy time (the union of kernel intervals), the step times and the top kernels by time.
``perftool info FILE --format json`` does that and more (roles, idle causes, collectives, the roofline). Each runs
in a fresh process, alternating, best of ``--repeat``, timed from before it imports numpy or perftool (what a user
waits for, but the interpreter's start, the same for both); printed: each time and peak RSS, and the ratios
perftool / reference (time: of the best passes, of each pair of passes and their median, the spread the machine
gives it) and peak RSS / file size; then each best pass's CPU time, user and system, and page faults, whose cost
is the machine's (a pipeline that grows its memory by a gigabyte spends its system time faulting pages in), and
what a fault costs this machine (1 GiB faulted in by a fresh process). Targets
(issue #31): time <= 0.6x, RSS <= 0.6x the file.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

import msgspec

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Event(msgspec.Struct, gc=False):
    """The fields of an event the reference pipeline reads (untracked by the garbage collector, as msgspec advises for
    millions of small structs)."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0


class Document(msgspec.Struct):
    traceEvents: list[Event]


def reference(path: str) -> dict:
    """The plain pipeline: typed decode of the whole document, numpy columns, busy time, steps, top kernels (timed
    from before numpy is imported, as a script would)."""
    start = time.perf_counter()
    import numpy as np

    with open(path, "rb") as fh:
        events = msgspec.json.decode(fh.read(), type=Document).traceEvents
    names: dict[str, int] = {}
    cats: dict[str, int] = {}
    ts = np.array([e.ts for e in events], np.float64)
    dur = np.array([e.dur for e in events], np.float64)
    name = np.array([names.setdefault(e.name, len(names)) for e in events], np.int32)
    cat = np.array([cats.setdefault(e.cat, len(cats)) for e in events], np.int32)
    complete = np.array([e.ph == "X" for e in events], bool)
    del events
    kernel = complete & (cat == cats.get("kernel", -1))
    order = np.argsort(ts[kernel], kind="stable")
    starts, ends = ts[kernel][order], np.maximum.accumulate((ts + dur)[kernel][order])
    opens = np.r_[True, starts[1:] > ends[:-1]] if starts.size else np.empty(0, bool)
    first = np.flatnonzero(opens)
    busy = float(np.sum(ends[np.r_[first[1:] - 1, starts.size - 1]] - starts[first])) if starts.size else 0.0
    step_ids = [i for n, i in names.items() if n.startswith("ProfilerStep#")]
    steps = np.sort(dur[complete & np.isin(name, step_ids)])
    by_kernel = np.bincount(name[kernel], weights=dur[kernel], minlength=len(names))
    top = np.argsort(-by_kernel)[:10]
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **_cpu(),
        "busy_us": busy,
        "steps": int(steps.size),
        "top": int(top.size),
    }


def perftool_info(path: str) -> dict:
    """``perftool info FILE --format json`` as the ``perftool`` command runs it (its entry point, whose start pauses
    what a command's start needs paused: :mod:`perftool.common.startup`), the output thrown away; timed from before
    perftool is imported, as the command is."""
    start = time.perf_counter()
    sys.argv = ["perftool", "info", path, "--format", "json", "-o", os.devnull]
    from perftool.cli.main import main  # the package first, which sees the command starting

    try:
        main()
    except SystemExit as exc:
        assert not exc.code, f"perftool exited with {exc.code}"
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        **_cpu(),
    }


def page_faults() -> dict:
    """What growing memory costs this machine: a fresh 1 GiB of numpy faulted in by 4 KiB pages (its transparent
    huge pages off), the system time a fault took (a bare machine zeroes a page in well under a microsecond; a
    virtual one whose host backs its memory lazily pays the host's fault too)."""
    import numpy as np

    (np._core if hasattr(np, "_core") else np.core).multiarray._set_madvise_hugepage(False)  # numpy 2, and 1.x
    before = resource.getrusage(resource.RUSAGE_SELF)
    touched = np.ones(1 << 27)
    after = resource.getrusage(resource.RUSAGE_SELF)
    del touched
    faults = after.ru_minflt - before.ru_minflt
    return {"faults": faults, "system_s": after.ru_stime - before.ru_stime}


def _cpu() -> dict:
    """This process's CPU time so far (with its ended children's: the decoding processes), user and system, and its
    page faults that found the page in memory (a fresh page of the heap, zeroed by the kernel): the system time a
    pipeline spends growing its memory, which machines price differently."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "user_s": own.ru_utime + children.ru_utime,
        "system_s": own.ru_stime + children.ru_stime,
        "faults": own.ru_minflt + children.ru_minflt,
    }


def trace_path(trace: str | None, mb: float) -> str:
    """``trace``, else the Kineto-like trace of ``mb`` MB that bench_load.py generates (written once)."""
    if trace is not None:
        return trace
    from bench_load import generated
    from kineto_synth import write_trace

    return generated(f"kineto_{mb:g}mb.json", lambda out: write_trace(out, mb, compress=False))


def compile_perftool() -> None:
    """perftool's modules compiled to bytecode, as ``pip install`` leaves them (an editable install where Python
    writes no bytecode, ``PYTHONDONTWRITEBYTECODE``, would compile every module at each start: 50 ms more); numpy's
    and msgspec's, which the reference imports, are installed compiled."""
    import compileall

    import perftool

    compileall.compile_dir(os.path.dirname(perftool.__file__), quiet=1)


def prepared(doc: str, repeat: int) -> tuple[str, int]:
    """The options of a bench that runs ``perftool info`` on one trace (``--mb``, ``--trace``, ``--repeat``, its
    default ``repeat``), read with ``doc``'s first line as help: its trace, generated where needed, and how many
    passes; perftool compiled to bytecode first."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0)
    parser.add_argument("--trace", help="this trace instead of the generated one")
    parser.add_argument("--repeat", type=int, default=repeat)
    args = parser.parse_args()
    path = trace_path(args.trace, args.mb)
    compile_perftool()
    return path, args.repeat


def main() -> None:
    from bench_load import in_child

    path, repeat = prepared(__doc__, repeat=3)
    calls = (f"bench_reference.reference({path!r})", f"bench_reference.perftool_info({path!r})")
    runs = [(in_child(calls[0]), in_child(calls[1])) for _ in range(repeat)]  # alternated
    ours = min((run[1] for run in runs), key=lambda r: r["seconds"])
    theirs = min((run[0] for run in runs), key=lambda r: r["seconds"])
    mb = os.path.getsize(path) / 1e6
    print(f"trace      {path} ({mb:,.1f} MB), cores {os.cpu_count()}, best of {repeat}")
    print(f"reference  {theirs['seconds']:.2f} s   peak RSS {theirs['rss_mb']:,.0f} MB ({theirs['rss_mb'] / mb:.2f}x)")
    print(
        f"perftool   {ours['seconds']:.2f} s   peak RSS {ours['rss_mb']:,.0f} MB ({ours['rss_mb'] / mb:.2f}x the "
        f"file), largest decoding worker {ours['worker_rss_mb']:,.0f} MB"
    )
    for name, best in (("reference", theirs), ("perftool", ours)):
        print(
            f"{name:<10} CPU {best['user_s']:.2f} s user + {best['system_s']:.2f} s system, {best['faults']:,} page "
            f"faults ({best['system_s'] / max(best['faults'], 1) * 1e6:.1f} µs of system time each)"
        )
    faulting = in_child("bench_reference.page_faults()")
    print(
        f"machine    1 GiB faulted in by 4 KiB pages: {faulting['system_s']:.2f} s of system time, "
        f"{faulting['system_s'] / max(faulting['faults'], 1) * 1e6:.2f} µs a fault"
    )
    passes = [p["seconds"] / r["seconds"] for r, p in runs]  # each pass of perftool against the reference's beside it
    print(
        f"ratio      perftool / reference = {ours['seconds'] / theirs['seconds']:.2f}x (each pass: "
        f"{', '.join(f'{ratio:.2f}' for ratio in passes)}; median {statistics.median(passes):.2f}x; target <= 0.6x)"
    )


if __name__ == "__main__":
    main()
