"""``perftool emulate`` and ``perftool schema`` as a user runs them, bad configs included."""

from __future__ import annotations

import gzip
import json

import pytest
import yaml
from conftest import REPO, error_line

from perftool.pipeline.read import load_trace

SAMPLES = REPO / "sample_traces"
HEALTHY = SAMPLES / "npu" / "healthy.yaml"


def write_config(tmp_path, text: str, name: str = "config.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def healthy_document() -> dict:
    return yaml.safe_load(HEALTHY.read_text())


def test_emulate_prints_the_prediction(run):
    result = run("emulate", HEALTHY)
    assert result.exit_code == 0
    assert "samples/s" in result.stdout and "Ascend 910" in result.stdout
    assert "compute" in result.stdout  # the step breakdown


def test_emulate_json_summary_matches_the_trace_metadata(run, tmp_path):
    out = tmp_path / "t.json"
    result = run("emulate", HEALTHY, "--format", "json", "--trace", out)
    summary = json.loads(result.stdout)
    assert summary["schema"] == "perftool.emulate/1"
    document = json.loads(out.read_text())
    recorded = document["perftool"]["emulator"]
    assert recorded["prediction"] == summary["prediction"]
    assert recorded["device"] == "npu" and recorded["profile"]["model"].startswith("Ascend 910")
    assert recorded["config"]["knobs"]["loop_size"] == 32  # the full config that made the trace
    breakdown = summary["step_breakdown_us"]
    assert sum(breakdown.values()) == pytest.approx(summary["prediction"]["step_time_mean_us"], rel=1e-6)


def test_set_overrides_knobs_and_fields(run):
    base = json.loads(run("emulate", HEALTHY, "--format", "json").stdout)
    slower = json.loads(
        run("emulate", HEALTHY, "--format", "json", "--set", "loop_size=1", "--set", "workload.steps=64").stdout
    )
    assert slower["config"]["knobs"]["loop_size"] == 1 and slower["config"]["workload"]["steps"] == 64
    assert slower["prediction"]["throughput"] < base["prediction"]["throughput"] * 0.9


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_same_seed_gives_byte_identical_files(run, tmp_path, name):
    first, second = tmp_path / f"a-{name}", tmp_path / f"b-{name}"
    assert run("emulate", HEALTHY, "--trace", first).exit_code == 0
    assert run("emulate", HEALTHY, "--trace", second).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    other = tmp_path / f"c-{name}"
    run("emulate", HEALTHY, "--trace", other, "--set", "seed=99")
    assert other.read_bytes() != first.read_bytes()


def test_trace_has_named_tracks_roles_steps_and_memory_counters(run, tmp_path):
    out = tmp_path / "t.json.gz"
    run("emulate", SAMPLES / "ipu" / "offload_stream_copies.yaml", "--trace", out)
    document = json.loads(gzip.decompress(out.read_bytes()))
    events = document["traceEvents"]
    thread_names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {
        "Python training loop",
        "Training steps",
        "Graph compiler",
        "Preprocessing worker 0",
        "Execution",
    } <= thread_names
    names = {e["name"] for e in events}
    assert {"StreamCopyMidRemoteBuffer", "Engine::run", "Poplar graph compilation"} <= names
    steps = [e for e in events if e.get("cat") == "step"]
    assert len(steps) == 256 and all(e["ph"] == "X" for e in steps)
    assert any(e["ph"] == "C" and e["name"] == "Device memory" for e in events)
    trace = load_trace(out)
    assert trace.dialect == "emulator"
    roles = {t.thread_name: t.role.value for t in trace.tracks}
    assert roles["Execution"] == "device" and roles["Graph compiler"] == "compiler"
    assert roles["Preprocessing worker 0"] == "host.input"


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        ("npu/strided_copies_transdata", {"TransData", "AscendCL@aclmdlExecute", "AscendCL@aclopCompile"}),
        ("ipu/strided_copies", {"PreArrange-0", "DstStridedCopy"}),
        ("ipu/serialised_transfers_no_io_tiles", {"StreamCopyMid"}),
        ("hpu/cpu_fallback", {"CPU fallback digamma : self=HPUBFloat16Type", "memcpy D2H"}),
        ("gpu/launch_bound_no_cuda_graphs", {"cudaLaunchKernel"}),
    ],
)
def test_each_family_speaks_its_own_vocabulary(run, tmp_path, family, expected):
    out = tmp_path / "t.json"
    run("emulate", SAMPLES / f"{family}.yaml", "--trace", out)
    names = {e["name"] for e in json.loads(out.read_text())["traceEvents"]}
    assert expected <= names


