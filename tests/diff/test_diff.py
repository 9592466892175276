"""perftool diff: what changed between two traces, each change's part of the step-time delta, adding up to it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from builders import meta, span
from click.testing import CliRunner
from conftest import DATA, REPO, TORCH_FIXTURE, error_line

from perftool import api
from perftool.cli.main import cli
from perftool.diff.compare import unchanged
from perftool.diff.names import load_op_map, normalise
from perftool.gate.verdict import GateOptions, run_gate

VOCAB = DATA / "vocab"
KINETO = (VOCAB / "diff_kineto_before.json.gz", VOCAB / "diff_kineto_after.json.gz")
TORCH_NPU = (VOCAB / "diff_torch_npu_before.json.gz", VOCAB / "diff_torch_npu_after.json.gz")
SAMPLES = REPO / "sample_traces"


def changed(document: dict) -> dict[str, tuple[str, float]]:
    """The keys of a diff's JSON whose contribution is more than rounding: status and contribution (µs)."""
    (diff,) = document["diffs"]
    return {
        r["key"]: (r["status"], round(r["contribution_us"], 3))
        for r in diff["rows"]
        if abs(r["contribution_us"]) > 1e-3
    }


def adds_up(diff: dict) -> None:
    """The rows' and remainders' contributions are the measured delta of the mean step."""
    parts = sum(r["contribution_us"] for r in diff["rows"]) + sum(r["contribution_us"] for r in diff["remainders"])
    assert parts == pytest.approx(diff["delta_us"], abs=1e-6)
    assert diff["delta_us"] == pytest.approx(diff["candidate"]["step_time_us"] - diff["baseline"]["step_time_us"])


