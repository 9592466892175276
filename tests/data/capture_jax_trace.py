"""Capture the real JAX profiler fixture ``jax_cpu_train_recompile.trace.json.gz``.

A small MLP trained with ``jax.jit`` for 8 steps under ``jax.profiler``, each step marked with
``jax.profiler.StepTraceAnnotation`` as JAX's documentation shows; step 5 feeds a shorter batch, a new
input shape, so the jitted step compiles again after warm-up (``backend_compile_and_load`` on the
Python thread, XLA's compiler on its thread pool). The Python tracer is off (``python_tracer_level=0``)
to keep the file small. perftool does not depend on JAX; run this where it is installed
(``pip install jax``, the CPU wheel is enough):

    python tests/data/capture_jax_trace.py tests/data/jax_cpu_train_recompile.trace.json.gz
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

STEPS = 8
SHORT_BATCH_STEP = 5  # the step fed a shorter batch: a new shape, compiled again


def loss(weights: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    hidden = jnp.tanh(x @ weights["a"])
    return jnp.mean((hidden @ weights["b"] - y) ** 2)


@jax.jit
def train_step(weights: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> dict[str, jax.Array]:
    grads = jax.grad(loss)(weights, x, y)
    return jax.tree.map(lambda w, g: w - 0.01 * g, weights, grads)


def main(out: str) -> None:
    rng = np.random.default_rng(0)
    weights = {
        "a": jnp.asarray(rng.standard_normal((256, 512)), jnp.float32),
        "b": jnp.asarray(rng.standard_normal((512, 16)), jnp.float32),
    }
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with tempfile.TemporaryDirectory() as tmp:
        jax.profiler.start_trace(tmp, profiler_options=options)
        for step in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                rows = 48 if step == SHORT_BATCH_STEP else 64
                x = jnp.asarray(rng.standard_normal((rows, 256)), jnp.float32)
                y = jnp.asarray(rng.standard_normal((rows, 16)), jnp.float32)
                weights = train_step(weights, x, y)
                jax.block_until_ready(weights)
        jax.profiler.stop_trace()
        (written,) = glob.glob(os.path.join(tmp, "plugins", "profile", "*", "*.trace.json.gz"))
        shutil.copyfile(written, out)


if __name__ == "__main__":
    main(sys.argv[1])
