"""JAX / XLA traces: what ``jax.profiler`` (and TensorBoard's profiler, through XProf) writes from an XSpace.

Each plane of the XSpace is a process named after it: ``/device:GPU:0`` or ``/device:TPU:0`` for a device,
``/host:CPU`` for the host. A device's lines are its threads, and several of them are views of the same work:

* on a GPU, one line per stream and kind of work, ``Stream #16(Kernel)``, ``Stream #17(MemcpyH2D)``...: the
  device's own activity;
* on a TPU, ``XLA Ops`` (the ops the TensorCore ran, control-flow ops enclosing their bodies), ``Async XLA Ops``
  (DMAs and asynchronous collectives beside them) and ``Host Offload Ops``: the device's activity;
* ``Steps`` (a training step, each named by its number), ``XLA Modules`` (each execution of a compiled
  program: where neither a step line nor the host's calls mark the steps, the executions of the program that
  takes the device's time are the steps), ``Framework Ops``, ``Framework Name Scope``, ``Source code``,
  ``Launch Stats``, ``_counters_``: derived from the device's work (and on a GPU, ``XLA Ops`` too), so summaries,
  never counted again.

On the host, the Python thread calls compiled functions (``PjitFunction(train_step)``); the runtime's threads
launch kernels through the driver API (``cuLaunchKernel``, ``hipModuleLaunchKernel``) and run the executables
(``PjRtStreamExecutorLoadedExecutable::Execute``, ``ExecuteHelper``). Events have no category. A step the user marks
with ``jax.profiler.StepTraceAnnotation("train", step_num=n)`` is a host event named as the user named it, its args
holding ``step_num``: a step marker, where no device line gives the steps. A compiled call that missed jit's cache
holds the compile (``backend_compile_and_load``, the function jax's compiler annotates): the call is the compile.

TensorFlow writes the same XSpace. A ``tf.function`` call is a host event named after the function (``train_step``,
Keras's ``multi_step_on_iterator``) whose args say whether it traced the function anew (``tf_function_call``:
``traced-xla``, ``traced-nonXla``; ``notTraced-…`` where its cache held a graph for the arguments): such a call
builds a new graph (``tf.function-graph_building``) and, with ``jit_compile``, has XLA compile it before it runs, so
it is the compile, as a missed jit call is in JAX.
"""

from __future__ import annotations

import re

import numpy as np

from perftool.common.arrays import distinct
from perftool.dialects.base import Dialect
from perftool.dialects.vocabulary import COMPILED_CALL, JAX_BLOCK_FRAME, PYTHON_FRAME, STEP_NUMBER_ARG
from perftool.trace.model import Kind, Phase, Role, Trace, Track

DEVICE_PLANE = re.compile(r"^/device:(?P<kind>[A-Z]+):(?P<id>\d+)")
HOST_PLANE = re.compile(r"^/host:")
# A GPU stream's line, named by the kinds of work it ran, joined by commas ("Stream #16(Kernel,MemcpyD2D)"), or by its
# number alone where the tracer knew none of them (XLA's cupti and roctracer collectors: GetDeviceXLineName)
_STREAM = re.compile(r"^Stream #\d+(\((?P<work>[^)]*)\))?")
_STREAM_ROLES = {"MemcpyH2D": Role.H2D, "MemcpyD2H": Role.D2H}
_COPY_STREAMS = ("MemcpyD2D", "MemcpyOther", "MemcpyP2P")  # copies on the device, or whose direction it does not say
_DERIVED_FROM = " - from "
_STEP_LINES = ("Steps", "Sparse Core Steps")
_OP_LINES = ("XLA Ops", "Sparse Core Ops")
_MODULE_LINES = ("XLA Modules", "Sparse Core Modules")  # each execution of a compiled program
MIN_PROGRAM_RUNS = 3  # a program run fewer times than this is no loop's step
_ASYNC_LINES = ("Async XLA Ops", "Host Offload Ops")  # copies and collectives running beside the ops
# A call into the driver or runtime API (cuLaunchKernel, hipModuleLaunchKernel, cuMemcpyHtoDAsync_v2): XLA
# launches through these, where PyTorch calls the cuda*/hip* runtime.
_RUNTIME_CALL = re.compile(r"^(cu|hip|cuda)[A-Z]\w*$")
# What a StepTraceAnnotation's args hold, whatever its name: its step number (its "_r" root flag is the host tracer's
# own and stays out of the exported trace)
STEP_ARG = f'"{STEP_NUMBER_ARG}"'.encode()
TF_FUNCTION_CALL = b'"tf_function_call"'  # the args of a tf.function's call (TensorFlow's polymorphic function)
TF_TRACED = re.compile(rb'"tf_function_call":\s*"traced')  # ... of one that traced its function anew