@pytest.mark.parametrize("by", ["kernel", "op"])
def test_a_kineto_pair_names_exactly_the_op_that_slowed_appeared_and_went(run, by):
    result = run("diff", *KINETO, "--by", by, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    if by == "kernel":
        expected = {
            "ampere_sgemm_128x64_tn": ("both", 150.0),
            "at::native::index_put_kernel_impl<at::native::OpaqueType<N> >": ("added", 120.0),
            "at::native::fused_dropout_kernel_vec<float, float, unsigned int, N, N>": ("removed", -50.0),
        }
    else:  # device time each host op launched, through the launch flows
        expected = {
            "aten::linear": ("both", 150.0),
            "aten::index_put_": ("added", 120.0),
            "aten::dropout": ("removed", -50.0),
        }
    assert changed(document) == expected
    (diff,) = document["diffs"]
    assert diff["level"] == by and diff["delta_us"] == pytest.approx(220.0)
    adds_up(diff)
    # the rebuild's vector width <4> → <8> is the same kernel: only the dropout and index_put kernels are unmatched
    assert diff["unmatched"]["baseline"]["keys"] == 1 and diff["unmatched"]["candidate"]["keys"] == 1
    assert diff["unmatched"]["baseline"]["events"] == 8  # one a step, 8 steps


def test_the_annotation_level_counts_device_time_under_each_record_function(run):
    """The model's own ranges, named the same on any hardware: forward holds the slower GEMM, backward the new
    index_put_ less the dropout that went."""
    document = json.loads(run("diff", *KINETO, "--by", "annotation", "--format", "json").stdout)
    assert changed(document) == {"## forward ##": ("both", 150.0), "## backward ##": ("both", 70.0)}
    adds_up(document["diffs"][0])


def test_an_ascend_pair_names_exactly_the_task_that_slowed_appeared_and_went(run):
    document = json.loads(run("diff", *TORCH_NPU, "--format", "json").stdout)
    assert changed(document) == {"MatMulV2": ("both", 300.0), "IndexPutV2": ("added", 150.0),
                                 "DropOutDoMask": ("removed", -60.0)}  # fmt: skip
    adds_up(document["diffs"][0])


def test_an_hccl_op_is_compared_once_not_with_its_tasks_on_planes_and_stream(run):
    """Two ranks of a real torch_npu job (db export): msprof draws each all-reduce over its tasks, and the tasks on
    both its planes and its stream; compared per kernel, the op is the collective (as an NCCL kernel is), and the
    time counted twice is the compute beside it, a few ms, not the 393 ms its tasks were counted over again."""
    job = DATA / "real" / "torch_npu_db_l2_job"
    result = run("diff", str(job / "rank0_ascend_pt"), str(job / "rank1_ascend_pt"), "--format", "json")
    assert result.exit_code == 0, result.output
    (diff,) = json.loads(result.stdout)["diffs"]
    rows = {row["key"]: row for row in diff["rows"]}
    assert rows["hcom_allReduce_"]["baseline_us_per_step"] > 90_000
    assert not rows.keys() & {"Notify_Wait", "Notify Wait", "Notify_Record", "Memcpy", "Reduce_Inline", "SDMA"}
    assert rows["AI_CORE"]["baseline_us_per_step"] < 200  # compute tasks; not the all-reduce's own, recorded wider
    (overlap,) = [r for r in diff["remainders"] if r["name"].startswith("overlap")]
    assert overlap["baseline_us"] < 0.05 * diff["baseline"]["step_time_us"]
    adds_up(diff)


def test_without_launch_flows_the_op_level_falls_back_and_says_why(run):
    """torch_npu's trace links no device task to a host op, so per-op contributions cannot be measured."""
    document = json.loads(run("diff", *TORCH_NPU, "--by", "op", "--format", "json").stdout)
    (diff,) = document["diffs"]
    assert diff["asked"] == "op" and diff["level"] == "category" and "op 0%, annotation 0%" in diff["why"]
    assert changed(document) == {"compute": ("both", 390.0)}
    adds_up(diff)


def test_captures_without_step_markers_are_compared_whole(run):
    """An inference benchmark has no steps: each capture after its start-up is one "step", and the report says so."""
    startup = VOCAB / "startup_dominated.json.gz"
    document = json.loads(run("diff", startup, startup, "--format", "json").stdout)
    (diff,) = document["diffs"]
    assert diff["baseline"]["steps"] == 0 and diff["delta_us"] == 0 and "no step markers" in diff["notes"][0]
    assert "torch.profiler.schedule(wait=1, warmup=1, active=5)) with prof.step()" in diff["notes"][0]
    assert diff["baseline"]["step_time_us"] > 0
    adds_up(diff)
    assert "capture time (no step markers)" in run("diff", startup, startup).stdout


def test_jax_captures_without_steps_are_told_to_mark_them_as_jax_does(run, write_trace):
    """A JAX capture of one jitted call has no steps: the way to capture some is jax.profiler's, not PyTorch's."""
    events = [
        span("PjitFunction(train_step)", 701, 1, 5.0, 200.0),
        span("cuLaunchKernel", 701, 2, 150.0, 10.0, args={"correlation_id": "1"}),
        span("loop_fusion", 1, 16, 300.0, 600.0, args={"correlation_id": "1"}),
    ]
    names = [("/host:CPU", 701, 1, "python"), ("/host:CPU", 701, 2, "tf_pjrt_thread_pool/1"),
             ("/device:GPU:0", 1, 16, "Stream #16(Kernel)")]  # fmt: skip
    for process, pid, tid, thread in names:
        events += [meta("process_name", pid, 0, name=process), meta("thread_name", pid, tid, name=thread)]
    path = write_trace({"traceEvents": [*events, {}]})
    (diff,) = json.loads(run("diff", path, path, "--format", "json").stdout)["diffs"]
    (note,) = [note for note in diff["notes"] if note.startswith("no step markers")]
    assert diff["baseline"]["steps"] == 0 and "jax.profiler.StepTraceAnnotation(" in note
    assert "torch" not in note


def test_the_text_report_lists_the_contributors_and_what_appeared_and_went():
    wide = CliRunner().invoke(cli, ["diff", *map(str, KINETO), "--by", "op"], env={"COLUMNS": "120"}).stdout
    said = " ".join(wide.split())
    assert "+35.5% (+220.0 µs)" in said and "adds up to +220.0 µs" in said
    assert "aten::linear 1 → 1 400.0 µs → 550.0 µs +150.0 µs 68.2%" in said
    assert "New 1 op: aten::index_put_" in said and "Gone 1 op: aten::dropout" in said


def test_on_a_narrow_terminal_names_stay_whole_and_the_calls_give_way():
    narrow = CliRunner().invoke(cli, ["diff", *map(str, KINETO), "--by", "op"], env={"COLUMNS": "80"}).stdout
    assert max(map(len, narrow.splitlines())) <= 80 and "…" not in narrow
    said = " ".join(narrow.split())
    assert "device idle: kernel launches 24.4 µs → 24.4 µs" in said
    assert "aten::linear 400.0 µs → 550.0 µs +150.0 µs 68.2%" in said  # the contributions, without calls per step


def test_markdown_shows_the_table_that_adds_up(run, tmp_path):
    out = tmp_path / "diff.md"
    assert run("diff", *KINETO, "--format", "markdown", "-o", out).exit_code == 0
    text = out.read_text()
    assert "| ampere_sgemm_128x64_tn | 1 → 1 | 400.0 µs → 550.0 µs | +150.0 µs | 68.2% |" in text
    assert "| **step time** | | | **+220.0 µs** | |" in text


@pytest.mark.parametrize(
    ("config", "change", "gone_or_grown"),
    [
        ("npu/strided_copies_transdata.yaml", "layout_mismatch=false", {"TransData": ("removed", -5120.0)}),
        ("gpu/healthy.yaml", "device_graphs=false", {}),
    ],
)
def test_emulator_pairs_with_one_knob_changed(run, tmp_path, config, change, gone_or_grown):
    """The transposes the layout fix removes are the whole change; CUDA graphs off leaves every kernel as it was
    and the device idles while the host launches."""
    before, after = tmp_path / "before.json.gz", tmp_path / "after.json.gz"
    for trace, sets in ((before, []), (after, ["--set", change])):
        assert run("emulate", SAMPLES / config, "--trace", trace, *sets, "--format", "json").exit_code == 0
    document = json.loads(run("diff", before, after, "--format", "json").stdout)
    (diff,) = document["diffs"]
    adds_up(diff)
    grown = {key: (status, round(us)) for key, (status, us) in changed(document).items() if abs(us) > 1}
    assert grown == {key: (status, round(us)) for key, (status, us) in gone_or_grown.items()}
    if not gone_or_grown:
        idle = {r["name"]: r["contribution_us"] for r in diff["remainders"]}
        assert idle["device idle: host Python/dispatch"] == pytest.approx(diff["delta_us"], rel=0.01)


def test_across_vendors_names_match_through_the_op_map(run, tmp_path):
    """A GPU run against an NPU run: their GEMMs are both matmul; the report says it compared through the map."""
    document = json.loads(run("diff", KINETO[0], TORCH_NPU[1], "--format", "json").stdout)
    (diff,) = document["diffs"]
    assert diff["level"] == "kernel" and "matched through the op map" in diff["why"]
    rows = {r["key"]: r for r in diff["rows"]}
    assert (
        rows["matmul"]["baseline_us_per_step"] == pytest.approx(400) and rows["matmul"]["candidate_us_per_step"] == 900
    )
    adds_up(diff)
    own = tmp_path / "map.yaml"  # the user's map first: index_put kernels of both vendors are one op
    own.write_text("version: 1\nmap:\n  - as: index_put\n    match: '(?i)index_?put'\n")
    mine = json.loads(run("diff", KINETO[1], TORCH_NPU[1], "--op-map", own, "--format", "json").stdout)
    assert {r["key"]: r["status"] for r in mine["diffs"][0]["rows"]}["index_put"] == "both"


def test_two_jobs_are_compared_rank_by_rank(run, tmp_path):
    """Without the straggler, rank 5 computes faster and every other rank waits less in its all-reduce."""
    fixed = tmp_path / "fixed"
    job = SAMPLES / "jobs" / "gpu_ddp_straggler"
    assert run("emulate", job / "job.yaml", "--trace", fixed, "--set", "replicas.slow_ranks=[]").exit_code == 0
    document = json.loads(run("diff", job, fixed, "--workers", "1", "--format", "json").stdout)
    assert [d["rank"] for d in document["diffs"]] == list(range(8))
    for diff in document["diffs"]:
        adds_up(diff)
        assert diff["delta_us"] < 0
        largest = max(diff["rows"], key=lambda r: abs(r["contribution_us"]))
        if diff["rank"] == 5:  # its compute got faster
            assert sum(r["contribution_us"] for r in diff["rows"] if "gemm" in r["key"]) < -500
        else:
            assert largest["key"].startswith("ncclDevKernel_AllReduce") and largest["contribution_us"] < -500
    text = run("diff", job, fixed, "--workers", "1").stdout
    assert "whose step changed most" in text


def test_a_job_whose_ranks_were_captured_cycle_after_cycle_is_not_diffed_rank_by_rank_by_guess(run):
    """A rank's several captures (tests/data/profiler_cycles: two per rank) leave diff no one trace to compare it
    by: it says so, and how to give it one capture of each rank."""
    job = DATA / "profiler_cycles" / "gloo_job"
    error_line(
        run("diff", job, job, "--workers", "1"),
        f"{job}: 2 traces of rank 0 (captures at different times",
        "give it the files of one capture of each",
    )


def test_a_log_directory_of_one_run_is_diffed_as_its_trace(run, tmp_path):
    """tensorboard_trace_handler writes each run's trace into a log directory, named by host and process id: two
    runs' directories are compared as their two traces (the ids are no ranks), as the files themselves are."""
    for side, trace in zip(("before", "after"), KINETO):
        (tmp_path / side).mkdir()
        (tmp_path / side / f"host_{len(side)}1.1700000000000.pt.trace.json.gz").write_bytes(trace.read_bytes())
    by_directory = json.loads(run("diff", tmp_path / "before", tmp_path / "after", "--format", "json").stdout)
    by_file = json.loads(run("diff", *KINETO, "--format", "json").stdout)
    assert [d["rank"] for d in by_directory["diffs"]] == [None]
    assert changed(by_directory) == changed(by_file) and changed(by_file)


@pytest.mark.parametrize(
    ("traces", "why"),
    [
        ((KINETO[0], TORCH_NPU[0]), "2 traces of different jobs (they differ in trace format: ascend, kineto"),
        ((*KINETO,), "2 traces of no distributed job (none names a rank, holds distributedInfo or runs a collective)"),
    ],
)
def test_a_directory_of_traces_that_are_no_job_s_ranks_is_refused_as_gate_refuses_it(run, tmp_path, traces, why):
    """Traces of different jobs, or of no distributed job (a model's captures before and after a change), are no
    job to compare rank by rank, whatever numbers their names hold: diff says so in gate's words."""
    folder = tmp_path / "captures"
    folder.mkdir()
    for number, trace in enumerate(traces):
        (folder / f"capture{number}.json.gz").write_bytes(trace.read_bytes())
    said = error_line(run("diff", folder, folder), f"{folder}: {why}", "diff compares a trace with a trace")
    gated = error_line(run("gate", folder, folder), f"{folder}: {why}", "gate compares one trace with one")

    def reason(line: str) -> str:
        return line.split(f"{folder}: ")[1].split("; ")[0]

    assert reason(said) == reason(gated)


def job_without_distributed_info(folder: Path, names: list[str]) -> Path:
    """The gloo job's rank traces as a PyTorch before 1.10 writes them (no distributedInfo), named ``names``."""
    folder.mkdir()
    for name, trace in zip(names, sorted((DATA / "gloo_cpu_job").iterdir())):
        document = json.loads(gzip.decompress(trace.read_bytes()))
        del document["distributedInfo"]
        (folder / name).write_bytes(gzip.compress(json.dumps(document).encode()))
    return folder


def test_ranks_that_run_collectives_are_a_job_though_they_state_no_rank(run, tmp_path):
    """PyTorch before 1.10 writes no distributedInfo: the collectives its ranks run show them a job, compared rank by
    rank as the numbers ending their names give them."""
    job = job_without_distributed_info(tmp_path / "job", ["worker0.json.gz", "worker1.json.gz"])
    document = json.loads(run("diff", job, job, "--format", "json").stdout)
    assert [d["rank"] for d in document["diffs"]] == [0, 1]


def test_two_runs_whose_ranks_are_named_by_process_id_say_how_to_name_them_by_rank(run, tmp_path):
    """tensorboard_trace_handler names a trace by its process ({host}_{pid}); where the traces state no rank, a rank
    is its process id, which another run does not share: diff and gate say so, and how to name them."""
    runs = [
        job_without_distributed_info(tmp_path / side, [f"host_{pid}.1700000000000.pt.trace.json.gz" for pid in pids])
        for side, pids in (("before", (31000, 31007)), ("after", (41000, 41007)))
    ]
    error_line(run("diff", *runs), "share no rank to compare: their traces state no rank", "worker_name=f'rank{rank}'")
    error_line(run("gate", *runs), "not the same job (their traces state no rank", "worker_name=f'rank{rank}'")
    named = [f"rank{rank}.1700000000000.pt.trace.json.gz" for rank in (0, 9)]  # as the advice names them
    said = error_line(run("diff", job_without_distributed_info(tmp_path / "named", named), runs[0]), "share no rank")
    assert "worker_name" not in said  # these traces name their ranks
    numbered = job_without_distributed_info(tmp_path / "numbered", ["worker5.json.gz", "worker6.json.gz"])
    said = error_line(run("diff", numbered, runs[0]), "share no rank")
    assert "worker_name" not in said  # not the handler's names: their numbers are no process ids


def test_traces_named_by_rank_are_a_job_s_ranks_though_they_show_nothing_else_of_one(run, tmp_path):
    """A name that says its rank (rank0, rank1) makes a trace a job's rank, though it records no distributedInfo and
    runs no collective."""
    job = tmp_path / "job"
    job.mkdir()
    for number, trace in enumerate(KINETO):
        (job / f"rank{number}.json.gz").write_bytes(trace.read_bytes())
    document = json.loads(run("diff", job, job, "--format", "json").stdout)
    assert [d["rank"] for d in document["diffs"]] == [0, 1]


def test_the_library_gives_the_same_diff(tmp_path):
    result = api.diff(*KINETO, by="op")
    (diff,) = result.diffs
    assert diff.attributed_us == pytest.approx(diff.delta_us)
    assert [row.key for row in diff.rows[:3]] == ["aten::linear", "aten::index_put_", "aten::dropout"]
    assert diff.headline == (
        "step +35.5% (+220.0 µs): aten::linear +150.0 µs, new aten::index_put_ +120.0 µs, gone aten::dropout -50.0 µs"
    )


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("void at::native::elementwise_kernel<4, Gelu>(int, Gelu)", "at::native::elementwise_kernel<N, Gelu>"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, ncclWork*)", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
        ("Conv2D_12", "Conv2D"),
        ("MatMul-op45", "MatMul"),
        ("Cast_3 (7)#12", "Cast"),  # launch ids one after another all go
        ("Foo (3) bar", "Foo (3) bar"),  # only at the end
        ("step_1x", "step_1x"),
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),
        ("(anonymous namespace)::softmax<float, 9, false>", "(anonymous namespace)::softmax<float, N, false>"),
        ("PjitFunction(train_step)", "PjitFunction(train_step)"),  # JAX's call names its function: no parameters
        ("fusion.123", "fusion"),  # XLA's instance number of an HLO op, renumbered by any change to the program
        ("all-reduce.3", "all-reduce"),
        ("libcudnn_v8.9", "libcudnn_v8.9"),  # a version's dot: a digit before it
        ("loop_add_fusion.kd", "loop_add_fusion.kd"),
        # the DataLoader's fetch is one key whichever iterator num_workers chose
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "enumerate(DataLoader)#__next__"),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "enumerate(DataLoader)#__next__"),
        ("DataLoader.__next__", "DataLoader.__next__"),
    ],
)  # fmt: skip
def test_kernel_names_are_normalised_across_builds(name, normalised):
    assert normalise(name) == normalised


