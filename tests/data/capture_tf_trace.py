"""Capture the real TensorFlow profiler fixture ``tf_cpu_keras_fit_input_bound.xplane.pb``.

A small Keras model trained with ``model.fit`` on a ``tf.data`` pipeline whose map calls Python
(``tf.numpy_function``, 1 ms an element, one element at a time), profiled as Keras users profile: the
TensorBoard callback's ``profile_batch``, which marks each profiled batch and writes the run's XSpace into
``LOG_DIR/train/plugins/profile/RUN/HOST.xplane.pb`` (no JSON export). The input pipeline takes nearly the
whole step. perftool does not depend on TensorFlow; run this where it is installed (``pip install
tensorflow-cpu tensorboard``):

    python tests/data/capture_tf_trace.py tests/data/tf_cpu_keras_fit_input_bound.xplane.pb
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

BATCH = 32
PROFILED = (3, 6)  # the batches profiled: from the third to the sixth


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


def main(out: str) -> None:
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"),
                                 tf.keras.layers.Dense(10)])  # fmt: skip
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with tempfile.TemporaryDirectory() as logs:
        profile = tf.keras.callbacks.TensorBoard(log_dir=logs, profile_batch=PROFILED)
        model.fit(dataset(), epochs=1, callbacks=[profile], verbose=0)
        (written,) = glob.glob(os.path.join(logs, "train", "plugins", "profile", "*", "*.xplane.pb"))
        shutil.copyfile(written, out)


if __name__ == "__main__":
    main(sys.argv[1])
