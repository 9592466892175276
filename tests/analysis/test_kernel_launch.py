"""Occupancy from a kernel's launch, checked against the estimate Kineto writes beside it on real captures."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from conftest import REPO

from perftool.analysis.kernel_launch import Launch, SmLimits, launch_of, occupancy

REAL = REPO / "tests" / "data" / "real"
H100 = SmLimits.of(
    {"maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536, "sharedMemPerMultiprocessor": 233472,
     "warpSize": 32, "computeMajor": 9, "computeMinor": 0}
)  # fmt: skip


@pytest.mark.parametrize("capture", ["ddp_v100_rank1", "nccl_a100_rank", "alexnet_benchmark_startup"])
@pytest.mark.slow
def test_occupancy_is_kinetos_estimate_where_the_grid_fills_the_device(capture):
    """Kineto's "est. achieved occupancy %" is the theoretical occupancy capped by the blocks the grid gives each
    SM: where the grid gives every SM all the warps it holds, ours is Kineto's, rounded as it rounds. (Kineto
    writes 0 for a kernel whose shared memory needs the opt-in beyond 48 KB: those are left out.)"""
    document = json.loads(gzip.decompress((REAL / f"{capture}.json.gz").read_bytes()))
    sm = SmLimits.of(document["deviceProperties"][0])
    assert sm is not None
    most_warps = sm.threads // sm.warp
    compared = 0
    for event in document["traceEvents"]:
        args = event.get("args", {})
        kinetos = args.get("est. achieved occupancy %")
        if not kinetos or args.get("warps per SM", 0) < most_warps:
            continue
        launch = launch_of(json.dumps(args).encode())
        assert launch is not None
        held = occupancy(launch, sm)
        assert held is not None and math.floor(held.share * 100 + 0.5) == kinetos, (event["name"], args, held)
        compared += 1
    assert compared > 50


def test_registers_shared_memory_and_threads_each_limit_an_sm():
    assert H100 is not None
    by_registers = occupancy(Launch(blocks=4096, threads=256, registers=255, shared_memory=0), H100)
    assert by_registers is not None and (by_registers.share, by_registers.limit) == (0.125, "registers")
    assert by_registers.without_limit == 1.0  # 8 blocks of 8 warps by threads alone
    by_memory = occupancy(Launch(blocks=4096, threads=128, registers=32, shared_memory=100 << 10), H100)
    assert by_memory is not None and (by_memory.share, by_memory.limit) == (0.125, "shared memory")
    full = occupancy(Launch(blocks=4096, threads=1024, registers=32, shared_memory=0), H100)
    assert full is not None and (full.share, full.limit) == (1.0, "threads")
    assert occupancy(Launch(blocks=1, threads=0, registers=32, shared_memory=0), H100) is None  # no block recorded
    assert occupancy(Launch(blocks=1, threads=256, registers=0, shared_memory=300_000), H100) is None  # cannot run


@pytest.mark.parametrize(
    ("details", "launch"),
    [
        (
            "regs:32 static_shared:1024 dynamic_shared:49152 grid:132,1,1 block:128,1,1 occ_pct:50.0",
            (132, 128, 32, 50176),
        ),
        (" grid:4,64,1 block:256,1,1 private_mem:0 group_mem:8704 occ_pct:0", (256, 256, 0, 8704)),
    ],
    ids=["CUPTI", "roctracer"],
)
def test_xla_s_kernel_details_string_is_the_launch(details, launch):
    """XLA's GPU tracers write a kernel's launch as one string (ToXStat): registers, shared memory (CUDA's static
    and dynamic, or AMD's group memory), grid and block; the real MI300X capture's GEMM reads as 4×64 blocks of 256."""
    kept = json.dumps({"correlation_id": "6", "kernel_details": details, "hlo_op": "custom-call.1"}).encode()
    assert launch_of(kept) == Launch(*launch)


def test_the_real_jax_capture_s_kernels_have_their_launches():
    document = json.loads(gzip.decompress((REAL / "jax08_mi300x_attention_opbyop.trace.json.gz").read_bytes()))
    details = [e["args"] for e in document["traceEvents"] if "kernel_details" in e.get("args", {})]
    launches = [launch_of(json.dumps(args).encode()) for args in details]
    assert len(launches) > 100 and all(launch is not None and launch.blocks > 0 for launch in launches)


@pytest.mark.parametrize(
    "kept",
    [
        b'{"kernel_details": "grid:a,1 block:2"}',
        b'{"kernel_details": "block:64,1,1"}',
        b'{"grid": "8"}',
        b'{"grid": [0, 1, 1]}',
        b'{"grid": [1, 1, 1, 1]}',
        b'{"grid": [true]}',
        b"[1]",
        b"\xff",
    ],
)
def test_a_launch_a_device_could_not_run_is_none(kept):
    assert launch_of(kept) is None


def test_a_device_that_records_no_registers_has_no_limits():
    assert SmLimits.of({"maxThreadsPerMultiprocessor": 2048, "warpSize": 64, "sharedMemPerBlock": 65536}) is None
    assert SmLimits.of({"maxThreadsPerMultiprocessor": True, "regsPerMultiprocessor": 65536,
                        "sharedMemPerMultiprocessor": 1, "warpSize": 32}) is None  # fmt: skip