def test_the_built_in_op_map_gives_each_vendor_the_shared_name(tmp_path):
    own = tmp_path / "mine.yaml"  # the user's entries come first, a pattern of theirs before a built-in name
    own.write_text("version: 1\nmap:\n  - as: gemm\n    match: '^aten::(mm|addmm)$'\n")
    mine = load_op_map((str(own),)).shared
    assert mine("aten::mm") == "gemm" and mine("aten::bmm") == "matmul"
    shared = load_op_map().shared
    assert shared("ampere_sgemm_128x64_tn") == shared("MatMulV2") == shared("aten::mm") == "matmul"
    assert shared("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == shared("hcom_allReduce_") == "all_reduce"
    assert shared("layernorm_bwd_bf16") == "layer_norm_backward" and shared("layernorm_fwd_bf16") == "layer_norm"
    assert shared("cudnn::dgrad_engine<conv>") == shared("ConvBackpropInput") == "conv_backward"
    assert shared("Memcpy HtoD (Pinned -> Device)") == "copy_h2d" and shared("Memcpy DtoH") == "copy_d2h"
    assert shared("gemm_bwd_kernel") == "matmul_backward" and shared("softmax_grad") == "softmax_backward"
    assert shared("some_custom_kernel") is None


def test_gate_explains_a_failed_step_time_in_every_format(run, tmp_path, junit_schema):
    slow = tmp_path / "slow.json.gz"
    run("emulate", SAMPLES / "gpu" / "healthy.yaml", "--trace", slow, "--set", "device_graphs=false")
    baseline = SAMPLES / "gpu" / "healthy.trace.json.gz"
    headline = "step +49.4% (+826.8 µs): device idle: host Python/dispatch +826.8 µs"
    document = json.loads(run("gate", baseline, slow, "--format", "json").stdout)
    (explained,) = document["explanations"]
    assert explained["headline"] == headline
    assert sum(c["contribution_us"] for c in explained["contributors"]) == pytest.approx(explained["delta_us"])
    step = next(c for c in document["checks"] if c["id"] == "timing:step_time")
    assert step["verdict"] == "fail" and headline in step["detail"]
    markdown = run("gate", baseline, slow, "--format", "markdown").stdout
    assert "### Why the step time changed" in markdown and "| *device idle: host Python/dispatch* |" in markdown
    assert headline in run("gate", baseline, slow, "--format", "junit").stdout
    assert headline.replace("%", "%25") in run("gate", baseline, slow, "--format", "github").stdout  # escaped
    sarif = json.loads(run("gate", baseline, slow, "--format", "sarif").stdout)
    assert any(headline in result["message"]["text"] for result in sarif["runs"][0]["results"])
    text = " ".join(run("gate", baseline, slow).stdout.split())
    assert "Why the step time changed (perftool diff, per kernel)" in text


def test_gate_on_a_saved_scan_says_why_it_cannot_explain():
    candidate, saved = (
        SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz",
        SAMPLES / "baselines" / "npu__healthy.findings.json",
    )
    result = run_gate(str(candidate), str(saved), None, [], GateOptions(allow_mismatch=True))
    assert any(c.id == "timing:step_time" and c.verdict == "fail" for c in result.checks)
    assert result.explanations == [] and "saved scan result" in result.unexplained


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        ((KINETO[0], "missing.json"), ("missing.json",)),
        ((KINETO[0], TORCH_FIXTURE), ("share nothing comparable", "no device work")),
        ((KINETO[0], SAMPLES / "jobs" / "gpu_ddp_straggler"), ("a trace with a trace", "is one trace and", "holds 8")),
        ((KINETO[0], VOCAB / "startup_dominated.json.gz"), ("startup_dominated.json.gz has no step markers",)),
        ((*KINETO, "--op-map", "{map}"), ("map.yaml:4", "map[0].match", "not a regular expression")),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run, tmp_path, args, needles):
    bad_map = tmp_path / "map.yaml"
    bad_map.write_text("version: 1\nmap:\n  - as: x\n    match: '(unclosed'\n")
    error_line(run("diff", *(str(a).replace("{map}", str(bad_map)) for a in args)), *needles)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("^(a+)+$", "a repeat inside a repeat"),
        ("(a|ab)*c", "an alternation inside a repeat"),
        ("(gemm)_\\1", "a reference back to a group"),
    ],
)
def test_an_op_map_pattern_that_backtracks_exponentially_is_refused_by_name(run, tmp_path, pattern, why):
    """``^(a+)+$`` against a kernel named a…ab took hours at 40 letters (hardening round 4, D15): such a pattern is
    refused when the map is read, naming the file, the entry and what makes it so."""
    own = tmp_path / "map.yaml"
    own.write_text(f"version: 1\nmap:\n  - as: x\n    match: '{pattern}'\n")
    error_line(run("diff", *KINETO, "--op-map", own), f"{own}:4", "map[0].match", f"refused: {why}")


