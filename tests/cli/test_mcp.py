"""``perftool mcp``: the server started as an agent starts it (a subprocess over stdio) and driven with the official
SDK's client: its tools answer with the documents ``--format json`` writes, bounded, and bad input in one line."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import jsonschema
import pytest
from conftest import REPO

from perftool.cli import mcp
from perftool.common.errors import PerftoolError

SAMPLE = REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz"
BEFORE, AFTER = (REPO / "tests" / "data" / "vocab" / f"diff_kineto_{side}.json.gz" for side in ("before", "after"))
GPU_SAMPLE = REPO / "sample_traces" / "gpu" / "healthy.trace.json.gz"
JOB = REPO / "sample_traces" / "jobs" / "gpu_ddp_straggler"


def test_without_the_sdk_the_command_says_how_to_get_it_in_one_line(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if not installed: importing it fails
    result = run("mcp")
    assert result.exit_code == 2
    assert result.stderr == (
        "perftool: error: perftool mcp needs the Model Context Protocol SDK: pip install 'mcp>=2' (perftool's mcp "
        "extra)\n"
    )


def calls(*requests: tuple[str, dict]) -> tuple[list[str], list[tuple[bool, str]]]:
    """Start ``perftool mcp``, list its tools and make each call in turn: (tool names, (is_error, text) per call).
    Skips where the SDK is not installed (``.ci/run`` installs it)."""
    mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install 'mcp>=2'")
    stdio = pytest.importorskip("mcp.client.stdio")

    async def session() -> tuple[list[str], list[tuple[bool, str]]]:
        server = stdio.StdioServerParameters(command=sys.executable, args=["-m", "perftool", "mcp"], cwd=str(REPO))
        async with mcp.Client(server) as client:
            listed = await client.list_tools()
            answers = []
            for name, arguments in requests:
                result = await client.call_tool(name, arguments)
                answers.append((bool(result.is_error), "".join(part.text for part in result.content)))
            return [tool.name for tool in listed.tools], answers

    return asyncio.run(session())


@pytest.mark.slow  # a server process, started and driven over stdio
def test_an_agent_scans_explains_and_diffs_through_the_server(run):
    names, answers = calls(
        ("scan", {"traces": [str(SAMPLE)]}),
        ("explain_rule", {"rule": "PT001"}),
        ("diff", {"baseline": str(BEFORE), "candidate": str(AFTER)}),
    )
    assert names == ["info", "scan", "diff", "gate", "explain_rule", "calibrate", "tune"]
    assert not any(error for error, _ in answers)
    scanned, rule, changed = (json.loads(text) for _, text in answers)
    jsonschema.Draft202012Validator(json.loads(run("schema", "findings").stdout)).validate(scanned)
    cli = json.loads(run("scan", SAMPLE, "--format", "json", "--fail-on", "never").stdout)
    assert [f["fingerprint"] for f in scanned["traces"][0]["findings"]] == [
        f["fingerprint"] for f in cli["traces"][0]["findings"]
    ]
    assert rule == json.loads(run("rules", "explain", "PT001", "--format", "json").stdout)
    assert (
        changed["diffs"][0]["headline"]
        == json.loads(run("diff", BEFORE, AFTER, "--format", "json").stdout)["diffs"][0]["headline"]
    )


@pytest.mark.slow
def test_answers_are_bounded_and_bad_input_is_one_line():
    _, answers = calls(
        ("scan", {"traces": [str(SAMPLE)], "top": 1, "evidence": 1}),
        ("scan", {"traces": ["/no/such/trace.json"]}),
        ("diff", {"baseline": str(BEFORE), "candidate": str(AFTER), "top": 2}),
    )
    (scan_failed, scanned), (failed, problem), (_, changed) = answers
    (trace,) = json.loads(scanned)["traces"]
    assert not scan_failed and len(trace["findings"]) == 1 and len(trace["findings"][0]["evidence"]) == 1
    assert failed and problem.endswith("perftool: error: /no/such/trace.json: no such file")
    assert "\n" not in problem and "Traceback" not in problem
    assert all(len(pair["rows"]) <= 2 for pair in json.loads(changed)["diffs"])


@pytest.mark.slow
def test_arguments_the_sdk_rejects_and_standard_input_are_one_line_errors_and_a_mismatch_can_be_allowed():
    """The SDK's own check of an argument's type or value answers in the API's one line (it printed pydantic's
    lines and a link); standard input, the protocol's channel, is no trace; gate's way past a mismatch exists."""
    _, answers = calls(
        ("scan", {"traces": [str(SAMPLE)], "device": "quantum"}),
        ("info", {"traces": "notalist"}),
        ("scan", {"traces": ["-"]}),
        ("gate", {"baseline": str(SAMPLE), "candidate": str(GPU_SAMPLE)}),
        ("gate", {"baseline": str(SAMPLE), "candidate": str(GPU_SAMPLE), "allow_mismatch": True, "fail_on": "never"}),
        ("scan", {"traces": [str(SAMPLE)]}),
    )
    assert answers[0] == (
        True,
        "Error executing tool scan: perftool: error: scan(): device: Input should be 'npu', 'ipu', 'hpu', 'gpu' or "
        "'generic' (got 'quantum')",
    )
    assert answers[1] == (
        True,
        "Error executing tool info: perftool: error: info(): traces: Input should be a valid list (got 'notalist')",
    )
    assert answers[2] == (
        True,
        "Error executing tool scan: perftool: error: -: standard input carries this server's protocol: give the "
        "trace's file",
    )
    refused, (allowed_failed, allowed) = answers[3], answers[4]
    assert refused[0] and "`allow_mismatch=True`" in refused[1]
    assert not allowed_failed and json.loads(allowed)["mismatches"]
    assert not answers[5][0]  # the server reads on after each


def test_standard_input_by_any_name_is_refused_before_it_is_read():
    for name in ("-", "/dev/stdin", "/proc/self/fd/0"):
        with pytest.raises(PerftoolError, match=f"^{name}: standard input carries this server's protocol"):
            mcp.info([name])


def test_a_pipe_or_a_device_is_refused_before_it_is_opened(tmp_path):
    """Opening a pipe waits for a writer: the server waited for ever on one."""
    pipe = tmp_path / "trace.json"
    os.mkfifo(pipe)
    for name in (str(pipe), "/dev/zero"):
        with pytest.raises(PerftoolError, match=f"^{name}: not a file or a directory"):
            mcp.scan([name])


def test_each_per_step_series_holds_its_first_steps_and_the_count_says_how_many_there_are(run):
    """A trace's steps grow with the capture: an answer holds the first `steps` of every per-step series (a
    trace's, a side's of diff and gate, a rank's of a job) and the rest as written."""
    whole = json.loads(run("scan", SAMPLE, "--format", "json", "--fail-on", "never").stdout)["traces"][0]
    (trace,) = json.loads(mcp.scan([str(SAMPLE)], steps=5))["traces"]
    assert trace["steps"] == whole["steps"] == 255
    for series in ("step_durations_us", "warmup_durations_us", "step_starts_us", "step_numbers"):
        assert trace[series] == whole[series][:5], series
    assert [f["fingerprint"] for f in trace["findings"]] == [f["fingerprint"] for f in whole["findings"]]
    assert trace["metrics"] == whole["metrics"] and trace["idle"] == whole["idle"]
    info = json.loads(mcp.info([str(SAMPLE)], steps=5))
    assert len(info["step_times_us"]) == len(info["step_numbers"]) == 5 and info["metrics"]["steps.steady"] == 255
    (pair,) = json.loads(mcp.diff(str(SAMPLE), str(SAMPLE), steps=5))["diffs"]
    assert len(pair["baseline"]["step_durations_us"]) == len(pair["candidate"]["step_durations_us"]) == 5
    (sides,) = json.loads(mcp.gate(str(SAMPLE), str(SAMPLE), steps=5))["step_times"]
    assert len(sides["baseline"]) == len(sides["candidate"]) == 5
    job = json.loads(mcp.scan([str(JOB)], steps=2))["job"]
    assert len(job["ranks"]) == 8
    assert all(len(series) == 2 for rank in job["ranks"] for series in rank["per_step"].values()), job["ranks"][0]
    assert len(json.loads(mcp.scan([str(SAMPLE)]))["traces"][0]["step_durations_us"]) == mcp.STEPS