class Xla(Dialect):
    name = "xla"
    role_kinds = {Role.DEVICE: Kind.COMPUTE, Role.HOST: Kind.HOST_OP, Role.H2D: Kind.H2D, Role.D2H: Kind.D2H}
    devices_by_process = True  # a plane per device: /device:TPU:0, /device:TPU:1, ...

    def detect(self, trace: Trace) -> bool:
        return any(DEVICE_PLANE.match(t.process_name) or HOST_PLANE.match(t.process_name) for t in trace.tracks)

    def roles(self, trace: Trace) -> dict[int, Role]:
        """Host planes are host threads; a device's streams (GPU) or op lines (TPU) are its work, every line
        derived from them a summary. A TPU's ``XLA Ops`` are its work; a GPU's repeat its streams' kernels."""
        with_streams = {
            t.pid for t in trace.tracks if DEVICE_PLANE.match(t.process_name) and _STREAM.match(t.thread_name)
        }
        roles = {}
        for track in trace.tracks:
            if HOST_PLANE.match(track.process_name):
                roles[track.id] = Role.HOST
            elif DEVICE_PLANE.match(track.process_name):
                roles[track.id] = _device_line_role(track, track.pid in with_streams)
        return roles

    def kinds(self, trace: Trace) -> np.ndarray:
        """A step line's events are steps, a copy stream's and an async line's copies (unless their names say they
        are collectives), a summary line's annotations, the Python tracer's frames the host's own work."""
        kind = super().kinds(trace)
        for track in trace.tracks:
            if not DEVICE_PLANE.match(track.process_name):
                continue
            line, on_line = _line(track), trace.track == track.id
            stream = _STREAM.match(line)
            if line in _STEP_LINES:
                kind[on_line] = Kind.STEP  # named by the step's number alone
            elif track.role == Role.SUMMARY:
                kind[on_line] = Kind.ANNOTATION
            elif line in _ASYNC_LINES or (stream and (work := _work(stream)) and work <= set(_COPY_STREAMS)):
                kind[on_line & (kind == Kind.COMPUTE)] = Kind.D2D
        # the Python tracer's frames ("$train.py:40 train_step", "$builtins isinstance"): the host running Python, as
        # Kineto's frames are, neither an op nor a mark; its own work where it calls nothing inside them
        kind[trace.name_matches(PYTHON_FRAME)] = Kind.OTHER
        kind[trace.name_matches(JAX_BLOCK_FRAME)] = Kind.SYNC  # but a frame waiting for the device is a wait
        misses, compiles = _cache_misses(trace, kind)
        kind[compiles] = Kind.HOST_OP  # the compile is counted once, as the call it stalled
        kind[misses] = Kind.COMPILE
        if not (kind == Kind.STEP).any():
            kind[_step_annotations(trace)] = Kind.STEP
        if not (kind == Kind.STEP).any() and not trace.name_matches(COMPILED_CALL).any():
            kind[_repeated_program(trace)] = Kind.STEP
        return kind

    def name_kind(self, name: str) -> Kind:
        kind = super().name_kind(name)
        if kind in (Kind.OTHER, Kind.H2D, Kind.D2H, Kind.D2D) and _RUNTIME_CALL.match(name):
            return Kind.RUNTIME  # a copy call on the host is a runtime call, as the kernel launches are
        return kind


def _step_annotations(trace: Trace) -> np.ndarray:
    """Per event: a step ``jax.profiler.StepTraceAnnotation`` marked on the host. Its name is the user's, so each
    name of the host's is asked once: does its first event with args carry :data:`STEP_ARG`."""
    host = np.isin(trace.track, [t.id for t in trace.tracks if HOST_PLANE.match(t.process_name)])
    marking = _names_whose_args_hold(trace, np.flatnonzero(host & (trace.phase == Phase.COMPLETE)), STEP_ARG)
    return host & (trace.phase == Phase.COMPLETE) & np.isin(trace.name, marking)


def _names_whose_args_hold(trace: Trace, rows: np.ndarray, mark: bytes) -> list[int]:
    """The names among ``rows`` whose first event with args carries ``mark``: each name asked once (a user's or a
    function's name, whose events all carry the same keys)."""
    rows = rows[trace.args_ref[rows] >= 0]
    names, first = np.unique(trace.name[rows], return_index=True)
    refs = trace.args_ref[rows[first]].tolist()
    return [name for name, ref in zip(names.tolist(), refs) if mark in trace.kept_args[ref]]