def test_op_map_patterns_without_exponential_backtracking_are_kept():
    """The built-in map's patterns, lookaheads, a fixed count and atomic or possessive repeats under a repeat are
    all allowed."""
    from perftool.diff.patterns import backtracking_risk

    assert [backtracking_risk(p) for p in ("(?is)^(?=.*conv)(?=.*(bwd|grad))", "(ab{3})+", "(?>a+)+", "(a++)+")] == [
        None
    ] * 4
    assert len(load_op_map().entries) > 20  # every built-in entry passes the check


def test_a_truncated_trace_is_one_line_naming_it(run, tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(gzip.decompress(KINETO[1].read_bytes())[:5000]))
    error_line(run("diff", KINETO[0], cut), "cut.json.gz")


@pytest.mark.parametrize("by", ["kernel", "op", "annotation", "category", "track"])
def test_a_host_paced_trace_adds_up_at_every_level(run, by):
    """A CPU-only training loop: paced by its host thread, whose work, overlap and idle rebuild the step at every
    level, the work held by annotations (or by no annotation) included."""
    document = json.loads(run("diff", TORCH_FIXTURE, TORCH_FIXTURE, "--by", by, "--format", "json").stdout)
    (diff,) = document["diffs"]
    assert diff["baseline"]["timeline"] == "host" and diff["delta_us"] == 0
    parts = sum(r["baseline_paced_us_per_step"] for r in diff["rows"]) + sum(
        r["baseline_us"] * (-1 if r["name"].startswith("overlap") else 1) for r in diff["remainders"]
    )
    assert parts == pytest.approx(diff["baseline"]["step_time_us"])  # the step, rebuilt from its parts


