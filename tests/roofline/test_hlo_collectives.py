"""XLA's collectives sized by their programs' HLO: what each moves and the ranks of its group, as each of XLA's
releases writes the groups (programs jax compiled, ``tests/data/hlo/make_collectives.py``), and a JAX capture's
collective kernels given them."""

from __future__ import annotations

import gzip
import json
import math
import shutil

import pytest
from builders import NCCL, build, xla_space
from conftest import DATA
from xspace_synth import F32, computation, hlo, instruction, message, number, packed, shape

from perftool import load_trace
from perftool.analysis import compute_metrics
from perftool.dialects.hlo import program_messages
from perftool.trace import xspace

PROGRAMS = DATA / "hlo"
SHARD = 256 * 128 * 4  # one device's shard of make_collectives.py's f32 input to each of shard_map's collectives
EVERY_COLLECTIVE = [(SHARD, 4), (SHARD, 2), (2 * SHARD, 2), (SHARD, 2), (SHARD, 2), (SHARD, None)]
# an all-reduce over 4 ranks, over 2; an all-gather (the whole output), a reduce-scatter (the whole input), an
# all-to-all, over 2; a permute (no groups)
GRADIENTS = {"a": 512 * 1024 * 4, "b": 1024 * 16 * 4}  # the training step's weights, f32
SHARDED_GRADIENTS = {"a": 256 * 512 * 4, "b": 16 * 256 * 4}  # the partial products the tensor-parallel step reduces
WRITTEN = {  # by jax release: replica_groups (0.4), collective_device_list (0.6: groups, or iota lists), a mesh (0.10)
    "collectives_jax0.4.30": EVERY_COLLECTIVE,
    "collectives_jax0.6.2": EVERY_COLLECTIVE,
    "collectives_jax0.10.2": EVERY_COLLECTIVE,
    "data_parallel_jax0.4.30": [(GRADIENTS["a"], 4), (GRADIENTS["b"], 4)],
    "data_parallel_jax0.6.2": [(GRADIENTS["a"], 4), (GRADIENTS["b"], 4)],  # [2,4]<=[8]: 2 groups of 4
    "data_parallel_jax0.10.2": [(sum(GRADIENTS.values()), 4)],  # one all-reduce of both, over the mesh's axis of 4
    "tensor_parallel_jax0.4.30": [(SHARDED_GRADIENTS["a"], 2), (SHARDED_GRADIENTS["b"], 2)],
    "tensor_parallel_jax0.6.2": [(SHARDED_GRADIENTS["a"], 2), (SHARDED_GRADIENTS["b"], 2)],  # [4,2]<=[2,4]T(1,0)
    "tensor_parallel_jax0.10.2": [(sum(SHARDED_GRADIENTS.values()), 2)],
}


def moved(proto: bytes) -> list[tuple[float, int | None]]:
    """A program's collectives as (bytes, ranks), ranks None where unknown, in a stable order."""
    found = [(m.nbytes, None if math.isnan(m.ranks) else int(m.ranks)) for m in program_messages(proto).values()]
    return sorted(found, key=lambda pair: (pair[0], pair[1] or 0))


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_each_release_s_groups_and_operands_size_its_collectives(name):
    expected = sorted(WRITTEN[name], key=lambda pair: (pair[0], pair[1] or 0))
    assert moved((PROGRAMS / f"{name}.hlo_proto.pb").read_bytes()) == expected


def one_collective(opcode: str, extra: bytes = b"", wrapped: bool = False) -> bytes:
    """A program of one collective of f32[1024] (4 KiB), as its own instruction or run by an ``async-start``."""
    operand = shape(F32, 1024)
    body = computation(
        "body", 2,
        instruction("p", "parameter", operand, 1), instruction(f"{opcode}.1", opcode, operand, 2, (1,), extra=extra),
    )  # fmt: skip
    if wrapped:
        start = instruction("reduce-scatter-start", "async-start", operand, 2, (1,), (2,))
        return hlo(body, computation("main", 1, instruction("x", "parameter", operand, 1), start))
    return hlo(computation("main", 1, instruction("x", "parameter", operand, 1),
                           instruction(f"{opcode}.1", opcode, operand, 2, (1,), extra=extra)))  # fmt: skip


def groups(*members: list[int]) -> bytes:
    return b"".join(message(49, packed(1, ids)) for ids in members)  # replica_groups


