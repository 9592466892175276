"""The emulator's physics: the documented behaviours, memory limits, and the two paths agreeing."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO

from perftool.analysis import compute_metrics
from perftool.common.errors import PerftoolError
from perftool.emulator.config import load_config
from perftool.emulator.evaluate import evaluate
from perftool.emulator.full_run import run
from perftool.emulator.plan import build_plan, io_tiles_needed
from perftool.emulator.profiles import PROFILES, TILE_BYTES
from perftool.emulator.simulate import simulate
from perftool.emulator.trace_writer import write_trace
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import scan_trace

SAMPLES = REPO / "sample_traces"
SAMPLE_CONFIGS = sorted(SAMPLES.glob("*/*.yaml"))


def sample(name: str, *overrides: str):
    return load_config(SAMPLES / f"{name}.yaml", list(overrides))


def sweep(config, **knobs):
    """Throughput of the config for each value of one knob."""
    ((name, values),) = knobs.items()
    return evaluate(config, {name: np.array(values)})


def test_throughput_rises_with_loop_size_and_saturates():
    loops = [1, 2, 4, 8, 16, 32, 64, 128, 256]  # all divide the 256 steps: no remainder loop
    result = sweep(sample("npu/healthy"), loop_size=loops)
    throughput = result["throughput"]
    assert np.all(np.diff(throughput) > -1e-9 * throughput[:-1])
    assert throughput[loops.index(32)] / throughput[0] > 1.15  # host dispatch every step costs > 15%
    assert throughput[-1] / throughput[loops.index(64)] - 1 < 0.005  # saturated


def test_prefetch_depth_three_absorbs_jitter_and_eight_adds_little():
    throughput = sweep(sample("ipu/input_bound_prefetch"), prefetch_depth=[1, 3, 8])["throughput"]
    gain_1_to_3 = throughput[1] / throughput[0] - 1
    gain_3_to_8 = throughput[2] / throughput[1] - 1
    assert gain_1_to_3 > 0.03
    assert 0 <= gain_3_to_8 < gain_1_to_3 / 2


def test_prefetch_depth_does_not_matter_without_jitter():
    config = sample("ipu/input_bound_prefetch", "workload.preprocess_jitter=0", "workload.preprocess_us_per_sample=40")
    throughput = sweep(config, prefetch_depth=[1, 3, 8])["throughput"]
    assert throughput.max() / throughput.min() - 1 < 0.002


def test_best_io_tile_count_is_interior_and_the_micro_batch_must_fit():
    config = sample("ipu/serialised_transfers_no_io_tiles")  # fp32 transfers, significant next to compute
    tiles = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    result = sweep(config, io_tiles=tiles)
    micro_batch = config.knobs.batch_size * config.workload.sample_size
    needed = int(io_tiles_needed(micro_batch))
    assert needed == int(np.ceil(1.05 * micro_batch / TILE_BYTES))
    for count, reason, throughput in zip(tiles, result.plan.infeasible, result["throughput"]):
        assert (0 < count < needed) == bool(reason)
        assert np.isnan(throughput) == bool(reason)
    best = tiles[int(np.nanargmax(result["throughput"]))]
    assert best == min(t for t in tiles if t >= needed)  # the smallest power of two that holds a micro-batch
    assert 0 < best < tiles[-1]
    assert result["throughput"][tiles.index(best)] / result["throughput"][0] > 1.2
    assert result["throughput"][-1] < result["throughput"][tiles.index(best)] * 0.75  # compute lost to IO tiles


def test_out_of_memory_is_infeasible_never_fast():
    config = sample("npu/healthy")
    result = sweep(config, batch_size=[64, 256, 1024])
    assert list(result.feasible) == [True, True, False]
    assert "out of memory" in result.plan.infeasible[2]
    assert np.isnan(result["throughput"][2]) and np.isnan(result["step_time_us"][2])


def test_offloading_optimizer_state_saves_memory_and_costs_stream_copies():
    config = sample("ipu/offload_stream_copies")
    plan = build_plan(config, {"offload_optimizer": np.array([True, False])})
    assert plan.memory_bytes[0] == plan.memory_bytes[1] - config.workload.optimizer_state
    result = evaluate(config, {"offload_optimizer": np.array([True, False])})
    profile = PROFILES["ipu"]
    copies_per_step = (
        2 * config.workload.optimizer_state * 1e6 / profile.remote_buffer_bandwidth / config.knobs.gradient_accumulation
    )
    lost = result["step_time_mean_us"][0] - result["step_time_mean_us"][1]
    assert lost == pytest.approx(copies_per_step, rel=0.02)
    breakdown = run(config).breakdown()
    assert breakdown["offload_copy"] == pytest.approx(copies_per_step, rel=0.02)


def test_offloading_is_what_makes_a_large_optimizer_fit():
    config = sample("ipu/offload_stream_copies", "workload.optimizer_state=800MB")
    result = evaluate(config, {"offload_optimizer": np.array([True, False])})
    assert list(result.feasible) == [True, False]


def test_cpu_fallback_costs_copies_and_the_host_op_every_step():
    with_fallback = run(sample("hpu/cpu_fallback"))
    op = with_fallback.config.knobs.cpu_fallback_ops[0]
    profile = PROFILES["hpu"]
    round_trip = (
        op.tensor_size * 1e6 / profile.d2h_bandwidth + op.host_us + op.tensor_size * 1e6 / profile.h2d_bandwidth
    )
    assert with_fallback.breakdown()["fallback"] == pytest.approx(round_trip, rel=0.01)
    healthy = run(sample("hpu/healthy"))
    slower = with_fallback.prediction["step_time_mean_us"] - healthy.prediction["step_time_mean_us"]
    assert slower == pytest.approx(round_trip, rel=0.05)


@pytest.mark.parametrize(
    ("name", "overrides", "recompilations"),
    [
        ("npu/healthy", [], 0),
        ("npu/recompile_remainder_loop", [], 1),  # 250 % 32 != 0
        ("npu/recompile_remainder_loop", ["loop_size=25"], 0),
        ("hpu/recompile_unpadded_last_batch", [], 1),
        ("hpu/recompile_unpadded_last_batch", ["last_batch=pad"], 0),
        ("hpu/recompile_unpadded_last_batch", ["last_batch=drop"], 0),
    ],
)
def test_new_shapes_and_loop_lengths_recompile(name, overrides, recompilations):
    result = evaluate(sample(name, *overrides))
    assert result["recompilations"][0] == recompilations
    assert result["compiles"][0] == 1 + recompilations


def test_last_batch_policy_decides_the_extra_step_and_its_shape():
    config = sample("hpu/recompile_unpadded_last_batch")
    plan = build_plan(config, {"last_batch": np.array(["partial", "pad", "drop"])})
    assert list(plan.total_steps) == [config.workload.steps + 1] * 2 + [config.workload.steps]
    assert list(plan.partial_last) == [True, False, False]
    assert plan.compute_last_us[0] == pytest.approx(plan.compute_us[0] * 5 / config.knobs.batch_size)
    assert plan.compute_last_us[1] == plan.compute_us[1]  # padding computes a full batch


def test_device_graphs_remove_host_launch_overhead():
    result = sweep(sample("hpu/host_bound_no_hpu_graphs"), device_graphs=[False, True])
    assert result["device_busy_fraction"][0] < 0.8
    assert result["device_busy_fraction"][1] > 0.99
    assert result["throughput"][1] / result["throughput"][0] > 1.25


def test_a_sync_each_step_keeps_the_host_from_running_ahead_and_graphs_keep_it(tmp_path):
    """A loop that reads a value back every step waits for the step's device work: the device then idles while the
    host runs Python and launches again, which device graphs shorten but do not remove."""
    steps = {
        (sync, graphs): float(evaluate(sample("gpu/launch_bound_no_cuda_graphs", f"workload.sync_each_step={sync}",
                                              f"device_graphs={graphs}"))["step_time_mean_us"][0])
        for sync in (False, True)
        for graphs in (False, True)
    }  # fmt: skip
    assert steps[True, False] > steps[False, False] and steps[True, True] > steps[False, True]
    assert steps[True, True] < steps[True, False]  # graphs still remove the launches
    config = sample("gpu/launch_bound_no_cuda_graphs", "workload.sync_each_step=true", "device_graphs=true")
    path = tmp_path / "sync.json"
    write_trace(run(config), str(path))
    idle = scan_trace(load_trace(str(path)), []).idle
    assert idle["sync"] > 0.15 and idle["sync"] > 0.9 * sum(idle.values())  # the device idles after each sync


def test_smaller_transfer_dtype_shortens_serial_copies():
    result = sweep(sample("ipu/serialised_transfers_no_io_tiles"), transfer_dtype=["fp32", "fp16", "int8"])
    assert result["step_time_us"][0] > result["step_time_us"][1] > result["step_time_us"][2]


def test_batched_fast_path_equals_one_config_at_a_time():
    config = sample("ipu/healthy")
    grid = {
        "loop_size": np.array([1, 8, 64, 64, 100, 64]),
        "prefetch_depth": np.array([1, 3, 2, 8, 3, 1]),
        "io_tiles": np.array([0, 8, 16, 4, 1, 0]),
        "batch_size": np.array([16, 8, 16, 32, 16, 24]),
        "transfer_dtype": np.array(["fp16", "fp32", "int8", "fp16", "fp16", "fp32"]),
    }
    batched = evaluate(config, grid)
    for row in range(6):
        overrides = [f"{name}={values[row]}" for name, values in grid.items()]
        alone = evaluate(load_config(SAMPLES / "ipu/healthy.yaml", overrides))
        assert alone.plan.infeasible[0] == batched.plan.infeasible[row]
        for name, values in batched.figures.items():
            np.testing.assert_allclose(alone[name][0], values[row], rtol=1e-9, err_msg=f"{name} row {row}")


@pytest.mark.parametrize(
    "name, overrides",
    [(f"{p.parent.name}/{p.stem}", []) for p in SAMPLE_CONFIGS]
    + [("ipu/offload_stream_copies", ["gradient_accumulation=1"])],
)
def test_a_run_where_every_configuration_agrees_takes_shortcuts_to_the_same_figures(name, overrides):
    """One config alone calls the device and updates the weights (and its offloaded state) each step and copies from
    one kind of memory; beside a second configuration that differs in all three, the simulation takes its general
    path, with the same figures for the first."""
    config = sample(name, *overrides)
    knobs = config.knobs
    grid = {
        "loop_size": np.array([knobs.loop_size, knobs.loop_size * 2]),
        "gradient_accumulation": np.array([knobs.gradient_accumulation, knobs.gradient_accumulation + 1]),
        "pin_memory": np.array([knobs.pin_memory, not knobs.pin_memory]),
    }
    alone, beside = evaluate(config), evaluate(config, grid)
    for name, values in alone.figures.items():
        np.testing.assert_allclose(values[0], beside[name][0], rtol=1e-9, err_msg=name)


def test_a_config_as_written_is_simulated_once_however_often_asked(monkeypatch):
    from perftool.emulator import evaluate as module

    config = sample("npu/healthy", "workload.steps=96")
    runs = []
    monkeypatch.setattr(module, "simulate", lambda plan, seed: runs.append(plan.n) or simulate(plan, seed))
    first, again = evaluate(config), evaluate(config.model_copy())
    assert runs == [1] and again is first
    evaluate(sample("npu/healthy", "workload.steps=97"))  # another config: simulated
    assert runs == [1, 1]


def test_long_epochs_are_simulated_in_smaller_pieces():
    """A piece's timeline stays within PIECE_BYTES: an epoch of a million steps is simulated a few dozen
    configurations at a time, a short one thousands at a time, and a job's ranks stay together."""
    from perftool.emulator.evaluate import CHUNK, PIECE_BYTES, STEP_BYTES, _pieces

    depths = {"prefetch_depth": np.tile([1, 2], 100)}
    long = list(_pieces(build_plan(sample("npu/healthy", "workload.steps=1000000", "loop_size=1"), depths)))
    assert max(piece.size for piece in long) * STEP_BYTES * 1_000_000 <= PIECE_BYTES and sum(map(len, long)) == 200
    short = list(_pieces(build_plan(sample("npu/healthy"), {"prefetch_depth": np.tile([1, 2], 3000)})))
    assert [piece.size for piece in short] == [CHUNK, 6000 - CHUNK]
    job = load_config(
        REPO / "sample_traces" / "jobs" / "npu_exposed_allreduce" / "job.yaml", ["workload.steps=1000000"]
    )
    assert all(piece.size % 8 == 0 for piece in _pieces(build_plan(job, depths)))


