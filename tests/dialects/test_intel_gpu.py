"""An Intel GPU's capture as PyTorch's profiler writes it through Kineto's XPU plugin (xpupti, on Intel's PTI): the SYCL
runtime's enqueue and wait calls in ``xpu_runtime``, copies named by PTI (``Memcpy M2D (…)``: M for the program's
own, pageable memory, H for the runtime's pinned host allocations), kernels on ``Stream N`` threads of the device's
process. Read as the CUDA capture it was written from is, it gives the same verdicts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import DATA, scanned

from perftool.dialects import base, vocabulary
from perftool.trace.model import Kind, Role

CUDA_CAPTURE = DATA / "cuda_input_bound_pageable.pt.trace.json.gz"  # a real capture on an H100
# The calls the CUDA capture makes, as the SYCL unified runtime names the same work
RUNTIME_CALLS = {
    "cudaLaunchKernel": "urEnqueueKernelLaunch",
    "cudaLaunchKernelExC": "urEnqueueKernelLaunchCustomExp",
    "cuLaunchKernel": "urEnqueueKernelLaunch",
    "cudaMemcpyAsync": "urEnqueueUSMMemcpy",
    "cudaMemsetAsync": "urEnqueueUSMFill",
    "cudaStreamSynchronize": "urQueueFinish",
    "cudaDeviceSynchronize": "urQueueFinish",
    "cudaMalloc": "urUSMDeviceAlloc",
    "cudaFree": "urUSMFree",
}
DEVICE_WORK = {  # PTI's names: the copy's kind, then source and destination memory
    "Memcpy HtoD (Pageable -> Device)": "Memcpy M2D (MEMORY(Unknown) -> DEVICE)",
    "Memcpy DtoH (Device -> Pageable)": "Memcpy D2M (DEVICE -> MEMORY(Unknown))",
    "Memset (Device)": "Memset (0 -> DEVICE)",
}


def as_xpu_capture(document: dict) -> dict:
    """The CUDA capture's events as Kineto's XPU profiler writes them, on an Intel Data Center GPU Max."""
    document["deviceProperties"] = [{"id": 0, "name": "Intel(R) Data Center GPU Max 1550"}]
    for event in document["traceEvents"]:
        category = event.get("cat")
        if category in ("cuda_runtime", "cuda_driver"):
            event["cat"] = "xpu_runtime"
            name = event["name"]
            event["name"] = RUNTIME_CALLS.get(name, f"ur{name[4:]}" if name.startswith("cuda") else name)
        elif category in ("gpu_memcpy", "gpu_memset"):
            event["name"] = DEVICE_WORK[event["name"]]
    return document


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> tuple[Path, Path]:
    """The real CUDA capture, and its rewrite as an Intel GPU's (written once for the module)."""
    xpu = tmp_path_factory.mktemp("xpu") / "xpu.pt.trace.json.gz"
    xpu.write_bytes(gzip.compress(json.dumps(as_xpu_capture(json.loads(gzip.open(CUDA_CAPTURE).read()))).encode()))
    return CUDA_CAPTURE, xpu


