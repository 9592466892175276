"""Text output reads well in an 80-column CI log and a 120-column terminal: no column cut or dropped."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import REPO

from perftool.cli.main import cli
from perftool.common import limits

SAMPLES = REPO / "sample_traces"
GATE = (
    "gate",
    str(SAMPLES / "baselines" / "npu__healthy.findings.json"),
    str(SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz"),
)


def piped(*args: str, columns: int) -> str:
    """What a CI log shows: the command's stdout, not a terminal, COLUMNS wide."""
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": str(columns)}, catch_exceptions=False)
    assert "Traceback" not in result.output
    return result.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_gate_keeps_every_column_and_every_reason(columns):
    out = piped(*GATE, columns=columns)
    assert "…" not in out and max(map(len, out.splitlines())) <= columns
    for figure in ("9.243 ms", "11.239 ms", "+21.6%", "0.6%", "17.8%", "+17.2 pts", "device.compute_fraction"):
        assert figure in out  # each in its unit, and a metric's name whole
    words = " ".join(out.replace("│", " ").split())  # a reason may wrap inside its cell
    assert "21.6% worse, significant" in words and "past the error limit" in words  # the why, in either layout


@pytest.mark.parametrize("columns", [80, 140])
def test_gate_folds_a_reason_s_word_longer_than_its_cell_and_cuts_none(columns):
    """The way to capture more steps names a call with its arguments, one word wider than the reason's cell (the Why
    list at 80 columns, the why column wide): folded onto the next line, never cut."""
    rank = str(REPO / "tests" / "data" / "real" / "torch_npu_db_l2_job" / "rank0_ascend_pt")
    out = piped("gate", rank, rank, columns=columns)
    assert "…" not in out and max(map(len, out.splitlines())) <= columns
    joined = "".join(out.replace("│", " ").split())
    assert "torch_npu.profiler.profile(schedule=torch_npu.profiler.schedule(wait=1,warmup=1,active=5))" in joined


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("family", ["gpu", "hpu", "ipu", "npu"])
@pytest.mark.slow
def test_tune_table_keeps_every_knob_readable(columns, family):
    out = piped(
        "tune",
        str(REPO / "examples" / "tune" / f"{family}.yaml"),
        "--evaluations",
        "40",
        "--no-progress",
        columns=columns,
    )
    assert "…" not in out and max(map(len, out.splitlines())) <= columns
    header = next(line for line in out.splitlines() if line.lstrip().startswith("# "))
    for column in ("prefetch", "samples/s", "step", "memory"):
        assert column in header
    recommended = next(line for line in out.splitlines() if "★" in line and "GB" in line)
    assert " ms " in recommended and recommended.rstrip().endswith("GB")


@pytest.mark.slow
def test_tune_why_lines_wrap_under_their_bullet():
    out = piped(
        "tune", str(REPO / "examples" / "tune" / "gpu.yaml"), "--evaluations", "40", "--no-progress", columns=80
    )
    why = out.split("\nWhy\n")[1].split("\n\n")[0].splitlines()
    assert why[0].startswith(" • ")
    assert all(line.startswith((" • ", "   ")) for line in why)  # continuation lines stay indented


@pytest.mark.parametrize("columns", [80, 120])
def test_the_rule_catalogue_fits_and_cuts_no_threshold(columns):
    """`rules list` at 80 columns cut its last column ("info ≥ 2%, warnin"): each level is on a line of its own."""
    out = piped("rules", "list", columns=columns)
    assert max(map(len, out.splitlines())) <= columns and "…" not in out
    assert out.count("warning ≥ 5%") >= 10 and out.count("error ≥ 25%") >= 10


def test_a_written_report_and_an_exit_1_each_say_so_in_one_line(tmp_path):
    """Quiet success is not success: `-o FILE` says what it wrote, and an exit code 1 says why, each one line on
    standard error (standard output keeps the report)."""
    import subprocess
    import sys

    trace = str(SAMPLES / "npu" / "host_bound_loop_size.trace.json.gz")
    out = tmp_path / "scan.json"
    wrote = subprocess.run([sys.executable, "-m", "perftool", "scan", trace, "-o", str(out), "--format", "json"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert wrote.returncode == 0 and wrote.stdout == ""
    assert wrote.stderr == f"perftool: wrote {out} ({limits.size_text(out.stat().st_size)})\n"  # 25 KiB, 25.4 KiB
    failed = subprocess.run([sys.executable, "-m", "perftool", "scan", trace, "--fail-on", "warning"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert failed.returncode == 1 and "PT001" in failed.stdout
    assert failed.stderr == "perftool: 1 finding at warning or above (--fail-on warning): exit 1\n"
    gate = subprocess.run([sys.executable, "-m", "perftool", *GATE], capture_output=True, text=True, timeout=120)
    assert gate.returncode == 1 and gate.stderr == "perftool: the gate fails: 4 checks failed: exit 1\n"
