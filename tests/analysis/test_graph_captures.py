"""Replayed graph kernels given to the ops that made them, from the engine's traces of the graph's capture kept beside
the profile (``capture_traces/``): one for one by kernel name where the capture names them (HIP), by count on one
stream where it does not (CUDA); never where the graphs that fit give other ops."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA

from perftool.analysis.graph_captures import capture_files, captured_graphs, replay_ops
from perftool.dialects.vocabulary import GRAPH_LAUNCH
from perftool.diff.profile import profile
from perftool.pipeline.read import load_trace
from perftool.roofline.figures import roofline

DECODE = DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz"
CAPTURE = DATA / "real" / "sglang_mi300x_qwen3_8b_graph_capture_bs32.json.gz"  # the same run's bs-32 decode graph


def _said(result) -> str:
    return " ".join(result.output.split())


def test_the_real_decode_step_s_kernels_are_given_their_ops_by_its_graph_s_capture(tmp_path, run):
    """SGLang's decode of 32 sequences on an MI300X, one HIP graph of 544 kernels, beside its capture
    (``--enable-profile-cuda-graph`` writes ``capture_traces/bs_32_rank0.json.gz``): alone, under 1% of its device
    time has an op with shapes; beside the capture, the replay's GEMMs are aten::mm of 32 tokens, memory-bound, and its
    paged attention (two kernels a layer: one call each) reads the 32 sequences' 32,785 keys the step's annotation
    counts, memory-bound too."""
    alone = roofline(load_trace(DECODE))
    assert alone.modelled_share < 0.01
    shutil.copy(DECODE, tmp_path / DECODE.name)
    (tmp_path / "capture_traces").mkdir()
    shutil.copy(CAPTURE, tmp_path / "capture_traces" / "bs_32_rank0.json.gz")
    trace = load_trace(tmp_path / DECODE.name)
    ops = replay_ops(trace)
    assert ops.replays == 1 and ops.unmatched == 0 and ops.spans.size == 544
    assert ops.used == ["capture_traces/bs_32_rank0.json.gz"]
    found = roofline(trace)
    assert found.modelled_share > 0.95 and found.dtype == "bf16"  # its GEMMs, norms, activations and attention
    (up,) = [op for op in found.ops if op.name == "aten::mm" and op.shapes == "32x4096, 4096x24576"]
    assert up.calls == 36 and up.flops == 36 * 2 * 32 * 4096 * 24576 and up.bound == "memory"
    (attention,) = [op for op in found.ops if op.name.startswith("sglang_profiler::attention_paged_attention_ragged")]
    kernels = trace.name_matches(re.compile(r"^void paged_attention_ll4mi_"), ops.spans)
    assert attention.calls == 36 and attention.device_us == pytest.approx(float(trace.dur[ops.spans[kernels]].sum()))
    assert attention.flops == 36 * 4 * 32 * 128 * 32_785 and attention.bound == "memory"
    assert attention.bytes == 36 * (2 * 32 * 32 * 128 * 2 + 2 * 32_785 * 8 * 128 * 2)
    by_op = profile(trace).tables["op"]  # diff --by op: the outermost ops as captured, one call each a replay
    paged = by_op.keys.index("sglang_profiler::attention_paged_attention_ragged")  # the numeric suffix normalised
    assert by_op.calls[paged] == 36 and by_op.paced_us[paged] == pytest.approx(attention.device_us, rel=1e-5)
    assert all(kind.name for kind in found.calls.kinds)  # a launch made in no modelled op is no call
    said = _said(run("info", str(tmp_path / DECODE.name)))
    assert "the roofline and diff --by op give each replayed kernel to the op that launched it as the graph" in said
    assert "capture_traces/bs_32_rank0.json.gz" in said


def test_a_serving_engine_s_replay_without_its_capture_beside_says_how_to_keep_it(run):
    """A serving engine's profile is told of its capture traces and of running without graphs, in the terms of the
    engine its trace names (SGLang's here); a training job's (its own CUDA graphs) is told PyTorch's way alone."""
    said = _said(run("info", str(DECODE)))
    assert "whose kernels no op of their own names" in said
    assert "a capture_traces/ folder: SGLang's --enable-profile-cuda-graph), or" in said
    assert "graphs off (SGLang's --disable-cuda-graph)" in said and "vLLM" not in said
    training = _said(run("info", str(DATA / "real" / "ddp_v100_rank1.json.gz")))
    assert "whose kernels no op of their own names" in training and "capture_traces/" not in training
    assert 'graphs off (torch.compile without mode="reduce-overhead")' in training
    assert "vLLM" not in training and "SGLang" not in training


def _capture(launches: list[tuple[str, tuple[int, int, int]]], named: bool, size: int | None = None) -> dict:
    """A capture trace: between a stream's begin and end of capture, one aten::mm (M x K by K x N, bf16) per launch,
    the kernel launched inside it (its name in the launch's args where ``named``, as HIP's runtime calls write it),
    all inside the engine's annotation of the batch ``size`` it captures for, where given; after it, a kernel
    launched eagerly."""
    events: list[dict] = [
        {"ph": "X", "name": "cudaStreamBeginCapture", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": 0, "dur": 2},
    ]
    if size is not None:
        events.append({"ph": "X", "name": f"capture_{size}_DECODE", "cat": "user_annotation", "pid": 1, "tid": 1,
                       "ts": -5, "dur": 20 + len(launches) * 100})  # fmt: skip
    for k, (kernel, (m, n, inner)) in enumerate(launches):
        at = 10 + k * 100
        events.append({"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": at, "dur": 50,
                       "args": {"Input Dims": [[m, inner], [inner, n]],
                                "Input type": ["c10::BFloat16", "c10::BFloat16"]}})  # fmt: skip
        events.append({"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1,
                       "ts": at + 10, "dur": 5, "args": {"kernel": kernel} if named else {}})  # fmt: skip
    end = 10 + len(launches) * 100
    events.append({"ph": "X", "name": "cudaStreamEndCapture", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": end,
                   "dur": 2})  # fmt: skip
    events.append(
        {
            "ph": "X",
            "name": "cudaLaunchKernel",
            "cat": "cuda_runtime",
            "pid": 1,
            "tid": 1,
            "ts": end + 50,
            "dur": 5,
            "args": {"kernel": "after_the_capture"} if named else {},
        }
    )  # eager work: no graph's node
    return {"schemaVersion": 1, "traceEvents": events}


def _marked_steps(events: list[dict], work: int) -> list[int]:
    """The starts of 4 steps of 500 µs and ``work`` µs more each, their ProfilerStep#N markers added to ``events``."""
    length = 500 + work
    for step in range(4):
        events.append({"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation", "pid": 1, "tid": 1,
                       "ts": step * length, "dur": length - 10})  # fmt: skip
    return [step * length for step in range(4)]


def _replay(kernels: list[str], streams: int = 1, iteration: str | None = None) -> dict:
    """A profile of 4 decode steps, each one graph launch replaying ``kernels`` (100 µs each, on ``streams``
    streams in turn) after 200 µs of host work, inside the engine's ``iteration`` annotation where given."""
    events: list[dict] = []
    for step, at in enumerate(_marked_steps(events, 110 * len(kernels))):
        if iteration is not None:
            events.append({"ph": "X", "name": iteration, "cat": "user_annotation", "pid": 1, "tid": 1, "ts": at + 100,
                           "dur": 300})  # fmt: skip
        events.append({"ph": "X", "name": "cudaGraphLaunch", "cat": "cuda_runtime", "pid": 1, "tid": 1,
                       "ts": at + 200, "dur": 10})  # fmt: skip
        events.append({"ph": "X", "name": "decode_graph", "cat": "user_annotation", "pid": 1, "tid": 1,
                       "ts": at + 190, "dur": 30})  # fmt: skip
        events.append({"ph": "s", "id": step + 1, "pid": 1, "tid": 1, "ts": at + 200, "cat": "ac2g", "name": "ac2g"})
        for k, kernel in enumerate(kernels):
            stream = 7 + k % streams
            start = at + 250 + k * 110
            events.append({"ph": "X", "name": kernel, "cat": "kernel", "pid": 0, "tid": stream, "ts": start,
                           "dur": 100})  # fmt: skip
            events.append({"ph": "f", "id": step + 1, "pid": 0, "tid": stream, "ts": start, "cat": "ac2g",
                           "name": "ac2g", "bp": "e"})  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events}


GEMMS = [("gemm_a", (32, 4096, 4096)), ("gemm_b", (32, 1024, 4096)), ("gemm_a", (32, 4096, 4096))]


def _profile(tmp_path: Path, replay: dict, *captures: dict) -> Path:
    """The profile ``replay`` with ``captures`` in ``capture_traces/`` beside it."""
    (tmp_path / "capture_traces").mkdir(parents=True)
    for k, capture in enumerate(captures):
        (tmp_path / "capture_traces" / f"bs_{k}_rank0.json").write_text(json.dumps(capture))
    path = tmp_path / "profile.pt.trace.json"
    path.write_text(json.dumps(replay))
    return path


@pytest.mark.parametrize("named", [True, False])
def test_a_replay_takes_its_kernels_ops_from_the_capture_one_for_one(tmp_path, named):
    """By name where the capture names its kernels; by count, on one stream, where it does not (CUDA's launches)."""
    path = _profile(tmp_path, _replay([kernel for kernel, _ in GEMMS]), _capture(GEMMS, named))
    (graph,) = captured_graphs(tmp_path / "capture_traces" / "bs_0_rank0.json")
    assert [launch.op for launch in graph.launches] == ["aten::mm"] * 3
    assert [launch.kernel for launch in graph.launches] == (["gemm_a", "gemm_b", "gemm_a"] if named else [""] * 3)
    trace = load_trace(path)
    assert replay_ops(trace).unmatched == 0 and replay_ops(trace).spans.size == 4 * 3
    found = roofline(trace)
    assert found.modelled_share == 1.0
    (region,) = found.regions  # each replayed kernel counted in the annotation around the launch that replayed it
    assert region.name == "decode_graph" and region.calls == sum(op.calls for op in found.ops) == 3 * found.steps
    flops = {op.shapes: op.flops / op.calls for op in found.ops}
    assert flops == {"32x4096, 4096x4096": 2 * 32 * 4096 * 4096, "32x4096, 4096x1024": 2 * 32 * 1024 * 4096}


def test_kernels_of_other_names_or_unnamed_ones_on_several_streams_are_no_capture_s(tmp_path, run):
    renamed = _profile(tmp_path / "renamed", _replay(["gemm_a", "gemm_c", "gemm_a"]), _capture(GEMMS, True))
    assert replay_ops(load_trace(renamed)).unmatched == 4
    said = _said(run("info", str(renamed)))
    assert "The graphs captured in capture_traces/bs_0_rank0.json beside it hold none whose launches are" in said
    streams = _profile(tmp_path / "streams", _replay(["gemm_a", "gemm_b", "gemm_a"], streams=2), _capture(GEMMS, False))
    assert replay_ops(load_trace(streams)).spans.size == 0  # CUDA's capture names no kernel: order holds on one stream


def test_graphs_that_fit_alike_give_their_ops_only_where_their_ops_agree(tmp_path):
    """Two batch sizes whose graphs run the same kernels: their ops' shapes tell them apart, so neither is taken;
    the same graph captured twice gives one answer."""
    wider = [(kernel, (64, n, inner)) for kernel, (_, n, inner) in GEMMS]
    kernels = [kernel for kernel, _ in GEMMS]
    apart = _profile(tmp_path / "apart", _replay(kernels), _capture(GEMMS, True), _capture(wider, True))
    assert replay_ops(load_trace(apart)).unmatched == 4
    twice = _profile(tmp_path / "twice", _replay(kernels), _capture(GEMMS, True), _capture(GEMMS, True))
    assert replay_ops(load_trace(twice)).unmatched == 0


def test_a_capture_trace_that_does_not_read_is_named_and_the_others_still_serve(tmp_path, run):
    """A cut capture trace is named as not read; TraceLens's record of the captures beside them (each one's file,
    batch size and mode) is no capture trace, and is not read at all."""
    path = _profile(tmp_path, _replay([kernel for kernel, _ in GEMMS]), _capture(GEMMS, True))
    (tmp_path / "capture_traces" / "cut.json").write_text('{"traceEvents": [')
    record = [{"file": "bs_0_rank0.json", "batch_size": 1, "mode": "FULL"}]
    (tmp_path / "capture_traces" / "execution_details.json").write_text(json.dumps(record, indent=2))
    assert [p.name for p in capture_files(str(path), {})] == ["bs_0_rank0.json", "cut.json"]
    result = run("scan", str(path), "--fail-on", "never", "--format", "json")
    assert result.exit_code == 0
    (said,) = [c for c in json.loads(result.stdout)["traces"][0]["caveats"] if "graph replays" in c]
    assert "the roofline and diff --by op give each replayed kernel to the op that launched it" in said
    assert f"(not read: {tmp_path / 'capture_traces' / 'cut.json'}: truncated JSON" in said
    assert "execution_details.json" not in said


# an engine's iteration of so many tokens, as its annotations count them: vLLM's detailed annotation (the tokens
# first), vLLM's default (its prefills' tokens, then its decodes'), SGLang's decode (its batch) and prefill (its tokens)
ITERATIONS = {
    "vllm detailed": lambda tokens: f"execute_{tokens}_context_0(sq0)_generation_{tokens}(sq{tokens})",
    "vllm": lambda tokens: f"execute_context_1({tokens - 4})_generation_4(4)",
    "sglang": lambda tokens: f"step[DECODE bs={tokens}]",
    "sglang prefill": lambda tokens: f"step[EXTEND bs=2 toks={tokens}]",
}


@pytest.mark.parametrize("style", list(ITERATIONS))
@pytest.mark.parametrize(("tokens", "rows"), [(20, 32), (16, 16), (40, None), (None, None)])
def test_batches_captured_alike_are_told_apart_by_the_tokens_of_the_step_replaying_them(tmp_path, tokens, rows, style):
    """Graphs captured for 16 and for 32 tokens run the same kernels: a step of 20 tokens replays the one for 32
    (the smallest that holds it), one of 16 that for 16; one of 40 fits neither, and a step that names no tokens
    leaves it unclear. The tokens are the iteration's as each engine's annotation counts them (vLLM's default one:
    its prefills' and its decodes' together)."""
    kernels = [kernel for kernel, _ in GEMMS]
    sixteen = [(kernel, (16, n, inner)) for kernel, (_, n, inner) in GEMMS]
    iteration = ITERATIONS[style](tokens) if tokens is not None else None
    path = _profile(tmp_path, _replay(kernels, iteration=iteration), _capture(sixteen, True, 16),
                    _capture(GEMMS, True, 32))  # fmt: skip
    found = roofline(load_trace(path))
    if rows is None:
        assert found.modelled_share == 0.0
        return
    assert {op.shapes for op in found.ops} == {f"{rows}x4096, 4096x4096", f"{rows}x4096, 4096x1024"}


def test_a_replay_s_tokens_are_those_of_the_innermost_step_around_its_launch(write_trace):
    """Of the engine's annotations (vLLM's execute_N_..., SGLang's step[DECODE bs=N]), the innermost one around the
    launch call names its tokens (the one around an inner one that ended before it, where it holds the launch); one
    that ended before it names none."""
    from perftool.analysis.serving import named_numbers
    from perftool.dialects.vocabulary import ENGINE_STEP_TOKENS

    def step(tokens: int, ts: float, dur: float) -> dict:
        return {"ph": "X", "name": f"execute_{tokens}_context_0(sq0)_generation_{tokens}(sq{tokens})",
                "cat": "user_annotation", "pid": 1, "tid": 1, "ts": ts, "dur": dur}  # fmt: skip

    launch = {"ph": "X", "name": "cudaGraphLaunch", "cat": "cuda_runtime", "pid": 1, "tid": 1, "dur": 10}
    decode = {"ph": "X", "name": "step[DECODE bs=8]", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 2_000,
              "dur": 500}  # fmt: skip
    events = [step(64, 0, 1_000), step(32, 100, 300), step(16, 1_100, 50), decode, {**launch, "ts": 200},
              {**launch, "ts": 500}, {**launch, "ts": 1_200}, {**launch, "ts": 2_100}]  # fmt: skip
    trace = load_trace(write_trace({"schemaVersion": 1, "traceEvents": events}))
    launches = [int(row) for row in np.flatnonzero(trace.name_matches(GRAPH_LAUNCH))]
    assert named_numbers(trace, np.array(launches), ENGINE_STEP_TOKENS) == [32, 64, None, 8]


FLUX_STEP = DATA / "real" / "flux1_aiter_mi300x_step.json.gz"
FLUX_WARMUP = DATA / "real" / "flux1_aiter_mi300x_warmup_compile_cudagraph.json.gz"


def test_a_compiled_model_s_graph_replays_take_their_ops_from_its_warm_up_s_capture(tmp_path):
    """FLUX.1 on an MI300X, torch.compile'd with CUDA-graph trees: its warm-up records the graph (994 launches), its
    step replays it four times (993 kernels each: the capture's last GEMM shows no kernel). With the warm-up kept in
    ``capture_traces/`` beside it, the step's GEMMs are aten::mm and aten::addmm with their shapes, and its attention
    aiter's fmha_v3_fwd over 4,608 tokens of 24 heads, not causal: 2·24·4608²·(128 + 128) FLOPs a call, 57 a replay
    (FLUX.1's 19 double- and 38 single-stream blocks)."""
    alone = roofline(load_trace(FLUX_STEP))
    assert alone.modelled_share < 0.06
    shutil.copy(FLUX_STEP, tmp_path / "profile_trace_rank_0.json.gz")
    (tmp_path / "capture_traces").mkdir()
    shutil.copy(FLUX_WARMUP, tmp_path / "capture_traces" / "capture_trace_rank_0.json.gz")
    trace = load_trace(tmp_path / "profile_trace_rank_0.json.gz")
    ops = replay_ops(trace)
    assert ops.replays == 4 and ops.unmatched == 0 and ops.spans.size == 4 * 993
    found = roofline(trace)
    assert found.modelled_share > 0.8 and found.mfu > 0.3
    attention, gemm = sorted(found.ops, key=lambda op: -op.device_us)[:2]
    assert gemm.name == "aten::mm" and gemm.shapes.startswith("4608x15360, 15360x3072") and gemm.calls == 4 * 38
    assert attention.name == "aiter::fmha_v3_fwd" and attention.calls == 4 * 57
    assert attention.flops == pytest.approx(4 * 57 * 2 * 24 * 4608**2 * (128 + 128))


@pytest.mark.parametrize(("count", "unseen", "fits"), [(5, 1, True), (5, 2, False), (250, 2, True), (250, 3, False)])
def test_a_replay_may_lack_a_few_of_the_captured_launches_where_the_capture_names_them(tmp_path, count, unseen, fits):
    """Of a graph's named launches, a few may show no kernel in the replay (1% of them, one at least: 1 of 5, 2 of
    250), the others in their order: the remaining kernels keep their own launches' ops; more missing is another
    graph."""
    launches = [(f"gemm_{k}", (32, 256 * (k + 1), 4096)) for k in range(count)]
    kernels = [kernel for kernel, _ in launches]
    path = _profile(tmp_path, _replay(kernels[:1] + kernels[1 + unseen :]), _capture(launches, True))
    found = roofline(load_trace(path))
    if not fits:
        assert found.modelled_share == 0.0
        return
    kept = [0, *range(1 + unseen, count)]
    assert sorted(op.shapes for op in found.ops) == sorted(f"32x4096, 4096x{256 * (k + 1)}" for k in kept)


def test_an_annotated_copy_written_elsewhere_reads_the_captures_its_trace_had_beside(tmp_path, run):
    """``scan --format perfetto`` names the capture traces it read, so its annotated copy, wherever it is written,
    gives the replayed kernels the same ops."""
    path = _profile(tmp_path / "profile", _replay([kernel for kernel, _ in GEMMS]), _capture(GEMMS, True))
    out = tmp_path / "elsewhere" / "annotated.json"
    out.parent.mkdir()
    assert run("scan", str(path), "--format", "perfetto", "-o", str(out), "--fail-on", "never").exit_code == 0
    assert roofline(load_trace(out)).flops == roofline(load_trace(path)).flops > 0


def test_a_capture_trace_is_read_once_while_it_is_unchanged(tmp_path, monkeypatch):
    """A job's ranks share the capture traces beside them: each file is read once, again once it changes."""
    from perftool.analysis import graph_captures
    from perftool.trace.loader import read_trace

    read: list[Path] = []
    monkeypatch.setattr(graph_captures, "read_trace", lambda path, **options: read.append(path) or read_trace(path,
                        **options))  # fmt: skip
    path = _profile(tmp_path, _replay([kernel for kernel, _ in GEMMS]), _capture(GEMMS, True))
    assert replay_ops(load_trace(path)).unmatched == replay_ops(load_trace(path)).unmatched == 0
    assert len(read) == 1
    (tmp_path / "capture_traces" / "bs_0_rank0.json").write_text(json.dumps(_capture(GEMMS[:2], True)))
    assert replay_ops(load_trace(path)).unmatched == 4 and len(read) == 2  # another graph now: no replay is it


def _eager(kernels: list[tuple[str, tuple[int, int, int]]]) -> dict:
    """The same 4 steps run eagerly: each GEMM an aten::mm launching its kernel (120 µs), after 200 µs of host work."""
    events: list[dict] = []
    for step, at in enumerate(_marked_steps(events, 130 * len(kernels))):
        for k, (kernel, (m, n, inner)) in enumerate(kernels):
            flow, op = step * 10 + k + 1, at + 200 + k * 20
            events.append({"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": op, "dur": 15,
                           "args": {"Input Dims": [[m, inner], [inner, n]],
                                    "Input type": ["c10::BFloat16", "c10::BFloat16"]}})  # fmt: skip
            events.append({"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1, "tid": 1,
                           "ts": op + 5, "dur": 5})  # fmt: skip
            events.append({"ph": "s", "id": flow, "pid": 1, "tid": 1, "ts": op + 5, "cat": "ac2g", "name": "ac2g"})
            start = at + 300 + k * 130
            events.append({"ph": "X", "name": kernel, "cat": "kernel", "pid": 0, "tid": 7, "ts": start, "dur": 120})
            events.append({"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": start, "cat": "ac2g", "name": "ac2g",
                           "bp": "e"})  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events}


