"""Every rule's cases (tests/rule_cases/PTnnn.yaml): small traces in each vocabulary, and what the scan of each
must and must not report. One test drives them all; see tests/rule_cases/README.md for the format."""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path

import pytest
import yaml

from perftool.rules.catalog import load_catalog

CASES = Path(__file__).parent / "rule_cases"
RANK = {"info": 0, "warning": 1, "error": 2}


def _meta(kind: str, pid: int, tid: int, **args) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


VOCABULARIES = {  # vocabulary -> (track alias -> (pid, tid)), metadata naming them, the step markers' track
    "kineto": (
        {"host": (100, 1), "device": (0, 7), "comm": (0, 13)},
        [
            _meta("process_name", 100, 0, name="python3"),
            _meta("process_labels", 100, 0, labels="CPU"),
            _meta("process_name", 0, 0, name="python3"),
            _meta("process_labels", 0, 0, labels="GPU 0"),
            _meta("thread_name", 0, 7, name="stream 7"),
            _meta("thread_name", 0, 13, name="stream 13"),
        ],
        "host",
    ),
    "kineto-legacy": (
        {"host": (100, 1), "device": (0, 7)},
        [
            _meta("process_name", 100, 0, name="python"),
            _meta("thread_name", 0, 7, name="stream 7"),
        ],
        "host",
    ),
    "ascend": (
        {"python": (1, 11), "cann": (2, 11), "npu": (3, 5), "npu_comm": (3, 8), "hccl": (4, 1)},
        [
            _meta("process_name", 1, 0, name="Python"),
            _meta("process_name", 2, 0, name="CANN"),
            _meta("process_name", 3, 0, name="Ascend Hardware"),
            _meta("thread_name", 3, 5, name="Stream 5"),
            _meta("thread_name", 3, 8, name="Stream 8"),
            _meta("process_name", 4, 0, name="HCCL"),
            _meta("thread_name", 4, 1, name="Plane 0"),
        ],
        "python",
    ),
    "graphcore": (
        {"host": (1, 1), "ipu": (2, 1)},
        [
            _meta("process_name", 1, 0, name="Host (Poplar)"),
            _meta("process_name", 2, 0, name="IPU 0"),
            _meta("thread_name", 2, 1, name="Execution"),
        ],
        "host",
    ),
    "xla-gpu": (  # jax.profiler on a GPU: planes as processes, a line per stream and kind of work
        {"python": (701, 1), "launcher": (701, 2), "device": (1, 16), "h2d": (1, 17)},
        [
            _meta("process_name", 701, 0, name="/host:CPU"),
            _meta("thread_name", 701, 1, name="python"),
            _meta("thread_name", 701, 2, name="Host Threads/2356"),
            _meta("process_name", 1, 0, name="/device:GPU:0"),
            _meta("thread_name", 1, 16, name="Stream #16(Kernel)"),
            _meta("thread_name", 1, 17, name="Stream #17(MemcpyH2D)"),
        ],
        "python",
    ),
    "xla-tpu": (  # jax.profiler on a TPU: the ops, the programs they belong to and the steps, each a line
        {"python": (701, 1), "steps": (1, 1), "modules": (1, 2), "ops": (1, 3), "async": (1, 4)},
        [
            _meta("process_name", 701, 0, name="/host:CPU"),
            _meta("thread_name", 701, 1, name="python"),
            _meta("process_name", 1, 0, name="/device:TPU:0"),
            _meta("thread_name", 1, 1, name="Steps"),
            _meta("thread_name", 1, 2, name="XLA Modules"),
            _meta("thread_name", 1, 3, name="XLA Ops"),
            _meta("thread_name", 1, 4, name="Async XLA Ops"),
        ],
        "steps",
    ),
    "gaudi": (
        {"host": (10, 1), "device": (0, 1)},
        [
            _meta("process_name", 10, 0, name="python3"),
            _meta("process_name", 0, 0, name="HPU 0"),
            _meta("thread_name", 0, 1, name="TPC"),
        ],
        "host",
    ),
}


READ_AS = {  # vocabulary -> the dialect and device family perftool must read a case's trace as
    "kineto": ("kineto", "gpu"),
    "ascend": ("ascend", "npu"),
    "graphcore": ("graphcore", "ipu"),
    "gaudi": ("kineto", "hpu"),
    "xla-gpu": ("xla", "gpu"),
    "xla-tpu": ("xla", "generic"),
}
MARKER = {"xla-tpu": "{step}"}  # how a vocabulary names its step markers, where not ProfilerStep#N (a TPU's by number)