def test_a_diff_across_devices_and_workloads_says_so_and_one_of_the_same_job_does_not(run):
    """A V100 job against an A100 job that runs other work: the header and the JSON say both; the same job
    before and after a DataLoader change says neither."""
    real = DATA / "real"
    across = json.loads(run("diff", real / "ddp_v100_rank1.json.gz", real / "nccl_a100_rank.json.gz",
                            "--format", "json").stdout)["diffs"][0]  # fmt: skip
    notes = " ".join(across["notes"])
    assert "the devices differ (Tesla V100-SXM2-16GB → NVIDIA A100-PG509-200)" in notes
    assert "not be the same workload" in notes and across["matched"]["op"] < 0.5
    same = json.loads(run("diff", real / "resnet50_pt18_workers0.json.gz", real / "resnet50_pt18_workers4.json.gz",
                          "--format", "json").stdout)["diffs"][0]  # fmt: skip
    assert same["matched"]["op"] > 0.9 and not any("devices differ" in n or "workload" in n for n in same["notes"])


@pytest.mark.parametrize("by", ["kernel", "op"])
def test_a_host_paced_loop_given_dataloader_workers_is_one_workload_whose_fetch_is_compared_as_one(run, by):
    """A CPU training loop before and after ``num_workers`` 0 → 2 (real captures): the fetch's name follows the
    DataLoader's iterator, yet it is the same fetch, compared as one key; the note says what the iterators were."""
    loader = DATA / "loader_workers"
    document = run("diff", loader / "workers0.pt.trace.json.gz", loader / "workers2.pt.trace.json.gz", "--by", by,
                   "--format", "json").stdout  # fmt: skip
    (diff,) = json.loads(document)["diffs"]
    assert diff["level"] == by and diff["matched"][by] > 0.9 and not any("workload" in n for n in diff["notes"])
    (fetch,) = [row for row in diff["rows"] if "DataLoader" in row["key"]]
    assert fetch["key"] == "enumerate(DataLoader)#__next__" and fetch["status"] == "both"
    assert fetch["baseline_calls_per_step"] == fetch["candidate_calls_per_step"] == 1
    assert (
        "the DataLoader's iterator changed: _SingleProcessDataLoaderIter (num_workers=0) → "
        "_MultiProcessingDataLoaderIter (num_workers ≥ 1)" in diff["notes"][0]
    )
    adds_up(diff)