@pytest.mark.parametrize("config", sorted(SAMPLES.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_committed_sample_traces_equal_a_fresh_regeneration(run, tmp_path, config):
    committed = config.with_suffix(".trace.json.gz")
    fresh = tmp_path / committed.name
    assert run("emulate", config, "--trace", fresh).exit_code == 0
    # compare the JSON, not the gzip stream: zlib builds may compress the same bytes differently
    assert gzip.decompress(fresh.read_bytes()) == gzip.decompress(committed.read_bytes())


@pytest.mark.parametrize("trace", sorted(SAMPLES.glob("*/*.trace.json.gz")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_spans_on_one_thread_never_overlap(trace):
    """Perfetto draws a thread's slices as a stack: they must follow one another (at ns resolution)."""
    spans = {}
    for event in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]:
        if event["ph"] == "X":
            start = round(event["ts"] * 1000)
            spans.setdefault((event["pid"], event["tid"]), []).append((start, start + round(event["dur"] * 1000)))
    for thread, intervals in spans.items():
        intervals.sort()
        assert all(later[0] >= earlier[1] for earlier, later in zip(intervals, intervals[1:])), thread


def test_schema_describes_the_config(run):
    schema = json.loads(run("schema").stdout)
    assert schema["additionalProperties"] is False
    assert {"device", "workload", "knobs", "seed"} <= set(schema["properties"])
    assert "loop_size" in schema["$defs"]["Knobs"]["properties"]


@pytest.mark.parametrize(
    ("edit", "line_of", "says"),
    [
        (lambda d: d["workload"].update(colour="red"), "  colour:", "workload.colour: unknown field"),
        (
            lambda d: d["knobs"].update(loop_size="many"),
            "  loop_size:",
            "knobs.loop_size: Input should be a valid integer",
        ),
        (lambda d: d["workload"].update(weights=-5), "  weights:", "workload.weights: not a size"),
        (
            lambda d: d["workload"].update(sample_size=0),
            "  sample_size:",
            "workload.sample_size: Input should be greater than 0",
        ),
        (
            lambda d: d["knobs"].update(loop_size=512),
            "  loop_size:",
            "knobs.loop_size: 512 is more than the 256 steps of an epoch",
        ),
        (lambda d: d["knobs"].update(io_tiles=4), "  io_tiles:", "knobs.io_tiles: device 'npu' has no io_tiles knob"),
        (lambda d: d.update(device="tpu"), "device:", "device: Input should be 'npu', 'ipu', 'hpu' or 'gpu'"),
        (
            lambda d: d["workload"].pop("steps"),
            "workload:",
            "workload: give the epoch's length as steps or as dataset_samples (one of them)",
        ),
        (
            lambda d: d["workload"].update(dataset_samples=50_000),
            "workload:",
            "workload: give the epoch's length as steps or as dataset_samples (one of them)",
        ),
        (
            lambda d: d["workload"].pop("steps") and d["workload"].update(dataset_samples=500, last_batch_samples=3),
            "workload:",
            "workload: last_batch_samples follows from dataset_samples and the batch size: leave it out",
        ),
        (
            lambda d: d["workload"].pop("steps") and d["workload"].update(dataset_samples=10),
            "  batch_size:",
            "knobs.batch_size: 64 is more than the dataset's 10 samples",
        ),
    ],
)
def test_bad_config_values_name_the_file_line_and_field(run, tmp_path, edit, line_of, says):
    document = healthy_document()
    edit(document)
    text = "# a comment first\n" + yaml.safe_dump(document, sort_keys=False)
    line = next(n for n, content in enumerate(text.splitlines(), 1) if content.startswith(line_of))
    result = run("emulate", write_config(tmp_path, text))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"perftool: error: {tmp_path / 'config.yaml'}:{line}: {says}")


def test_io_tiles_above_the_tile_count(run):
    result = run("emulate", SAMPLES / "ipu" / "healthy.yaml", "--set", "io_tiles=1472")
    assert result.exit_code == 2
    assert "(--set io_tiles=1472): knobs.io_tiles: 1472 leaves no compute tiles" in result.stderr


def test_out_of_memory_config_is_refused(run, tmp_path):
    out = tmp_path / "t.json"
    result = run("emulate", HEALTHY, "--set", "batch_size=4096", "--trace", out)
    assert result.exit_code == 2
    assert "out of memory: needs" in result.stderr and "of 32.00 GB" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("device: [npu\n", ":2:1: not valid YAML"),
        ("- just\n- a list\n", ": a config must be a YAML mapping"),
        (
            "!!python/object/apply:os.system ['echo hacked']\n",
            ":1:1: not valid YAML: could not determine a constructor",
        ),
        ("device: npu\nworkload: {}\nknobs: {}\n", ":2: workload.weights: Field required"),
    ],
)
def test_config_that_is_not_a_valid_yaml_mapping(run, tmp_path, text, says):
    path = write_config(tmp_path, text)
    result = run("emulate", path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"perftool: error: {path}{says}")
    assert "hacked" not in result.stdout


