"""-o never destroys anything: devices and FIFOs are written into, links are written through, inputs are refused."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import threading
from pathlib import Path

import pytest
from conftest import REPO, TORCH_FIXTURE, error_line

SAMPLE_CONFIG = REPO / "sample_traces" / "npu" / "healthy.yaml"
TUNE_CONFIG = REPO / "examples" / "tune" / "gpu.yaml"


def test_a_symlink_is_written_through_and_stays_a_link(run, tmp_path):
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    result = run("info", TORCH_FIXTURE, "--format", "json", "-o", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["dialect"] == "kineto"


def test_a_fifo_is_written_into_not_replaced(run, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = run("info", TORCH_FIXTURE, "--format", "json", "-o", fifo)
    reader.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert json.loads(received[0])["dialect"] == "kineto"


def device_node(tmp_path: Path, name: str, minor: int) -> Path:
    """A private copy of a memory device (1, minor) in ``tmp_path``, so a regression can only harm the copy."""
    path = tmp_path / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        with open(path, "wb"):
            pass
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc.strerror}")
    return path


def test_a_character_device_is_written_into_not_replaced(run, tmp_path):
    null = device_node(tmp_path, "null", 3)
    result = run("info", TORCH_FIXTURE, "-o", null)
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(null.stat().st_mode)


def test_a_full_device_is_a_clear_error_and_stays_a_device(run, tmp_path):
    full = device_node(tmp_path, "full", 7)
    error_line(run("info", TORCH_FIXTURE, "-o", full), str(full), "cannot write")
    assert stat.S_ISCHR(full.stat().st_mode)


def test_other_special_files_are_refused(run, tmp_path):
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        error_line(run("info", TORCH_FIXTURE, "-o", path), "not a regular file")
        assert stat.S_ISSOCK(path.stat().st_mode)


@pytest.mark.parametrize(
    "command",
    [
        lambda own: ("info", own, "-o", own),
        lambda own: ("scan", own, "--format", "json", "-o", own),
        lambda own: ("gate", own, own, "--format", "json", "-o", own),
    ],
    ids=["info", "scan", "gate"],
)
def test_an_output_that_is_an_input_is_refused_and_left_alone(run, tmp_path, command):
    own = tmp_path / "t.json.gz"
    shutil.copy(TORCH_FIXTURE, own)
    before = own.read_bytes()
    error_line(run(*command(str(own))), "is also an input")
    assert own.read_bytes() == before


def test_an_input_reached_through_another_spelling_or_a_link_is_refused(run, tmp_path, monkeypatch):
    own = tmp_path / "c.yaml"
    shutil.copy(SAMPLE_CONFIG, own)
    link = tmp_path / "link.yaml"
    link.symlink_to(own)
    monkeypatch.chdir(tmp_path)
    before = own.read_bytes()
    error_line(run("emulate", "c.yaml", "-o", "./c.yaml"), "is also an input")
    error_line(run("emulate", "c.yaml", "-o", str(link)), "is also an input")
    assert own.read_bytes() == before and link.is_symlink()


def test_tune_refuses_to_overwrite_its_config_or_one_output_with_another(run, tmp_path):
    own = tmp_path / "gpu.yaml"
    shutil.copy(TUNE_CONFIG, own)
    before = own.read_bytes()
    error_line(run("tune", own, "--evaluations", "4", "--write-best", own), "is also an input")
    assert own.read_bytes() == before
    same = tmp_path / "out.json"
    error_line(run("tune", own, "--evaluations", "4", "--results", same, "-o", same), "give each output its own file")
    assert not same.exists()


def test_regular_files_keep_being_replaced_atomically(run, tmp_path):
    out = tmp_path / "out.json"
    out.write_text("stale")
    out.chmod(0o640)
    assert run("info", TORCH_FIXTURE, "--format", "json", "-o", out).exit_code == 0
    assert json.loads(out.read_text())["dialect"] == "kineto"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert [p.name for p in Path(tmp_path).iterdir()] == ["out.json"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("setup", "command", "said"),
    [
        (lambda d: (d / "spec.yaml").write_text("model: X\n"),
         ("info", "t.json.gz", "--device-spec", "spec.yaml", "-o", "spec.yaml"), "is also an input"),
        (lambda d: (d / "perftool.yaml").write_text("evidence: 3\n"),
         ("scan", "t.json.gz", "-o", "perftool.yaml"), "is also an input"),  # found, not given: read all the same
        (lambda d: (d / "perftool.yaml").write_text("evidence: 3\n"),
         ("gate", "t.json.gz", "t.json.gz", "-o", "perftool.yaml"), "is also an input"),
        (lambda d: (d / "myrules").mkdir(),
         ("scan", "t.json.gz", "--rules", "myrules", "-o", "myrules/report.yaml"), "an input directory"),
        (lambda d: ((d / "own").mkdir(), (d / "perftool.yaml").write_text("rule_dirs: [own]\n")),
         ("gate", "t.json.gz", "t.json.gz", "-o", "own/verdict.txt"), "an input directory"),  # the project's rules
    ],
    ids=["device spec", "found project config", "gate's project config", "rules directory", "project's rules"],
)  # fmt: skip
def test_every_file_a_command_reads_is_an_input_no_output_replaces(run, tmp_path, monkeypatch, setup, command, said):
    """Not only the traces: the device spec, the project config found by the upward search, and every rule
    directory (given or the project's) are inputs; writing onto or into one is refused before any work."""
    (tmp_path / ".git").mkdir()  # the project search stops at this repository's root
    shutil.copy(TORCH_FIXTURE, tmp_path / "t.json.gz")
    setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    error_line(run(*command), said)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_standard_output_that_cannot_be_written_is_one_line_and_exit_2(fmt):
    """Standard output on a full disk (or EIO): one line naming it, exit 2, never a traceback with exit 1 (the code
    for 'a finding reached --fail-on') (hardening round 4, D17)."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "perftool", "scan", str(TORCH_FIXTURE), "--fail-on", "never", "--format", fmt],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == "perftool: error: standard output: cannot write: No space left on device\n"


@pytest.mark.parametrize("command", ["scan", "info"])
def test_a_closed_standard_output_is_an_error_not_a_lost_report(command):
    """Started with standard output closed (``>&-``), the report has nowhere to go: one line, exit 2, never exit 0
    with the report lost nor a traceback (hardening round 4, D18)."""
    import subprocess
    import sys

    options = ["--fail-on", "never"] if command == "scan" else []
    done = subprocess.run(
        [sys.executable, "-m", "perftool", command, str(TORCH_FIXTURE), *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
        preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == "perftool: error: standard output is closed: the report has nowhere to go (give -o FILE)\n"


def test_a_closed_standard_output_still_writes_the_file_given_with_o(tmp_path):
    """``-o FILE`` needs no standard output: the report is written and the command succeeds."""
    import subprocess
    import sys

    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "perftool", "info", str(TORCH_FIXTURE), "--format", "json", "-o", str(report)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text())["dialect"] == "kineto"