def mesh(axes: dict[str, int], *spanned: bytes) -> bytes:
    """A mesh of named axes and the axes the groups span (each an AxisRef: its index; empty for the first)."""
    names = b"".join(message(1, message(1, name) + number(2, size)) for name, size in axes.items())
    return message(93, message(1, names) + b"".join(message(2, ref) for ref in spanned))


@pytest.mark.parametrize(
    ("extra", "ranks"),
    [
        pytest.param(groups([0, 1, 2, 3], [4, 5, 6, 7]), 4, id="replica-groups"),
        pytest.param(message(87, message(2, number(1, 2) + number(2, 4))), 4, id="iota"),  # 2 groups of 4
        pytest.param(message(87, message(1, packed(1, [0, 1])) + message(1, packed(1, [2, 3]))), 2, id="device-list"),
        pytest.param(mesh({"x": 2, "y": 8}, number(1, 1)), 8, id="mesh-axis"),  # spans the second axis
        pytest.param(mesh({"x": 2, "y": 8}, b"", number(1, 1)), 16, id="mesh-axes"),  # both
        pytest.param(groups([0, 1], [2, 3, 4]), None, id="uneven"),  # groups of different sizes: no one number
        pytest.param(b"", None, id="all"),  # no groups: every device, whose count the instruction does not give
        pytest.param(message(87, message(2, number(1, 2))), None, id="unsized"),  # an iota list without its size
        pytest.param(mesh({"x": 2, "y": 8}, number(1, 2)), None, id="no-such-axis"),
        pytest.param(mesh({"x": 2, "y": 8}), None, id="no-axis"),
        pytest.param(mesh({"x": 2, "y": 8}, number(1, 1) + message(2, number(1, 2) + number(2, 4))), None,
                     id="sub-axis"),  # part of an axis
    ],
)  # fmt: skip
def test_a_collective_s_ranks_are_its_group_s_whichever_way_it_is_written(extra, ranks):
    assert moved(one_collective("all-reduce", extra)) == [(4096, ranks)]


def test_a_gather_s_message_is_its_whole_output_and_an_async_start_moves_what_it_runs():
    assert moved(one_collective("all-gather", groups([0, 1, 2, 3]))) == [(4 * 4096, 4)]
    ((gathered, ranks),) = moved(one_collective("all-gather", b""))  # every device, whose count is not given
    assert math.isnan(gathered) and ranks is None  # so the gathered whole is not known
    assert moved(one_collective("reduce-scatter", groups([0, 1]), wrapped=True)) == [(4096, 2), (4096, 2)]
    assert set(program_messages(one_collective("reduce-scatter", groups([0, 1]), wrapped=True))) == {
        "reduce-scatter.1",
        "reduce-scatter-start",
    }


def xla_job(tmp_path, *programs: tuple[str, str]) -> str:
    """A jax.profiler capture of 8 steps on a GPU: a fusion, then the step's two gradient all-reduces (NCCL's
    kernels, on XLA's collectives stream) with no compute beside them; ``programs`` (file, ``MODULE(ID)``) beside it as
    XProf writes them."""
    ops = {"hlo_module": "jit_train_step"}
    case = {
        "vocabulary": "xla-gpu",
        "steps": 8,
        "period": 1000,
        "marker": "train {step}",
        "events": [
            {"name": "PjitFunction(train_step)", "track": "python", "ts": 2, "dur": 20},
            {"name": "loop_fusion", "track": "device", "ts": 10, "dur": 500, "args": ops | {"hlo_op": "fusion.1"}},
            {"name": NCCL, "track": "comm", "ts": 520, "dur": 300, "args": ops | {"hlo_op": "all-reduce"}},
            {"name": NCCL, "track": "comm", "ts": 830, "dur": 20, "args": ops | {"hlo_op": "all-reduce.1"}},
        ],
    }
    for file, name in programs:
        shutil.copyfile(PROGRAMS / f"{file}.hlo_proto.pb", tmp_path / f"{name}.hlo_proto.pb")
    path = tmp_path / "host.trace.json.gz"
    path.write_text(json.dumps(build(case)))
    return str(path)