def test_diff_by_op_compares_a_replayed_graph_s_kernels_with_the_eager_run_s_ops(tmp_path, run):
    """An eager run against the same steps replayed as a graph, its capture beside: by op, the graph's kernels are
    the aten::mm calls that launched them as captured (3 a step, no host time), so the two compare op by op; without
    the capture they are the graph launch's, and the op level matches nothing."""
    eager = tmp_path / "eager.pt.trace.json"
    eager.write_text(json.dumps(_eager(GEMMS)))
    graph = _profile(tmp_path / "graph", _replay([kernel for kernel, _ in GEMMS]), _capture(GEMMS, True))
    (diff,) = json.loads(run("diff", str(eager), str(graph), "--by", "op", "--format", "json").stdout)["diffs"]
    rows = {row["key"]: row for row in diff["rows"]}
    assert diff["level"] == "op" and rows["aten::mm"]["status"] == "both"
    mm = rows["aten::mm"]
    assert (mm["baseline_calls_per_step"], mm["candidate_calls_per_step"]) == (3, 3)
    assert (mm["baseline_paced_us_per_step"], mm["candidate_paced_us_per_step"]) == (3 * 120, 300)
    assert (mm["candidate_us_per_step"], mm["contribution_us"]) == (0, -60)  # no host time: it ran once, captured
    op_table = profile(load_trace(graph)).tables["op"]
    mm, launch = op_table.keys.index("aten::mm"), op_table.keys.index("cudaGraphLaunch")
    assert (op_table.calls[mm], op_table.time_us[mm], op_table.paced_us[mm]) == (3, 0, 300)
    assert op_table.paced_us[launch] == 0 and op_table.time_us[launch] == 10
    shutil.rmtree(tmp_path / "graph" / "capture_traces")
    alone = profile(load_trace(tmp_path / "graph" / "profile.pt.trace.json")).tables["op"]
    assert "aten::mm" not in alone.keys and alone.paced_us[alone.keys.index("cudaGraphLaunch")] == 300


