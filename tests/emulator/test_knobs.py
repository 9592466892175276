"""The one table of knobs (perftool.emulator.config.TUNABLES) that tune sweeps, fixes set and `perftool knobs` lists:
every name in it is a setting of the config, its values are the model's, and what the rules set is in it."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from perftool.emulator.config import TUNABLES, Knobs, knob_value, load_config, setting
from perftool.emulator.profiles import JOB_KNOB_NAMES, PROFILES, knob_name
from perftool.tune.spec import TUNABLE

SAMPLES = REPO / "sample_traces"


def test_tune_sweeps_what_the_table_marks_swept_and_every_knob_but_none_else():
    assert TUNABLE == tuple(name for name, tunable in TUNABLES.items() if tunable.swept)
    assert set(Knobs.model_fields) <= set(TUNABLES)  # every knob is in the table; section settings too


@pytest.mark.parametrize("name", list(TUNABLES))
def test_each_entry_is_a_setting_of_the_config_with_the_model_s_values(name):
    config = load_config(SAMPLES / "jobs" / "npu_exposed_allreduce" / "job.yaml")  # has every section
    tunable = TUNABLES[name]
    setting(config, name)  # the path resolves (a wrong one raises)
    assert tunable.label and tunable.meaning and tunable.families
    if tunable.accepts.startswith("1 to "):  # the bounds the table states are the ones the config enforces
        high = int(tunable.accepts.split(" to ")[1].replace(",", ""))
        assert knob_value(config, name, high + 1)[1] is not None and knob_value(config, name, 0)[1] is not None
    if "." not in name:
        assert tunable.families == sorted(f for f, profile in PROFILES.items() if name in profile.knobs)


@pytest.mark.slow
def test_what_the_rules_set_on_the_samples_is_in_the_table(run):
    """Each knob a finding's fix sets, on every bundled sample, is a row of the table."""
    changed = set()
    for trace in sorted(SAMPLES.glob("*/*.trace.json.gz")):
        document = json.loads(run("scan", trace, "--format", "json", "--fail-on", "never").stdout)
        changed |= {key for t in document["traces"] for f in t["findings"] for key in f["fix"]["changes"]}
    assert {"loop_size", "prefetch_depth", "io_tiles", "device_graphs", "cpu_fallback_ops"} <= changed
    assert changed <= set(TUNABLES)


def test_the_knobs_command_lists_the_table(run):
    document = json.loads(run("knobs", "--format", "json").stdout)
    assert document["schema"] == "perftool.knobs/1"
    rows = {row["name"]: row for row in document["knobs"]}
    assert list(rows) == list(TUNABLES)
    assert rows["loop_size"] | {"meaning": ""} == {
        "name": "loop_size",
        "config": "knobs.loop_size",
        "label": "loop size",
        "unit": "steps per device call",
        "accepts": "1 or more",
        "families": ["ipu", "npu"],
        "swept": True,
        "meaning": "",
    }
    assert rows["workload.input_workers"]["config"] == "workload.input_workers"
    assert not rows["cpu_fallback_ops"]["swept"]
    text = run("knobs").stdout  # at 80 columns: a paragraph a knob, its name first
    starts = [line for line in text.splitlines() if "  (" in line and not line.startswith(" ")]
    assert [line.split("  (")[0] for line in starts] == list(TUNABLES)
    assert "loop_size  (steps per device call: 1 or more; on ipu, npu)" in text
    assert "Fixes set it; tune does not sweep it." in " ".join(text.split())


@pytest.mark.parametrize(
    ("job", "named"),
    [
        ({"framework": "pytorch", "kind": "serving", "engine": "vllm"},
         "vLLM's captured graphs, the device's own (on unless --enforce-eager)"),
        ({"framework": "pytorch", "kind": "serving", "engine": "sglang"},
         "SGLang's captured graphs, the device's own (on unless --disable-cuda-graph)"),
        ({"framework": "pytorch", "kind": "serving"},
         "the engine's CUDA/HIP graphs: vLLM without --enforce-eager, SGLang without --disable-cuda-graph"),
        ({"framework": "pytorch", "kind": "training"}, PROFILES["gpu"].knob_names["device_graphs"]),
        ({"framework": "tensorflow", "kind": "training"}, JOB_KNOB_NAMES["tensorflow on gpu"]["device_graphs"]),
    ],
    ids=["vllm", "sglang", "engine unknown", "training", "tensorflow"],
)  # fmt: skip
def test_a_fitted_job_s_device_graphs_are_named_as_its_engine_or_framework_names_them(job, named):
    """A fit records the serving engine its trace names; tune then names device graphs by that engine's flag, by
    both engines' where the trace named neither, by XLA's for a TensorFlow job, and by the device family's name for
    any other job."""
    assert knob_name(PROFILES["gpu"], "device_graphs", job) == named


def test_a_tensorflow_job_s_input_pipeline_is_tf_data_s_on_a_gpu_and_the_family_s_own_on_an_ipu():
    job = {"framework": "tensorflow", "kind": "training"}
    assert knob_name(PROFILES["gpu"], "prefetch_depth", job) == "tf.data Dataset.prefetch(buffer_size)"
    assert "num_parallel_calls" in knob_name(PROFILES["gpu"], "workload.input_workers", job)
    assert knob_name(PROFILES["ipu"], "prefetch_depth", job) == PROFILES["ipu"].knob_names["prefetch_depth"]


def test_an_inference_job_s_pinned_memory_is_named_for_its_own_tensors_too():
    """An inference pipeline copies its own tensors as often as a DataLoader's batches: pinned memory is named both
    ways for it, the family's DataLoader words for training."""
    inference = knob_name(PROFILES["gpu"], "pin_memory", {"framework": "pytorch", "kind": "inference"})
    assert inference == JOB_KNOB_NAMES["inference"]["pin_memory"] and "tensor.pin_memory()" in inference
    training = knob_name(PROFILES["gpu"], "pin_memory", {"framework": "pytorch", "kind": "training"})
    assert training.startswith("DataLoader(pin_memory=True) and .to('cuda', non_blocking=True)")
    assert "read back" not in training  # the read-back's pinning is a knob of its own


def test_a_read_back_is_pinned_by_a_knob_of_its_own_named_the_same_for_every_job():
    """Pinning the results read back is its own setting: named by the buffer a job copies them into, for training
    and inference alike, on the families whose jobs can pin."""
    for family in ("gpu", "hpu"):
        assert "pin_readback" in PROFILES[family].knobs
        for kind in ("training", "inference"):
            name = knob_name(PROFILES[family], "pin_readback", {"framework": "pytorch", "kind": kind})
            assert name is not None and "torch.empty(shape, pin_memory=True)" in name
    assert "pin_readback" not in PROFILES["ipu"].knobs
