"""Serving and inference: the engine's iterations are the steps, and a step marker holding several loop iterations
(a batch fetched each) is split into them; a model's repeating layers inside one iteration are not iterations."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import DATA, complete

from perftool.analysis.family import job_kind
from perftool.analysis.steps import detect_steps
from perftool.pipeline.read import load_trace

KINETO = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
HOST = {"pid": 100, "tid": 100}


def _labels() -> list:
    return [
        {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]


def _layers(t: float, count: int) -> list:
    """``count`` identical layers, each an op on the host and its kernel."""
    events = []
    for layer in range(count):
        at = t + layer * 100
        events += [
            complete("aten::linear", at, 20, cat="cpu_op", **HOST),
            complete("sm90_gemm", at + 25, 70, cat="kernel", pid=0, tid=7),
        ]
    return events


@pytest.mark.parametrize(
    "marker",
    [
        "execute_new_2_cached_30",
        "execute_context_2(96_1024)_generation_30(30)",
        "step[DECODE bs=32]",
        "step[PREBUILT bs=32]",  # a disaggregated decode server's iteration over prefilled requests
        "step[TARGET_VERIFY bs=8]",  # speculative decoding's verification
    ],
    ids=["vllm", "vllm-2025", "sglang", "sglang-prebuilt", "sglang-verify"],
)
def test_a_serving_engine_s_iterations_are_its_steps(write_trace, marker):
    events = _labels()
    for step in range(5):
        t = step * 5_000.0
        events += [complete(marker, t, 4_000, cat="user_annotation", **HOST), *_layers(t + 10, 36)]
    trace = load_trace(write_trace(KINETO | {"traceEvents": events}))
    steps = detect_steps(trace)
    assert steps.count == 5 and steps.inferred is None and steps.within is None
    assert job_kind(trace) == "serving"  # by its iterations' annotations alone: its ops are any model's


def test_an_engine_step_inside_another_engine_marker_is_one_step(write_trace):
    """SGLang's scheduler step inside the model execution's annotation: one iteration, not two steps."""
    events = _labels() + [
        complete("execute_32_context_0(sq0)_generation_32(sq32)", 0, 4_000, cat="user_annotation", **HOST),
        complete("step[DECODE bs=32]", 10, 3_900, cat="user_annotation", **HOST),
        *_layers(20, 36),
    ]
    assert detect_steps(load_trace(write_trace(KINETO | {"traceEvents": events}))).count == 1


def test_a_step_marker_holding_several_fetched_batches_is_split_into_them(write_trace, run):
    events = _labels() + [complete("ProfilerStep#6", 0, 30_000, cat="user_annotation", **HOST)]
    for batch in range(6):
        t = 10 + batch * 5_000.0
        fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        events += [complete(fetch, t, 3_000, cat="user_annotation", **HOST), *_layers(t + 3_100, 12)]
    path = write_trace(KINETO | {"traceEvents": events})
    steps = detect_steps(load_trace(path))
    assert steps.count == 6 and steps.within == "ProfilerStep#6"
    said = " ".join(run("scan", path).output.split())
    assert "ProfilerStep#6 holds 6 iterations, told by the host's repeating calls" in said


def test_a_model_s_repeating_layers_do_not_split_its_one_step(write_trace):
    events = _labels() + [complete("ProfilerStep#3", 0, 4_000, cat="user_annotation", **HOST), *_layers(10, 36)]
    steps = detect_steps(load_trace(write_trace(KINETO | {"traceEvents": events})))
    assert steps.count == 1 and steps.within is None


def test_what_a_job_is_reads_from_its_ops():
    from perftool.pipeline.read import load_trace as load

    assert job_kind(load(DATA / "real" / "resnet50_pt18_workers0.json.gz")) == "training"
    assert job_kind(load(DATA / "real" / "mtia_inference.json.gz")) == "inference"
    assert job_kind(load(DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz")) == "serving"


def test_a_serving_capture_of_too_few_iterations_is_told_how_its_engine_profiles(run):
    """An engine starts and stops the profiler itself: the note asks for more of its iterations the engine's way,
    not for a training loop's prof.step(); a training capture keeps that hint."""
    serving = json.loads(run("info", DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz",
                             "--format", "json").stdout)["caveats"]  # fmt: skip
    (note,) = [c for c in serving if "steady step" in c]
    assert "SGLang's profiler (SGLANG_TORCH_PROFILER_DIR, POST /start_profile with start_step and num_steps)" in note
    assert "vLLM" not in note and "prof.step()" not in note  # the engine the trace names, SGLang, alone
    vllm = json.loads(run("info", DATA / "real" / "b200_vllm_gptoss_eager_tp8_rank0.json.gz", "--format",
                          "json").stdout)["caveats"]  # fmt: skip
    (note,) = [c for c in vllm if "steady step" in c]
    assert "llm.start_profile()" in note and "delay_iterations and max_iterations" in note and "SGLang" not in note
    training = json.loads(run("info", DATA / "real" / "rocm_mi250_minitoy.json.gz", "--format", "json").stdout)
    (note,) = [c for c in training["caveats"] if "steady step" in c]
    assert "prof.step() at the end of every iteration" in note and "start_profile" not in note


