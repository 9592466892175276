"""Chrome Trace Event Format for one emulated configuration, ready for Perfetto UI and ``perftool scan``.

The host process holds the training loop, a step-marker thread, the graph compiler and one thread
per preprocessing worker; the device process holds the compute stream and the two copy links, plus
a device-memory counter. Names follow the family's own profilers (:mod:`.vocabulary`); categories
are the event kinds perftool's emulator dialect reads back. The top-level ``perftool`` key records
the device, its constants, the full config and the fast path's prediction.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import numpy as np

from perftool.common import limits
from perftool.common.errors import PerftoolError
from perftool.common.output import write_bytes
from perftool.common.units import listed
from perftool.emulator.config import EmulatorConfig
from perftool.emulator.full_run import Run, rank_files
from perftool.emulator.plan import Plan
from perftool.emulator.vocabulary import HPU_DTYPE_NAMES, VOCABULARIES, Vocabulary
from perftool.trace.model import Role
from perftool.trace.profiler_dirs import TRACE_SUFFIXES

Timeline = dict[str, np.ndarray]  # each recorded series of the run's timeline, on the trace's clock

FORMAT_VERSION = 1
HOST, DEVICE = 1, 2
LOOP, STEPS, COMPILER, WORKERS = 1, 2, 3, 10  # host threads (workers: WORKERS + k)
COMPUTE, H2D_LINK, D2H_LINK, COMM = 1, 2, 3, 4  # device threads (COMM: with replicas)


def check_length(config: EmulatorConfig, path: str) -> None:
    """Refuse, before any work, a trace too long to build in memory (emulating without a trace has no such limit)."""
    steps, _ = config.epoch
    if steps > limits.MAX_TRACE_STEPS_WRITTEN:
        raise PerftoolError(
            f"{path}: a trace of {steps:,} steps is longer than the {limits.MAX_TRACE_STEPS_WRITTEN:,} perftool "
            "writes; lower workload.steps (or dataset_samples) for the trace (the prediction without --trace has no "
            "such limit)"
        )


def trace_bytes(run: Run) -> bytes:
    """The trace of one emulated run as JSON bytes."""
    config = run.config
    header: dict[str, Any] = {
        "displayTimeUnit": "ms",
        "perftool": {
            "emulator": {
                "version": FORMAT_VERSION,
                "device": config.device,
                "profile": config.profile.describe(),
                "config": config.model_dump(mode="json"),
                "prediction": run.prediction,
            },
            "tracks": [{"pid": pid, "tid": tid, "role": role.value} for pid, tid, _, role in _threads(config)],
        },
    }
    if run.plan.replicas > 1:
        backend = VOCABULARIES[config.device].backend
        header["distributedInfo"] = {"backend": backend, "rank": run.rank, "world_size": run.plan.replicas}
    if run.host is not None:
        header["host_name"] = run.host  # where Kineto records it
    events = ",\n".join(_events(run))
    return msgspec.json.encode(header)[:-1] + f',"traceEvents":[\n{events}\n]}}\n'.encode()


def write_trace(run: Run, path: str) -> int:
    """Write the run's trace to ``path`` atomically (gzip for ``.gz``); returns the bytes written."""
    data = encode_for(path, trace_bytes(run))
    write_bytes(data, path)
    return len(data)


def check_job_directory(directory: str, replicas: int) -> None:
    """Refuse a directory that holds traces of another run: a later scan would read them as ranks of this job."""
    if not os.path.isdir(directory):
        return
    ours = {os.path.basename(path) for path in rank_files(directory, replicas)}
    others = sorted(name for name in os.listdir(directory) if name.endswith(TRACE_SUFFIXES) and name not in ours)
    if others:
        shown = listed(others, 3)
        raise PerftoolError(
            f"{directory}: holds traces of another run ({shown}) that a scan would take for ranks of this job: "
            "give an empty or new directory"
        )


