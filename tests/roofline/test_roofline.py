"""The roofline from the trace alone: each op's kernels found through its launches, its FLOPs against the device's
peaks, MFU of the steady window, on the bundled sample and on real captures; the device table as data."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import DATA, REPO, complete, error_line, process_name, thread_name

import perftool
from perftool import hardware
from perftool.analysis.metrics import compute_metrics
from perftool.common.results import InfoReport, RooflineStep, RooflineSteps
from perftool.hardware import BY_KEY, SOURCED, identify
from perftool.pipeline.read import load_trace
from perftool.roofline.calls import op_calls
from perftool.roofline.figures import HOST_ONLY_NOTE, roofline
from perftool.trace.kept_args import ArgsKept, KeepArgs

REAL = DATA / "real"
SAMPLE = REPO / "sample_traces" / "gpu_training_kineto.pt.trace.json.gz"
LINEAR_FLOPS = 2 * 64 * 512 * 512  # the sample's aten::linear: x[64,512] · w[512,512]ᵀ


def _roofline(path):
    return roofline(load_trace(str(path)))


def test_the_bundled_sample_s_mfu_is_its_gemms_flops_over_the_window_at_the_h100_s_fp32_peak():
    trace = load_trace(str(SAMPLE))
    metrics = compute_metrics(trace)  # the window the roofline measures is the metrics' own
    roof = roofline(trace)
    assert roof.spec is BY_KEY["H100-SXM5-80GB"] and roof.dtype == "fp32" and roof.peak_tflops == 67
    linear = next(op for op in roof.ops if op.name == "aten::linear")
    assert linear.family == "gemm" and linear.flops == linear.calls * LINEAR_FLOPS
    # counted by hand from the JSON: the forward ops that start in the steady window, by their recorded shapes
    document = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    lo = metrics["window.start_us"]
    hi = lo + metrics["window.duration_us"]
    per_call = {"aten::linear": LINEAR_FLOPS, "aten::mm": 2 * 64 * 512 * 512, "aten::add": 64 * 512,
                "aten::gelu": 64 * 512, "aten::softmax": 5 * 64 * 512, "aten::layer_norm": 5 * 64 * 512}  # fmt: skip
    by_hand = sum(per_call.get(e["name"], 0) for e in document["traceEvents"] if lo <= e.get("ts", -1) < hi)
    assert roof.flops == by_hand
    assert roof.mfu == pytest.approx(by_hand / ((hi - lo) / 1e6) / 67e12)
    # the backward ops have names no family knows: their device time is not modelled, and the share says so
    assert 0.4 < roof.modelled_share < 0.6
    assert sum(op.lost_us for op in roof.ops) == pytest.approx(roof.lost_us)


def test_a_kernel_counts_for_the_innermost_op_that_launched_it(write_trace):
    """aten::linear → aten::addmm → cudaLaunchKernel → kernel: the FLOPs are addmm's, once."""
    host = {"pid": 1, "tid": 1}
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        complete("ProfilerStep#1", 0, 100, cat="user_annotation", **host),
        complete("aten::linear", 10, 60, cat="cpu_op", **host,
                 args={"Input Dims": [[64, 512], [256, 512], [256]], "Input type": ["float"] * 3}),
        complete("aten::addmm", 12, 50, cat="cpu_op", **host,
                 args={"Input Dims": [[256], [64, 512], [512, 256], [], []], "Input type": ["float"] * 3}),
        complete("cudaLaunchKernel", 20, 5, cat="cuda_runtime", **host),
        {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 21, "cat": "ac2g", "name": "ac2g"},
        complete("sgemm_kernel", 30, 40, cat="kernel", pid=0, tid=7),
        {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 30, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]  # fmt: skip
    path = write_trace({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}]})
    roof = _roofline(path)
    (op,) = roof.ops
    assert (op.name, op.calls, op.flops, op.device_us) == ("aten::addmm", 1, 2 * 64 * 512 * 256, 40)
    # at A100's 19.5 TFLOP/s fp32, 16.8 MFLOP take 0.86 µs; its bytes at 2,039 GB/s 0.36 µs: compute-bound
    assert op.bound == "compute" and op.roofline_us == pytest.approx(2 * 64 * 512 * 256 / 19.5e12 * 1e6)
    assert op.lost_us == pytest.approx(40 - op.roofline_us) and roof.modelled_share == 1.0


