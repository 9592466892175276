"""The emulator's timeline: one pass over the steps, vectorised across configurations.

Four resources run side by side and wait on each other:

- **preprocessing workers** prepare batches in turn; each keeps up to ``prefetch_depth`` batches
  ready, so batch *i* may start once batch *i − prefetch_depth × workers* has left the buffer:
  the buffer is what absorbs preprocessing jitter. With no workers the training loop loads each
  batch itself, once it is free. Workers share the host's cores with the loop (:mod:`.plan`);
- **the host** runs the training loop: Python and a dispatch for every device call (one per
  ``loop_size`` steps), a compile before a call of a new shape or loop length, and CPU-fallback
  ops. Graph-mode stacks (NPU, IPU) wait for each call before the next; eager/lazy stacks (HPU, GPU)
  run up to one step ahead and pull each batch from the data loader themselves. A batch in
  pageable memory is copied by a blocking call: it starts once the device has finished its queued
  work, and the host waits for it before launching the step;
- **the host→device link** copies a batch beside compute (DMA engines, or IPU IO tiles), or the
  device copies it itself before computing (IPU without IO tiles, pageable memory);
- **the device** runs each step in order: serial input copy, compute (split by a CPU fallback's
  round trip; where ops are launched one by one, idle while runs of short ones are launched),
  strided rearrangement copies, and every ``gradient_accumulation`` steps the weight update with
  its remote-buffer copies when the optimizer state is offloaded.

A step spans from the end of the previous step's device work to the end of its own. Random
jitter is drawn once per step from the seed and shared by every configuration, so configurations
are compared on the same luck.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perftool.emulator.plan import Plan

MAX_COMPILES = 3  # first call, remainder loop, partial last batch


@dataclass
class Timeline:
    """Where each configuration's steps end and what the device did: arrays ``[step, config]``."""

    step_end: np.ndarray  # float64 µs; rows past a configuration's last step repeat its end
    device_busy: np.ndarray  # float32 µs of device work in each step
    compile_start: np.ndarray  # [MAX_COMPILES, config], NaN when unused
    compile_end: np.ndarray
    recorded: dict[str, np.ndarray] = field(default_factory=dict)  # per-step detail, when asked


class _Recorder:
    """Keeps per-step arrays for the trace writer and the step breakdown, each step a row of one array per quantity
    made at its first step (an array object per step and quantity took ~5 KB a step); the fast path (not
    ``enabled``) puts nothing."""

    def __init__(self, enabled: bool, steps: int) -> None:
        self.enabled, self.steps = enabled, steps
        self.rows: dict[str, np.ndarray] = {}
        self.filled = 0

    def put(self, **values: np.ndarray) -> None:
        """One step's values, steps in order."""
        for name, value in values.items():
            value = np.asarray(value)
            if name not in self.rows:
                self.rows[name] = np.empty((self.steps, *value.shape), value.dtype)
            self.rows[name][self.filled] = value
        self.filled += 1

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: rows[: self.filled] for name, rows in self.rows.items()}


