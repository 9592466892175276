"""Results copied back to the host each step, fitted: their bytes as the copies record them, the bandwidth they ran
at, and whether pageable memory made the host wait; a read-back too short to matter stays device work."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from builders import meta, span
from conftest import DATA, REPO

from perftool.emulator.config import EmulatorConfig, load_config
from perftool.emulator.full_run import run
from perftool.emulator.profiles import PROFILES
from perftool.emulator.trace_writer import write_trace
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.predict import fitting
from perftool.predict.fitting import fit
from perftool.tune.calibration import calibrate

PAGEABLE_CAPTURE = DATA / "cuda_input_bound_pageable.pt.trace.json.gz"  # 64 MB read back to pageable memory a step


def written(
    tmp_path, readback: int, pinned: bool, *overrides: str, renamed: dict[str, str] | None = None, sized: bool = True
) -> tuple[Path, EmulatorConfig]:
    """(its trace, the config emulated) for the healthy GPU sample (its inputs pinned) reading ``readback`` bytes
    back each step into ``pinned`` memory or not (with ``overrides``), its events ``renamed`` where given, the
    copies' sizes left out unless ``sized``."""
    emulated = load_config(
        REPO / "sample_traces" / "gpu" / "healthy.yaml",
        [f"workload.readback_per_step={readback}", f"knobs.pin_readback={str(pinned).lower()}", "workload.steps=32",
         *overrides],
    )  # fmt: skip
    path = tmp_path / f"readback{len(list(tmp_path.iterdir()))}.trace.json.gz"
    write_trace(run(emulated), str(path))
    document = json.loads(gzip.decompress(path.read_bytes()))
    for event in document["traceEvents"]:
        event["name"] = (renamed or {}).get(event.get("name"), event.get("name"))
        if not sized:
            event.pop("args", None)
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    return path, emulated


def fitted(tmp_path, readback: int, pinned: bool, *overrides: str, **written_as: Any) -> tuple[EmulatorConfig, ...]:
    """(the fit, the config emulated) for :func:`written`'s trace: the fit reads the events alone, never the config
    recorded beside."""
    path, emulated = written(tmp_path, readback, pinned, *overrides, **written_as)
    trace = load_trace(str(path))
    return fit(trace, analyse_trace(trace, [])[1], given={"knobs": {"batch_size": 128}}), emulated


@pytest.mark.parametrize(("pinned", "bandwidth"), [(False, "pageable_d2h_bandwidth"), (True, "d2h_bandwidth")])
def test_an_emulated_read_back_is_fitted_its_bytes_memory_and_bandwidth(tmp_path, pinned, bandwidth):
    config, emulated = fitted(tmp_path, 64 << 20, pinned)
    assert config.workload.readback_per_step == 64 << 20  # the bytes the copies record
    assert config.knobs.pin_readback is pinned and config.knobs.pin_memory is True  # the inputs are pinned
    assert getattr(config.profile, bandwidth) == pytest.approx(getattr(emulated.profile, bandwidth), rel=0.01)
    assert config.workload.sync_each_step is False  # the pageable copy's wait is the read-back's, not a sync
    without, _ = fitted(tmp_path, 0, pinned)
    assert config.workload.gflops_per_sample == pytest.approx(without.workload.gflops_per_sample, rel=0.01)  # no copy


def test_a_read_back_whose_sizes_are_not_recorded_is_its_time_at_the_bandwidth_of_its_memory(tmp_path):
    """Without the copies' ``bytes`` the fit takes the family's pageable bandwidth (the emulated one here) and
    overrides none."""
    config, _ = fitted(tmp_path, 64 << 20, False, sized=False)
    assert config.workload.readback_per_step == pytest.approx(64 << 20, rel=0.01)
    assert config.device_overrides is None or config.device_overrides.pageable_d2h_bandwidth is None


def test_a_read_back_a_blocking_call_waits_for_is_pageable_whatever_its_copy_is_named(tmp_path):
    """HIP names no memory in its copies (``Memcpy DtoH (Device -> Host)``); its blocking copy call says the host
    waited for the read-back."""
    hip = {"Memcpy DtoH (Device -> Pageable)": "Memcpy DtoH (Device -> Host)", "cudaMemcpyAsync": "hipMemcpyWithStream"}
    config, _ = fitted(tmp_path, 64 << 20, False, renamed=hip)
    assert config.workload.readback_per_step == 64 << 20 and config.knobs.pin_readback is False
    assert config.knobs.pin_memory is True  # the call waits for the read-back, not for the next batch's copy
    overrides = config.device_overrides
    assert overrides is not None and overrides.pageable_d2h_bandwidth and overrides.d2h_bandwidth is None
    assert config.workload.sync_each_step is False