@pytest.mark.parametrize(
    "name, device, mfu, expected_op",
    [
        ("ddp_v100_rank1", "V100-SXM2-16GB", True, ("aten::addmm", "512, 1024x1705, 1705x512")),
        ("rocm_mi250_minitoy", "MI250-GCD", True, ("aten::addmm", "128, 5x128, 128x128")),
        ("resnet50_pt18_workers0", None, False, ("aten::cudnn_convolution_backward", "32x256x14x14, 32x1024x14x14")),
    ],
)
def test_real_captures_with_shapes_get_their_ops_flops_and_mfu_where_the_device_is_known(
    name, device, mfu, expected_op
):
    roof = _roofline(REAL / f"{name}.json.gz")
    assert (roof.spec.key if roof.spec else None) == device
    assert (roof.mfu is not None) == mfu and roof.flops > 0 and roof.modelled_share > 0
    assert any(op.name == expected_op[0] and op.shapes.startswith(expected_op[1]) for op in roof.ops)
    if device is None:  # PyTorch 1.8 names no device: no percentages, and it says how to give one
        assert roof.lost_us is None and any("--device-spec" in note for note in roof.notes)
        assert any("no element type" in note for note in roof.notes)  # nor types: fp32 assumed, said so


def test_a_v100_addmm_is_counted_from_its_recorded_shapes():
    """ddp_v100_rank1: aten::addmm(bias[512], x[1024,1705], w[1705,512]) in fp32, 2 * 1024 * 1705 * 512 each."""
    roof = _roofline(REAL / "ddp_v100_rank1.json.gz")
    row = next(op for op in roof.ops if op.name == "aten::addmm" and op.shapes.startswith("512, 1024x1705"))
    assert row.flops == row.calls * 2 * 1024 * 1705 * 512 and row.dtype == "fp32"
    assert row.achieved_tflops < 15.7  # under the V100's fp32 peak


@pytest.mark.parametrize(
    ("path", "profiler"),
    [
        (REAL / "nccl_a100_rank.json.gz", "torch.profiler.profile"),
        (DATA / "vocab" / "diff_torch_npu_before.json.gz", "torch_npu.profiler.profile"),
    ],
)
def test_a_trace_without_shapes_says_what_to_capture_with_its_own_profiler(path, profiler):
    """PyTorch's profiler, or torch_npu's for a torch_npu trace, records the ops' shapes where told to."""
    roof = _roofline(path)
    assert roof.flops == 0 and roof.mfu is None and not roof.ops
    advice = f"no op in this trace records its input shapes: capture with {profiler}(record_shapes=True"
    assert any(note.startswith(advice) for note in roof.notes)


