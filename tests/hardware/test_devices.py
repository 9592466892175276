"""The device table: which model a trace's device properties describe, and the fitted config that names it."""

from __future__ import annotations

import pytest
import yaml
from conftest import DATA, REPO

from perftool.analysis.family import device_properties
from perftool.emulator.config import load_config
from perftool.emulator.devices import BY_KEY, GENERIC, identify
from perftool.emulator.devices import profile as profile_of
from perftool.emulator.profiles import PROFILES
from perftool.pipeline.read import load_trace
from perftool.tune.calibration import calibrate

REAL = DATA / "real"
GB = 1e9


@pytest.mark.parametrize(
    "properties, model",
    [
        ({"name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16945512448}, "V100-SXM2-16GB"),
        ({"name": "Tesla V100-SXM2-32GB"}, "V100-SXM2-32GB"),
        ({"name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224}, "A100-SXM4-40GB"),
        ({"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85e9}, "A100-SXM4-80GB"),
        ({"name": "NVIDIA A100 80GB PCIe"}, "A100-PCIE-80GB"),
        ({"name": "NVIDIA H100 80GB HBM3", "numSms": 132}, "H100-SXM5-80GB"),
        ({"name": "NVIDIA H100 PCIe"}, "H100-PCIE-80GB"),
        ({"name": "AMD Instinct MI250X"}, "MI250X-GCD"),
        # ROCm names a CDNA2 GCD generically: its 104 compute units and 64 GB tell it apart
        ({"name": "AMD Radeon Graphics", "numSms": 104, "totalGlobalMem": 68702699520}, "MI250-GCD"),
        ({"name": "AMD Radeon Graphics", "numSms": 304}, None),  # an MI300X or an MI325X: their memory would say
        # memory 15.1% under an MI300X's is not one's (a partitioned device, another model); 14.6% under is
        ({"name": "AMD Radeon Graphics", "numSms": 304, "totalGlobalMem": int(163 * 2**30)}, None),
        ({"name": "AMD Radeon Graphics", "numSms": 304, "totalGlobalMem": int(164 * 2**30)}, "MI300X"),
        ({"name": "NVIDIA GPU", "numSms": 40, "totalGlobalMem": 15_843_721_216}, "T4"),  # 14.8 GiB of its 16 GB
        ({"name": "NVIDIA B200", "numSms": 148}, "B200"),
        ({"name": "NVIDIA GB200", "numSms": 148}, "GB200"),  # its GPU peaks higher than an HGX B200's
        ({"name": "NVIDIA H200", "numSms": 132}, "H200-141GB"),
        ({"name": "NVIDIA H200 NVL", "numSms": 132}, "H200-NVL-141GB"),  # the longer name: its lower peaks
        ({"name": "NVIDIA GH200 480GB", "numSms": 132}, "GH200-96GB"),  # 480 GB: the Grace CPU's memory counted in
        ({"name": "NVIDIA GH200 144G HBM3e", "numSms": 132}, "GH200-144GB"),
        ({"name": "NVIDIA GH200", "totalGlobalMem": int(139.8 * 2**30)}, "GH200-144GB"),  # by its memory
        ({"name": "NVIDIA GH200", "totalGlobalMem": int(94.5 * 2**30)}, "GH200-96GB"),
        ({"name": "NVIDIA H20", "numSms": 78}, "H20"),
        ({"name": "NVIDIA L20"}, "L20"),
        ({"name": "NVIDIA GeForce RTX 4090"}, "RTX-4090"),
        ({"name": "NVIDIA GeForce RTX 4090 Laptop GPU"}, None),  # another chip
        ({"name": "NVIDIA A30"}, "A30"),
        ({"name": "NVIDIA RTX A6000", "numSms": 84}, "RTX-A6000"),  # not an A40, its data-centre twin
        ({"name": "NVIDIA GeForce RTX 3090"}, "RTX-3090"),
        ({"name": "NVIDIA GeForce RTX 3090 Ti"}, None),  # 84 SMs and faster memory
        ({"name": "Tesla P100-SXM2-16GB"}, "P100-SXM2"),
        ({"name": "Tesla P100-PCIE-16GB"}, "P100-PCIE-16GB"),
        ({"name": "Tesla P100-PCIE-12GB"}, None),  # less memory and bandwidth
        # named by the vendor only: GB of device memory are binary (93.1 GiB is nearest an H100 NVL's 94 GB, though in
        # decimal GB nearer a GH200's 96 GB), and an H200 and an H200 NVL fit alike
        ({"name": "NVIDIA GPU", "numSms": 132, "totalGlobalMem": int(93.1 * 2**30)}, "H100-NVL-94GB"),
        ({"name": "NVIDIA GPU", "numSms": 132, "totalGlobalMem": int(95.5 * 2**30)}, "GH200-96GB"),
        ({"name": "NVIDIA GPU", "numSms": 132, "totalGlobalMem": int(140 * 2**30)}, None),
        ({"name": "AMD Instinct MI355X", "numSms": 256, "totalGlobalMem": 309_220_868_096}, "MI355X"),
        ({"name": "AMD Instinct MI350X"}, "MI350X"),
        # an MI350X or an MI355X: the same compute units and memory
        ({"name": "AMD Radeon Graphics", "numSms": 256, "totalGlobalMem": 309_220_868_096}, None),
        ({"name": "AMD Radeon Graphics"}, None),  # nothing to tell the models apart by
        ({"name": "ARTEMIS"}, None),
        ({}, None),
    ],
)
def test_a_trace_s_device_properties_name_its_model(properties, model):
    found = identify("gpu", properties)
    assert (found.key if found else None) == model


def test_each_family_s_reference_device_is_a_model_of_the_table():
    """The emulator's family profiles are models of the table, so naming the model changes nothing."""
    for family, profile in PROFILES.items():
        assert any(profile_of(model) == profile for model in BY_KEY.values() if model.family == family), family


def test_models_carry_their_hardware_and_keep_the_family_s_software():
    v100, h100 = profile_of(BY_KEY["V100-SXM2-16GB"]), profile_of(BY_KEY["H100-SXM5-80GB"])
    assert v100.memory_bytes == 16 * GB and v100.peak_tflops == 125 and v100.h2d_bandwidth < h100.h2d_bandwidth
    assert h100.peak_tflops == 989.5 and h100.memory_bandwidth > 3 * v100.memory_bandwidth
    assert v100.op_launch_us == h100.op_launch_us == PROFILES["gpu"].op_launch_us  # a fit sets these from the trace
    assert (
        profile_of(BY_KEY["Ascend-910B"]).family == "npu" and profile_of(BY_KEY["Ascend-910B"]).memory_bytes == 64 * GB
    )


@pytest.mark.parametrize(
    "name, model",
    [("ddp_v100_rank1", "V100-SXM2-16GB"), ("nccl_a100_rank", "A100-SXM4-40GB"), ("rocm_mi250_minitoy", "MI250-GCD")],
)
def test_a_real_capture_is_fitted_on_its_own_device(name, model):
    assert identify("gpu", device_properties(load_trace(str(REAL / f"{name}.json.gz")))).key == model


@pytest.mark.slow
def test_calibrate_names_the_model_or_says_the_device_is_generic(run, tmp_path):
    fitted = tmp_path / "v100.yaml"
    result = run("calibrate", REAL / "ddp_v100_rank1.json.gz", "-o", fitted)
    assert result.exit_code == 0, result.output
    assert "NVIDIA V100 SXM2 (16 GB)" in " ".join(result.stdout.split())
    config = load_config(fitted)
    assert config.device_model == "V100-SXM2-16GB" and config.profile.memory_bytes == 16 * GB
    # a capture whose profiler does not record the device (PyTorch 1.8): a generic GPU, named as such, and a note
    unknown = calibrate(str(REAL / "resnet50_pt18_workers0.json.gz"))
    assert unknown.config.device_model == GENERIC and "generic GPU" in unknown.config.profile.model
    assert any("not one perftool knows by model" in note for note in unknown.notes)


def test_a_config_names_a_model_of_its_family_or_is_refused(run, tmp_path):
    document = yaml.safe_load((REPO / "sample_traces" / "gpu" / "healthy.yaml").read_text())
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**document, "device_model": "H100-SXM5-80GB"}))
    emulated = run("emulate", path)
    assert emulated.exit_code == 0 and "NVIDIA H100 SXM5 (80 GB)" in emulated.stdout
    for model, says in [("X200", "unknown device model 'X200'"), ("Ascend-910B", "Ascend-910B is no 'gpu' device")]:
        path.write_text(yaml.safe_dump({**document, "device_model": model}))
        refused = run("emulate", path)
        assert refused.exit_code == 2 and says in refused.stderr and refused.stderr.count("\n") == 1
