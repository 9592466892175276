"""``perftool gate --format junit``: one test case per check, for CI systems that read JUnit XML.

A failed check is a ``<failure>`` (a check not made too, unless ``--fail-on never``), a skipped one
``<skipped>``; a warning passes, with its reason in ``<system-out>``. The document validates against the
JUnit schema that Jenkins and pytest use (junit-10.xsd), which allows ``skipped`` on a test suite but not
on ``<testsuites>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from perftool.common.errors import one_line
from perftool.gate.checks import Verdict
from perftool.gate.verdict import GateResult


def render(result: GateResult) -> str:
    counts = {verdict: sum(result.counted(check) is verdict for check in result.checks) for verdict in Verdict}
    suites = ET.Element(
        "testsuites",
        name="perftool gate",
        tests=str(len(result.checks)),
        failures=str(counts[Verdict.FAIL]),
        errors="0",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"perftool gate {result.candidate}",
        tests=str(len(result.checks)),
        failures=str(counts[Verdict.FAIL]),
        errors="0",
        skipped=str(counts[Verdict.SKIP]),
        time="0",
    )
    for check in result.checks:
        case = ET.SubElement(
            suite, "testcase", classname=f"perftool.gate.{check.id.split(':')[0]}", name=check.name, time="0"
        )
        verdict = result.counted(check)
        if check.verdict is Verdict.NOT_CHECKED and verdict is Verdict.FAIL:
            ET.SubElement(case, "failure", message=f"not checked: {check.detail}", type="not checked")
        elif check.verdict is Verdict.NOT_CHECKED:
            ET.SubElement(case, "system-out").text = f"warning: not checked: {check.detail}"
        elif verdict is Verdict.FAIL:
            failure = ET.SubElement(case, "failure", message=check.reason(), type="regression")
            failure.text = f"{check.figures()}; fails on: {check.limit}"
        elif verdict is Verdict.SKIP:
            ET.SubElement(case, "skipped", message=check.detail)
        elif verdict is Verdict.WARN:
            ET.SubElement(case, "system-out").text = f"warning: {check.reason()}: {check.figures()}"
    for element in suites.iter():  # XML 1.0 cannot hold most control characters at all, escaped or not
        element.attrib.update({key: one_line(value) for key, value in element.attrib.items()})
        element.text = one_line(element.text) if element.text else element.text
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