def test_a_capture_of_the_device_alone_says_to_record_the_host_s_ops_too(tmp_path):
    """The real ROCm capture less its host ops (as a profiler run with the device's activity alone writes it:
    runtime calls and kernels): no op to model, and the note says how to record them, not that none ran."""
    document = json.loads(gzip.decompress((REAL / "rocm_mi250_minitoy.json.gz").read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("cat") not in ("cpu_op", "user_annotation")]
    device_alone = tmp_path / "device_alone.json"
    device_alone.write_text(json.dumps(document))
    capture = "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)"
    assert (
        f"capture the CPU activity too, {capture}, so ops and their shapes are recorded"
        in _roofline(device_alone).notes[-1]
    )
    for event in document["traceEvents"]:
        event.update({"cat": "cpu_op", "name": "custom::fused_step"} if event.get("cat") == "cuda_runtime" else {})
    unmodelled = tmp_path / "unmodelled_ops.json"  # host ops, none of a modelled family
    unmodelled.write_text(json.dumps(document))
    assert _roofline(unmodelled).notes[-1].startswith("no op of a modelled family (GEMM, convolution, attention")


def test_a_capture_of_the_host_alone_has_no_roofline_to_ask_a_device_spec_for(run):
    """A CPU-only capture's ops (shapes recorded) ran on no device: the roofline says so, and neither asks for a
    --device-spec nor lists annotations with no device time."""
    roof = _roofline(DATA / "torch_cpu_train.pt.trace.json.gz")
    assert roof.notes == [HOST_ONLY_NOTE] and roof.regions == [] and roof.mfu is None
    text = " ".join(run("info", DATA / "torch_cpu_train.pt.trace.json.gz").stdout.split())
    assert "│ device │ none (host only) │" in text
    assert "--device-spec" not in text and "By annotation" not in text


def test_info_shows_mfu_and_the_ops_furthest_below_the_roofline(run):
    result = run("info", SAMPLE)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "Roofline (steady state)" in text and "MFU │ ≥ 0.2357% of the fp32 peak (67 TFLOP/s)" in text
    assert "Ops furthest below the roofline" in text and "aten::linear" in text
    quiet = run("info", REAL / "nccl_a100_rank.json.gz")
    assert "record_shapes=True, with_flops=True" in " ".join(quiet.stdout.split())


def test_info_json_markdown_and_html_carry_the_roofline(run, tmp_path):
    document = json.loads(run("info", SAMPLE, "--format", "json").stdout)
    roof = document["roofline"]
    assert roof["device_spec"] == "H100-SXM5-80GB" and roof["mfu"] > 0 and roof["peak_tflops"]["bf16"] == 989.5
    assert {op["family"] for op in roof["ops"]} == {"gemm", "softmax", "norm", "elementwise"}
    assert all(op["lost_us"] >= 0 and op["of_roofline"] <= 1 for op in roof["ops"])
    markdown = run("info", SAMPLE, "--format", "markdown").stdout
    assert "## Roofline (steady state)" in markdown and "| aten::linear |" in markdown
    html = run("info", SAMPLE, "--format", "html").stdout
    assert 'data-chart="roofline"' in html and html.count('class="op"') == len(roof["ops"])
    assert 'class="roof"' in html  # the device's roofs are drawn


def test_a_device_spec_file_gives_an_unknown_device_its_roofline(run, tmp_path):
    spec = tmp_path / "v100.yaml"
    spec.write_text((REPO / "perftool" / "hardware" / "specs" / "v100-sxm2-16gb.yaml").read_text())
    document = json.loads(run("info", REAL / "resnet50_pt18_workers0.json.gz", "--format", "json",
                              "--device-spec", spec).stdout)  # fmt: skip
    assert document["roofline"]["device_spec"] == "V100-SXM2-16GB" and 0 < document["roofline"]["mfu"] < 1
    spec.write_text("key: X\nmodel: X\nfamily: gpu\nmemory_gb: 1\nmemory_bandwidth_gbps: 1\npeak_tflops: {fp32: 1}\n")
    error_line(run("info", SAMPLE, "--device-spec", spec), str(spec), "sources")
    spec.write_text("key: X\nmodel: X\nfamily: gpu\nmemory_gb: -1\n")
    error_line(run("info", SAMPLE, "--device-spec", spec), str(spec), "memory_gb")


def test_no_peaks_says_whether_the_device_is_unknown_or_the_trace_names_no_model():
    """MTIA's ARTEMIS is a model perftool has no figures for; a PyTorch 1.8 capture lists no device properties, so
    its "GPU 0" is a place, not a model, and only the user can say which."""
    unknown = next(n for n in _roofline(REAL / "mtia_inference.json.gz").notes if "no peaks" in n)
    assert unknown.startswith("device 'MTIA 17 (ARTEMIS)' is not one perftool knows: no peaks")
    unnamed = next(n for n in _roofline(REAL / "resnet50_pt18_workers0.json.gz").notes if "no peaks" in n)
    assert unnamed.startswith("the trace does not name its device's model ('GPU 0' says only where the work ran)")
    assert unnamed.endswith("; give its figures with --device-spec FILE") and "XSpace" not in unnamed


def test_no_peaks_for_an_ascend_timeline_says_its_db_export_names_the_npu(write_trace, tmp_path):
    """torch_npu's text export names its device "NPU", by where the work ran; its db export records the model
    (NPU_INFO), which the note points to; the db export itself names it."""
    events = [process_name(1, "Python"), process_name(2, "Ascend Hardware"), thread_name(2, 2, "Stream 2"),
              complete("aten::mm", 0, 50, pid=1, tid=1), complete("MatMul", 10, 40, pid=2, tid=2)]  # fmt: skip
    note = next(n for n in roofline(load_trace(write_trace(events))).notes if "no peaks" in n)
    assert "; the profiler's db export names it (torch_npu: torch_npu.profiler.ExportType.Db in" in note
    database = (
        REAL / "torch_npu_db_l2_job" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    )
    assert not any("no peaks" in n for n in roofline(load_trace(str(database))).notes)


def test_no_peaks_for_a_device_named_by_its_vendor_says_what_its_units_and_memory_fit(write_trace):
    """ROCm's "AMD Radeon Graphics" with 304 compute units is an MI300X or an MI325X: without its memory, neither (the
    note names both); with memory far from both, or with nothing but the name, none either."""
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        complete("aten::mm", 0, 50, cat="cpu_op", pid=100, tid=100),
        complete("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", 10, 40, cat="kernel", pid=0, tid=7),
    ]
    alike = "AMD Instinct MI300X (192 GB) and AMD Instinct MI325X (256 GB) alike, whose peaks or memory bandwidth"
    for properties, said in [
        ({"numSms": 304}, f"its 304 compute units fit {alike}"),
        ({"numSms": 304, "totalGlobalMem": 100 << 30}, "its 304 compute units and 100.0 GiB fit no one model"),
        ({}, "records nothing to tell it by"),
    ]:
        device = {"id": 0, "name": "AMD Radeon Graphics", **properties}
        path = write_trace({"schemaVersion": 1, "deviceProperties": [device], "traceEvents": events})
        note = next(n for n in roofline(load_trace(str(path))).notes if "no peaks" in n)
        assert note.startswith(f"the trace names its device only by its vendor ('AMD Radeon Graphics'), and {said}")


