"""Capture the real TensorFlow profiler fixtures, each a run's XSpace as TensorFlow writes it (no JSON export):

* ``tf_cpu_keras_fit_input_bound.xplane.pb``: a small Keras model trained with ``model.fit`` on a ``tf.data``
  pipeline whose map calls Python (``tf.numpy_function``, 1 ms an element, one element at a time), profiled as Keras
  users profile, by the TensorBoard callback's ``profile_batch``, which marks each profiled batch. The input
  pipeline takes nearly the whole step.
* ``tf_cpu_train_retrace.xplane.pb``: the same model trained by a custom loop, its step a ``tf.function`` with no
  input signature, profiled with ``tf.profiler.experimental.start`` and each step marked with
  ``tf.profiler.experimental.Trace("train", step_num=step, _r=1)``; from step 5 each batch has a new size, so the
  function is traced again at each of the last three steps.
* ``tf_cpu_train_retrace.trace.json.gz``: that XSpace as XProf's trace viewer exports it (JSON; ``pip install
  xprof``), as a user downloads it from TensorBoard's profile page.

perftool does not depend on TensorFlow; run this where it is installed (``pip install tensorflow-cpu
tensorboard xprof``):

    python tests/data/capture_tf_trace.py tests/data
"""

from __future__ import annotations

import glob
import gzip
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

BATCH = 32
PROFILED = (3, 6)  # the batches the Keras callback profiles: from the third to the sixth
STEPS = 8
NEW_SIZES_FROM = 5  # the first step of the custom loop fed a batch of a new size


def model() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"),
                                tf.keras.layers.Dense(10)])  # fmt: skip


def slow_element(features: np.ndarray) -> np.ndarray:
    """Python preprocessing of one element, as a pipeline that decodes in Python does it."""
    time.sleep(0.001)
    return features


def dataset() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((BATCH * 8, 64), dtype=np.float32)
    y = rng.integers(0, 10, BATCH * 8)

    def prepare(features: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        prepared = tf.numpy_function(slow_element, [features], tf.float32)
        prepared.set_shape([64])
        return prepared, label

    return tf.data.Dataset.from_tensor_slices((x, y)).map(prepare).batch(BATCH)


def keras_fit(logs: str) -> None:
    trained = model()
    trained.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    profile = tf.keras.callbacks.TensorBoard(log_dir=logs, profile_batch=PROFILED)
    trained.fit(dataset(), epochs=1, callbacks=[profile], verbose=0)


def custom_loop(logs: str) -> None:
    trained, optimizer = model(), tf.keras.optimizers.Adam()
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    rng = np.random.default_rng(0)

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            value = loss(y, trained(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(value, trained.trainable_variables), trained.trainable_variables))
        return value

    def batch(size: int) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.constant(rng.random((size, 64), dtype=np.float32)), tf.constant(rng.integers(0, 10, size))

    train_step(*batch(BATCH))  # traced before the capture
    tf.profiler.experimental.start(logs)
    for step in range(STEPS):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            size = BATCH if step < NEW_SIZES_FROM else BATCH + 8 * step
            train_step(*batch(size)).numpy()
    tf.profiler.experimental.stop()


def capture(run: object, into: str, name: str) -> None:
    """Run ``run(log_dir)`` and copy the XSpace it wrote to ``into/name``."""
    with tempfile.TemporaryDirectory() as logs:
        run(logs)  # type: ignore[operator]
        (written,) = glob.glob(os.path.join(logs, "**", "plugins", "profile", "*", "*.xplane.pb"), recursive=True)
        shutil.copyfile(written, os.path.join(into, name))


def export_json(xspace: str, out: str) -> None:
    """The trace viewer's JSON of ``xspace``, as XProf exports it, gzipped with no time in its header."""
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([xspace], "trace_viewer", {})
    with open(out, "wb") as file, gzip.GzipFile(fileobj=file, mode="wb", mtime=0) as packed:
        packed.write(data if isinstance(data, bytes) else data.encode())


if __name__ == "__main__":
    capture(keras_fit, sys.argv[1], "tf_cpu_keras_fit_input_bound.xplane.pb")
    capture(custom_loop, sys.argv[1], "tf_cpu_train_retrace.xplane.pb")
    export_json(os.path.join(sys.argv[1], "tf_cpu_train_retrace.xplane.pb"),
                os.path.join(sys.argv[1], "tf_cpu_train_retrace.trace.json.gz"))  # fmt: skip