def test_an_intel_gpu_s_capture_gives_the_verdicts_of_the_cuda_capture_of_the_same_work(run, captures):
    """The host blocked in copies through pageable memory (PT009), the loader in the training process (PT002): the
    same findings at the same cost, and the device's idle time given the same causes."""
    (cuda, cuda_found), (xpu, xpu_found) = (scanned(run, str(path)) for path in captures)
    assert xpu["device"] == "Intel(R) Data Center GPU Max 1550"
    assert {rule: f["severity"] for rule, f in xpu_found.items()} == {
        rule: f["severity"] for rule, f in cuda_found.items()
    }
    for rule, finding in cuda_found.items():
        assert xpu_found[rule]["impact"]["share"] == pytest.approx(finding["impact"]["share"], abs=0.005), rule
    assert xpu["idle"] == pytest.approx(cuda["idle"], abs=0.005)
    assert xpu["idle"]["blocking_copy"] > 0.04 and xpu["idle"]["sync"] > 0
    blocking = xpu_found["PT009"]
    assert blocking["severity"] == "error" and "urEnqueueUSMMemcpy" in blocking["message"]  # its gain predicted
    assert blocking["gain"]["kind"] == "predicted"
    assert blocking["fix"]["changes"] == {"pin_memory": True, "pin_readback": True}  # inputs and read-back pageable
    assert {e["name"] for e in blocking["evidence"]} <= set(DEVICE_WORK.values())
    fixes = " ".join(f["fix"]["text"] for f in xpu_found.values())
    assert "torch.cuda" not in fixes and "CUDA" not in fixes  # no CUDA API is advised for an Intel GPU


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("urEnqueueKernelLaunch", Kind.RUNTIME),
        ("piEnqueueKernelLaunch", Kind.RUNTIME),
        ("urEnqueueUSMFill2D", Kind.RUNTIME),
        ("urQueueFinish", Kind.SYNC),
        ("piEventsWait", Kind.SYNC),
        ("zeEventHostSynchronize", Kind.SYNC),
        ("zeCommandQueueSynchronize", Kind.SYNC),
        ("Memcpy M2D (MEMORY(Unknown) -> DEVICE)", Kind.H2D),
        ("Memcpy H2D (HOST -> DEVICE)", Kind.H2D),
        ("Memcpy D2M (DEVICE -> MEMORY(Unknown))", Kind.D2H),
        ("Memcpy D2D (DEVICE -> DEVICE)", Kind.D2D),
        ("urEnqueueMemBufferMap", Kind.OTHER),  # not among the calls Kineto links to device work
    ],
)
def test_the_sycl_runtime_s_calls_and_pti_s_copies_are_named_what_they_are(name, kind):
    assert vocabulary.kind_of_name(name) == kind


@pytest.mark.parametrize(
    ("name", "launches"),
    [
        ("urEnqueueUSMMemcpy", True),
        ("urEnqueueUSMMemcpy2D", True),
        ("piextUSMEnqueueMemset", True),
        ("urEnqueueCooperativeKernelLaunchExp", True),
        ("urEnqueueUSMMemcpyToGlobalVariable", False),  # not among the calls Kineto links to device work
        ("urQueueFinish", False),
    ],
)
def test_the_sycl_runtime_s_enqueues_of_copies_and_fills_start_device_work(name, launches):
    """A copy call's name says it copies (a runtime call on the host, a copy on the device); that it starts device
    work is what tells the host's time in it from other work."""
    assert bool(vocabulary.LAUNCH.match(name)) is launches


@pytest.mark.parametrize(
    ("name", "pageable"),
    [
        ("Memcpy M2D (MEMORY(Unknown) -> DEVICE)", True),
        ("Memcpy D2M (Device -> Host (User allocated))", True),  # a later PTI's words for the same memory
        ("Memcpy H2D (HOST -> DEVICE)", False),  # the runtime's own host allocation: pinned
        ("Memcpy D2H (DEVICE -> HOST)", False),
    ],
)
def test_a_copy_to_or_from_the_program_s_own_memory_is_a_pageable_one(name, pageable):
    assert bool(vocabulary.PAGEABLE.search(name)) is pageable


def test_a_copy_engine_s_thread_is_told_by_pti_s_words_for_a_direction_and_not_by_letters_inside_a_word():
    assert base.device_thread_role("M2D link") == Role.H2D and base.device_thread_role("D2M link") == Role.D2H
    assert base.device_thread_role("im2d_queue") == Role.DEVICE


def test_the_sycl_runtime_s_memory_calls_are_allocations_and_its_kernel_enqueues_launch_one_kernel():
    assert all(vocabulary.ALLOCATION.match(n) for n in ("urUSMDeviceAlloc", "urUSMHostAlloc", "zeMemAllocShared"))
    assert all(vocabulary.DEALLOCATION.match(n) for n in ("urUSMFree", "piextUSMFree", "zeMemFree"))
    assert vocabulary.KERNEL_LAUNCH.match("urEnqueueKernelLaunchCustomExp")
    assert not vocabulary.KERNEL_LAUNCH.match("urEnqueueUSMMemcpy")