def test_a_device_that_needs_a_large_batch_to_fill_computes_small_ones_less_efficiently():
    batches = {"batch_size": np.array([32, 128, 512])}
    flat = evaluate(sample("gpu/healthy"), batches)
    filling = evaluate(sample("gpu/healthy", "workload.half_efficiency_batch=128"), batches)
    slowdown = (filling.plan.compute_us / filling.plan.batch) / (flat.plan.compute_us / flat.plan.batch)
    np.testing.assert_allclose(slowdown, [(32 + 128) / 32, 2.0, (512 + 128) / 512])  # half efficiency at 128
    assert filling.plan.compute_last_us[0] == pytest.approx(flat.plan.compute_last_us[0] * slowdown[0])
    flat_gain = flat["throughput"][2] / flat["throughput"][0]
    assert filling["throughput"][2] / filling["throughput"][0] > 2 * flat_gain  # a large batch pays off more


DATASET = ["workload.steps=null", "workload.last_batch_samples=0", "workload.dataset_samples=3205"]


@pytest.mark.parametrize(
    "name, grid, first_recompiles",
    [
        # 3205 = 400 × 8 + 5: the short last batch compiles
        (
            "hpu/recompile_unpadded_last_batch",
            {"batch_size": [8, 16, 24, 64, 5], "last_batch": ["partial"] * 4 + ["pad"]},
            1,
        ),
        # 3205 = 100 × 32 + 5: a remainder loop of 4 steps, then the short last batch
        ("npu/recompile_remainder_loop", {"batch_size": [32, 64, 128, 640, 64], "loop_size": [32, 32, 8, 4, 16]}, 2),
    ],
)
def test_a_dataset_gives_each_batch_size_its_own_epoch(name, grid, first_recompiles):
    """Configurations whose epochs differ in length, simulated together, predict what each does alone with the
    steps and short last batch its batch size leaves."""
    batched = evaluate(sample(name, *DATASET), {knob: np.array(values) for knob, values in grid.items()})
    for row, batch in enumerate(grid["batch_size"]):
        steps, left = divmod(3205, batch)
        assert (batched.plan.steps[row], batched.plan.last_samples[row]) == (steps, left)
        knobs = [f"{knob}={values[row]}" for knob, values in grid.items()]
        alone = evaluate(sample(name, f"workload.steps={steps}", f"workload.last_batch_samples={left}", *knobs))
        for figure, values in batched.figures.items():
            np.testing.assert_allclose(alone[figure][0], values[row], rtol=1e-9, err_msg=f"{figure} row {row}")
    assert batched["recompilations"][0] == first_recompiles