def test_the_python_api_gives_the_op_table_as_a_dataframe():
    roof = perftool.roofline(SAMPLE)
    table = roof.to_pandas()
    assert list(table.columns[:4]) == ["name", "family", "shapes", "dtype"] and len(table) == len(roof.ops)
    assert table["flops"].sum() == roof.flops


def test_modelled_ops_keep_only_their_inputs_and_equal_inputs_share_them():
    trace = load_trace(str(SAMPLE))
    rows = [i for i, n in enumerate(trace.name.tolist()) if trace.names[n] == "aten::linear"]
    assert trace.args(rows[0]) == {"Input Dims": [[64, 512], [512, 512], [512]], "Input type": ["float"] * 3}
    assert len({int(trace.args_ref[r]) for r in rows}) < len(rows) / 10


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("AMD Instinct MI325X", "MI325X"),
        ("AMD Instinct MI100", "MI100"),
        ("NVIDIA H800", "H800-SXM5-80GB"),
        ("NVIDIA H200", "H200-141GB"),
        ("NVIDIA B200", "B200"),
        ("Ascend910B2", "Ascend-910B"),
        ("Gaudi 3", "Gaudi3"),
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A40", "A40"),
        ("NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB"),
    ],
)
def test_devices_are_matched_as_traces_spell_them(name, key):
    assert identify({"name": name}).key == key


