"""Fixes in the terms of the framework the trace's job ran on: a TensorFlow job is told tf.data's, Keras's and XLA's
knobs, not PyTorch's (DataLoader, torch.compile, CUDA graphs) nor JAX's."""

from __future__ import annotations

import re

import pytest
from conftest import REPO, complete, process_name, scanned, thread_name

from perftool.rules.catalog import load_catalog

# Fixes worded for JAX that have no TensorFlow wording, and why
NOT_WORDED_FOR_TENSORFLOW = {("PT011", "all_to_all"): "expert-parallel all-to-alls are a JAX or PyTorch job's"}
# TensorFlow texts that name another framework on purpose, and why
NAMING_ANOTHER_FRAMEWORK = {("PT017", None): "TensorFlow has no fused attention: Keras's JAX backend has"}
# what a fix worded for TensorFlow must not name: another framework's APIs
OTHER_FRAMEWORKS = ("torch", "DataLoader", "CUDA graph", "jax", "jnp", "flax")
TENSORFLOW_S = ("tf.", "Keras", "jit_compile", "steps_per_execution", "MultiWorkerMirroredStrategy")  # what it names


def _fixes_of_context(context: str) -> dict[tuple[str, str | None], str]:
    """Each rule's fix (``(rule id, None)``) and variant's fix worded for ``context``."""
    found = {}
    for rule in load_catalog():
        found |= {(rule.id, None): rule.fix[context]} if context in rule.fix else {}
        variants = rule.fix_variants.items()
        found |= {(rule.id, variant): fixes[context] for variant, fixes in variants if context in fixes}
    return found


def test_every_fix_worded_for_jax_is_worded_for_tensorflow_in_its_own_terms():
    """Where a rule words a fix for JAX, its family's fix names PyTorch's APIs; a TensorFlow job is told its own."""
    jax, tensorflow = _fixes_of_context("jax"), _fixes_of_context("tensorflow")
    assert set(jax) - set(tensorflow) == set(NOT_WORDED_FOR_TENSORFLOW)
    for where, template in tensorflow.items():
        text = re.sub(r"\{[^}]*\}", "", template)  # its words, not the names of the values filled in
        if where in NAMING_ANOTHER_FRAMEWORK:
            text = text.replace("KERAS_BACKEND=jax", "")  # the Keras backend named, no other framework's API
        assert not [word for word in OTHER_FRAMEWORKS if word in text], where
        assert [word for word in TENSORFLOW_S if word in text], where


@pytest.mark.parametrize("framework", ["jax", "tensorflow"])
def test_a_framework_s_fix_an_inference_job_is_told_speaks_of_training_only_as_training(framework):
    """Fixes are told in the framework's terms before inference's: where a rule words a fix for inference too, a
    JAX or TensorFlow job that trains nothing is told the framework's text, which names a backward pass, gradients
    or an optimizer only after "in training"."""
    inference, framework_s = _fixes_of_context("inference"), _fixes_of_context(framework)
    told = {where: framework_s[where].lower() for where in set(inference) & set(framework_s)}
    assert {("PT011", None), ("PT012", None)} <= set(told)  # the collectives' fixes, which speak of gradients
    for where, text in told.items():
        training = text.find("in training")
        mentions = [text.find(word) for word in ("backward", "gradient", "optimizer") if word in text]
        assert all(training != -1 and at > training for at in mentions), where


@pytest.mark.parametrize("framework", ["jax", "tensorflow"])
def test_a_framework_s_fix_says_what_an_inference_job_does_with_its_results(framework):
    """Where a rule's inference text speaks of reading results back (an inference job must: its results are its
    output), the framework's text, told first, says what to do with them too, not only with a training loop's loss
    and metrics."""
    inference, framework_s = _fixes_of_context("inference"), _fixes_of_context(framework)
    of_results = {where for where, text in inference.items() if "results back" in text}
    assert ("PT008", None) in of_results
    for where in of_results & set(framework_s):
        text = framework_s[where].lower()
        assert "in inference" in text and "result" in text[text.find("in inference") :], where