def test_a_device_paced_pair_says_its_dataloader_iterator_changed_and_one_of_a_capture_with_itself_does_not(run):
    real = DATA / "real"
    (diff,) = json.loads(run("diff", real / "resnet50_pt18_workers0.json.gz", real / "resnet50_pt18_workers4.json.gz",
                             "--by", "op", "--format", "json").stdout)["diffs"]  # fmt: skip
    changed = "_SingleProcessDataLoaderIter (num_workers=0) → _MultiProcessingDataLoaderIter"
    assert any(changed in note for note in diff["notes"])
    assert [row["key"] for row in diff["rows"] if "DataLoader" in row["key"]] == ["enumerate(DataLoader)#__next__"]
    trace = real / "resnet50_pt18_workers4.json.gz"
    (same,) = json.loads(run("diff", trace, trace, "--format", "json").stdout)["diffs"]
    assert not any("DataLoader" in note for note in same["notes"])


@pytest.mark.parametrize("compiled_first", [False, True])
def test_a_model_compiled_against_its_eager_run_is_said_to_be_that_not_maybe_another_workload(run, compiled_first):
    """A CPU training loop, its model eager and torch.compile'd (real captures): few names match, as compiling runs
    other, fused kernels and ops; the note says which side runs compiled, not that the work may differ."""
    sides = [DATA / "compile_pair" / "eager.pt.trace.json.gz", DATA / "compile_pair" / "compiled.pt.trace.json.gz"]
    sides = sides[::-1] if compiled_first else sides
    (diff,) = json.loads(run("diff", *sides, "--format", "json").stdout)["diffs"]
    assert diff["matched"]["op"] < 0.5 and not any("workload" in note for note in diff["notes"])
    compiled, eager = ("baseline", "candidate") if compiled_first else ("candidate", "baseline")
    said = f"the {compiled} runs torch.compile'd regions (Torch-Compiled Region) where the {eager} runs eagerly"
    assert any(note.startswith(said) for note in diff["notes"])
    adds_up(diff)