@pytest.mark.parametrize("command", ["emulate", "tune"])
@pytest.mark.parametrize("trace", ["gpu/healthy.trace.json.gz", "gpu_training_kineto.pt.trace.json.gz"])
def test_a_trace_in_place_of_a_config_says_how_to_make_one(run, command, trace):
    """A trace given to a command that runs a config (a common first try) is refused with the way from one to the
    other, whatever its size: a trace read as YAML is refused for its length, or its fields, first."""
    path = SAMPLES / trace
    error_line(
        run(command, path),
        f"{path}: a gzip'd JSON trace, not a config",
        f"fit one to the trace with perftool calibrate {path} -o fit.yaml, and give fit.yaml instead",
    )


@pytest.mark.parametrize("command", ["emulate", "tune"])
def test_a_directory_in_place_of_a_config_says_how_to_make_one(run, command):
    """A profiler's output directory or a job's (here the straggler sample's ranks) given where a config goes."""
    job = SAMPLES / "jobs" / "gpu_ddp_straggler"
    error_line(
        run(command, job),
        f"{job}: a directory, not a config",
        f"perftool calibrate {job} -o fit.yaml fits a config to them; give fit.yaml instead",
    )


def test_a_config_written_as_json_is_read_as_before(run, tmp_path):
    """JSON is YAML: a config written as JSON, a mapping that holds no trace's events, is a config."""
    path = write_config(tmp_path, json.dumps(healthy_document()), "config.json")
    shown = run("emulate", path).stdout
    assert "Prediction (steady state)" in shown and shown == run("emulate", HEALTHY).stdout


def test_bad_set_and_missing_file(run, tmp_path):
    assert "expected NAME=VALUE" in run("emulate", HEALTHY, "--set", "loop_size").stderr
    missing = run("emulate", tmp_path / "nope.yaml")
    assert missing.exit_code == 2 and "nope.yaml: cannot read config" in missing.stderr


def test_unwritable_output_fails_before_any_work(run, tmp_path):
    result = run("emulate", HEALTHY, "--trace", tmp_path / "missing-dir" / "t.json")
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_device_constants_can_be_overridden(run, tmp_path):
    """A user's own measurements replace the family's constants: less host Python per call, a shorter step."""
    config = SAMPLES / "npu" / "host_bound_loop_size.yaml"
    base = json.loads(run("emulate", config, "--format", "json").stdout)
    out = tmp_path / "t.json"
    faster = run("emulate", config, "--format", "json", "--set", "device_overrides.python_us=200", "--trace", out)
    quicker = json.loads(faster.stdout)
    assert base["prediction"]["step_time_mean_us"] - quicker["prediction"]["step_time_mean_us"] == pytest.approx(1300)
    recorded = json.loads(out.read_text())["perftool"]["emulator"]
    assert recorded["profile"]["python_us"] == 200 and recorded["config"]["device_overrides"]["python_us"] == 200
    bad = run("emulate", config, "--set", "device_overrides.efficiency=1.5")
    assert bad.exit_code == 2 and "device_overrides.efficiency" in bad.stderr
    assert "device_overrides" in json.loads(run("schema", "config").stdout)["properties"]