def test_a_jax_capture_s_all_reduces_are_sized_by_their_program_and_get_a_bus_bandwidth(tmp_path, run):
    path = xla_job(tmp_path, ("data_parallel_jax0.6.2", "jit_train_step(7)"))
    metrics = compute_metrics(load_trace(path))
    (stat,) = metrics.collectives  # the 7 steps after the first, a warm-up
    assert (stat.name, stat.count, stat.group_size) == ("all_reduce", 14, 4)
    assert stat.bytes == pytest.approx(7 * sum(GRADIENTS.values()))
    assert stat.algbw_gbps == pytest.approx(sum(GRADIENTS.values()) / 320e-6 / 1e9)
    assert stat.busbw_gbps == pytest.approx(stat.algbw_gbps * 2 * 3 / 4)  # nccl-tests: 2(n-1)/n for all-reduce
    result = run("scan", path, "--format", "json", "--select", "PT011", "--fail-on", "never")
    (finding,) = json.loads(result.stdout)["traces"][0]["findings"]
    assert "GB/s bus bandwidth" in finding["message"] and "median 1.1 MB" in finding["message"]


def test_without_its_program_or_with_two_alike_a_jax_collective_s_size_is_unknown(tmp_path):
    (alone := tmp_path / "alone").mkdir()
    (stat,) = compute_metrics(load_trace(xla_job(alone))).collectives
    assert stat.bytes is None and stat.group_size is None and stat.busbw_gbps is None
    (twice := tmp_path / "twice").mkdir()  # one jax.jit compiled for two shardings, the kernels naming neither id
    path = xla_job(twice, ("data_parallel_jax0.6.2", "jit_train_step(7)"), ("tensor_parallel_jax0.6.2",
                                                                            "jit_train_step(9)"))  # fmt: skip
    (stat,) = compute_metrics(load_trace(path)).collectives
    assert stat.bytes is None and stat.busbw_gbps is None


def test_a_kernel_s_program_id_or_its_launch_in_the_xspace_tells_apart_programs_of_one_name(tmp_path):
    """One jax.jit compiled for two shardings: kernels of the tensor-parallel program (id 9) are sized by it, whether
    they name its id (the XSpace) or not (the JSON export beside it, whose launches the XSpace names)."""
    protos = {f"jit_train_step({ident})": (PROGRAMS / f"{file}_jax0.6.2.hlo_proto.pb").read_bytes()
              for ident, file in ((7, "data_parallel"), (9, "tensor_parallel"))}  # fmt: skip
    space_path = tmp_path / "host.xplane.pb"
    space_path.write_bytes(xla_space([("jit_train_step", "all-reduce", 9), ("jit_train_step", "all-reduce.1", 9)],
                                     protos))  # fmt: skip
    events = []
    for batch in xspace.batches(str(space_path), {}):
        for e in batch:
            args = {k: v for k, v in json.loads(bytes(e.args) or b"{}").items() if k != xspace.PROGRAM_ID}
            times = {k: v for k, v in (("ts", e.ts), ("dur", e.dur)) if v == v}  # NaN: none recorded
            events.append({"ph": e.ph, "pid": e.pid, "tid": e.tid, "name": e.name, **times, "args": args})
    export = tmp_path / "host.trace.json.gz"
    export.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    for path in (space_path, export):
        (stat,) = compute_metrics(load_trace(str(path))).collectives
        assert stat.group_size == 2 and stat.bytes == pytest.approx(3 * sum(SHARDED_GRADIENTS.values())), path.name


def test_a_tpu_s_collective_ops_are_sized_by_their_program_as_named_by_their_own_names(tmp_path):
    """A TPU's ops line names each op by its HLO op, its program by id in its args: its all-reduces are sized too,
    each of the two by its own op though their args are alike."""
    shutil.copyfile(PROGRAMS / "data_parallel_jax0.6.2.hlo_proto.pb", tmp_path / "jit_train_step(7).hlo_proto.pb")
    program = {"program_id": "7"}
    case = {
        "vocabulary": "xla-tpu",
        "steps": 8,
        "period": 1000,
        "events": [
            {"name": "PjitFunction(train_step)", "track": "python", "ts": 2, "dur": 20},
            {"name": "jit_train_step(7)", "track": "modules", "ts": 5, "dur": 990},
            {"name": "fusion.3", "track": "ops", "ts": 5, "dur": 600, "args": program},
            {"name": "all-reduce", "track": "ops", "ts": 610, "dur": 300, "args": program},
            {"name": "all-reduce.1", "track": "ops", "ts": 915, "dur": 20, "args": program},
        ],
    }
    path = tmp_path / "host.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(build(case)).encode()))
    metrics = compute_metrics(load_trace(str(path)))
    (stat,) = metrics.collectives
    steps = stat.count // 2
    assert stat.group_size == 4 and stat.bytes == pytest.approx(steps * sum(GRADIENTS.values()))