@pytest.mark.parametrize(
    ("properties", "key"),
    [
        ({"name": "AMD Instinct", "numSms": 304, "totalGlobalMem": 206_141_652_992}, "MI300X"),  # an XSpace's plane
        ({"name": "AMD Instinct", "numSms": 304, "totalGlobalMem": 274_877_906_944}, "MI325X"),
        ({"name": "NVIDIA GPU", "numSms": 132, "totalGlobalMem": 150_754_820_096}, None),  # an H200 or an H200 NVL
        ({"name": "NVIDIA GPU", "numSms": 58, "totalGlobalMem": 24_000_000_000}, "L4"),
        # 46,068 MiB on 84 SMs: an A40 or an RTX A6000, whose peaks differ, told apart by the bandwidth where recorded
        ({"name": "NVIDIA GPU", "numSms": 84, "totalGlobalMem": 48_305_799_168}, None),
        ({"name": "NVIDIA GPU", "numSms": 84, "totalGlobalMem": 48_305_799_168, "memoryBandwidth": 696e9}, "A40"),
        ({"name": "NVIDIA GPU", "numSms": 84, "totalGlobalMem": 48_305_799_168, "memoryBandwidth": 768e9}, "RTX-A6000"),
        ({"name": "AMD Radeon Graphics", "numSms": 120, "totalGlobalMem": 34_342_961_152}, "MI100"),  # 32 GiB, gfx908
        ({"name": "NVIDIA GPU", "numSms": 132, "totalGlobalMem": 85_520_809_984}, None),  # an H100 SXM or an H800
        ({"name": "NVIDIA GPU", "numSms": 7, "totalGlobalMem": 85_520_809_984}, None),
    ],
)
def test_a_name_that_says_only_the_vendor_is_told_apart_by_units_and_memory_or_not_at_all(properties, key):
    found = identify(properties)
    assert (found.key if found else None) == key


A100_80GB = {"name": "NVIDIA GPU", "numSms": 108, "totalGlobalMem": 85_100_068_864}  # as an XSpace's plane records it


@pytest.mark.parametrize(
    ("bandwidth", "alike"),
    [
        (None, ["A100-SXM4-80GB", "A800-SXM4-80GB", "A100-PCIE-80GB"]),
        (2_039_088_000_000, ["A100-SXM4-80GB", "A800-SXM4-80GB"]),  # 2 × 1,593 MHz × 5,120 bits: the SXM4's
        (1_935_360_000_000, ["A100-PCIE-80GB"]),  # 2 × 1,512 MHz × 5,120 bits: the PCIe card's
        (1_019_544_000_000, ["A100-SXM4-80GB", "A800-SXM4-80GB", "A100-PCIE-80GB"]),  # half: near none, so no help
    ],
    ids=["not recorded", "an SXM4's", "a PCIe card's", "near none"],
)
def test_models_a_vendor_only_device_fits_alike_are_told_apart_by_its_recorded_bandwidth(bandwidth, alike):
    """An XSpace's NVIDIA plane records the memory bandwidth its clock and bus width give: within 2% of one of the
    models that fit the units and memory alike, it picks those out (an A100 SXM4 from the PCIe card, 5% slower); a
    figure near none of them (AMD's planes record half their peak) leaves them all."""
    properties = A100_80GB | ({"memoryBandwidth": bandwidth} if bandwidth else {})
    assert sorted(m.key for m in hardware.fitting_models(properties)) == sorted(alike)
    found = identify(properties)
    assert (found.key if found else None) == (alike[0] if len(alike) == 1 else None)


@pytest.mark.parametrize(
    ("properties", "key", "bf16"),
    [
        ({"numSms": 132, "totalGlobalMem": 85_045_460_992}, "H100-SXM5-80GB or H800-SXM5-80GB", 989.5),
        (A100_80GB | {"memoryBandwidth": 2_039_088_000_000}, "A100-SXM4-80GB or A800-SXM4-80GB", 312),
        ({"numSms": 108, "totalGlobalMem": 42_298_834_944}, "A100-PCIE-40GB or A100-SXM4-40GB", 312),
        (A100_80GB, None, None),  # the PCIe card's bandwidth is not the SXM4's
        ({"numSms": 132, "totalGlobalMem": 150_754_820_096}, None, None),  # an H200 NVL's peaks are 16% lower
    ],
)
def test_the_roofline_takes_the_peaks_of_models_a_device_fits_alike_where_they_are_the_same(properties, key, bf16):
    """JAX on an H100 records an NVIDIA GPU of 132 SMs and 79.2 GiB, which an H800 is too: no one model, but their
    peaks and memory bandwidth are the same, and the roofline uses them, named for both. Models whose figures differ
    give none."""
    found = hardware.roofline_model({"name": "NVIDIA GPU"} | properties)
    assert (found.key if found else None) == key
    assert found is None or (found.peak_tflops["bf16"] == bf16 and " or " in found.model)