def _event(spec: dict, at: float, tracks: dict) -> dict:
    pid, tid = tracks[spec["track"]]
    event = {
        "ph": "X",
        "name": spec["name"],
        "cat": spec.get("cat", ""),
        "pid": pid,
        "tid": tid,
        "ts": at + spec["ts"],
        "dur": spec["dur"],
    }
    return event | ({"args": spec["args"]} if "args" in spec else {})


def _events(specs: list, at: float, tracks: dict, flows: count) -> list:
    """The events of ``specs`` at ``at``; two that name the same ``flow`` are joined by a launch flow (Kineto's
    ``ac2g``) from the first (a launch on the host) to the second (the kernel it started)."""
    events = [_event(spec, at, tracks) for spec in specs]
    ends: dict[str, list] = {}
    for spec, event in zip(specs, events):
        if "flow" in spec:
            ends.setdefault(spec["flow"], []).append(event)
    for launch, kernel in ends.values():
        flow = {"name": "ac2g", "cat": "ac2g", "id": next(flows)}
        events.append(flow | {"ph": "s", "pid": launch["pid"], "tid": launch["tid"], "ts": launch["ts"]})
        events.append(flow | {"ph": "f", "bp": "e", "pid": kernel["pid"], "tid": kernel["tid"], "ts": kernel["ts"]})
    return events


def build(case: dict) -> dict:
    """The case's trace: its steps, each with the case's events (repeated, and every n-th step's extras)."""
    vocabulary = "kineto-legacy" if case.get("legacy") else case["vocabulary"]
    tracks, events, step_track = VOCABULARIES[vocabulary]
    events = list(events)
    repeat = case.get("repeat", {"count": 1, "every": 0})
    step_cat = {"kineto": "user_annotation", "kineto-legacy": "Operator", "gaudi": "user_annotation"}.get(
        vocabulary, ""
    )
    flows = count(1)
    for i in range(case["steps"]):
        t = i * case["period"]
        if case.get("markers", True):
            name = MARKER.get(vocabulary, "ProfilerStep#{step}").format(step=i)
            marker = {"name": name, "track": step_track, "ts": 0, "dur": case["period"] - 1}
            events.append(_event(marker | {"cat": step_cat}, t, tracks))
        if i == 0:
            events += _events(case.get("first", []), t, tracks, flows)
        for k in range(repeat["count"]):
            events += _events(case["events"], t + k * repeat["every"], tracks, flows)
        for n, extra in case.get("every", {}).items():
            if i % int(n) == int(n) - 1:
                events += _events(extra, t, tracks, flows)
    document: dict = {"traceEvents": events}
    if "device" in case:  # Kineto's record of the GPU: its name picks the device's figures, its SMs where given
        document["deviceProperties"] = [{"id": 0, "name": case["device"]} | case.get("device_properties", {})]
    return document


def all_cases() -> list:
    found = []
    for path in sorted(CASES.glob("PT*.yaml")):
        document = yaml.safe_load(path.read_text())
        found += [pytest.param(document["rule"], case, id=f"{path.stem}: {case['name']}") for case in document["cases"]]
    return found


@pytest.mark.parametrize(("rule", "case"), all_cases())
def test_rule_case(run, write_trace, rule, case):
    result = run("scan", write_trace(build(case)), "--format", "json", "--fail-on", "never")
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
        if "capped_has" in expected:
            assert expected["capped_has"] in (finding["capped"] or ""), finding["capped"]
        if expected.get("held") is False:
            assert finding["capped"] is None, finding["capped"]
        if "fix_lacks" in expected:
            assert expected["fix_lacks"] not in finding["fix"]["text"], finding["fix"]["text"]
        for name, value in expected.get("value", {}).items():
            assert finding["values"][name] == value, (name, finding["values"][name])
        for name, value in expected.get("approx", {}).items():
            assert finding["values"][name] == pytest.approx(value, rel=1e-3), (name, finding["values"][name])
    for rejected in case.get("reject", []):
        assert rejected not in findings, f"{rejected} reported: {findings[rejected]['message']}"


def test_every_rule_has_a_case_that_reports_it():
    """Every rule about one trace; rules about a job of many ranks (PT013) have theirs in tests/test_jobs.py."""
    from perftool.rules.detectors import DETECTORS

    reported = {expected["rule"] for _, case in (p.values for p in all_cases()) for expected in case.get("expect", [])}
    assert {rule.id for rule in load_catalog() if DETECTORS[rule.detector].level == "trace"} <= reported