def _cache_misses(trace: Trace, kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of jit's cache misses, and of the compiles they hold: a compiled call (``PjitFunction(f)``) that
    compiled traces ``f``, lowers it and compiles it (``backend_compile_and_load``) before it runs, all of it time
    the step waits, so the outermost such call on its thread is the compile, named by the function compiled. A
    compile outside any compiled call (``jit(f).lower(...).compile()``) stays the compile. A tf.function call that
    traced its function anew (:func:`_traced_calls`) is a miss whether or not a compile event is inside it."""
    compiles = np.flatnonzero((kind == Kind.COMPILE) & trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE))
    calls = np.flatnonzero(trace.name_matches(COMPILED_CALL) & (trace.phase == Phase.COMPLETE))
    traced = _traced_calls(trace)
    misses, held = [traced], [np.zeros(0, dtype=np.int64)]
    for outer in (calls, traced):
        for track in np.flatnonzero(trace.tracks_of(compiles) & trace.tracks_of(outer)).tolist():
            outermost = trace.top_level(outer[trace.track[outer] == track])
            inner = compiles[trace.track[compiles] == track]
            holder = outermost[np.maximum(np.searchsorted(trace.ts[outermost], trace.ts[inner], side="right") - 1, 0)]
            holds = (trace.ts[holder] <= trace.ts[inner]) & (trace.end[holder] >= trace.end[inner])
            misses.append(distinct(holder[holds]))
            held.append(inner[holds])
    return distinct(np.concatenate(misses)), np.concatenate(held)


def _traced_calls(trace: Trace) -> np.ndarray:
    """The rows of the host's tf.function calls that traced their function anew, the outermost on their thread (a
    function called while another is traced is traced inside it). The calls are the names whose args carry
    :data:`TF_FUNCTION_CALL` (:func:`_names_whose_args_hold`)."""
    host = np.flatnonzero(trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE) & (trace.args_ref >= 0))
    functions = _names_whose_args_hold(trace, host, TF_FUNCTION_CALL)
    if not functions:
        return np.zeros(0, dtype=np.int64)
    calls = host[np.isin(trace.name[host], functions)]
    traced = calls[[TF_TRACED.search(trace.kept_args[ref]) is not None for ref in trace.args_ref[calls].tolist()]]
    return trace.top_level_by_track(traced)


def _repeated_program(trace: Trace) -> np.ndarray:
    """Per event: an execution of the compiled program that takes the device's time, where no step line and no
    host call marks the steps (a capture without the host's trace): on the ``XLA Modules`` lines, the program run
    most time that runs at least :data:`MIN_PROGRAM_RUNS` times. Each execution is a step."""
    lines = [t.id for t in trace.tracks if DEVICE_PLANE.match(t.process_name) and _line(t) in _MODULE_LINES]
    runs = np.isin(trace.track, lines) & (trace.phase == Phase.COMPLETE)
    if not runs.any():
        return runs
    count = np.bincount(trace.name[runs], minlength=len(trace.names))
    time = np.bincount(trace.name[runs], weights=trace.dur[runs], minlength=len(trace.names))
    time[count < MIN_PROGRAM_RUNS] = 0
    if time.max() <= 0:
        return np.zeros(len(trace), dtype=bool)
    return runs & (trace.name == int(np.argmax(time)))


def _line(track: Track) -> str:
    """The line's kind: its name, less what XProf's trace viewer adds to a line derived from one stream
    (``XLA Ops - from #16``)."""
    return track.thread_name.split(_DERIVED_FROM, 1)[0]


def _work(stream: re.Match[str]) -> set[str]:
    """The kinds of work a stream's line names (none where it names none)."""
    return set(stream["work"].split(",")) if stream["work"] else set()


def _device_line_role(track: Track, has_streams: bool) -> Role:
    """A device plane's line: a stream or op line holds the device's work, any other line is derived from it."""
    line = _line(track)
    if stream := _STREAM.match(line):
        roles = {_STREAM_ROLES.get(work, Role.DEVICE) for work in _work(stream)}
        return roles.pop() if len(roles) == 1 else Role.DEVICE
    if line in _OP_LINES:
        return Role.SUMMARY if has_streams else Role.DEVICE
    if line in _ASYNC_LINES:
        return Role.DEVICE
    return Role.SUMMARY
