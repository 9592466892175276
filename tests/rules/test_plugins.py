"""Detectors are plug-ins: a package registers one under the ``perftool.detectors`` entry points, a rule
file puts it to work, and perftool finds it with no change of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

from perftool.common.plugins import registered
from perftool.rules.detectors import DETECTORS, _registered

PLUGIN = '''
"""A third-party detector: device ops longer than a threshold."""
import numpy as np

from perftool.rules.detectors.base import Detection, Detector, Setting
from perftool.trace.model import Kind


def detect(scope, params):
    trace = scope.trace
    rows = np.flatnonzero((trace.kind == Kind.COMPUTE) & scope.in_window & (trace.dur >= params["min_us"]))
    if rows.size == 0:
        return None
    lost = float(trace.dur[rows].sum())
    return Detection(lost, {"count": int(rows.size)}, scope.events(rows), key="long")


DETECTOR = Detector(
    name="long_device_ops", summary="device ops longer than min_us", values={"count": "such ops"}, detect=detect,
    settings={"min_us": Setting(1000.0, "the shortest op reported, µs")},
)
'''

RULE = """
id: PX100
name: long-device-ops
title: Long device ops
detector: long_device_ops
thresholds: {info: 0.0}
message: "{count} device ops take at least a millisecond."
fix:
  generic: "Split them."
explain: {what: Long ops., why: They hide others., example: A 5 ms matmul.}
"""


def _plugin_path(tmp_path) -> dict[str, str]:
    """A plug-in package as pip would install it: its module and a dist-info with the entry point."""
    (tmp_path / "perftool_demo_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "perftool_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: perftool-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[perftool.detectors]\nlong_device_ops = perftool_demo_plugin:DETECTOR\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "PX100-long-device-ops.yaml").write_text(RULE)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def _perftool(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perftool", *args], env=env, capture_output=True, text=True, cwd=REPO)


@pytest.mark.slow
def test_a_plugin_detector_is_found_and_reports(tmp_path):
    env = _plugin_path(tmp_path)
    trace = str(REPO / "sample_traces" / "npu" / "healthy.trace.json.gz")
    result = _perftool(env, "scan", trace, "--rules", str(tmp_path / "rules"), "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    findings = {f["rule_id"]: f for f in json.loads(result.stdout)["traces"][0]["findings"]}
    assert findings["PX100"]["message"].endswith("device ops take at least a millisecond.")
    listed = _perftool({**env, "COLUMNS": "200"}, "rules", "list", "--rules", str(tmp_path / "rules"))
    assert "long_device_ops" in listed.stdout and "from perftool-demo-plugin" in listed.stdout, listed.stdout


@pytest.mark.slow
def test_without_the_plugin_its_rule_is_a_clear_error(tmp_path):
    _plugin_path(tmp_path)
    result = _perftool(
        dict(os.environ),
        "scan",
        str(REPO / "sample_traces" / "npu" / "healthy.trace.json.gz"),
        "--rules",
        str(tmp_path / "rules"),
    )
    assert result.returncode == 2 and "unknown detector 'long_device_ops'" in result.stderr


def test_every_built_in_detector_is_an_entry_point_that_loads():
    """perftool's own detectors are listed once, as entry points: every detector module of the package has one,
    each loads a Detector of its entry's name, and they are the detectors perftool runs."""
    from importlib.metadata import entry_points

    from perftool.rules.detectors import DETECTORS, GROUP, ORIGINS, OWN, Detector, built_in_modules

    own = [entry for entry in entry_points(group=GROUP) if entry.value.startswith(OWN)]
    assert sorted(entry.value.split(":")[0] for entry in own) == built_in_modules()
    for entry in own:
        detector = entry.load()
        assert isinstance(detector, Detector) and detector.name == entry.name
        assert DETECTORS[detector.name] is detector and ORIGINS[detector.name] == "perftool"
    rule_detectors = {line.split(":", 1)[1].strip() for path in (REPO / "rules").glob("PT*.yaml")
                      for line in path.read_text().splitlines() if line.startswith("detector:")}  # fmt: skip
    assert rule_detectors == {entry.name for entry in own}  # each built-in rule has its detector, and no more


def _never_installed(monkeypatch) -> None:
    """As if perftool ran from a source tree no distribution lists (the caller clears the cache again after)."""
    from perftool.common import plugins

    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    plugins.registered.cache_clear()


def test_a_source_tree_never_installed_finds_the_built_in_detectors_in_its_pyproject(monkeypatch):
    import perftool.rules.detectors as detectors
    from perftool.common import plugins

    _never_installed(monkeypatch)
    try:
        found, origins = detectors._registered()
    finally:
        plugins.registered.cache_clear()
    assert found == detectors.DETECTORS and set(origins.values()) == {"perftool"}


FORMAT_PLUGIN = '''
"""A third-party output format: a scan's findings as tab-separated lines."""


def render(report):
    rows = [f"{trace.path}\\t{finding.rule_id}\\t{finding.severity.value}" for trace, finding in report.findings]
    return "\\n".join(["trace\\trule\\tseverity", *rows]) + "\\n"
'''