def _tensorflow_on_a_gpu() -> dict:
    """A Keras job's GPU steps as TensorFlow's profiler writes them (its XSpace's JSON): each profiled batch waits
    1 ms on tf.data's iterator, then launches its one fused kernel (700 µs); the device waits for the input half of
    each 2 ms step, and for the launch a little."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python"), thread_name(701, 2, "tf_Compute/1"),
              thread_name(701, 3, "tf_data_iterator_get_next/1"), process_name(1, "/device:GPU:0"),
              thread_name(1, 16, "Stream #16(Kernel)")]  # fmt: skip
    for n in range(8):
        t = n * 2000.0
        events += [
            complete("Profiled batch", t, 1990, pid=701, tid=1, args={"step_num": str(n), "_r": "1"}),
            complete("__inference_multi_step_on_iterator_830", t + 2, 1980, pid=701, tid=1),
            complete("IteratorGetNextOp::DoCompute", t + 5, 1000, pid=701, tid=3),
            complete("cuLaunchKernel", t + 1100, 10, pid=701, tid=2, args={"correlation_id": str(n)}),
            complete("loop_fusion", t + 1150, 700, pid=1, tid=16,
                     args={"correlation_id": str(n), "name": "gradient_tape/dense/MatMul"}),
        ]  # fmt: skip
    return {"traceEvents": [*events, {}]}


def test_a_tensorflow_job_on_a_gpu_is_told_tf_data_s_and_keras_s_knobs(run, write_trace):
    trace, findings = scanned(run, str(write_trace(_tensorflow_on_a_gpu())))
    assert trace["framework"] == "tensorflow" and trace["family"] == "gpu"
    input_fix, host_fix = findings["PT002"]["fix"]["text"], findings["PT001"]["fix"]["text"]
    assert ".prefetch(3) at the end of the tf.data pipeline" in input_fix and "DataLoader" not in input_fix
    assert "model.compile(steps_per_execution=N)" in host_fix and "torch" not in host_fix


def _tensorflow_run_eagerly(plane: str, line: str) -> dict:
    """A TensorFlow loop that runs its step eagerly: Python dispatches each of the step's 20 ops on its own
    (TFE_Py_FastPathExecute_C carrying EagerLocalExecute: <op>, which launches its kernel), 40 µs apart, while
    each kernel runs 5 µs on the device's ``plane`` (its ``line``)."""
    events = [process_name(701, "/host:CPU"), thread_name(701, 1, "python"), process_name(1, plane),
              thread_name(1, 16, line)]  # fmt: skip
    ops = ("MatMul", "AddV2", "Relu", "Mul", "ReadVariableOp")
    for step in range(6):
        t = step * 1000.0
        events.append(complete("train", t, 990, pid=701, tid=1, args={"step_num": str(step), "_r": "1"}))
        for n in range(20):
            at, correlation = t + 10 + n * 40, str(step * 100 + n)
            events += [
                complete("TFE_Py_FastPathExecute_C", at, 35, pid=701, tid=1),
                complete(f"EagerLocalExecute: {ops[n % len(ops)]}", at + 2, 30, pid=701, tid=1),
                complete("cuLaunchKernel", at + 25, 5, pid=701, tid=1, args={"correlation_id": correlation}),
                complete("fusion", at + 32, 5, pid=1, tid=16, args={"correlation_id": correlation}),
            ]
    return {"traceEvents": [*events, {}]}


@pytest.mark.parametrize(
    ("plane", "line", "told"),
    [("/device:GPU:0", "Stream #16(Kernel)", "Put the whole step (in training, forward, backward and optimizer "
      "update together) in one tf.function compiled by XLA"),
     ("/device:TPU:0", "XLA Ops", "The step runs eagerly, op by op: the host dispatches 20 TensorFlow ops per step")],
    ids=["gpu", "tpu"],
)  # fmt: skip
def test_a_tensorflow_step_run_eagerly_is_told_to_run_as_one_tf_function(run, write_trace, plane, line, told):
    """Each op dispatched from Python on its own is counted as JAX's op-by-op calls are. On a GPU, whose host paces
    the step by dispatching its ops one by one, the fix compiles the step into one program; where no device graph
    is fitted (a TPU), the eager dispatch itself is named. The loop has no backward pass: the framework's fix, told
    before inference's, says what a training step would hold only as that."""
    trace, findings = scanned(run, str(write_trace(_tensorflow_run_eagerly(plane, line))))
    assert trace["framework"] == "tensorflow" and trace["job_kind"] == "inference"
    host = findings["PT001"]
    assert host["values"]["compiled_calls_per_step"] == 20
    assert host["values"]["compiled_names"].startswith("EagerLocalExecute: ")
    assert told in host["fix"]["text"]


@pytest.mark.parametrize(
    ("sample", "rule", "named"),
    [("npu/host_bound_loop_size", "PT001", "NPU_LOOP_SIZE="), ("ipu/input_bound_prefetch", "PT002", "IPUInfeedQueue")],
)
def test_a_tensorflow_job_on_an_npu_or_an_ipu_is_told_the_family_s_own_fix(run, sample, rule, named):
    """Ascend's and Graphcore's fixes are TensorFlow's already (its NPU adapter's loop size, the IPU's infeed): a
    TensorFlow job there keeps them rather than the wording for TensorFlow on a GPU."""
    trace, findings = scanned(run, str(REPO / "sample_traces" / f"{sample}.trace.json.gz"))
    assert trace["framework"] == "tensorflow"
    assert named in findings[rule]["fix"]["text"] and "tf.data" not in findings[rule]["fix"]["text"]