@pytest.mark.parametrize("named", [True, False])
def test_a_profile_holding_its_graphs_capture_gives_its_replays_their_ops(tmp_path, run, named):
    """A compiled model profiled from its first calls: the graph's capture, then four steps replaying it, in one
    trace. The replays' kernels take their ops from the capture in the trace itself, HIP's named launches or CUDA's
    unnamed ones (on one stream); a replay of kernels other than the named ones is none of its graphs, and the note
    says so."""

    def together(replay: dict, name: str = "profile.pt.trace.json") -> Path:
        steps = [{**event, "ts": event["ts"] + 10_000} for event in replay["traceEvents"]]
        path = tmp_path / name
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _capture(GEMMS, named)["traceEvents"] + steps}))
        return path

    path = together(_replay([kernel for kernel, _ in GEMMS]))
    trace = load_trace(path)
    ops = replay_ops(trace)
    assert ops.replays == 4 and ops.unmatched == 0 and ops.used == ["the trace itself"]
    found = roofline(trace)
    assert found.modelled_share == 1.0 and {op.name for op in found.ops} == {"aten::mm"}
    assert sum(op.calls for op in found.ops) == 3 * found.steps
    assert "as the graph was captured (the trace itself)" in _said(run("info", str(path)))
    if not named:
        return
    other = together(_replay(["gemm_a", "gemm_c", "gemm_a"]), "other.pt.trace.json")
    assert replay_ops(load_trace(other)).unmatched == 4
    assert "The graphs captured in the trace itself hold none whose launches are" in _said(run("info", str(other)))


def test_graphs_are_read_only_for_replays_in_the_window_asked_about(monkeypatch):
    """FLUX.1's warm-up records its graph and replays it once, in the start-up the figures leave out: the roofline
    reads no capture for it (not even the trace's own, read again for its launches' kernel names), while the whole
    capture's replay is given its ops."""
    from perftool.analysis import graph_captures
    from perftool.trace.loader import read_trace

    read: list[Path] = []
    monkeypatch.setattr(graph_captures, "read_trace", lambda path, **options: read.append(path) or read_trace(path,
                        **options))  # fmt: skip
    trace = load_trace(FLUX_WARMUP)
    assert roofline(trace).modelled_share < 0.3 and read == []
    ops = replay_ops(trace)  # every replay: the one after the capture
    assert ops.replays == 1 and ops.used == ["the trace itself"] and ops.spans.size == 993 and len(read) == 1