def test_an_engine_that_replays_graphs_is_never_told_to_use_them(run):
    """The SGLang decode window replays its iteration as one HIP graph: the host-bound advice is the host work
    around the replays (overlap scheduling), not graphs."""
    result = run("scan", DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz", "--format", "json")
    findings = [f for trace in json.loads(result.stdout)["traces"] for f in trace["findings"]]
    (fix,) = [f["fix"]["text"] for f in findings if f["rule_id"] == "PT001"]
    assert fix.startswith("SGLang replays its iterations as HIP graphs already")  # an MI300X's
    assert "--enforce-eager" not in fix and "overlap scheduler on (no --disable-overlap-schedule)" in fix
    assert "--cuda-graph-max-bs" in fix and "vLLM" not in fix


def _fetched_batches(at: float, count: int) -> list:
    """``count`` loop iterations from ``at``, 5 ms apart, each fetching its batch then running 12 layers."""
    fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    events = []
    for batch in range(count):
        t = at + batch * 5_000.0
        events += [complete(fetch, t, 3_000, cat="user_annotation", **HOST), *_layers(t + 3_100, 12)]
    return events


def test_three_step_markers_are_the_steps_whatever_the_last_holds(write_trace):
    markers = [complete(f"ProfilerStep#{n}", n * 5_000.0, 4_900, cat="user_annotation", **HOST) for n in range(2)]
    markers.append(complete("ProfilerStep#2", 10_000, 30_000, cat="user_annotation", **HOST))
    events = _labels() + markers + _layers(10, 12) + _layers(5_010, 12) + _fetched_batches(10_010, 6)
    steps = detect_steps(load_trace(write_trace(KINETO | {"traceEvents": events})))
    assert (steps.count, steps.within) == (3, None)


def test_a_marker_s_iterations_are_those_inside_it(write_trace):
    """The loop runs on after the capture's one step marker ends: those iterations are not the marker's."""
    marker = complete("ProfilerStep#6", 0, 30_000, cat="user_annotation", **HOST)
    events = _labels() + [marker, *_fetched_batches(10, 6), *_fetched_batches(30_010, 3)]
    steps = detect_steps(load_trace(write_trace(KINETO | {"traceEvents": events})))
    assert (steps.count, steps.within) == (6, "ProfilerStep#6")


def test_steps_are_inferred_after_start_up(write_trace):
    """No step markers; the context created (a slow ``cuInit``) while the loop fetches its first batch: the steps are
    the iterations after start-up, from the second fetch."""
    init = complete("cuInit", 100, 1_000, cat="cuda_driver", **HOST)
    events = _labels() + [init, *_fetched_batches(10, 7)]
    steps = detect_steps(load_trace(write_trace(KINETO | {"traceEvents": events})))
    assert steps.inferred is not None and (steps.count, steps.start[0]) == (6, 5_010)


def _iterations(*kinds: tuple[str, int, str]) -> dict:
    """An engine's iterations, one after another: each (its marker, its layers, the kernel its attention runs)."""
    events, t = _labels(), 0.0
    for marker, layers, attention in kinds:
        length = layers * 100 + 100
        events += [complete(marker, t, length, cat="user_annotation", **HOST), *_layers(t + 10, layers)]
        events.append(complete(attention, t + 20, 10, cat="cpu_op", **HOST))
        t += length + 50
    return KINETO | {"traceEvents": events}


PREFILL, DECODE = (
    ("step[EXTEND bs=4 toks=4096]", 360, "prefill_attention"),
    ("step[DECODE bs=4]", 36, "decode_attention"),
)


@pytest.mark.parametrize(
    ("kinds", "warmup"),
    [
        ([PREFILL, DECODE, DECODE, DECODE, DECODE], 0),  # a prefill is ten times a decode and runs its own kernels
        ([PREFILL, DECODE, PREFILL, DECODE, DECODE], 0),
        ([(DECODE[0], 72, DECODE[2]), PREFILL, DECODE, DECODE, DECODE], 1),  # a decode twice the others' is slow
        ([(DECODE[0], 44, PREFILL[2]), PREFILL, DECODE, DECODE, DECODE], 1),  # a fifth slower, an op no decode runs
        ([(DECODE[0], 44, DECODE[2]), PREFILL, DECODE, DECODE, DECODE], 0),  # a fifth slower alone: steady
        ([(DECODE[0], 72, DECODE[2]), DECODE, DECODE, DECODE, DECODE], 1),  # one kind: as for any steps
    ],
    ids=["prefill-first", "prefills-between", "slow-decode-first", "first-call", "no-first-call", "decodes-only"],
)
def test_an_engine_s_iterations_are_judged_for_warm_up_against_their_own_kind(write_trace, kinds, warmup):
    """Slower by half than its kind's typical step, or by a tenth with an op no later step of its kind calls."""
    steps = detect_steps(load_trace(write_trace(_iterations(*kinds))))
    assert steps.count == len(kinds) and steps.warmup == warmup
    one_kind = all(marker == DECODE[0] for marker, _, _ in kinds)
    assert steps.modes == (None if one_kind else [marker[5:11] for marker, _, _ in kinds])


@pytest.mark.parametrize(
    ("markers", "modes"),
    [
        (["step[EXTEND bs=2 toks=100]", "step[DECODE bs=2]"], ["EXTEND", "DECODE"]),
        (["execute_new_2_cached_0", "execute_new_0_cached_2"], ["new requests", "running requests"]),
        (
            [
                "execute_context_2(96)_generation_0(0)",
                "execute_context_0(0)_generation_2(2)",
                "execute_2_context_1(sq1sk1sqsq1sqsk1)_generation_1(sq1sk9sqsq1sqsk9)",
            ],
            ["prefill", "decode", "prefill and decode"],
        ),  # fmt: skip
        ([f"execute_new_{'9' * 5000}_cached_1", "execute_new_000_cached_2"], ["new requests", "running requests"]),
        (["step[DECODE bs=2]", "step[DECODE bs=4]"], None),  # one kind
        (["step[DECODE bs=2]", "ProfilerStep#3"], None),  # a marker naming no kind
    ],
)
def test_an_engine_s_iterations_are_told_apart_by_the_kind_its_markers_name(write_trace, markers, modes):
    from perftool.analysis.serving import iteration_modes

    events = [complete(m, i * 1_000.0, 900, cat="user_annotation", **HOST) for i, m in enumerate(markers)]
    trace = load_trace(write_trace(KINETO | {"traceEvents": _labels() + events}))
    rows = np.flatnonzero(trace.name_matches(re.compile("^(step|execute|Profiler)")))
    assert iteration_modes(trace, rows[np.argsort(trace.ts[rows])]) == modes


def test_a_prefill_and_a_decode_cut_from_one_serving_capture_read_as_its_two_iterations(run, write_trace):
    """The real SGLang windows on their shared clock: a prefill then a decode replayed as one graph, the device busy
    throughout; the prefill was the decode's warm-up (ten times its length, kernels of its own) and the step 10 ms."""
    import gzip

    events, seen = [], set()
    for window in ("prefill", "decode"):
        path = DATA / "real" / f"sglang_mi300x_qwen3_8b_{window}_window.json.gz"
        for event in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
            key = json.dumps(event, sort_keys=True)
            events += [] if key in seen else [event]
            seen.add(key)
    scanned = json.loads(run("scan", write_trace({"traceEvents": events}), "--format", "json").stdout)["traces"][0]
    assert scanned["steps"] == 2 and scanned["warmup_durations_us"] == [] and scanned["findings"] == []
    assert scanned["step_durations_us"] == pytest.approx([494_002, 10_468], abs=1)
    assert scanned["metrics"]["device.busy_fraction"] > 0.99
    (kinds,) = [c for c in scanned["caveats"] if "kinds" in c]
    assert kinds.endswith(
        "of 2 kinds, which the mean step mixes: prefill 1 step of 494.002 ms, decode 1 step of 10.468 ms"
    )


def test_the_kinds_of_an_engine_s_steady_iterations_are_said_with_their_mean_steps(run, write_trace):
    """A slow first decode is warm-up; the steady prefill and three decodes are each said with their mean step."""
    kinds = [(DECODE[0], 72, DECODE[2]), PREFILL, DECODE, DECODE, DECODE]
    scanned = json.loads(run("scan", write_trace(_iterations(*kinds)), "--format", "json").stdout)["traces"][0]
    assert scanned["steps"] == 4 and len(scanned["warmup_durations_us"]) == 1
    (said,) = [c for c in scanned["caveats"] if "kinds" in c]
    prefill, decode = scanned["step_durations_us"][0], scanned["step_durations_us"][1]
    assert said.endswith(f"EXTEND 1 step of {prefill / 1e3:.3f} ms, DECODE 3 steps of {decode / 1e3:.3f} ms")


def test_steady_iterations_of_one_kind_say_nothing_of_kinds():
    """Where warm-up took every iteration of one kind, the steady ones are of one kind: no mean mixes kinds."""
    from perftool.analysis.confidence import _iteration_kinds
    from perftool.analysis.steps import Steps

    starts = np.array([0.0, 100.0, 200.0, 300.0])
    steps = Steps(starts, starts + 90, 1, modes=["EXTEND", "DECODE", "DECODE", "DECODE"])
    assert _iteration_kinds(steps) is None
    assert _iteration_kinds(Steps(starts, starts + 90, 0, modes=steps.modes)) == (
        "the engine's steady iterations are of 2 kinds, which the mean step mixes: EXTEND 1 step of 90.0 µs, "
        "DECODE 3 steps of 90.0 µs"
    )