def test_a_loop_longer_than_the_epoch_or_a_batch_beyond_the_dataset_is_infeasible():
    plan = build_plan(
        sample("npu/healthy", *DATASET), {"batch_size": np.array([64, 640, 4096]), "loop_size": np.array([32, 32, 1])}
    )
    assert list(plan.infeasible) == [
        "",
        "loop longer than an epoch: 32 steps, an epoch of 5",
        "no full batch: the dataset holds fewer samples than a batch of 4096",
    ]
    huge = sample(
        "npu/healthy", "workload.steps=null", "workload.last_batch_samples=0", "workload.dataset_samples=64000000"
    )
    plan = build_plan(huge, {"batch_size": np.array([64, 32])})
    assert list(plan.infeasible) == ["", "epoch too long: 2,000,000 steps at batch 32, over 1,000,000"]


@pytest.mark.parametrize("name", ["npu/healthy", "npu/input_bound_prefetch"])
def test_same_seed_same_figures_other_seed_other_luck(name):
    first, again = evaluate(sample(name)), evaluate(sample(name))
    assert first.row(0) == again.row(0)
    other = evaluate(sample(name, "seed=8"))
    assert other["step_time_mean_us"][0] != first["step_time_mean_us"][0]


def test_compute_jitter_alone_moves_a_healthy_run_little():
    means = [evaluate(sample("npu/healthy", f"seed={seed}"))["step_time_mean_us"][0] for seed in range(5)]
    assert max(means) / min(means) - 1 < 0.01


