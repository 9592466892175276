"""Write the HLO programs of collectives in this folder, as the installed jax compiles them for 8 devices (the CPU's,
``--xla_force_host_platform_device_count``; the HLO's collectives and groups are the partitioner's, whatever the
device): each of shard_map's collectives on a shard of f32[256, 128] (128 KiB) over a 2 x 2 mesh, and the
gradient all-reduces the partitioner adds to a jitted training step, data-parallel and tensor-parallel, over a
2 x 4 mesh. XLA's releases write a collective's groups differently (``replica_groups``, then a
``collective_device_list`` of groups or of an iota list, then a mesh and its axes): run this under several
releases to keep one program of each form. Each program's ``HloModuleProto`` is wrapped as the ``HloProto`` XProf
writes beside a profile.

    pip install 'jax==0.4.30' && python tests/data/hlo/make_collectives.py   # replica_groups
    pip install 'jax==0.6.2' && python tests/data/hlo/make_collectives.py    # collective_device_list, iota lists
    pip install 'jax==0.10.2' && python tests/data/hlo/make_collectives.py   # mesh axes
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402  (the flag is read when jax starts)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "bench"))
from xspace_synth import message  # noqa: E402  (the protobuf encoder the tests share)

try:
    from jax import shard_map
except ImportError:  # before jax 0.7
    from jax.experimental.shard_map import shard_map


def collectives(x):
    """Every collective shard_map has, on one device's shard of x."""
    return jnp.stack([
        jax.lax.psum(x, ("dp", "tp")).sum(),  # all-reduce, 4 ranks
        jax.lax.psum(x, "tp").sum(),  # all-reduce, 2 ranks
        jax.lax.all_gather(x, "dp", tiled=True).sum(),  # all-gather, 2 ranks
        jax.lax.psum_scatter(x, "tp", tiled=True).sum(),  # reduce-scatter, 2 ranks
        jax.lax.all_to_all(x, "dp", 0, 0, tiled=True).sum(),  # all-to-all, 2 ranks
        jax.lax.ppermute(x, "dp", [(0, 1), (1, 0)]).sum(),  # collective-permute
    ]).reshape(1, 6)  # fmt: skip


def loss(weights, x):
    return jnp.mean(jnp.tanh(x @ weights["a"]) @ weights["b"])


def train_step(weights, x):
    grads = jax.grad(loss)(weights, x)
    return jax.tree.map(lambda w, g: w - 0.01 * g, weights, grads)


def module(compiled) -> bytes:
    return compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()


def main() -> None:
    tag = f"jax{jax.__version__}"
    devices = np.array(jax.devices())
    square = Mesh(devices[:4].reshape(2, 2), ("dp", "tp"))
    mapped = shard_map(collectives, mesh=square, in_specs=P(("dp", "tp")), out_specs=P(("dp", "tp")))
    x = jnp.ones((4 * 256, 128), jnp.float32)
    programs = {"collectives": jax.jit(mapped).lower(x).compile()}
    wide = Mesh(devices.reshape(2, 4), ("dp", "tp"))
    replicated, by_rows = NamedSharding(wide, P()), NamedSharding(wide, P("tp"))
    weights = {"a": jnp.ones((512, 1024)), "b": jnp.ones((1024, 16))}
    data_parallel = jax.jit(train_step, in_shardings=(replicated, by_rows), out_shardings=replicated)
    programs["data_parallel"] = data_parallel.lower(weights, jnp.ones((256, 512))).compile()
    split = {"a": NamedSharding(wide, P(None, "tp")), "b": NamedSharding(wide, P("tp", None))}
    tensor_parallel = jax.jit(train_step, in_shardings=(split, NamedSharding(wide, P("dp"))), out_shardings=split)
    programs["tensor_parallel"] = tensor_parallel.lower(weights, jnp.ones((256, 512))).compile()
    for name, compiled in programs.items():
        (HERE / f"{name}_{tag}.hlo_proto.pb").write_bytes(message(1, module(compiled)))  # HloProto.hlo_module
        for line in compiled.as_text().splitlines():
            if any(f" {op}(" in line for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")):
                print(name, line.strip()[:200])


if __name__ == "__main__":
    main()
