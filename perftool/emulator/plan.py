"""What each configuration costs per step, vectorised: one array element per configuration.

A plan turns the workload, the device profile and the knob values into per-step costs (µs), the
call structure (loop size, remainder loop, last batch) and the memory footprint. Feasibility is
decided here, before any simulation: a configuration that does not fit is out of memory, never fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perftool.emulator.config import DTYPE_BYTES, MAX_STEPS, EmulatorConfig, Knobs
from perftool.emulator.profiles import TILE_BYTES, DeviceProfile

IO_TILE_HEADROOM = 1.05  # IO tiles need ~5% for exchange code and buffers (reference 002, §4.4.2)


@dataclass
class Plan:
    """Per-configuration arrays (length ``n``) and the workload scalars they share."""

    n: int
    steps: np.ndarray  # full-batch steps in one epoch (they follow from the batch size when the dataset is given)
    batch: np.ndarray
    loop: np.ndarray
    depth: np.ndarray
    io_tiles: np.ndarray
    accumulation: np.ndarray
    # per-step costs, µs (``_last``: the extra step made by a padded or partial last batch)
    compute_us: np.ndarray
    compute_last_us: np.ndarray
    input_bytes: np.ndarray  # one micro-batch as transferred to the device
    transfer_us: np.ndarray
    transfer_last_us: np.ndarray
    preprocess_us: np.ndarray
    preprocess_last_us: np.ndarray
    strided_us: np.ndarray
    strided_last_us: np.ndarray
    overlap: np.ndarray  # share of the input transfer that runs beside compute (0..1)
    dispatch_us: np.ndarray  # host launch cost of one device call
    streamed: np.ndarray  # ops launched one by one: the device trails the host's launches
    launch_idle_us: np.ndarray  # device idle in a streamed step, waiting on launches of short ops
    blocking_copy: np.ndarray  # the input copy is from pageable memory: it blocks the host and waits for the device
    readback_us: np.ndarray  # the copy back to the host after each step's work (pageable or pinned bandwidth)
    blocking_readback: np.ndarray  # the read-back goes to pageable memory: the host waits for the step and the copy
    host_slowdown: np.ndarray  # the host's own work stretched by CPU cores shared with busy input workers (>= 1)
    update_us: np.ndarray  # weight update
    offload_us: np.ndarray  # remote-buffer copies of the optimizer state at each update
    # call structure
    extra_step: np.ndarray  # a padded or partial last batch adds one step
    partial_last: np.ndarray  # ... at a new shape (a new graph)
    last_samples: np.ndarray  # samples left over for a short last batch
    graph_mode: np.ndarray  # new shapes and loop lengths compile
    python_us: np.ndarray  # host Python each time control returns to the training loop
    # scalars shared by every configuration
    epochs: int  # the job's epochs: mid-epoch compiles happen in the first only
    compile_us: float
    fallback_d2h_us: float
    fallback_host_us: float
    fallback_h2d_us: float
    preprocess_jitter: float
    preprocess_replay: tuple[float, ...] | None  # relative times of successive batches, mean one, replayed in turn
    compute_jitter: float
    host_jitter: float
    workers: np.ndarray  # input workers per configuration (int); 0: the training loop loads each batch itself
    blocking: np.ndarray  # the host waits for each step's device work before going on (per configuration)
    host_feeds_data: bool
    # memory
    static_bytes: np.ndarray
    activation_bytes: np.ndarray
    capacity_bytes: np.ndarray
    infeasible: np.ndarray  # str per configuration, "" when it fits
    # data-parallel replicas: each configuration is ``replicas`` consecutive columns, one per rank
    replicas: int = 1
    rank: np.ndarray | None = None  # per column: its rank
    bucket_us: tuple[float, ...] = ()  # each gradient bucket's all-reduce, µs, in the order backward fills them
    bucket_bytes: tuple[float, ...] = ()
    reduce_during_backward: bool = True

    @property
    def total_steps(self) -> np.ndarray:
        return self.steps + self.extra_step.astype(np.int64)

    @property
    def memory_bytes(self) -> np.ndarray:
        return self.static_bytes + self.activation_bytes

    @property
    def feasible(self) -> np.ndarray:
        return self.infeasible == ""

    def subset(self, rows: np.ndarray) -> Plan:
        """The plan of the configurations at integer positions ``rows``."""
        values = {name: value[rows] if isinstance(value, np.ndarray) else value for name, value in vars(self).items()}
        return Plan(**{**values, "n": len(rows)})

    @staticmethod
    def concat(plans: list[Plan]) -> Plan:
        """The configurations of ``plans`` side by side, simulated in one run: plans whose shared scalars agree (the
        same config with a per-configuration figure changed), else a ValueError."""
        first = vars(plans[0])
        values: dict[str, Any] = {}
        for name, value in first.items():
            if isinstance(value, np.ndarray):
                values[name] = np.concatenate([vars(plan)[name] for plan in plans])
            elif name != "n" and any(vars(plan)[name] != value for plan in plans[1:]):
                raise ValueError(f"plans differ in {name}, which their configurations share")
            else:
                values[name] = value
        return Plan(**{**values, "n": sum(plan.n for plan in plans)})

    @staticmethod
    def joined(plans: list[Plan]) -> Plan | None:
        """:meth:`concat` of ``plans``, to simulate as one run; None where they differ in what all of a plan's
        configurations share (a gradient bucket's size), so that each runs alone."""
        try:
            return Plan.concat(plans)
        except ValueError:
            return None


def knob_grid(config: EmulatorConfig, grid: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Every knob as an array: the swept values from ``grid``, the config's value elsewhere.

    Swept values are not validated here: callers check them against the config's rules first.
    """
    grid = {k: np.asarray(v) for k, v in (grid or {}).items()}
    unknown = set(grid) - set(Knobs.model_fields)
    if unknown:
        raise ValueError(f"not knobs: {sorted(unknown)}")
    sizes = {v.size for v in grid.values()} or {1}
    if len(sizes) != 1:
        raise ValueError("knob arrays differ in length")
    n = sizes.pop()
    return {
        name: (grid[name] if name in grid else np.full(n, getattr(config.knobs, name))).astype(_DTYPES[name])
        for name in Knobs.model_fields
        if name != "cpu_fallback_ops"
    }


_DTYPES = {
    "batch_size": np.int64,
    "loop_size": np.int64,
    "prefetch_depth": np.int64,
    "io_tiles": np.int64,
    "gradient_accumulation": np.int64,
    "transfer_dtype": str,
    "last_batch": str,
    "offload_optimizer": bool,
    "device_graphs": bool,
    "layout_mismatch": bool,
    "pin_memory": bool,
    "pin_readback": bool,
}


def build_plan(config: EmulatorConfig, grid: dict[str, np.ndarray] | None = None) -> Plan:
    """The plan of the config as written, or of every knob combination in ``grid``."""
    profile, work, knobs = config.profile, config.workload, knob_grid(config, grid)
    batch = knobs["batch_size"].astype(np.int64)
    io = knobs["io_tiles"].astype(np.int64)
    steps, last = work.epoch(batch)
    policy = knobs["last_batch"]
    extra = (policy != "drop") & (last > 0)
    partial = (policy == "partial") & (last > 0)
    graphs = knobs["device_graphs"].astype(bool)
    graph_mode = np.full(batch.size, profile.compiles_graphs) | graphs
    streamed = (profile.op_launch_us > 0) & ~graphs  # without device graphs, every op is launched from the host
    pageable = ~knobs["pin_memory"].astype(bool)
    pageable_readback = ~knobs["pin_readback"].astype(bool) & (work.readback_per_step > 0)

    compute_tiles = profile.tiles - io  # meaningful on devices with tiles only
    tile_slowdown = profile.tiles / compute_tiles if profile.tiles else 1.0
    us_per_sample = work.gflops_per_sample * 1e3 / (profile.peak_tflops * profile.efficiency) * tile_slowdown
    wire_bytes = work.sample_size * np.vectorize(DTYPE_BYTES.get)(knobs["transfer_dtype"]) / 4
    us_per_wire_byte = 1e6 / profile.h2d_bandwidth
    strided_per_sample = np.where(
        knobs["layout_mismatch"], work.layout_copy_per_sample * 1e6 / profile.strided_copy_bandwidth, 0.0
    )
    offload = knobs["offload_optimizer"].astype(bool)
    accumulation = knobs["gradient_accumulation"].astype(np.int64)

    fallback_d2h_us, fallback_host_us, fallback_h2d_us = _fallback_costs(config, profile)
    # a device graph cannot hold an op that runs on the host: each fallback splits the step into one more graph
    segments = 1 + sum(op.calls_per_step for op in config.knobs.cpu_fallback_ops)
    static_bytes, activation_bytes, capacity_bytes = _memory(
        config, profile, batch, offload, accumulation, wire_bytes, io
    )
    compute_us = us_per_sample * (batch + work.half_efficiency_batch)
    dispatch_us = np.where(streamed, work.ops_per_step * profile.op_launch_us, profile.call_dispatch_us * segments)
    launch_idle_us = np.where(streamed, work.launch_idle_us, 0.0)
    preprocess_us = work.preprocess_us_per_sample * batch
    readback_bandwidth = np.where(pageable_readback, profile.pageable_d2h_bandwidth, profile.d2h_bandwidth)
    slowdown = _host_slowdown(
        config, preprocess_us, compute_us + launch_idle_us, (dispatch_us + profile.python_us) / knobs["loop_size"]
    )
    plan = Plan(
        n=int(batch.size),
        steps=steps,
        batch=batch,
        loop=knobs["loop_size"].astype(np.int64),
        depth=knobs["prefetch_depth"].astype(np.int64),
        io_tiles=io,
        accumulation=accumulation,
        compute_us=compute_us,
        compute_last_us=us_per_sample * (np.where(partial, last, batch) + work.half_efficiency_batch),
        input_bytes=wire_bytes * batch,
        transfer_us=wire_bytes * batch * us_per_wire_byte,
        transfer_last_us=wire_bytes * np.where(partial, last, batch) * us_per_wire_byte,
        preprocess_us=preprocess_us * slowdown,
        preprocess_last_us=work.preprocess_us_per_sample * last * slowdown,
        strided_us=strided_per_sample * batch,
        strided_last_us=strided_per_sample * np.where(partial, last, batch),
        overlap=np.where(pageable, 0.0, _overlap(profile, io)),
        dispatch_us=dispatch_us * slowdown,
        streamed=streamed,
        launch_idle_us=launch_idle_us,
        blocking_copy=pageable,
        blocking_readback=pageable_readback,
        host_slowdown=slowdown,
        update_us=np.full(batch.size, (3 * work.weights + 2 * work.optimizer_state) * 1e6 / profile.memory_bandwidth),
        offload_us=np.where(offload, 2 * work.optimizer_state * 1e6 / max(profile.remote_buffer_bandwidth, 1.0), 0.0),
        readback_us=work.readback_per_step * 1e6 / readback_bandwidth,
        extra_step=extra,
        partial_last=partial,
        last_samples=last,
        graph_mode=graph_mode,
        python_us=np.full(batch.size, profile.python_us),
        epochs=work.epochs,
        compile_us=work.graph_compile_ms * 1e3,
        fallback_d2h_us=fallback_d2h_us,
        fallback_host_us=fallback_host_us,
        fallback_h2d_us=fallback_h2d_us,
        preprocess_jitter=work.preprocess_jitter,
        preprocess_replay=_mean_one(work.preprocess_replay),
        compute_jitter=work.compute_jitter,
        host_jitter=work.host_jitter,
        workers=np.full(batch.size, work.input_workers),
        blocking=np.full(batch.size, profile.host_blocks_per_call or work.sync_each_step)
        | pageable_readback,  # a read-back into pageable memory waits for the step
        host_feeds_data=profile.host_feeds_data,
        static_bytes=static_bytes,
        activation_bytes=activation_bytes,
        capacity_bytes=capacity_bytes,
        infeasible=np.full(batch.size, "", dtype=object),
    )
    plan.infeasible = _infeasible(profile, plan)
    return _with_replicas(config, profile, plan) if config.replicas is not None else plan


def _with_replicas(config: EmulatorConfig, profile: DeviceProfile, plan: Plan) -> Plan:
    """Each configuration as ``count`` ranks (consecutive columns), the slow ones slowed, with the all-reduce of
    the gradients (one per bucket of ``bucket`` bytes) priced on the device's collective links (``profile``: the
    config's, read once per plan)."""
    replicas = config.replicas
    assert replicas is not None
    count = replicas.count
    ranked = plan.subset(np.repeat(np.arange(plan.n), count))
    ranked.rank = np.tile(np.arange(count), plan.n)
    compute, preprocess = np.ones(count), np.ones(count)
    for slow in replicas.slow_ranks:
        compute[slow.rank], preprocess[slow.rank] = slow.compute, slow.preprocess
    for name, factor in (("compute_us", compute), ("compute_last_us", compute)):
        setattr(ranked, name, getattr(ranked, name) * factor[ranked.rank])
    for name in ("preprocess_us", "preprocess_last_us"):
        setattr(ranked, name, getattr(ranked, name) * preprocess[ranked.rank])
    gradients = float(config.workload.weights)
    full, rest = divmod(gradients, float(replicas.bucket))
    sizes = [float(replicas.bucket)] * int(full) + ([rest] if rest else [])
    bandwidth = (replicas.bus_bandwidth * 1e9) if replicas.bus_bandwidth else profile.collective_bandwidth
    latency = replicas.latency_us if replicas.latency_us is not None else profile.collective_latency_us
    traffic = 2 * (count - 1) / count  # an all-reduce's bytes on each rank's links per byte reduced
    ranked.replicas = count
    ranked.bucket_bytes = tuple(sizes)
    ranked.bucket_us = tuple(latency + size * traffic * 1e6 / bandwidth for size in sizes) if count > 1 else ()
    ranked.reduce_during_backward = replicas.overlap
    return ranked


def _mean_one(factors: tuple[float, ...] | None) -> tuple[float, ...] | None:
    """Relative times scaled to a mean of one (None stays None)."""
    if factors is None:
        return None
    mean = sum(factors) / len(factors)
    return tuple(factor / mean for factor in factors)


def _host_slowdown(
    config: EmulatorConfig, preprocess_us: np.ndarray, device_us: np.ndarray, host_us: np.ndarray
) -> np.ndarray:
    """Per configuration, how much slower the host's own work runs when the training loop (one core) and its input
    workers need more cores than ``host.cpus``: each worker is busy for the share of its time that keeping up with
    the step takes (the step's floor: the device's work or the host's, whichever is longer)."""
    workers = config.workload.input_workers
    if workers == 0:
        return np.ones(preprocess_us.size)
    floor = np.maximum(np.maximum(device_us, host_us), 1.0)
    busy_workers = np.minimum(preprocess_us / floor, workers)
    return np.maximum((1 + busy_workers) / config.host.cpus, 1.0)


def _fallback_costs(config: EmulatorConfig, profile: DeviceProfile) -> tuple[float, float, float]:
    """Per step, µs: the CPU-fallback ops' copies to the host, their host time, and the copies back."""
    ops = config.knobs.cpu_fallback_ops
    return (
        sum(op.calls_per_step * op.tensor_size * 1e6 / profile.d2h_bandwidth for op in ops),
        sum(op.calls_per_step * op.host_us for op in ops),
        sum(op.calls_per_step * op.tensor_size * 1e6 / profile.h2d_bandwidth for op in ops),
    )


def _memory(
    config: EmulatorConfig,
    profile: DeviceProfile,
    batch: np.ndarray,
    offload: np.ndarray,
    accumulation: np.ndarray,
    wire_bytes: np.ndarray,
    io: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per configuration, bytes: what stays on the device (weights, gradients, optimizer state unless offloaded,
    accumulated gradients), what a batch needs (activations, input buffers off tiles), and the capacity (the
    compute tiles' memory on tile devices)."""
    work = config.workload
    static = 2 * work.weights + np.where(offload, 0, work.optimizer_state) + np.where(accumulation > 1, work.weights, 0)
    activation = work.activations_per_sample * batch + np.where(profile.tiles, 0, 2 * wire_bytes * batch)
    capacity = (profile.tiles - io) * TILE_BYTES if profile.tiles else np.full(batch.size, profile.memory_bytes)
    return static.astype(np.float64), activation.astype(np.float64), np.asarray(capacity, np.float64)


def io_tiles_needed(micro_batch_bytes: np.ndarray | float) -> np.ndarray:
    """``N_IO ≈ 1.05 × micro-batch bytes / 624 kB`` (reference 002, §4.4.2), rounded up."""
    return np.ceil(IO_TILE_HEADROOM * np.asarray(micro_batch_bytes, dtype=np.float64) / TILE_BYTES).astype(np.int64)


def _overlap(profile: DeviceProfile, io_tiles: np.ndarray) -> np.ndarray:
    """Share of input transfers hidden behind compute: DMA engines, or IPU IO tiles when there are some."""
    if profile.async_h2d:
        return np.ones(io_tiles.size)
    return (io_tiles > 0).astype(np.float64)


def _infeasible(profile: DeviceProfile, plan: Plan) -> np.ndarray:
    """Why each configuration cannot run ('' when it can): the epoch first, then memory, then IO tiles."""
    reasons = np.full(plan.n, "", dtype=object)
    for row in np.flatnonzero((plan.loop > plan.steps) | (plan.steps > MAX_STEPS)):
        if plan.steps[row] == 0:
            reasons[row] = f"no full batch: the dataset holds fewer samples than a batch of {plan.batch[row]}"
        elif plan.steps[row] > MAX_STEPS:
            reasons[row] = f"epoch too long: {plan.steps[row]:,} steps at batch {plan.batch[row]}, over {MAX_STEPS:,}"
        else:
            reasons[row] = f"loop longer than an epoch: {plan.loop[row]} steps, an epoch of {plan.steps[row]}"
    over = (plan.memory_bytes > plan.capacity_bytes) & (reasons == "")
    for row in np.flatnonzero(over):
        reasons[row] = f"out of memory: needs {_gb(plan.memory_bytes[row])} of {_gb(plan.capacity_bytes[row])}" + (
            " on compute tiles" if profile.tiles else ""
        )
    if profile.tiles:
        needed = io_tiles_needed(plan.input_bytes)
        short = (reasons == "") & (plan.io_tiles > 0) & (plan.io_tiles < needed)
        for row in np.flatnonzero(short):
            reasons[row] = (
                f"too few IO tiles: a micro-batch of {plan.input_bytes[row] / 1e3:,.0f} kB needs {needed[row]}, "
                f"not {plan.io_tiles[row]}"
            )
    return reasons


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f} GB" if value >= 1e8 else f"{value / 1e6:.1f} MB"
