"""Names from a trace are data in every output: no terminal escapes or invisible characters, no Markdown links,
images or mentions, no HTML, XML that parses, SARIF URIs that are URI references."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from urllib.parse import unquote

import pytest
import yaml
from conftest import REPO, kernel_steps

HOSTILE = [
    "k\x01", "[x](https://evil.example)", "![t](https://evil.example/t.png)", "@alice", "<script>alert(1)</script>",
    "\u202eevil", "nul\x00", "\x1b[31mred", "a|b", "`tick`", "www.evil.example", "12. listed",
]  # fmt: skip
HIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")  # the word joiner may stay
LINK = re.compile(r"(?<!\\)\]\((?:https?|www)")  # [text](url) or ![alt](url), live
RAW_HTML = re.compile(r"(?<!\\)<(script|b)\b")  # the names' tags; perftool's own <details> may stay
AUTOLINK = re.compile(r"www\.evil|(?<!\\)://evil")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A baseline and a candidate three times slower, their kernels named to attack what shows them."""
    folder = tmp_path_factory.mktemp("hostile")
    return kernel_steps(folder / "base.json", 6, 1, HOSTILE), kernel_steps(folder / "new.json", 6, 3, HOSTILE)


def check_output(fmt: str, out: str, junit_schema=None, sarif_validator=None, path=None) -> None:
    """What each format must hold to, whatever the names in it."""
    assert not HIDDEN.search(out) or fmt == "json", HIDDEN.search(out)  # JSON keeps names exact, as data
    if fmt in ("json", "sarif"):
        document = json.loads(out)
        if fmt == "sarif":
            assert [error.message for error in sarif_validator.iter_errors(document)] == []
    elif fmt == "junit":
        ET.fromstring(out.encode())  # a control character made it unparsable
        junit_schema.validate(str(path))
    elif fmt == "markdown":
        assert not LINK.search(out) and not RAW_HTML.search(out) and "@alice" not in out  # "@\u2060alice": no one told
        assert not AUTOLINK.search(out)  # GitHub makes links of both by itself
    elif fmt == "html":
        assert "<script>alert" not in out


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "junit", "sarif", "github", "html"])
def test_gate_shows_hostile_names_as_data(run, pair, tmp_path, fmt, junit_schema, sarif_validator):
    out = tmp_path / f"gate.{fmt}"
    assert run("gate", *pair, "--format", fmt, "-o", out).exit_code == 1  # three times slower
    check_output(fmt, out.read_text(), junit_schema, sarif_validator, out)


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "html"])
def test_diff_shows_hostile_names_as_data(run, pair, tmp_path, fmt):
    out = tmp_path / f"diff.{fmt}"
    assert run("diff", *pair, "--format", fmt, "-o", out).exit_code == 0
    text = out.read_text()
    check_output(fmt, text)
    if fmt == "markdown":
        assert "\\[x\\](https\\://evil.example)" in text  # shown, escaped, not dropped


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "sarif", "github", "html"])
def test_scan_shows_a_hostile_file_name_as_data(run, tmp_path, fmt, sarif_validator, monkeypatch):
    """A trace whose file name holds controls, a bidi override, Markdown, HTML, a mention, spaces, % and a colon."""
    monkeypatch.chdir(tmp_path)
    name = "evil \x1b[31m\u202e\x01 [x](https:evil) @alice <b>|% a:b.json"
    source = REPO / "sample_traces" / "gpu" / "launch_bound_no_cuda_graphs.trace.json.gz"
    (tmp_path / name).write_bytes(__import__("gzip").decompress(source.read_bytes()))
    out = tmp_path / f"scan.{fmt}"
    assert run("scan", name, "--format", fmt, "-o", out.name, "--fail-on", "never").exit_code == 0
    text = out.read_text()
    check_output(fmt, text, sarif_validator=sarif_validator)
    if fmt == "sarif":
        uris = {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(text)["runs"][0]["results"]
        }
        (uri,) = uris
        assert " " not in uri and ":" not in uri.split("/")[0] and unquote(uri) == name


@pytest.mark.parametrize("command", ["emulate", "tune"])
def test_a_workload_named_with_escapes_is_printed_as_data(run, tmp_path, command):
    config = yaml.safe_load((REPO / "examples" / "tune" / "npu.yaml").read_text())
    config["workload"]["name"] = "\x1b[2J\x1b[31mevil\u202e"
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run(command, path, *(["--set", "tune.space={loop_size: [1, 8]}"] if command == "tune" else []))
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout and "\\x1b[31mevil" in result.stdout