@pytest.mark.parametrize(
    "name", ["NVIDIA A10G", "NVIDIA T400", "NVIDIA A800 40GB Active", "NVIDIA GeForce RTX 4090 D", "NVIDIA H20-3e"]
)
def test_a_device_whose_name_only_starts_like_a_known_one_is_not_taken_for_it(name):
    """An A10G is not an A10, nor the A800 workstation card the A800 SXM, nor an RTX 4090 D (114 SMs) an RTX 4090, nor
    the H20 with 141 GB of HBM3e the 96 GB one: their figures differ, and no figures beat wrong ones."""
    assert identify({"name": name}) is None


def test_every_device_file_says_where_its_figures_come_from_and_covers_the_families():
    for spec in hardware.SPECS:
        assert set(SOURCED) <= set(spec.sources), spec.key
        assert spec.interconnect_gbps is None or "interconnect_gbps" in spec.sources, spec.key
    assert {spec.family for spec in hardware.SPECS} == {"gpu", "npu", "hpu", "ipu", "tpu"}
    assert {spec.vendor for spec in hardware.SPECS} >= {"NVIDIA", "AMD", "Huawei", "Intel", "Graphcore", "Google"}


@pytest.mark.parametrize(
    ("device_kind", "key"),
    [("TPU v4", "TPU-v4"), ("TPU v5 lite", "TPU-v5e"), ("TPU v5p", "TPU-v5p"), ("TPU v6 lite", "TPU-v6e")],
)
def test_tpu_generations_are_known_by_the_names_jax_gives_them(device_kind, key):
    spec = identify({"name": device_kind})
    assert spec is not None and spec.key == key and spec.peak_flops("bf16") > 0


def test_a_tpu_is_the_roofline_s_not_the_emulator_s():
    from perftool.emulator.devices import BY_KEY as EMULATED

    assert "TPU-v4" in hardware.BY_KEY and "TPU-v4" not in EMULATED


def test_an_event_kept_for_its_category_keeps_all_its_args_even_with_an_op_s_name():
    """A dialect that reads its events' args (msprof's device tasks, by category) gets them whole, though a task
    be named like an ATen op; a host op kept for its name keeps just its inputs."""
    keep = KeepArgs(frozenset({"task"}), "^add$", "^add$", frozenset({"kernel"}))
    signatures = [("X", "add", "task", 1, 1), ("X", "add", "cpu_op", 1, 1), ("X", "mul", "x", 1, 1)]
    signatures.append(("X", "k", "kernel", 1, 1))
    assert keep.of(signatures).tolist() == [ArgsKept.ALL, ArgsKept.INPUTS, ArgsKept.NONE, ArgsKept.LAUNCH]