def test_a_job_s_answer_holds_its_slowest_ranks_documents_beside_its_view_of_every_rank():
    """A job's per-rank documents grow with its ranks: the rank the others wait for comes first, then the longest
    steps; the job view keeps every rank's row."""
    for answer in (mcp.scan([str(JOB)], ranks=2), mcp.info([str(JOB)], ranks=2)):
        document = json.loads(answer)
        job, ranks = document["job"], [trace["rank"] for trace in document["traces"]]
        assert len(job["ranks"]) == 8 and job["slowest_rank"] == 5 and len(ranks) == 2 and 5 in ranks
        steps = {row["rank"]: row["step_time_us"] for row in job["ranks"]}
        other = next(rank for rank in ranks if rank != 5)
        assert steps[other] == max(time for rank, time in steps.items() if rank != 5)
        assert ranks == sorted(ranks)  # in rank order
    assert len(json.loads(mcp.scan([str(JOB)]))["traces"]) == mcp.RANKS == 8


@pytest.mark.slow
def test_info_gate_calibrate_and_tune_answer_with_their_documents(run):
    baseline = REPO / "sample_traces" / "baselines" / "npu__healthy.findings.json"
    tune_config = REPO / "examples" / "tune" / "npu.yaml"
    fitted = REPO / "tests" / "data" / "vocab" / "zero_workers.json.gz"
    _, answers = calls(
        ("info", {"traces": [str(SAMPLE)]}),
        ("gate", {"baseline": str(baseline), "candidate": str(SAMPLE)}),
        ("calibrate", {"trace": str(fitted)}),
        ("tune", {"config": str(tune_config), "evaluations": 20, "top": 2}),
    )
    assert not any(error for error, _ in answers), answers
    documents = [json.loads(text) for _, text in answers]
    for name, document in zip(("info", "gate-result", "calibrate-result", "tune-result"), documents):
        jsonschema.Draft202012Validator(json.loads(run("schema", name).stdout)).validate(document)
    gate = json.loads(run("gate", baseline, SAMPLE, "--format", "json").stdout)
    assert documents[1]["status"] == gate["status"] and len(documents[3]["top"]) == 2