@pytest.mark.parametrize("name", ["resnet50_pt18_workers0.json.gz", "jax08_mi300x_attention_opbyop.trace.json.gz"])
def test_a_capture_against_itself_names_no_change_and_no_other_workload(run, name):
    """Nothing changed: the headline names no part (not three 0.0 µs ones), and a capture whose kernels no flow
    links to host ops (XLA's) is not called another workload for sharing no op time with itself."""
    trace = DATA / "real" / name
    (diff,) = json.loads(run("diff", trace, trace, "--format", "json").stdout)["diffs"]
    assert diff["delta_us"] == 0 and diff["headline"] == "step +0.0% (0.0 µs)"
    assert not any("workload" in note for note in diff["notes"])
    adds_up(diff)
    said = "Nothing changed: every kernel and every cause of idle time takes the same time a step on both sides."
    text = " ".join(run("diff", trace, trace).stdout.split())
    assert said in text and "What the change is made of" not in text and "Where the steps go" in text
    assert f"\n{said}\n" in run("diff", trace, trace, "--format", "markdown").stdout
    page = run("diff", trace, trace, "--format", "html").stdout
    assert f"<p>{said}</p>" in page and 'data-table="contributions"' not in page


def test_parts_that_each_round_to_nothing_but_add_up_to_a_change_are_a_change():
    """20,000 keys each 0.04 µs slower a step: no part shows, but the step is 800 µs longer, and that is a change."""
    assert not unchanged(800.0, [0.04] * 20_000)
    assert unchanged(0.0, [0.04, -0.04]) and not unchanged(0.0, [0.05, -0.05])  # NOTHING_US, 0.05 µs, its limit