@pytest.mark.parametrize(
    "args, counted",
    [
        ({"Input Dims": [[4, 8], [8, 2]], "Input type": ["float", "float"]}, 1),  # the control: well formed
        ({"Input Dims": "not a list"}, 0),
        ({"Input Dims": [["a", "b"], [2, 2]], "Input type": ["float", "float"]}, 0),
        ({"Input Dims": [[-4, 2], [2, 2]], "Input type": [3, None]}, 0),
        ({"Input Dims": [[10**30, 2], [2, 10**30]]}, 0),
        ([1, 2, 3], 0),
    ],
)
def test_malformed_recorded_inputs_leave_the_op_unknown_and_info_still_answers(write_trace, run, args, counted):
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        complete("ProfilerStep#1", 0, 100, cat="user_annotation"),
        complete("aten::mm", 10, 50, cat="cpu_op", args=args),
        complete("cudaLaunchKernel", 20, 5, cat="cuda_runtime"),
        {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 21, "cat": "ac2g", "name": "ac2g"},
        complete("gemm_kernel", 30, 40, cat="kernel", pid=0, tid=7),
        {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 30, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]
    result = run("info", write_trace({"traceEvents": events}), "--format", "json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["roofline"]["ops"]) == counted


def test_each_steady_step_has_its_flops_and_mfu_and_they_add_up_to_the_window_s():
    """The sample's steps are timed on the device: each call counts in the step its first kernel starts in."""
    roof = _roofline(SAMPLE)
    assert len(roof.per_step) == roof.steps == 48
    assert sum(step.flops for step in roof.per_step) == pytest.approx(roof.flops, rel=0.02)
    for step in roof.per_step:
        assert step.mfu == pytest.approx(step.flops / (step.time_us / 1e6) / 67e12)
    # one step worked by hand: its linear and mm calls are 33.6 MFLOP each, the rest a few hundred kFLOP
    assert all(step.flops % 32_768 == 0 and step.flops > 0 for step in roof.per_step)


def test_the_steps_are_written_as_read_and_read_back_as_written(run):
    """The per-step figures are columns: the document's rows are those of the steps' models, and a document read back
    holds the same steps."""
    roof = _roofline(SAMPLE)
    result = run("info", str(SAMPLE), "--format", "json")
    assert result.exit_code == 0, result.output
    written = json.loads(result.stdout)["roofline"]["per_step"]
    assert written == [step.model_dump() for step in roof.per_step] and len(written) == 48
    read_back = InfoReport.model_validate_json(result.stdout).roofline.per_step
    assert isinstance(read_back, RooflineSteps) and read_back.rows() == written and read_back == roof.per_step


def test_a_step_without_a_figure_reads_none_and_the_steps_index_as_a_list():
    nan = float("nan")
    steps = RooflineSteps(
        number=np.array([4, 5, 6]),
        time_us=np.array([10.0, 0.0, 20.0]),
        flops=np.array([2e6, 0.0, 4e6]),
        achieved_tflops=np.array([2e-4, nan, 2e-4]),
        mfu=np.array([0.5, nan, nan]),
    )
    assert steps[1] == RooflineStep(number=5, time_us=0.0, flops=0.0, achieved_tflops=None, mfu=None)
    assert steps[-1].number == 6 and steps[-1].mfu is None and steps[0].mfu == 0.5
    assert [step.number for step in steps[1:]] == [5, 6] and [step.number for step in steps] == [4, 5, 6]
    with pytest.raises(IndexError):
        steps[3]
    assert RooflineSteps.of(list(steps)) == steps == list(steps) and steps != steps[:2]


def test_ops_count_in_the_innermost_annotation_around_them(write_trace):
    """Two forward mms inside "## forward ##" → "attention" and one outside it: per annotation, FLOPs, time, lost."""
    host = {"pid": 1, "tid": 1}
    mm = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::BFloat16"] * 2}
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        complete("ProfilerStep#1", 0, 1000, cat="user_annotation", **host),
        complete("## forward ##", 5, 500, cat="user_annotation", **host),
        complete("attention", 8, 300, cat="user_annotation", **host),
    ]
    for i, (at, kernel_us) in enumerate([(10, 20), (100, 30), (600, 50)]):
        events += [
            complete("aten::mm", at, 40, cat="cpu_op", args=mm, **host),
            complete("cudaLaunchKernel", at + 5, 5, cat="cuda_runtime", **host),
            {"ph": "s", "id": i + 1, "pid": 1, "tid": 1, "ts": at + 6, "cat": "ac2g", "name": "ac2g"},
            complete("sm90_gemm_bf16", at + 50, kernel_us, cat="kernel", pid=0, tid=7),
            {"ph": "f", "id": i + 1, "pid": 0, "tid": 7, "ts": at + 50, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
    path = write_trace({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]})
    roof = _roofline(path)
    regions = {region.name: region for region in roof.regions}
    assert set(regions) == {"attention"}  # the third mm lies in no annotation but the step, which does not count
    inside = regions["attention"]
    flops = 2 * 1024**3
    assert (inside.calls, inside.flops, inside.device_us) == (2, 2 * flops, 50)
    at_roof = max(flops / 989.5e12, 3 * 1024 * 1024 * 2 / 3350e9) * 1e6  # 2.17 µs of FLOPs, 1.88 µs of bytes
    assert inside.lost_us == pytest.approx(50 - 2 * at_roof)
    assert inside.share_of_peak == pytest.approx(2 * flops / 50e-6 / 989.5e12)


def test_a_roofline_finding_s_gain_is_a_bound_and_no_fit_is_tried_for_it(run, write_trace, monkeypatch):
    """PT014-PT020 fix what the emulator does not model (dtype, shapes, fusion, launch configuration): their gains
    say "up to", and scanning a real trace for them never fits the emulator."""
    import yaml
    from builders import CASES, build

    from perftool.predict import gains

    def no_fit(scope):
        raise AssertionError("a fit was tried for a finding whose fix sets no knob")

    monkeypatch.setattr(gains, "_fitted", no_fit)
    for rule in ("PT014", "PT019", "PT020"):
        case = yaml.safe_load((CASES / f"{rule}.yaml").read_text())["cases"][0]
        result = run("scan", write_trace(build(case)), "--select", rule, "--format", "json", "--fail-on", "never")
        (finding,) = json.loads(result.stdout)["traces"][0]["findings"]
        assert finding["gain"]["kind"] == "upper_bound" and finding["severity"] == "warning"


def test_ops_are_in_the_window_by_their_kernels_when_the_host_runs_ahead():
    """A DDP rank whose host issues the next step's ops while the device still runs this one's: the device window's
    kernels belong to ops the host started before it, and each is counted by its first kernel's time."""
    roof = perftool.roofline(DATA / "real" / "mi300_resnet_actckpt_ddp8_rank0.json.gz")
    assert roof.modelled_us / roof.device_us > 0.9


def test_inductor_s_kernels_are_counted_by_the_family_their_names_give(write_trace):
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        *(complete("triton_poi_fused_add_mul_0", 100 * i, 10, pid=0, tid=7, cat="kernel") for i in range(3)),
        complete("triton_red_fused_native_layer_norm_1", 400, 30, pid=0, tid=7, cat="kernel"),
        complete("triton_per_fused_softmax_2", 500, 20, pid=0, tid=7, cat="kernel"),
        complete("triton_tem_fused_mm_3", 600, 40, pid=0, tid=7, cat="kernel"),
        complete("sm90_xmma_gemm_bf16bf16", 700, 100, pid=0, tid=7, cat="kernel"),
    ]
    notes = roofline(load_trace(write_trace({"schemaVersion": 1, "traceEvents": events}))).notes
    (said,) = [note for note in notes if "Inductor" in note]
    assert said.startswith("55% of device compute time is Inductor's kernels (torch.compile): pointwise 30.0 µs (3")
    assert "reductions 50.0 µs (2 kernels), GEMM templates 40.0 µs (1 kernel)" in said