def random_knobs(family: str, draw: int) -> list[str]:
    """A random but feasible knob combination for one family's sample workload."""
    rng = np.random.default_rng([draw, len(family)])
    knobs = {
        "batch_size": int(rng.choice([8, 16, 24])),
        "prefetch_depth": int(rng.integers(1, 5)),
        "gradient_accumulation": int(rng.choice([1, 2, 3])),
        "last_batch": str(rng.choice(["partial", "pad", "drop"])),
        "transfer_dtype": str(rng.choice(["fp32", "fp16", "int8"])),
    }
    if family in ("npu", "ipu"):
        knobs["loop_size"] = int(rng.choice([1, 3, 8, 16]))
        knobs["layout_mismatch"] = bool(rng.integers(2))
    if family == "ipu":
        knobs["io_tiles"] = int(rng.choice([0, 16, 64]))
        knobs["offload_optimizer"] = bool(rng.integers(2))
    if family in ("hpu", "gpu"):
        knobs["device_graphs"] = bool(rng.integers(2))
    return [f"{name}={value}" for name, value in knobs.items()] + [
        "workload.steps=60",
        "workload.last_batch_samples=5",
        "workload.preprocess_jitter=0.6",
        f"seed={draw}",
    ]


EAGER_LOOP = [  # the training loop loads each batch itself, copies it from pageable memory, launches op by op
    "workload.input_workers=0",
    "pin_memory=false",
    "device_graphs=false",
    "workload.launch_idle_us=150",
    "workload.steps=60",
]
CASES = (
    {f"{path.parent.name}/{path.stem}": (path, []) for path in SAMPLE_CONFIGS}
    | {
        f"{family}/random-{draw}": (SAMPLES / f"{family}/healthy.yaml", random_knobs(family, draw))
        for family in PROFILES
        for draw in range(3)
    }
    | {"gpu/eager-loop": (SAMPLES / "gpu/input_bound_prefetch.yaml", EAGER_LOOP)}
    | {"hpu/eager-loop": (SAMPLES / "hpu/healthy.yaml", EAGER_LOOP)}
)