@pytest.mark.slow
def test_a_plugin_format_is_offered_and_renders(tmp_path):
    """A package that registers ``scan.tsv`` under ``perftool.formats`` adds ``--format tsv`` to scan, and only to
    scan; its renderer gets the scan's report."""
    (tmp_path / "perftool_tsv.py").write_text(textwrap.dedent(FORMAT_PLUGIN))
    info = tmp_path / "perftool_tsv-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: perftool-tsv\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[perftool.formats]\nscan.tsv = perftool_tsv:render\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    trace = str(REPO / "sample_traces" / "npu" / "host_bound_loop_size.trace.json.gz")
    result = _perftool(env, "scan", trace, "--format", "tsv", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header == "trace\trule\tseverity" and rows
    assert all(row.startswith(trace + "\t") and row.split("\t")[1].startswith("PT") for row in rows)
    refused = _perftool(env, "diff", trace, trace, "--format", "tsv")
    assert refused.returncode == 2 and "'tsv' is not one of" in refused.stderr
    (tmp_path / "perftool_tsv.py").write_text("import a_module_nobody_installed\n")
    broken = _perftool(env, "scan", trace, "--format", "tsv")
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert broken.stderr.startswith("perftool: error: the tsv format (perftool_tsv:render) could not be loaded: ")


def test_every_built_in_format_is_an_entry_point_that_loads():
    """perftool's own formats are listed once, as entry points named <what>.<format>: each loads a function, every
    command's --format offers text first, and every renderer module of the package is one of them."""
    from importlib.metadata import entry_points
    from pkgutil import iter_modules

    import perftool.report as report
    from perftool.common.plugins import OWN
    from perftool.report.registry import GROUP, SHOWN, formats

    own = [entry for entry in entry_points(group=GROUP) if entry.value.startswith(OWN)]
    assert {entry.name.partition(".")[0] for entry in own} == set(SHOWN)
    for entry in own:
        assert callable(entry.load()), entry
    for shown in SHOWN:
        assert formats(shown)[0] == "text" and len(formats(shown)) >= 2, shown
    renderers = {entry.value.split(":")[0].rsplit(".", 1)[1] for entry in own}
    helpers = {"console", "escape", "html_page", "info_rows", "overall", "progress", "registry", "roofline_rows",
               "rule_page", "svg", "tune_best_yaml", "tune_results_csv", "tune_results_json", "views"}  # fmt: skip
    assert {module.name for module in iter_modules(report.__path__)} - helpers == renderers


def test_a_source_tree_never_installed_finds_the_built_in_formats_in_its_pyproject(monkeypatch):
    from perftool.common import plugins
    from perftool.report.registry import GROUP, SHOWN, formats

    installed = {shown: formats(shown) for shown in SHOWN}
    _never_installed(monkeypatch)
    try:
        names = {entry.name for entry in plugins.registered(GROUP)}
        assert {shown: sorted(formats(shown)) for shown in SHOWN} == {s: sorted(f) for s, f in installed.items()}
    finally:
        plugins.registered.cache_clear()
    assert "scan.sarif" in names and "calibrate.json" in names


REGISTRY = """
from perftool.rules.detectors.base import Detector

def detect(scope, params):
    return None

NOT_A_DETECTOR = "long_device_ops"
DETECTOR = Detector(name="long_device_ops", summary="first", values={}, detect=detect)
AGAIN = Detector(name="long_device_ops", summary="second", values={}, detect=detect)
CLASH = Detector(name="sync_points", summary="a built-in's name", values={}, detect=detect)
"""


@pytest.fixture
def registry_plugin(tmp_path, monkeypatch):
    """An installed package registering a detector, another of the same name, one with a built-in's name and
    something that is no detector: the registry's entry points read afresh, and again once it is gone."""
    (tmp_path / "perftool_demo_registry.py").write_text(REGISTRY)
    info = tmp_path / "perftool_demo_registry-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: perftool-demo-registry\nVersion: 0.1\n")
    entries = ["not_one = perftool_demo_registry:NOT_A_DETECTOR", "long_device_ops = perftool_demo_registry:DETECTOR",
               "long_again = perftool_demo_registry:AGAIN", "sync_points = perftool_demo_registry:CLASH"]  # fmt: skip
    (info / "entry_points.txt").write_text("[perftool.detectors]\n" + "\n".join(entries) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registered.cache_clear()
    yield
    monkeypatch.undo()
    registered.cache_clear()


def test_the_registry_keeps_the_first_detector_of_a_name_and_skips_what_is_none(registry_plugin):
    found, origin = _registered()
    assert found["long_device_ops"].summary == "first" and origin["long_device_ops"] == "perftool-demo-registry"
    assert found["sync_points"] is DETECTORS["sync_points"] and origin["sync_points"] == "perftool"
    assert set(found) == set(DETECTORS) | {"long_device_ops"}