def test_kernels_inductor_did_not_write_get_no_such_note(write_trace):
    events = [complete("sm90_xmma_gemm_bf16bf16", 0, 100, pid=0, tid=7, cat="kernel")]
    assert not [n for n in roofline(load_trace(write_trace({"traceEvents": events}))).notes if "Inductor" in n]


def test_each_call_starts_and_is_windowed_by_its_first_kernel_whatever_order_they_launch_in(write_trace):
    """Two matmuls whose kernels the device runs interleaved (first mm's, second's, first's, second's): each call
    starts where its earliest kernel starts, and a window opening between a call's first and last kernel leaves the
    call out."""
    host = {
        "pid": 1,
        "tid": 1,
        "cat": "cpu_op",
        "args": {"Input Dims": [[64, 512], [512, 512]], "Input type": ["float"] * 2},
    }
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        complete("aten::mm", 10, 40, **host),
        complete("aten::mm", 60, 40, **host),
    ]
    for flow, (launch, kernel) in enumerate([(20, 300), (70, 400), (30, 500), (80, 600)], start=1):
        events += [
            complete("cudaLaunchKernel", launch, 2, cat="cuda_runtime", pid=1, tid=1),
            {"ph": "s", "id": flow, "pid": 1, "tid": 1, "ts": launch + 1, "cat": "ac2g", "name": "ac2g"},
            complete("gemm_kernel", kernel, 50, cat="kernel", pid=0, tid=7),
            {"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": kernel, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
    trace = load_trace(write_trace({"traceEvents": events}))
    whole = op_calls(trace, (0, 1000))
    assert whole.device_start.tolist() == [300, 400] and whole.device_us.tolist() == [100, 100]
    later = op_calls(trace, (350, 1000))  # the first mm's first kernel starts before the window: not its call
    assert trace.ts[later.rows].tolist() == [60] and later.device_start.tolist() == [400]
