"""``perftool mcp``: the server started as an agent starts it (a subprocess over stdio) and driven with the official
SDK's client: its tools answer with the documents ``--format json`` writes, bounded, and bad input in one line."""

from __future__ import annotations

import asyncio
import json
import sys

import jsonschema
import pytest
from conftest import REPO

SAMPLE = REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz"
BEFORE, AFTER = (REPO / "tests" / "data" / "vocab" / f"diff_kineto_{side}.json.gz" for side in ("before", "after"))


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