@pytest.mark.parametrize(("config_path", "overrides"), CASES.values(), ids=CASES.keys())
def test_scanning_the_written_trace_agrees_with_the_fast_path(config_path, overrides, run, tmp_path):
    trace_path = tmp_path / "trace.json"
    sets = [arg for item in overrides for arg in ("--set", item)]
    result = run("emulate", config_path, "--trace", trace_path, *sets)
    assert result.exit_code == 0, result.stderr
    metrics = compute_metrics(load_trace(trace_path)).values
    # the trace is one epoch: its mean step pays a mid-epoch compile in full, as a one-epoch job's does
    predicted = evaluate(load_config(config_path, [*overrides, "workload.epochs=1"])).row(0)
    pairs = {
        "step_time_us": "step_time_us.median",
        "step_time_mean_us": "step_time_us.mean",
        "step_time_p90_us": "step_time_us.p90",
        "device_busy_fraction": "device.busy_fraction",
    }
    for figure, metric in pairs.items():
        assert metrics[metric] == pytest.approx(predicted[figure], rel=0.01), figure
    assert metrics["steps.warmup"] == predicted["warmup_steps"]
    assert metrics["recompilations.count"] == predicted["recompilations"]
    assert metrics["compile.count"] == predicted["compiles"]


def test_a_cpu_fallback_splits_a_device_graph():
    """A device graph cannot hold an op that runs on the host: each fallback call a step is one more graph to
    launch, so device graphs save less where ops fall back."""
    from perftool.emulator.plan import build_plan

    config = sample("hpu/cpu_fallback")
    calls = sum(op.calls_per_step for op in config.knobs.cpu_fallback_ops)
    assert config.knobs.device_graphs and calls == 1
    assert build_plan(config).dispatch_us[0] == pytest.approx(config.profile.call_dispatch_us * (1 + calls))
    clean = sample("hpu/cpu_fallback", "cpu_fallback_ops=[]")
    assert build_plan(clean).dispatch_us[0] == pytest.approx(config.profile.call_dispatch_us)