def reading_back(syncs: bool, steps: int = 8) -> dict:
    """A Kineto trace of an eager loop: each step 2 ms of Python, ten 300 µs kernels, their outputs read back by a
    blocking copy into pageable memory (8 MB in 4 ms), then, where it ``syncs``, five more kernels (a metric) and
    ``loss.item()`` waiting for them."""
    host, device = (100, 1), (0, 7)
    events = [meta("process_labels", 100, 0, labels="CPU"), meta("process_labels", 0, 0, labels="GPU 0")]
    t = 0.0
    for step in range(steps):
        begin = t
        events.append(span("train_step (train.py:20)", *host, t, 2000, "python_function"))
        t += 2000
        for kernels in (10, 5 if syncs else 0):
            for _ in range(kernels):
                events += [span("aten::linear", *host, t, 20, "cpu_op"), span("cudaLaunchKernel", *host, t + 14, 5,
                           "cuda_runtime"), span("sm90_gemm", *device, t + 20, 300, "kernel")]  # fmt: skip
                t += 300
            if kernels == 10:  # the outputs read back, the host waiting in the copy
                copy = span(
                    "Memcpy DtoH (Device -> Pageable)", *device, t + 20, 4000, "gpu_memcpy", {"bytes": 8_000_000}
                )
                events += [span("aten::to", *host, t, 4030, "cpu_op"), span("cudaMemcpyAsync", *host, t + 5, 4020,
                           "cuda_runtime"), copy]  # fmt: skip
                t += 4030
        if syncs:
            events += [span("aten::item", *host, t - 1480, 1500, "cpu_op"),
                       span("cudaStreamSynchronize", *host, t - 1470, 1480, "cuda_runtime")]  # fmt: skip
        events.append(span(f"ProfilerStep#{step}", *host, begin, t - begin - 1, "user_annotation"))
    return {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}


@pytest.mark.parametrize("syncs", [True, False])
def test_a_loop_that_also_syncs_each_step_keeps_its_sync_beside_a_pageable_read_back(tmp_path, syncs):
    """``loss.item()`` after the read-back waits for each step too: pinning the read-back leaves that wait. Without
    it the read-back is the only wait, which the emulator makes of a read-back into pageable memory itself."""
    path = tmp_path / "reading_back.json"
    path.write_text(json.dumps(reading_back(syncs)))
    trace = load_trace(str(path))
    config = fit(trace, analyse_trace(trace, [])[1])
    assert config.workload.readback_per_step == 8_000_000 and config.knobs.pin_readback is False
    assert config.knobs.pin_memory is True and config.workload.sync_each_step is syncs  # no input copy


def test_a_capture_at_another_batch_fits_efficiency_from_compute_without_the_read_back(tmp_path):
    """The same 64 MB read back at batch 32 and 128: what the work grows by with the batch is compute alone, so the
    efficiency fitted is the one fitted without the read-back (its 32 ms counted as work would make the work
    look far from proportional to the batch)."""

    def half_efficiency_batch(readback: int) -> float:
        small, _ = written(tmp_path, readback, False, "knobs.batch_size=32")
        large, _ = written(tmp_path, readback, False, "knobs.batch_size=128")
        both = calibrate(str(small), overrides={"knobs": {"batch_size": 32}}, at_batch=(128, str(large)))
        assert both.at_batch is not None and both.at_batch.error < 0.02
        return both.config.workload.half_efficiency_batch

    assert half_efficiency_batch(64 << 20) == pytest.approx(half_efficiency_batch(0), rel=0.05)


@pytest.mark.parametrize(("readback", "modelled"), [(256 << 10, False), (1 << 20, True)])
def test_a_read_back_is_modelled_from_a_hundredth_of_the_step(tmp_path, readback, modelled):
    """Pinned at 25 GB/s, 256 KB take 0.6% of the sample's 1.7 ms step and stay device work; 1 MB take 2.5%."""
    config, _ = fitted(tmp_path, readback, True)
    assert (config.workload.readback_per_step == readback) is modelled
    assert config.workload.readback_per_step in (0, readback)


def test_a_real_read_back_to_pageable_memory_is_fitted_and_the_fit_copies_as_the_trace_does():
    """``big.cpu()`` of 16M floats each step on an H100: 64 MiB at about 1.7 GB/s, the host waiting in it. The fit's
    emulated trace then copies for the trace's share of the step (it counted the copy as compute before)."""
    calibration = calibrate(str(PAGEABLE_CAPTURE))
    config = calibration.config
    assert config.workload.readback_per_step == 16 << 22
    assert 1.5e9 < config.profile.pageable_d2h_bandwidth < 2.0e9
    assert config.knobs.pin_memory is False and config.knobs.pin_readback is False  # inputs and outputs pageable
    assert config.workload.sync_each_step is False
    (copies,) = [check for check in calibration.fitted if check.figure == "device busy: copies"]
    assert copies.trace > 0.6 and copies.passed


def test_a_family_whose_jobs_cannot_pin_a_read_back_models_it_at_the_bandwidth_it_ran(tmp_path):
    """Where the family has no pinned read-back to set, the fit's read-back is not pageable (no what-if could pin
    it): the bandwidth the copies ran at is the link's. The window's time in it bounds what pinning it can win."""
    path, emulated = written(tmp_path, 64 << 20, False)
    trace = load_trace(str(path))
    scope = analyse_trace(trace, [])[1]
    steps = scope.steady_steps
    read_back = fitting._read_back_copies(trace, scope, steps)
    assert read_back is not None
    copy_us = (64 << 20) * 1e6 / emulated.profile.pageable_d2h_bandwidth  # each step's, as emulated
    assert fitting.readback_time(trace, scope) == pytest.approx(steps * copy_us, rel=0.01)
    for family, pageable in (("gpu", True), ("npu", False)):
        modelled = fitting._readback(trace, scope, PROFILES[family], read_back, steps)
        assert modelled.pageable is pageable
        assert set(modelled.overrides) == {"pageable_d2h_bandwidth" if pageable else "d2h_bandwidth"}