def write_job(run: Run, directory: str) -> int:
    """Write each rank's trace into ``directory`` (made if missing; :func:`check_job_directory` first); returns the
    bytes written. Every rank is written aside first, so a run stopped midway leaves the directory as it was."""
    check_job_directory(directory, run.plan.replicas)
    paths = run.trace_files(directory)
    os.makedirs(directory, exist_ok=True)
    aside = tempfile.mkdtemp(prefix=".perftool-job-", dir=directory)
    try:
        staged = [os.path.join(aside, os.path.basename(path)) for path in paths]
        written = sum(write_trace(rank, path) for rank, path in zip(run.ranks(), staged))
        for path, final in zip(staged, paths):
            os.replace(path, final)
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return written


def encode_for(path: str, data: bytes) -> bytes:
    """gzip when the file name asks for it; a fixed header time keeps the bytes reproducible."""
    return gzip.compress(data, compresslevel=6, mtime=0) if path.endswith(".gz") else data


def _threads(config: EmulatorConfig) -> list[tuple[int, int, str, Role]]:
    words = VOCABULARIES[config.device]
    threads = [
        (HOST, LOOP, "Python training loop", Role.HOST),
        (HOST, STEPS, "Training steps", Role.HOST),
        (HOST, COMPILER, "Graph compiler", Role.COMPILER),
        *((HOST, WORKERS + k, f"Preprocessing worker {k}", Role.INPUT) for k in range(config.workload.input_workers)),
        (DEVICE, COMPUTE, words.compute_thread, Role.DEVICE),
        (DEVICE, H2D_LINK, "H2D link", Role.H2D),
        (DEVICE, D2H_LINK, "D2H link", Role.D2H),
    ]
    if config.replicas is not None and config.replicas.count > 1:
        threads.append((DEVICE, COMM, words.comm_thread, Role.DEVICE))
    return threads


def _events(run: Run) -> list[str]:
    out: list[str] = []
    config, plan = run.config, run.plan
    words = VOCABULARIES[config.device]
    shift = run.clock_offset_us
    at = {name: _shifted(run.recorded(name), shift) for name in run.timeline.recorded}
    out += _metadata(config, words)
    steps = np.arange(int(plan.total_steps[0]))
    step_end = run.timeline.step_end[steps, 0] + shift
    step_start = np.concatenate([[shift], step_end[:-1]])
    samples = np.where(steps == plan.steps[0], plan.last_samples[0], plan.batch[0])
    out += _spans(
        "step",
        "step",
        HOST,
        STEPS,
        step_start,
        step_end,
        [f"step {i}" for i in steps],
        [{"step": int(i), "samples": int(k)} for i, k in zip(steps, samples)],
    )
    out += _input(config, words, plan, at, steps)
    out += _host(config, words, plan, at, steps)
    out += _device(config, words, plan, at)
    out += _all_reduce(words, plan, at)
    out += _memory(plan, at, shift)
    return out


def _shifted(values: np.ndarray, offset: float) -> np.ndarray:
    """Times moved onto a rank's own clock (flags and counts stay as they are)."""
    return values + offset if offset and values.dtype.kind == "f" else values