def test_the_json_is_written_a_block_of_rows_at_a_time_as_the_one_document(run, monkeypatch, tmp_path):
    """A diff of millions of names has millions of rows, so its JSON is written a block of rows at a time, never
    whole; the bytes are the model's own JSON: for two jobs (a diff per rank), rows over many blocks, and none."""
    from perftool.report import diff_json

    monkeypatch.setattr(diff_json, "ROWS_PER_BLOCK", 3)
    job = SAMPLES / "jobs" / "gpu_ddp_straggler"
    out = tmp_path / "diff.json"
    for pair in [(job, job), KINETO]:
        result = api.diff(*pair)
        blocks = list(diff_json.render(result))
        assert b"".join(blocks) == result.json_text().encode()
        assert len(blocks) > sum(len(diff.rows) for diff in result.diffs) / 3
        assert run("diff", *pair, "--format", "json").stdout == result.json_text()
        run("diff", *pair, "--format", "json", "-o", out)
        assert out.read_text() == result.json_text()
    no_rows = result.model_copy(update={"diffs": [d.model_copy(update={"rows": []}) for d in result.diffs]})
    assert b"".join(diff_json.render(no_rows)) == no_rows.json_text().encode()
    assert len(api.diff(job, job).diffs) > 1


def test_time_between_a_replayed_graph_s_kernels_is_a_row_of_its_own_and_the_step_still_adds_up(run):
    """A decode step replayed as one graph: the gaps between the graph's kernels are its own dependencies, not the
    host's Python (scan counts them so too), and the step rebuilt from its parts is still the step."""
    window = DATA / "real" / "sglang_mi300x_qwen3_8b_decode_window.json.gz"
    (diff,) = json.loads(run("diff", window, window, "--format", "json").stdout)["diffs"]
    idle = {r["name"]: r["baseline_us"] for r in diff["remainders"]}
    assert idle["device idle: inside graph replays"] > idle["device idle: host Python/dispatch"] > 0
    parts = sum(r["baseline_paced_us_per_step"] for r in diff["rows"]) + sum(
        r["baseline_us"] * (-1 if r["name"].startswith("overlap") else 1) for r in diff["remainders"]
    )
    assert parts == pytest.approx(diff["baseline"]["step_time_us"])
    across = json.loads(run("diff", window, DATA / "real" / "nccl_a100_rank.json.gz", "--format", "json").stdout)
    rows = {r["name"]: r for r in across["diffs"][0]["remainders"]}  # a side without replays has none of that time
    assert rows["device idle: inside graph replays"]["candidate_us"] == 0.0