def _kept(active: bool | np.ndarray, new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """The new value where this step exists (``True``: everywhere), the old one where the run has ended."""
    return new if active is True else np.where(active, new, old)


COMPUTE_STREAM = 1  # the random stream of the device's compute jitter (preprocessing draws stream 0, the host 2)


def jitter(seed: int, steps: int, cv: float, stream: int) -> np.ndarray:
    """Mean-one lognormal factors with coefficient of variation ``cv``, one per step."""
    z = np.random.default_rng([seed, stream]).standard_normal(steps)
    sigma = np.sqrt(np.log1p(cv * cv))
    return np.exp(sigma * z - sigma * sigma / 2)


def _jitter(plan: Plan, seed: int, steps: int, cv: float, stream: int) -> np.ndarray:
    """Per step, the jitter every configuration shares; with replicas, each rank draws its own: ``[step, column]``."""
    if plan.replicas == 1 or plan.rank is None:
        return jitter(seed, steps, cv, stream)
    per_rank = np.stack([jitter(seed, steps, cv, (stream + 1) * 1_000_003 + rank) for rank in range(plan.replicas)])
    return per_rank[plan.rank].T


@dataclass
class _Feeders:
    """Each configuration's input workers, taking its batches in turn: when each finished its last batch. Where
    every configuration has as many, a batch's worker is one row of the ring for all, read and written whole (picking
    each configuration's worker made a run of 2,048 configurations half as long again)."""

    workers: np.ndarray  # per configuration; 0: the training loop loads its batches itself
    columns: np.ndarray  # 0 .. configurations - 1, each configuration's column of the ring
    ready: np.ndarray  # [worker, configuration]
    shared: int | None  # the workers every configuration has, where they agree
    feeding: bool  # an input pipeline feeds some configuration

    @classmethod
    def of(cls, workers: np.ndarray) -> _Feeders:
        shared = int(workers[0]) if workers.size and bool(np.all(workers == workers[0])) else None
        ready = np.zeros((max(int(workers.max(initial=0)), 1), workers.size))
        return cls(workers, np.arange(workers.size), ready, shared, bool(np.any(workers > 0)))

    def free(self, i: int) -> np.ndarray:
        """When the worker of batch ``i`` is free, per configuration (0 for a worker's first batch: its row of the
        ring is not written before)."""
        if self.shared is not None:
            return self.ready[i % max(self.shared, 1)]
        return self.ready[i % np.maximum(self.workers, 1), self.columns]

    def where_fed(self, fed: np.ndarray, unfed: np.ndarray) -> np.ndarray:
        """``fed`` for the configurations an input pipeline feeds, ``unfed`` for the others."""
        return fed if self.shared is not None else np.where(self.workers > 0, fed, unfed)

    def took(self, i: int, ready: np.ndarray) -> None:
        """Batch ``i`` is ready at ``ready``: its worker is free from then."""
        if self.shared:
            self.ready[i % self.shared] = ready
        elif self.feeding:
            self.ready[i % np.maximum(self.workers, 1), self.columns] = ready


@dataclass
class _Clocks:
    """When each resource is next free, per configuration, carried from step to step."""

    dev_end_prev: np.ndarray  # the device finished the previous step
    dev_end_prev2: np.ndarray  # ... and the one before (eager stacks run one step ahead)
    dev_start_prev: np.ndarray  # the device started the previous step
    link_free: np.ndarray  # the host-to-device link is free
    host_free: np.ndarray  # the host has launched its last call
    call_ready: np.ndarray  # the last device call has been launched
    compiles: np.ndarray  # compiles so far (int)

    @classmethod
    def start(cls, n: int) -> _Clocks:
        free = np.zeros(n)
        return cls(free.copy(), free.copy(), free.copy(), free.copy(), free.copy(), free.copy(), np.zeros(n, np.int64))


@dataclass
class _Shape:
    """What the plan says once, for every step: shortcuts where all configurations agree."""

    cols: np.ndarray
    full_until: int  # every configuration runs a full batch in the steps before this one
    remainder_start: np.ndarray  # the first step of a remainder loop (-1: none)
    may_compile: set[int]  # the steps where some configuration may compile
    any_streamed: bool
    any_blocking_copy: bool  # some configuration copies from pageable memory, blocking the host
    blocking: np.ndarray  # the host waits for each step's device work before going on ...
    all_blocking: bool  # ... in every configuration ...
    none_blocking: bool  # ... in none
    reads_back: bool  # some configuration copies results back after each step
    every_step_calls: bool  # every configuration calls the device each step (loop size 1) ...
    every_step_updates: bool  # ... and updates the weights each step (no gradient accumulation)
    every: np.ndarray  # True for every configuration
    linked: np.ndarray  # copies run beside compute (DMA engines, IO tiles)
    all_linked: bool
    none_linked: bool
    serial_share: np.ndarray  # of a copy the device does itself
    fallback: bool
    no_partial: np.ndarray

    @classmethod
    def of(cls, plan: Plan) -> _Shape:
        full_steps_of_loops = plan.steps + (plan.extra_step & ~plan.partial_last)  # steps at the full shape
        remainder = full_steps_of_loops % plan.loop
        remainder_start = np.where(remainder > 0, full_steps_of_loops - remainder, -1)
        last_steps, remainders = np.unique(plan.steps), np.unique(remainder_start[remainder_start >= 0])
        linked = plan.overlap > 0
        return cls(
            cols=np.arange(plan.n),
            full_until=int(plan.steps.min()),
            remainder_start=remainder_start,
            may_compile={0, *last_steps.tolist(), *remainders.tolist()},
            any_streamed=bool(plan.streamed.any()),
            any_blocking_copy=bool(plan.blocking_copy.any()),
            blocking=plan.blocking,
            all_blocking=bool(plan.blocking.all()),
            none_blocking=not plan.blocking.any(),
            reads_back=bool(plan.readback_us.any()),
            every_step_calls=bool((plan.loop == 1).all()),
            every_step_updates=bool((plan.accumulation == 1).all()),
            every=np.ones(plan.n, dtype=bool),
            linked=linked,
            all_linked=bool(linked.all()),
            none_linked=not linked.any(),
            serial_share=1 - plan.overlap,
            fallback=plan.fallback_host_us > 0,
            no_partial=np.zeros(plan.n, dtype=bool),
        )

    def waited_for(self, clocks: _Clocks) -> np.ndarray:
        """The device's end the host waits for before its next step: the previous step's where it waits for each
        step, else the one before (an eager host runs a step ahead)."""
        if self.all_blocking or self.none_blocking:
            return clocks.dev_end_prev if self.all_blocking else clocks.dev_end_prev2
        return np.where(self.blocking, clocks.dev_end_prev, clocks.dev_end_prev2)


def simulate(plan: Plan, seed: int, record: bool = False) -> Timeline:
    """Run every configuration of ``plan`` through all its steps, one resource after another in each step."""
    n, steps = plan.n, int(plan.total_steps.max())
    preprocess_factor = (
        np.resize(np.asarray(plan.preprocess_replay), steps)
        if plan.preprocess_replay is not None
        else _jitter(plan, seed, steps, plan.preprocess_jitter, 0)
    )
    compute_factor = _jitter(plan, seed, steps, plan.compute_jitter, COMPUTE_STREAM)
    host_factor = _jitter(plan, seed, steps, plan.host_jitter, 2)
    rec = _Recorder(record, steps)
    shape, clocks = _Shape.of(plan), _Clocks.start(n)

    ahead = plan.depth * plan.workers  # batches in flight: each worker keeps prefetch_depth ready
    ring = int(ahead.max()) + 1
    consumed_ring = np.zeros((ring, n))  # when each recent batch left the prefetch buffer
    feeders = _Feeders.of(plan.workers)
    step_end = np.zeros((steps, n))
    device_busy = np.zeros((steps, n), dtype=np.float32)
    compile_start = np.full((MAX_COMPILES, n), np.nan)
    compile_end = np.full((MAX_COMPILES, n), np.nan)
    zeros = np.zeros(n)
    active: bool | np.ndarray  # True (every configuration has this step) keeps _kept to a plain choice

    for i in range(steps):
        if i < shape.full_until:
            active, partial = True, shape.no_partial
            compute = plan.compute_us * compute_factor[i]
            transfer, strided = plan.transfer_us, plan.strided_us
            preprocess = plan.preprocess_us * preprocess_factor[i]
        else:  # some runs have ended, or take the extra step of a padded or partial last batch
            active = i < plan.total_steps
            last = plan.steps == i
            partial = plan.partial_last & last
            compute = np.where(partial, plan.compute_last_us, plan.compute_us) * compute_factor[i]
            transfer = np.where(partial, plan.transfer_last_us, plan.transfer_us)
            strided = np.where(partial, plan.strided_last_us, plan.strided_us)
            preprocess = np.where(last, plan.preprocess_last_us, plan.preprocess_us) * preprocess_factor[i]

        wait_from = np.maximum(clocks.host_free, shape.waited_for(clocks))
        preprocess_start = wait_from  # without workers, the training loop loads the batch itself once it is free
        if feeders.feeding:  # with an input pipeline, a worker and a buffer slot must both be free
            slot_free = np.where(ahead <= i, consumed_ring[(i - ahead) % ring, shape.cols], 0.0)
            preprocess_start = feeders.where_fed(np.maximum(slot_free, feeders.free(i)), wait_from)
        ready = preprocess_start + preprocess

        waits, work = (wait_from, ready), (compute, transfer)
        host = _host(plan, shape, clocks, i, host_factor[i], waits, partial, active, work, (compile_start, compile_end))
        link = _link(plan, shape, clocks, ready, host["host_begin"], transfer, active)
        device = _device(plan, shape, clocks, i, ready, host["copy_start"], link, compute, transfer, strided, active)

        step_end[i] = _kept(active, device["dev_end"], clocks.dev_end_prev)
        idle_inside = device["backward_start"] - device["forward_end"] + device["ops_start"] - device["serial_end"]
        device_busy[i] = _kept(active, device["dev_end"] - device["dev_start"] - idle_inside, zeros)
        consumed_ring[i % ring] = _kept(active, device.pop("consumed"), consumed_ring[i % ring])
        feeders.took(i, ready)
        clocks.dev_end_prev2 = _kept(active, clocks.dev_end_prev, clocks.dev_end_prev2)
        clocks.dev_end_prev = step_end[i]
        clocks.dev_start_prev = _kept(active, device["dev_start"], clocks.dev_start_prev)
        if rec.enabled:
            rec.put(
                preprocess_start=preprocess_start,
                ready=ready,
                **host,
                **link,
                **device,
                active=np.broadcast_to(active, (n,)),
            )

    return Timeline(step_end, device_busy, compile_start, compile_end, rec.arrays())


def _host(
    plan: Plan,
    shape: _Shape,
    clocks: _Clocks,
    i: int,
    host_factor: np.ndarray | float,
    waits: tuple[np.ndarray, np.ndarray],
    partial: np.ndarray,
    active: bool | np.ndarray,
    work: tuple[np.ndarray, np.ndarray],
    compile_log: tuple[np.ndarray, np.ndarray],
) -> dict[str, np.ndarray]:
    """The host: a device call every loop_size steps, compiling new shapes and loop lengths first; its own work (Python,
    dispatch) varies by ``host_factor`` in this step. A host that
    feeds the data waits for its batch (``waits``: when it is free, when the batch is ready), and for a copy from
    pageable memory, which starts once the device has finished its queued work (``work``: compute and copy)."""
    wait_from, ready = waits
    compute, transfer = work
    call_start = shape.every if shape.every_step_calls else (i % plan.loop == 0) | partial
    host_begin = np.maximum(wait_from, ready) if plan.host_feeds_data else wait_from
    copy_start = np.maximum(host_begin, clocks.dev_end_prev)
    copy_end = (
        np.where(plan.blocking_copy, copy_start + transfer, host_begin) if shape.any_blocking_copy else host_begin
    )
    python_end = copy_end + plan.python_us * plan.host_slowdown * host_factor
    if i in shape.may_compile:
        new_graph = call_start & plan.graph_mode & ((i == 0) | (shape.remainder_start == i) | partial) & active
        compile_done = python_end + np.where(new_graph, plan.compile_us, 0.0)
        slot = np.minimum(clocks.compiles, MAX_COMPILES - 1)
        compile_log[0][slot[new_graph], shape.cols[new_graph]] = python_end[new_graph]
        compile_log[1][slot[new_graph], shape.cols[new_graph]] = compile_done[new_graph]
        clocks.compiles += new_graph
    else:
        new_graph, compile_done = shape.no_partial, python_end
    launch_end = compile_done + plan.dispatch_us * host_factor
    if shape.any_streamed:  # the device cannot finish before the last launch
        trailing = np.maximum(compile_done, launch_end - compute - plan.launch_idle_us)
        launched = np.where(plan.streamed, trailing, launch_end)
    else:
        launched = launch_end
    calls = call_start if active is True else call_start & active
    if calls is shape.every:
        clocks.host_free, clocks.call_ready = launch_end, launched
    else:
        clocks.host_free = np.where(calls, launch_end, clocks.host_free)
        clocks.call_ready = np.where(calls, launched, clocks.call_ready)
    return {
        "call_start": calls,
        "new_graph": new_graph,
        "wait_from": wait_from,
        "host_begin": host_begin,
        "copy_start": copy_start,
        "copy_end": copy_end,
        "python_end": python_end,
        "compile_done": compile_done,
        "launch_end": launch_end,
    }


def _link(
    plan: Plan,
    shape: _Shape,
    clocks: _Clocks,
    ready: np.ndarray,
    host_begin: np.ndarray,
    transfer: np.ndarray,
    active: bool | np.ndarray,
) -> dict[str, np.ndarray]:
    """The link: copies beside compute, one batch ahead of the device at most."""
    h2d_start = np.maximum(np.maximum(ready, clocks.link_free), clocks.dev_start_prev)
    if plan.host_feeds_data:
        h2d_start = np.maximum(h2d_start, host_begin)
    h2d_end = h2d_start + plan.overlap * transfer
    if not shape.none_linked:
        moved = h2d_end if shape.all_linked else np.where(shape.linked, h2d_end, clocks.link_free)
        clocks.link_free = _kept(active, moved, clocks.link_free)
    return {"h2d_start": h2d_start, "h2d_end": h2d_end}


def _device(
    plan: Plan,
    shape: _Shape,
    clocks: _Clocks,
    i: int,
    ready: np.ndarray,
    copy_start: np.ndarray,
    link: dict[str, np.ndarray],
    compute: np.ndarray,
    transfer: np.ndarray,
    strided: np.ndarray,
    active: bool | np.ndarray,
) -> dict[str, np.ndarray]:
    """The device: in order, after the previous step, the call's launch and the data (a copy from pageable memory
    as soon as the host issues it, the ops once launched); where ops are launched one by one, idle while the host
    launches runs of short ones; a CPU fallback's round trip splits compute; the weight update (and its offload
    copies) every gradient_accumulation steps."""
    h2d_start, h2d_end = link["h2d_start"], link["h2d_end"]
    linked = shape.linked
    data_at = h2d_end if shape.all_linked else ready if shape.none_linked else np.where(linked, h2d_end, ready)
    dev_start = np.maximum(np.maximum(clocks.dev_end_prev, clocks.call_ready), data_at)
    if shape.any_blocking_copy:
        dev_start = np.where(plan.blocking_copy, copy_start, dev_start)
    consumed = (
        h2d_start if shape.all_linked else dev_start if shape.none_linked else np.where(linked, h2d_start, dev_start)
    )
    serial_end = dev_start if shape.all_linked else dev_start + shape.serial_share * transfer
    if shape.any_blocking_copy:
        launched = np.where(plan.blocking_copy, np.maximum(serial_end, clocks.call_ready), serial_end)
    else:
        launched = serial_end
    ops_start = launched + plan.launch_idle_us
    forward_end = ops_start + compute / 2
    if shape.fallback:
        fallback_d2h_end = forward_end + plan.fallback_d2h_us
        host_op_start = np.maximum(fallback_d2h_end, clocks.host_free)
        host_op_end = host_op_start + plan.fallback_host_us
        clocks.host_free = _kept(active, host_op_end, clocks.host_free)
        backward_start = host_op_end + plan.fallback_h2d_us
        clocks.link_free = _kept(active, np.maximum(clocks.link_free, backward_start), clocks.link_free)  # copy back
    else:
        fallback_d2h_end = host_op_start = host_op_end = backward_start = forward_end
    compute_end = backward_start + compute / 2
    strided_end = compute_end + strided
    update = (
        shape.every if shape.every_step_updates else ((i + 1) % plan.accumulation == 0) | (i + 1 == plan.total_steps)
    )
    reduced = _all_reduce(plan, backward_start, compute_end, strided_end, update)
    update_start = np.maximum(strided_end, reduced["comm_end"][-1]) if plan.bucket_us else strided_end
    if update is shape.every:
        update_end = update_start + plan.update_us
        offload_end = update_end + plan.offload_us
    else:
        update_end = update_start + np.where(update, plan.update_us, 0.0)
        offload_end = update_end + np.where(update, plan.offload_us, 0.0)
    dev_end = offload_end + plan.readback_us if shape.reads_back else offload_end
    return {
        **reduced,
        "update_start": update_start,
        "dev_start": dev_start,
        "serial_end": serial_end,
        "ops_start": ops_start,
        "forward_end": forward_end,
        "fallback_d2h_end": fallback_d2h_end,
        "host_op_start": host_op_start,
        "host_op_end": host_op_end,
        "backward_start": backward_start,
        "compute_end": compute_end,
        "strided_end": strided_end,
        "update_end": update_end,
        "offload_end": offload_end,
        "dev_end": dev_end,
        "update": update & active,
        "consumed": consumed,
    }


def _all_reduce(
    plan: Plan, backward_start: np.ndarray, compute_end: np.ndarray, strided_end: np.ndarray, update: np.ndarray
) -> dict[str, np.ndarray]:
    """The gradient all-reduce across replicas before a weight update: one collective per bucket, in the order
    the backward pass fills them (each as soon as its gradients are in, else all after backward), one after
    another on each rank. A collective ends on every rank when the last rank's start plus its length is
    reached: the other ranks wait in it. Arrays ``[bucket, column]``; steps without an update reduce nothing."""
    if not plan.bucket_us:
        return {}
    buckets, count = len(plan.bucket_us), plan.replicas
    filled = (np.arange(1, buckets + 1) / buckets) if plan.reduce_during_backward else np.ones(buckets)
    starts, ends = np.empty((buckets, plan.n)), np.empty((buckets, plan.n))
    previous = np.full(plan.n, -np.inf)
    for k, length in enumerate(plan.bucket_us):
        start = np.maximum(backward_start + filled[k] * (compute_end - backward_start), previous)
        last_in = start.reshape(-1, count).max(axis=1).repeat(count)
        starts[k], ends[k] = start, last_in + length
        previous = ends[k]
    return {"comm_start": np.where(update, starts, strided_end), "comm_end": np.where(update, ends, strided_end)}