def _all_reduce(words: Vocabulary, plan: Plan, at: Timeline) -> list[str]:
    """Each gradient bucket's all-reduce on the communication stream, with the args profilers record."""
    out: list[str] = []
    for k, size in enumerate(plan.bucket_bytes if plan.bucket_us else ()):
        args = {
            "Collective name": "allreduce",
            "In msg nelems": int(size // 4),
            "Out msg nelems": int(size // 4),
            "dtype": "Float",
            "Group size": plan.replicas,
            "Process Group Name": "0",
            "Process Group Description": "default_pg",
        }
        starts, ends = at["comm_start"][:, k], at["comm_end"][:, k]
        out += _spans(words.all_reduce, "communication", DEVICE, COMM, starts, ends, args=[args] * starts.size)
    return out


def _metadata(config: EmulatorConfig, words: Vocabulary) -> list[str]:
    out: list[str] = []
    profile = config.profile
    processes = {HOST: words.host_process, DEVICE: f"{words.device_process} ({profile.model})"}
    for pid, name in processes.items():
        out.append(_json({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}))
        out.append(_json({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}))
    for pid, tid, name, _ in _threads(config):
        out.append(_json({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}))
        out.append(_json({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}))
    return out


def _input(config: EmulatorConfig, words: Vocabulary, plan: Plan, at: Timeline, steps: np.ndarray) -> list[str]:
    out: list[str] = []
    workers = config.workload.input_workers
    for k in range(workers):
        mine = steps % workers == k
        out += _spans(
            words.preprocess,
            "input",
            HOST,
            WORKERS + k,
            at["preprocess_start"][mine],
            at["ready"][mine],
            args=[{"batch": int(i)} for i in steps[mine]],
        )
    if plan.host_feeds_data:  # the loop waits for its batch, or loads it itself
        calls = at["call_start"]
        name = words.data_wait if workers else words.data_load
        out += _spans(name, "input", HOST, LOOP, at["wait_from"][calls], at["host_begin"][calls])
    return out


def _host(config: EmulatorConfig, words: Vocabulary, plan: Plan, at: Timeline, steps: np.ndarray) -> list[str]:
    out: list[str] = []
    calls = at["call_start"]
    call_steps = steps[calls]
    call_ends = np.append(call_steps[1:], steps[-1] + 1)
    if config.workload.sync_each_step and words.sync and not config.profile.host_blocks_per_call:
        launched = at["launch_end"][calls]  # each call's host waits, from its last launch, for the device's step
        out += _spans(words.sync, "sync", HOST, LOOP, launched[:-1], at["wait_from"][calls][1:])
    if plan.blocking_copy[0]:
        out += _spans(words.copy_call, "runtime", HOST, LOOP, at["host_begin"][calls], at["copy_end"][calls])
    if plan.blocking_readback[0]:  # each call's host waits, from its last launch, in the copy of its results back
        out += _spans(words.copy_call, "runtime", HOST, LOOP, at["launch_end"][calls], at["dev_end"][calls])
    out += _spans(words.python, "host_op", HOST, LOOP, at["copy_end"][calls], at["python_end"][calls])
    compiles = at["new_graph"]
    out += _spans(
        words.compile,
        "compile",
        HOST,
        COMPILER,
        at["python_end"][compiles],
        at["compile_done"][compiles],
        args=[_compile_reason(plan, int(i)) for i in steps[compiles]],
    )
    dispatch = words.op_launches if plan.streamed[0] else words.dispatch
    out += _spans(
        dispatch,
        "runtime",
        HOST,
        LOOP,
        at["compile_done"][calls],
        at["launch_end"][calls],
        args=[{"steps": int(b - a)} for a, b in zip(call_steps, call_ends)],
    )
    if words.data_parallel and plan.replicas > 1:  # the wrapper's forward launches the step's work
        out += _spans(words.data_parallel, "annotation", HOST, LOOP, at["compile_done"][calls], at["launch_end"][calls])
    for op, start, end in _fallback_ops(config, words, at):
        out += _spans(op, "host_op", HOST, LOOP, start, end)
    return out


def _device(config: EmulatorConfig, words: Vocabulary, plan: Plan, at: Timeline) -> list[str]:
    out: list[str] = []
    out += _spans(words.h2d, "h2d", DEVICE, H2D_LINK, at["h2d_start"], at["h2d_end"])
    serial = words.h2d_pageable if plan.blocking_copy[0] else words.h2d
    out += _spans(serial, "h2d", DEVICE, COMPUTE, at["dev_start"], at["serial_end"])
    out += _ops(words.forward, at["ops_start"], at["forward_end"])
    out += _ops(words.backward, at["backward_start"], at["compute_end"])
    out += _spans(words.fallback_d2h, "d2h", DEVICE, D2H_LINK, at["forward_end"], at["fallback_d2h_end"])
    out += _spans(words.fallback_h2d, "h2d", DEVICE, H2D_LINK, at["host_op_end"], at["backward_start"])
    out += _ops(
        tuple((name, 1 / len(words.strided)) for name in words.strided), at["compute_end"], at["strided_end"], "d2d"
    )
    update = at["update"]
    out += _spans(words.update, "compute", DEVICE, COMPUTE, at["update_start"][update], at["update_end"][update])
    if words.remote_buffer_copy:
        middle = (at["update_end"] + at["offload_end"]) / 2
        out += _spans(words.remote_buffer_copy, "h2d", DEVICE, COMPUTE, at["update_end"][update], middle[update])
        out += _spans(words.remote_buffer_copy, "d2h", DEVICE, COMPUTE, middle[update], at["offload_end"][update])
    readback = words.readback_pageable if plan.blocking_readback[0] else words.readback
    copied = [{"bytes": int(config.workload.readback_per_step)}] * at["dev_end"].size
    out += _spans(readback, "d2h", DEVICE, COMPUTE, at["offload_end"], at["dev_end"], args=copied)
    return out


def _memory(plan: Plan, at: Timeline, clock_start: float) -> list[str]:
    static, peak = float(plan.static_bytes[0]), float(plan.static_bytes[0] + plan.activation_bytes[0])
    prefix = f'{{"ph":"C","name":"Device memory","pid":{DEVICE},"tid":{COMPUTE},"ts":'
    out: list[str] = [f'{prefix}{float(clock_start)},"args":{{"bytes":{static}}}}}']
    for start, end in zip(_numbers(np.round(at["dev_start"], 3)), _numbers(np.round(at["compute_end"], 3))):
        out.append(f'{prefix}{start},"args":{{"bytes":{peak}}}}}')
        out.append(f'{prefix}{end},"args":{{"bytes":{static}}}}}')
    return out


def _ops(shares: Sequence[tuple[str, float]], starts: np.ndarray, ends: np.ndarray, cat: str = "compute") -> list[str]:
    """Split each [start, end) into consecutive ops by their shares."""
    out: list[str] = []
    position = starts
    for name, share in shares:
        following = position + (ends - starts) * share
        out += _spans(name, cat, DEVICE, COMPUTE, position, following)
        position = following
    return out


def _fallback_ops(
    config: EmulatorConfig, words: Vocabulary, at: Timeline
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Each fallback op's share of the host-op span, named the way the family's logs name it."""
    ops = config.knobs.cpu_fallback_ops
    total = sum(op.host_us * op.calls_per_step for op in ops)
    position = at["host_op_start"]
    for op in ops:
        following = position + (at["host_op_end"] - at["host_op_start"]) * (op.host_us * op.calls_per_step / total)
        dtype = HPU_DTYPE_NAMES.get(op.dtype, op.dtype) if config.device == "hpu" else op.dtype
        yield words.fallback_op.format(op=op.op, dtype=dtype), position, following
        position = following


def _compile_reason(plan: Plan, step: int) -> dict[str, Any]:
    loop, batch = int(plan.loop[0]), int(plan.batch[0])
    if step == 0:
        return {"reason": "first call", "loop_size": loop, "batch_size": batch}
    if step == plan.steps[0] and plan.partial_last[0]:
        return {"reason": "new shape: last batch", "batch_size": int(plan.last_samples[0])}
    return {"reason": "remainder loop", "loop_size": int(plan.total_steps[0] - step), "batch_size": batch}


def _spans(
    name: str,
    cat: str,
    pid: int,
    tid: int,
    starts: np.ndarray,
    ends: np.ndarray,
    names: Sequence[str] | None = None,
    args: Sequence[dict] | None = None,
) -> list[str]:
    """'X' events (as JSON) for every interval of positive length, times rounded to the nanosecond."""
    keep = np.flatnonzero(ends - starts > 0)
    rounded_starts, rounded_ends = np.round(starts[keep], 3), np.round(ends[keep], 3)  # back-to-back stays so
    ts, dur = _numbers(rounded_starts), _numbers(np.round(rounded_ends - rounded_starts, 3))
    where = f'"cat":"{cat}","pid":{pid},"tid":{tid}'
    if names is None and args is None:
        prefix = f'{{"ph":"X","name":{_json(name)},{where},"ts":'
        return [f'{prefix}{start},"dur":{length}}}' for start, length in zip(ts, dur)]
    labels = [_json(names[row] if names else name) for row in keep.tolist()]
    extras = [f',"args":{_json(args[row])}' for row in keep.tolist()] if args else [""] * keep.size
    return [
        f'{{"ph":"X","name":{label},{where},"ts":{start},"dur":{length}{extra}}}'
        for label, start, length, extra in zip(labels, ts, dur, extras)
    ]


def _numbers(values: np.ndarray) -> list[str]:
    """Each value as JSON text, formatted in one call (far cheaper than one float repr each)."""
    return msgspec.json.encode(values.tolist())[1:-1].decode().split(",") if values.size else []


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()
