"""Every rule's cases (tests/rule_cases/PTnnn.yaml): small traces in each vocabulary, and what the scan of each
must and must not report. One test drives them all; see tests/rule_cases/README.md for the format."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from builders import CASES, build

from perftool.rules.catalog import load_catalog

RANK = {"info": 0, "warning": 1, "error": 2}
READ_AS = {  # vocabulary -> the dialect and device family perftool must read a case's trace as
    "kineto": ("kineto", "gpu"),
    "kineto-workers": ("kineto", "gpu"),
    "kineto-2gpu": ("kineto", "gpu"),
    "kineto-npu": ("kineto", "npu"),  # torch_npu as PyTorch's PrivateUse1 device: an NPU whatever the dialect
    "ascend": ("ascend", "npu"),
    "graphcore": ("graphcore", "ipu"),
    "gaudi": ("kineto", "hpu"),
    "xla-gpu": ("xla", "gpu"),
    "xla-tpu": ("xla", "generic"),
}


def all_cases() -> list:
    found = []
    for path in sorted(CASES.glob("PT*.yaml")):
        document = yaml.safe_load(path.read_text())
        found += [pytest.param(document["rule"], case, id=f"{path.stem}: {case['name']}") for case in document["cases"]]
    return found


@pytest.mark.parametrize(("rule", "case"), all_cases())
def test_rule_case(run, write_trace, rule, case):
    named = {rule, *(expected["rule"] for expected in case.get("expect", [])), *case.get("reject", [])}
    trace = write_trace(build(case))  # scanned with the rules the case speaks of: a case is about them
    result = run("scan", trace, "--format", "json", "--fail-on", "never", "--select", ",".join(sorted(named)))
    assert result.exit_code == 0, result.output
    scanned = json.loads(result.stdout)["traces"][0]
    assert (scanned["dialect"], scanned["family"]) == READ_AS[case["vocabulary"]]  # the case is in that vocabulary
    findings = {f["rule_id"]: f for f in scanned["findings"]}
    for expected in case.get("expect", []):
        finding = findings.get(expected["rule"])
        assert finding is not None, f"{expected['rule']} not reported; got {sorted(findings)}"
        assert RANK[finding["severity"]] >= RANK[expected.get("severity", "info")], finding["severity"]
        for key, where in (("fix_has", "fix"), ("message_has", "message")):
            if key in expected:
                text = finding["fix"]["text"] if where == "fix" else finding["message"]
                assert expected[key] in text, text
        if "title" in expected:
            assert finding["title"] == expected["title"], finding["title"]
        if "capped_has" in expected:
            assert expected["capped_has"] in (finding["capped"] or ""), finding["capped"]
        if expected.get("held") is False:
            assert finding["capped"] is None, finding["capped"]
        lacks = expected.get("fix_lacks", [])
        for text in [lacks] if isinstance(lacks, str) else lacks:
            assert text not in finding["fix"]["text"], finding["fix"]["text"]
        if "key" in expected:  # what the finding is about, as its fingerprint says: the rule and that key
            about = hashlib.sha256(f"{expected['rule']}\0{expected['key']}".encode()).hexdigest()[:16]
            assert finding["fingerprint"] == about, f"not the fingerprint of key {expected['key']!r}"
        for name, value in expected.get("value", {}).items():
            assert finding["values"][name] == value, (name, finding["values"][name])
        for name, value in expected.get("approx", {}).items():
            assert finding["values"][name] == pytest.approx(value, rel=1e-3), (name, finding["values"][name])
    for rejected in case.get("reject", []):
        assert rejected not in findings, f"{rejected} reported: {findings[rejected]['message']}"


@pytest.mark.slow  # a second scan of every case, with every rule: run with --all (CI does)
@pytest.mark.parametrize(("rule", "case"), all_cases())
def test_a_case_written_in_reverse_order_finds_the_same(run, write_trace, rule, case):
    """Profilers write events in their own orders (by thread, by end, device spans last): every case's trace with its
    events listed last first gives the same findings, in the same words (names of equal time by name, not by where
    the file lists them first), with the same losses."""
    said = []
    for order in (1, -1):
        document = build(case)
        document["traceEvents"] = document["traceEvents"][::order]
        result = run("scan", write_trace(document), "--format", "json", "--fail-on", "never")
        findings = json.loads(result.stdout)["traces"][0]["findings"]
        said.append({f["rule_id"]: (f["severity"], f["message"], f["impact"]["lost_us"]) for f in findings})
    forward, backward = said
    assert forward.keys() == backward.keys()
    for rule_id, (severity, message, lost) in forward.items():
        assert backward[rule_id][:2] == (severity, message)
        assert backward[rule_id][2] == pytest.approx(lost, rel=1e-9, abs=1e-6)


def test_every_rule_has_a_case_that_reports_it():
    """Every rule about one trace; rules about a job of many ranks (PT013) have theirs in tests/job/test_jobs.py."""
    from perftool.rules.detectors import DETECTORS

    reported = {expected["rule"] for _, case in (p.values for p in all_cases()) for expected in case.get("expect", [])}
    assert {rule.id for rule in load_catalog() if DETECTORS[rule.detector].level == "trace"} <= reported