def test_a_loop_that_loads_and_copies_from_pageable_memory_cannot_run_ahead():
    """No workers: the loop loads each batch, then a pageable copy waits for the device: the step is the loop's
    loading, the copy and its launches, one after another; four workers take the loading off it."""
    config = load_config(SAMPLES / "gpu/input_bound_prefetch.yaml", EAGER_LOOP)
    plan = build_plan(config)
    serial = plan.preprocess_us[0] + plan.transfer_us[0] + plan.dispatch_us[0]
    step = evaluate(config)["step_time_mean_us"][0]
    assert step == pytest.approx(serial, rel=0.05) and step > plan.compute_us[0] + plan.launch_idle_us[0]
    workers = evaluate(
        load_config(SAMPLES / "gpu/input_bound_prefetch.yaml", [*EAGER_LOOP, "workload.input_workers=4"])
    )
    assert workers["step_time_mean_us"][0] < step - 0.5 * plan.preprocess_us[0]


def test_workers_that_oversubscribe_the_hosts_cores_slow_its_loop():
    """Eight busy workers and the loop on four cores: every host time stretches (9 / 4), the step with it."""
    busy = ["workload.input_workers=8", "workload.preprocess_us_per_sample=10000"]
    base = load_config(SAMPLES / "gpu/launch_bound_no_cuda_graphs.yaml", busy)
    crowded = load_config(SAMPLES / "gpu/launch_bound_no_cuda_graphs.yaml", [*busy, "host.cpus=4"])
    roomy, tight = build_plan(base), build_plan(crowded)
    assert roomy.host_slowdown[0] == 1.0 and tight.host_slowdown[0] == pytest.approx(9 / 4)
    assert tight.dispatch_us[0] == pytest.approx(roomy.dispatch_us[0] * 9 / 4)
    assert evaluate(crowded)["step_time_mean_us"][0] > evaluate(base)["step_time_mean_us"][0]


def test_no_input_workers_needs_a_host_that_feeds_the_data(tmp_path):
    """NPU and IPU loops are fed by an input thread of their framework: zero workers is a config error."""
    with pytest.raises(PerftoolError, match="input_workers.*fed by an input thread"):
        load_config(SAMPLES / "npu/healthy.yaml", ["workload.input_workers=0"])


def test_a_later_epoch_pays_its_short_last_batch_and_not_its_compile():
    """Each epoch after the first runs every step, the short last batch at its own cost, without compiling again:
    padding that batch to a full one costs a later epoch less than a full step (the compile's stall counted from
    the step it held up, not its whole length, which overlapped work already queued)."""

    def later_epoch_us(policy: str) -> tuple[float, float]:
        one, two = (evaluate(sample("hpu/recompile_unpadded_last_batch", f"workload.epochs={n}",
                                    f"knobs.last_batch={policy}")) for n in (1, 2))  # fmt: skip
        return two["job_time_us"][0] - one["job_time_us"][0], one["step_time_us"][0]

    partial, step = later_epoch_us("partial")
    padded, _ = later_epoch_us("pad")
    steps = sample("hpu/recompile_unpadded_last_batch").workload.steps
    assert padded == pytest.approx((steps + 1) * step, rel=0.02)  # every step of the epoch, warm-up's included
    assert 0 < padded - partial < step  # 5 samples of 16 cost less than a full batch, never less than nothing
